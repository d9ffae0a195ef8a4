"""The fast path's HTTP/1.1 client (transport/plain_http.py) against a local server that
answers with scripted bytes: replies framed by length, as chunks and by the connection's end,
connections kept, closed by the server and replaced, time-outs and broken replies."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from wikitrace.transport.plain_http import (
    PlainHTTP,
    PlainHTTPError,
    Reply,
    takes_plain_http,
)

Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


def _reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = "".join(f"{line}\r\n" for line in headers)
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


def _sized(body: bytes, *headers: str) -> bytes:
    return _reply(body, f"content-length: {len(body)}", *headers)


class _Server:
    """Answers each request with the next of `answers` (bytes, written in the pieces given,
    or a function given the writer); counts connections and keeps each request's bytes."""

    def __init__(self) -> None:
        self.answers: list[list[bytes] | Answer] = []
        self.connections = 0
        self.requests: list[bytes] = []
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if callable(answer):
                    await answer(writer)
                    continue
                for number, piece in enumerate(answer):
                    if number:
                        await asyncio.sleep(0.01)  # each piece its own read
                    writer.write(piece)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self) -> asyncio.Server:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        return server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"


def _run(server: _Server, calls: Callable[[PlainHTTP], Awaitable[Any]], timeout: float = 5) -> Any:
    async def main() -> Any:
        async with await server.start():
            client = PlainHTTP(server.url, {"authorization": "Bearer k"}, timeout)
            try:
                return await calls(client)
            finally:
                await client.aclose()

    return asyncio.run(main())


def test_a_reply_in_pieces_is_read_whole_and_the_connection_kept() -> None:
    server = _Server()
    body = b'{"choices": []}' * 50
    whole = _sized(body, "Retry-After: 3")
    server.answers = [[whole[:10], whole[10:40], whole[40:]], [whole], [whole]]

    async def three(client: PlainHTTP) -> list[Reply]:
        return [await client.post(b'{"n": %d}' % n) for n in range(3)]

    replies = _run(server, three)
    assert replies == [Reply(200, {"content-length": str(len(body)), "retry-after": "3"}, body)] * 3
    assert server.connections == 1
    assert server.requests[1] == (
        b"POST /v1/chat/completions HTTP/1.1\r\n"
        + f"host: 127.0.0.1:{server.port}\r\n".encode()
        + b"user-agent: wikitrace\r\nauthorization: Bearer k\r\ncontent-length: 8\r\n\r\n"
        + b'{"n": 1}'
    )


def test_chunks_an_interim_reply_and_a_body_to_the_connections_end() -> None:
    server = _Server()
    chunked = _reply(
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\ntrailer: x\r\n\r\n", "Transfer-Encoding: chunked"
    )
    interim = _reply(b"", status="100 Continue")
    to_end = b"HTTP/1.0 503 Busy\r\ncontent-type: text/plain\r\n\r\ntry later"

    async def close_after(writer: asyncio.StreamWriter) -> None:
        writer.write(to_end)
        await writer.drain()
        writer.close()

    server.answers = [[chunked[:30], chunked[30:]], [interim, _sized(b"ok")], close_after]

    async def calls(client: PlainHTTP) -> list[Reply]:
        return [await client.post(b"{}") for _ in range(3)]

    first, second, third = _run(server, calls)
    assert first.content == b"hello, world" and second == Reply(200, {"content-length": "2"}, b"ok")
    assert third.status_code == 503 and third.content == b"try later"
    assert server.connections == 1


def test_connections_the_server_closes_are_replaced() -> None:
    server = _Server()

    async def close_after(writer: asyncio.StreamWriter) -> None:
        writer.write(_sized(b"a"))
        await writer.drain()
        writer.close()

    async def hang_up(writer: asyncio.StreamWriter) -> None:
        writer.close()  # the request read, no reply: as a keep-alive time-out racing it

    # Closed after the reply, as `connection: close` says; closed while idle, which the
    # client sees before its next request; closed as a request on a kept connection arrives
    # (sent again on a new one, the call unharmed); closed on a new connection (an error).
    server.answers = [[_sized(b"x", "connection: close")], [_sized(b"y")], close_after]
    server.answers += [[_sized(b"z")], hang_up, [_sized(b"again")], hang_up]

    async def calls(client: PlainHTTP) -> list[bytes | str]:
        got: list[bytes | str] = [(await client.post(b"{}")).content for _ in range(3)]
        await asyncio.sleep(0.05)  # the idle connection is closed by now
        got += [(await client.post(b"{}")).content, (await client.post(b"{}")).content]
        client._idle.clear()  # the next call opens a connection
        try:
            await client.post(b"{}")
        except PlainHTTPError as error:
            got.append(str(error))
        return got

    assert _run(server, calls) == [
        b"x",
        b"y",
        b"a",
        b"z",
        b"again",
        "the server closed the connection before replying",
    ]
    assert server.connections == 5 and len(server.requests) == 7


def test_time_outs_refusals_and_broken_replies_are_errors() -> None:
    server = _Server()

    async def never(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(1)

    async def cut(writer: asyncio.StreamWriter) -> None:
        writer.write(_reply(b"ab", "content-length: 10"))
        await writer.drain()
        writer.close()

    server.answers = [never, cut, [b"SSH-2.0-OpenSSH\r\n\r\n"], [_sized(b"fine")]]

    async def calls(client: PlainHTTP) -> list[str]:
        errors = []
        for _ in range(3):
            try:
                await client.post(b"{}")
            except PlainHTTPError as error:
                errors.append(f"{type(error).__name__}: {error}")
        return [*errors, (await client.post(b"{}")).content.decode()]

    assert _run(server, calls, timeout=0.2) == [
        "PlainHTTPTimeout: no reply within 0.2 s",
        "PlainHTTPError: the server closed the connection in the middle of a reply",
        "PlainHTTPError: not an HTTP/1 reply: 'SSH-2.0-OpenSSH'",
        "fine",
    ]

    async def refused() -> None:
        await PlainHTTP("http://127.0.0.1:9/v1", {}, 1).post(b"{}")

    with pytest.raises(PlainHTTPError, match=r"^cannot connect to 127\.0\.0\.1:9: "):
        asyncio.run(refused())


def test_only_a_plain_http_server_without_a_proxy_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert takes_plain_http("http://127.0.0.1:8000/v1/chat/completions")
    assert not takes_plain_http("https://127.0.0.1:8000/v1/chat/completions")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert not takes_plain_http("http://models.internal/v1/chat/completions")
    monkeypatch.setenv("NO_PROXY", "models.internal")
    assert takes_plain_http("http://models.internal/v1/chat/completions")
    with pytest.raises(ValueError, match="the authorization header holds a line break"):
        PlainHTTP("http://h/v1", {"authorization": "Bearer k\r\nx-injected: 1"}, 1)
