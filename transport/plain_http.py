"""The fast path's HTTP/1.1 client for a plain `http://` server: POST requests over connections
kept open, each reply read whole, in some 0.1 ms of CPU a call where httpx2 takes 0.8 to 1.

A model build at 64 calls in flight spends its own process's CPU on each call; httpx2's layers
(its URL and header models, httpcore2's pool, h11's parser) cost most of a millisecond a call
against a local server, which is as much as the build's own work on a run
(benchmarks/build_bench.py). This client does what a chat completions call needs and no more:
one request written at once, the status line and headers parsed once, the body framed by its
Content-Length, as chunks, or by the end of the connection. It is taken only for an `http://`
base with no proxy set for it (`takes_plain_http`); https, proxies and anything else go
through httpx2 as before."""

from __future__ import annotations

import asyncio
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_HEAD = 64 * 1024
"""The most bytes a reply's status line and headers may take."""
KEEP_IDLE = 100
"""Connections kept open between calls (httpx2's limit, which the fast path set)."""


class PlainHTTPError(Exception):
    """A call that got no reply: the connection was refused, lost or broken."""


class PlainHTTPTimeout(PlainHTTPError):
    """A connection or a reply that took longer than the time-out."""


@dataclass(frozen=True)
class Reply:
    """A server's reply to one request."""

    status_code: int
    headers: dict[str, str]
    """Its headers, their names in lower case (the last of a name repeated)."""
    content: bytes


def takes_plain_http(url: str) -> bool:
    """Whether calls to `url` can go through `PlainHTTP`: an `http://` URL with no proxy set
    in the environment for its host (httpx2 would send them through the proxy)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies_environment()
    if not proxies.keys() & {"http", "all"}:
        return True
    return bool(urllib.request.proxy_bypass_environment(parts.hostname, proxies))


class _Connection(asyncio.Protocol):
    """One connection to the server; a reply at a time is read into `buffer`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.reply: asyncio.Future[Reply] | None = None
        self.closed = False
        self.got_bytes = False
        """Whether any byte of the reply awaited has come (a connection the server closed
        while idle fails with none: the request is sent again on a new one)."""
        self.keep = True
        """Whether the connection may carry another request after this reply."""
        self._head: tuple[int, dict[str, str], int] | None = None
        """The reply's status, headers and where its body starts, once they are read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, data: bytes) -> asyncio.Future[Reply]:
        """Write a request; the future its reply will be set on."""
        assert self.transport is not None and self.reply is None
        self.reply = asyncio.get_running_loop().create_future()
        self.got_bytes = False
        self._head = None
        self.transport.write(data)
        return self.reply

    def data_received(self, data: bytes) -> None:
        if self.reply is None or self.reply.done():
            self.keep = False  # bytes nobody asked for: this connection is not to be trusted
            self.close()
            return
        self.got_bytes = True
        self.buffer += data
        try:
            self._parse(at_end=False)
        except PlainHTTPError as error:
            self._fail(error)

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.reply is None or self.reply.done():
            return
        try:
            if self.got_bytes and self._parse(at_end=True):
                return
        except PlainHTTPError as error:
            self._fail(error)
            return
        reason = f": {exc!r}" if exc else ""
        self._fail(PlainHTTPError(f"the server closed the connection before replying{reason}"))

    def _fail(self, error: PlainHTTPError) -> None:
        self.keep = False
        if self.reply is not None and not self.reply.done():
            self.reply.set_exception(error)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _parse(self, *, at_end: bool) -> bool:
        """Set the reply when the buffer holds all of it (`at_end`: the server closed the
        connection, which ends a body of no stated length); whether it did."""
        if self._head is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    raise PlainHTTPError(f"the reply's headers are longer than {MAX_HEAD} bytes")
                return False
            status, headers = _head(bytes(self.buffer[:end]))
            if 100 <= status < 200:  # an interim reply: the real one follows
                del self.buffer[: end + 4]
                return self._parse(at_end=at_end)
            self._head = (status, headers, end + 4)
            connection = headers.get("connection", "").lower()
            if "close" in connection:
                self.keep = False
        status, headers, start = self._head
        body: bytes | None
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body, used = _chunked(self.buffer, start)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise PlainHTTPError(
                    f"the reply's content-length is not a number: {headers['content-length']!r}"
                ) from None
            used = start + length
            body = bytes(self.buffer[start:used]) if len(self.buffer) >= used else None
        else:  # the body runs to the end of the connection
            self.keep = False
            used = len(self.buffer)
            body = bytes(self.buffer[start:]) if at_end else None
        if body is None:
            if at_end:
                raise PlainHTTPError("the server closed the connection in the middle of a reply")
            return False
        del self.buffer[:used]
        if self.buffer:  # more than one reply to one request
            self.keep = False
        assert self.reply is not None
        self.reply.set_result(Reply(status, headers, body))
        return True


def _head(data: bytes) -> tuple[int, dict[str, str]]:
    """The status and headers of a reply's head (its status line and header lines)."""
    lines = data.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise PlainHTTPError(f"not an HTTP/1 reply: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    if version == "HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
        headers["connection"] = "close"
    return int(code), headers


def _chunked(buffer: bytearray, start: int) -> tuple[bytes | None, int]:
    """A chunked body from `start`, and where it ends; (None, 0) while it is incomplete."""
    parts: list[bytes] = []
    at = start
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None, 0
        size_text = bytes(buffer[at:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise PlainHTTPError(f"a chunk's size is not a number: {size_text[:20]!r}") from None
        at = line_end + 2
        if size == 0:
            # Trailers, if any, end with an empty line.
            end = buffer.find(b"\r\n", at)
            while end > at:
                at = end + 2
                end = buffer.find(b"\r\n", at)
            if end < 0:
                return None, 0
            return b"".join(parts), end + 2
        if len(buffer) < at + size + 2:
            return None, 0
        parts.append(bytes(buffer[at : at + size]))
        at += size + 2


class PlainHTTP:
    """POSTs to one URL of a plain `http://` server, from one event loop, over connections
    kept open between calls; `timeout` seconds for a connection, and again for a reply once
    its request is written. Headers must hold no line break (`ValueError`)."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not an http:// URL: {url}")
        self._host = parts.hostname
        self._port = parts.port or 80
        host = parts.netloc.rpartition("@")[2]  # credentials in a URL are no header
        fixed = {"host": host, "user-agent": "wikitrace", **headers}
        lines = []
        for name, value in fixed.items():
            if any(c in f"{name}{value}" for c in "\r\n\0"):
                raise ValueError(f"the {name} header holds a line break")
            lines.append(f"{name}: {value}\r\n")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._start = f"POST {target} HTTP/1.1\r\n{''.join(lines)}".encode("latin-1")
        self._timeout = timeout
        self._idle: list[_Connection] = []

    async def post(self, content: bytes) -> Reply:
        """The server's reply to `content`, POSTed; PlainHTTPError (PlainHTTPTimeout) when none
        came. A connection kept open that turns out closed is replaced once, at no cost to the
        call's attempts."""
        request = self._start + b"content-length: %d\r\n\r\n" % len(content) + content
        while self._idle:
            connection = self._idle.pop()
            if connection.closed:
                continue
            reply = await self._exchange(connection, request, reused=True)
            if reply is not None:
                return reply
            break  # closed by the server while idle: once on a new connection
        reply = await self._exchange(await self._connect(), request, reused=False)
        assert reply is not None
        return reply

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._timeout):
                _, connection = await loop.create_connection(_Connection, self._host, self._port)
        except TimeoutError:
            raise PlainHTTPTimeout(
                f"no connection to {self._host}:{self._port} within {self._timeout} s"
            ) from None
        except OSError as error:
            raise PlainHTTPError(f"cannot connect to {self._host}:{self._port}: {error}") from None
        return connection

    async def _exchange(
        self, connection: _Connection, request: bytes, *, reused: bool
    ) -> Reply | None:
        """The reply to `request` on `connection`; None when a `reused` connection was found
        closed before any byte of a reply came."""
        try:
            async with asyncio.timeout(self._timeout):
                reply = await connection.send(request)
        except TimeoutError:
            connection.close()
            raise PlainHTTPTimeout(f"no reply within {self._timeout} s") from None
        except PlainHTTPError:
            if reused and not connection.got_bytes:
                return None
            raise
        except BaseException:  # cancelled: the reply may still come, on no one's watch
            connection.close()
            raise
        connection.reply = None
        if connection.keep and not connection.closed and len(self._idle) < KEEP_IDLE:
            self._idle.append(connection)
        else:
            connection.close()
        return reply

    async def aclose(self) -> None:
        """Close the connections kept open."""
        for connection in self._idle:
            connection.close()
        self._idle.clear()
