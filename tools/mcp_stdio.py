"""The MCP server's stdio without a thread hop per message: stdin and stdout read and written
on the server's own event loop when they are pipes or sockets (as every MCP client starts a
server), through the official SDK's `stdio_server` all the same.

The SDK reads each line and writes (and flushes) each answer in a worker thread: three thread
hops a tool call, most of a call's time on a busy machine. Here the loop waits until stdin has
bytes (`anyio.wait_readable`) and reads what is there; an answer is written when stdout can
take it. Like the SDK, while the server runs, fd 0 reads nothing and fd 1 writes to stderr, so
nothing a tool prints can corrupt the protocol; both are put back when it stops. A stdin or
stdout that the loop cannot wait on (a regular file, a terminal on some systems) is left to
the SDK's own transport.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

READ_BYTES = 1 << 16
"""The most bytes read from stdin at a time."""


def waitable(fd: int) -> bool:
    """Whether the event loop can wait on `fd`: a pipe or a socket."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class LineReader:
    """Lines of the file descriptor `fd`, as `async for` gives them (text, each with its
    newline but the last), read on the loop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._held = b""
        self._ended = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        import anyio

        while b"\n" not in self._held and not self._ended:
            await anyio.wait_readable(self.fd)
            chunk = os.read(self.fd, READ_BYTES)  # readable: what is there, without waiting
            if chunk:
                self._held += chunk
            else:
                self._ended = True
        if not self._held:
            raise StopAsyncIteration
        line, newline, self._held = self._held.partition(b"\n")
        return (line + newline).decode("utf-8", errors="replace")


class Writer:
    """Text written to the file descriptor `fd` whole, each part when it can take it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        import anyio

        left = memoryview(text.encode("utf-8"))
        while left:
            await anyio.wait_writable(self.fd)
            left = left[os.write(self.fd, left) :]

    async def flush(self) -> None:
        """Nothing is held: each write reached the descriptor."""


@contextlib.contextmanager
def _claimed() -> Iterator[tuple[int, int]]:
    """Private copies of fds 0 and 1 for the protocol, while fd 0 reads the null device and
    fd 1 writes to stderr; both put back after."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    try:
        nothing = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(nothing, 0)
        finally:
            os.close(nothing)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


Serve = Callable[[Any, Any], Awaitable[None]]
"""Serves a session on the SDK's (read stream, write stream)."""


async def run_stdio(serve: Serve, fallback: Callable[[], Awaitable[None]]) -> None:
    """`serve` over this process's stdin and stdout, or `fallback` (the SDK's own stdio) when
    the loop cannot wait on them."""
    if not (waitable(0) and waitable(1)):
        await fallback()
        return
    from mcp.server.stdio import stdio_server

    with _claimed() as (wire_in, wire_out):
        # Not anyio's AsyncFile: what stdio_server reads and writes of one, on the loop.
        reader: Any = LineReader(wire_in)
        writer: Any = Writer(wire_out)
        async with stdio_server(reader, writer) as (read_stream, write_stream):
            await serve(read_stream, write_stream)
