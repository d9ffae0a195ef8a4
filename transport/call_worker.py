"""Model calls made by a worker process, so that the client's work on each call (building the
request, parsing the answer: litellm spends 3 to 10 ms of CPU a call, the fast path's one
shared HTTP client about 1 ms) runs on another core than the build's own (rendering prompts,
checking answers, writing pages).

With many calls in flight the answers arrive together and queue for one event loop; with the
calls in a worker, the two halves of that work no longer wait for each other. The worker is a
child process (`python -m wikitrace.transport.call_worker FD FD`, its ends of the two socket
pairs below) that runs `clients.make_client`'s client (backoff, errors and all) on its own event
loop: transport/fast_path.py's for a plain OpenAI-compatible endpoint (litellm not imported),
else `LiteLLMClient`. The two talk over a socket pair in frames of JSON (a 4-byte length,
then the bytes):

- builder to worker: the settings first; the worker answers `{"ready": null}` once its client
  is made and the model checked (litellm imported, a known provider, its key set), or
  `{"refused": "..."}`;
- then `{"id": n, "messages": [...]}` a call, answered by `{"id": n, "reply": {...}}` or
  `{"id": n, "error": "...", "fatal": b}`, in the order the answers come;
- `{"log": [level, logger, message]}` for what the worker's client logs (a retry, say), which
  the builder logs as its own.

A second socket pair counts tokens (`{"count": text}`, answered `{"tokens": n}`), one at a
time and waited for: a count is asked in the middle of fitting a prompt, which does not wait
on the event loop. So litellm is imported by the worker only, if at all. The worker ends when
the first socket closes: when the builder closes it, or dies, even killed.

`WorkerPool` runs several workers, for when one worker's core is the limit (litellm spends 3
to 10 ms of CPU a call): each call goes to the worker with the fewest calls waiting.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import itertools
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson

from .clients import make_client
from .fast_path import takes_fast_path
from .llm import (
    Client,
    LiteLLMClient,
    LLMCallError,
    LLMReply,
    LLMSettings,
    Message,
    ResponseCache,
)

_LENGTH = struct.Struct(">I")


def _frame(value: Any) -> bytes:
    data = orjson.dumps(value)
    return _LENGTH.pack(len(data)) + data


def _gone(model: str) -> LLMCallError:
    """What a call or count gets once the worker has stopped: no later one can succeed."""
    return LLMCallError(f"{model}: the process that makes the model calls stopped", fatal=True)


def _receive(sock: socket.socket, buffer: bytearray | None = None) -> Any:
    """The next frame, waited for: the first in `buffer` and what the socket adds to it (what
    comes after it stays there; without a buffer, the other end sends one frame and waits for
    the answer). ConnectionError when the other end has closed."""
    buffer = bytearray() if buffer is None else buffer
    while (frame := _taken(buffer)) is None:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed")
        buffer += chunk
    return frame


def _taken(buffer: bytearray) -> Any:
    """The first frame in `buffer`, taken out of it; None while it has not all come."""
    (length,) = _LENGTH.unpack_from(buffer) if len(buffer) >= _LENGTH.size else (None,)
    if length is None or len(buffer) < _LENGTH.size + length:
        return None
    frame = orjson.loads(buffer[_LENGTH.size : _LENGTH.size + length])
    del buffer[: _LENGTH.size + length]
    return frame


async def _read(reader: asyncio.StreamReader) -> Any:
    """The next frame; IncompleteReadError when the other end has closed."""
    (length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return orjson.loads(await reader.readexactly(length))


class WorkerLLM:
    """The LLM protocol over a worker process running LiteLLMClient.

    The worker starts on the first call or token count (a build whose replies are all cached
    never starts it, nor imports litellm). A token count waits while it starts (and imports
    litellm), as it would for an import of its own; the calls wait without holding up their
    event loop, on which the build goes on reading and writing the next runs meanwhile.
    """

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.model = settings.model
        self._identity = LiteLLMClient(settings).cache_identity()
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None
        self._counts: socket.socket | None = None
        self._refused: LLMCallError | None = None
        self._connection: _Connection | None = None
        self._ready = False
        self._early = bytearray()
        """What the worker sent before its calls' connection was made: the frame that says it
        is ready, as far as it has come, and anything after it."""
        self._readying: asyncio.Task[None] | None = None
        """Reading that frame on an event loop (`_until_ready`)."""
        self._ids = itertools.count(1)

    def cache_identity(self) -> dict[str, Any]:
        return self._identity

    def preflight(self) -> None:
        """Start the worker, which checks the model before anything is sent; raises what it
        finds (an unknown provider, a missing key), for this and every later call."""
        self.start()
        self.wait_ready()

    def start(self) -> None:
        """Start the worker process and send it the settings, without waiting for it to be
        ready (so that several workers import litellm at once); `wait_ready` waits."""
        if self._refused is not None:
            raise self._refused
        if self._process is not None:
            return
        self._process, self._socket, self._counts = _take_spare() or _spawn(self.model)
        self._socket.sendall(_frame(dataclasses.asdict(self.settings)))
        self._ready = False

    def wait_ready(self) -> None:
        """Wait until the started worker has imported litellm and checked the model; raise
        what it refused, as `preflight` does."""
        if self._refused is not None:
            raise self._refused
        if self._ready:
            return
        assert self._socket is not None, "start() first"
        if self._readying is not None:
            # A call waits for the frame on its event loop, which is this thread's, held here:
            # its read stops before the loop looks at the socket again; what it got is kept.
            self._readying.cancel()
        self._socket.setblocking(True)
        try:
            answer = _receive(self._socket, self._early)
        except ConnectionError:
            answer = None
        self._answered(answer)

    def _answered(self, answer: dict[str, Any] | None) -> None:
        """Take the worker's first frame (None: it has gone): ready, or refused (raised)."""
        if answer is None:
            refused: LLMCallError | None = _gone(self.model)
        else:
            refused = LLMCallError(answer["refused"], fatal=True) if "refused" in answer else None
        if refused is not None:
            self._refused = refused
            self.close()
            raise refused
        self._ready = True

    async def _until_ready(self) -> None:
        """Start the worker and wait until it is ready, without holding up this event loop;
        raise what it refused (`wait_ready`)."""
        if self._refused is None and not self._ready:
            self.start()
        if self._refused is not None or self._ready:
            self.wait_ready()
            return
        loop = asyncio.get_running_loop()
        if self._readying is None or self._readying.get_loop() is not loop:
            self._readying = loop.create_task(self._read_ready(loop))
        reading = self._readying
        try:
            await asyncio.shield(reading)  # one read, shared by the calls that wait
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not reading.cancelled() or (task is not None and task.cancelling()):
                raise  # this call was cancelled; else wait_ready took the frame itself
        self.wait_ready()  # ready or refused by now

    async def _read_ready(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self._socket is not None
        self._socket.setblocking(False)
        while (answer := _taken(self._early)) is None:
            try:
                chunk = await loop.sock_recv(self._socket, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break  # the worker has gone: answer is None
            self._early += chunk
        if not self._ready and self._refused is None:
            with contextlib.suppress(LLMCallError):  # each waiting call raises it
                self._answered(answer)

    def count_tokens(self, text: str) -> int:
        self.preflight()
        assert self._counts is not None
        try:
            self._counts.sendall(_frame({"count": text}))
            answer = _receive(self._counts)
        except OSError:  # a broken pipe, a reset, a closed socket
            raise _gone(self.model) from None
        if "error" in answer:
            raise LLMCallError(answer["error"])
        return int(answer["tokens"])

    def waiting(self) -> int:
        """Calls sent on this event loop and not answered yet (0 before the first)."""
        connection = self._connection
        if connection is None or connection.loop is not asyncio.get_running_loop():
            return 0
        return len(connection.waiting)

    async def complete(self, messages: list[Message]) -> LLMReply:
        reply, _ = await self._call({"messages": messages})
        return reply

    async def complete_saving(
        self, messages: list[Message], cache: Path, key: str
    ) -> tuple[LLMReply, bool]:
        """A call whose reply the worker saves in the response cache at `cache` under `key`
        the moment it arrives (llm.CachedLLM); and whether it could."""
        return await self._call({"messages": messages, "save": [str(cache), key]})

    async def _call(self, request: dict[str, Any]) -> tuple[LLMReply, bool]:
        await self._until_ready()
        connection = self._connected()
        call = next(self._ids)
        answer = connection.expect(call)
        await connection.send(_frame({"id": call, **request}))
        frame = await answer
        if "reply" in frame:
            return LLMReply(**frame["reply"]), bool(frame.get("saved"))
        raise LLMCallError(frame["error"], fatal=bool(frame.get("fatal")))

    def _connected(self) -> _Connection:
        """This event loop's side of the socket (a build runs one loop a round), made at once
        so that the calls that start together share it."""
        loop = asyncio.get_running_loop()
        if self._connection is None or self._connection.loop is not loop:
            self.preflight()
            assert self._socket is not None
            self._socket.setblocking(False)
            # What a reader of an ended loop had received and not read is read first.
            left = self._connection.received if self._connection else self._early
            self._connection = _Connection(self._socket, self.settings.model, left)
        return self._connection

    def close(self) -> None:
        """Stop the worker: closing the socket ends it; it is killed if it has not gone in 5 s.
        Spares no worker took go too: the build that started them is over."""
        _end_spares()
        self._connection = None
        self._readying = None
        for sock in (self._socket, self._counts):
            if sock is not None:
                sock.close()
        self._socket = self._counts = None
        if self._process is not None:
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def _spawn(model: str) -> tuple[subprocess.Popen[bytes], socket.socket, socket.socket]:
    """A worker process, waiting for its settings: it and the builder's ends of its sockets."""
    calls, counts = socket.socketpair(), socket.socketpair()
    theirs = [calls[1].fileno(), counts[1].fileno()]
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, *map(str, theirs)],
            pass_fds=theirs,
            stdin=subprocess.DEVNULL,
        )
    except OSError as error:
        calls[0].close()
        counts[0].close()
        raise LLMCallError(
            f"{model}: cannot start the process that makes the model calls ({error})",
            fatal=True,
        ) from None
    finally:
        calls[1].close()
        counts[1].close()
    return process, calls[0], counts[0]


_spares: list[tuple[subprocess.Popen[bytes], socket.socket, socket.socket]] = []
"""Workers started before their model was made (`start_spares`), for `WorkerLLM.start`."""


def start_spares(settings: LLMSettings, workers: int) -> None:
    """Start the `workers` call workers a build will use while it reads its inputs, so that
    the first call does not wait for one to start (Python and our modules: about 0.3 s). Only
    where a worker is cheap, on the fast path: a litellm worker imports litellm (8 s, 225 MB),
    which a rebuild answered by the cache must not pay, so it starts on the first call. A spare
    not taken ends with the build's model (`WorkerLLM.close`), or with this process."""
    if workers < 1 or not takes_fast_path(settings):
        return
    with contextlib.suppress(LLMCallError):  # then the first call says why
        while len(_spares) < workers:
            _spares.append(_spawn(settings.model))


def _take_spare() -> tuple[subprocess.Popen[bytes], socket.socket, socket.socket] | None:
    while _spares:
        spare = _spares.pop()
        if spare[0].poll() is None:
            return spare
        _end(*spare)
    return None


@atexit.register
def _end_spares() -> None:
    while _spares:
        _end(*_spares.pop())


def _end(process: subprocess.Popen[bytes], *sockets: socket.socket) -> None:
    """A worker waiting for its settings ends once its socket closes."""
    for sock in sockets:
        sock.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class WorkerPool:
    """The LLM protocol over several worker processes, for when one worker's core is what
    caps the calls (a fast model server and many calls in flight: litellm's CPU a call is
    what each worker spends). A call goes to the worker with the fewest calls waiting; token
    counts go to the first. The workers start together on the first call or count, each
    importing litellm (and each holding its memory, about 225 MB)."""

    def __init__(self, settings: LLMSettings, count: int) -> None:
        if count < 1:
            raise ValueError("a pool needs at least one worker")
        self.settings = settings
        self.model = settings.model
        self.workers = [WorkerLLM(settings) for _ in range(count)]

    def cache_identity(self) -> dict[str, Any]:
        return self.workers[0].cache_identity()

    def preflight(self) -> None:
        try:
            for worker in self.workers:
                worker.start()
        except LLMCallError:
            self.close()
            raise
        # Every worker is waited for, so that none is stopped in the middle of its import.
        refused = None
        for worker in self.workers:
            try:
                worker.wait_ready()
            except LLMCallError as error:
                refused = refused or error
        if refused is not None:
            self.close()
            raise refused

    def count_tokens(self, text: str) -> int:
        return self.workers[0].count_tokens(text)

    async def complete(self, messages: list[Message]) -> LLMReply:
        self.preflight()
        worker = min(self.workers, key=WorkerLLM.waiting)
        return await worker.complete(messages)

    async def complete_saving(
        self, messages: list[Message], cache: Path, key: str
    ) -> tuple[LLMReply, bool]:
        self.preflight()
        worker = min(self.workers, key=WorkerLLM.waiting)
        return await worker.complete_saving(messages, cache, key)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


def worker_client(settings: LLMSettings, workers: int) -> WorkerLLM | WorkerPool | None:
    """What makes the calls for `clients.connect`: one worker process, a pool of `workers`, or
    None (0: the calls are made in the caller's process). Nothing starts before the first
    call or count."""
    if workers == 1:
        return WorkerLLM(settings)
    if workers > 1:
        return WorkerPool(settings, workers)
    return None


class _Connection:
    """The builder's side of the socket on one event loop: a task reads the worker's frames
    and hands each answer to the call waiting for it. It uses the loop's socket calls (no
    transport that outlives its loop), and keeps what it has received and not yet read."""

    def __init__(self, sock: socket.socket, model: str, received: bytearray) -> None:
        self.loop = asyncio.get_running_loop()
        self.sock = sock
        self.model = model
        self.received = received
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.sending = asyncio.Lock()  # one frame at a time: sends must not interleave
        self.reading = self.loop.create_task(self._read_all())

    def expect(self, call: int) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self.waiting[call] = future
        return future

    async def send(self, data: bytes) -> None:
        async with self.sending:
            try:
                await self.loop.sock_sendall(self.sock, data)
            except OSError:
                self._stopped()
                raise _gone(self.model) from None

    async def _read_all(self) -> None:
        while True:
            while (frame := _taken(self.received)) is not None:
                self._take(frame)
            try:
                chunk = await self.loop.sock_recv(self.sock, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._stopped()
                return
            self.received += chunk

    def _take(self, frame: dict[str, Any]) -> None:
        if "log" in frame:
            level, name, message = frame["log"]
            logging.getLogger(name).log(level, "%s", message)
            return
        future = self.waiting.pop(frame["id"], None)
        if future is not None and not future.done():
            future.set_result(frame)

    def _stopped(self) -> None:
        """The worker has gone: every call waiting fails, and so will every later one."""
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(_gone(self.model))
        self.waiting.clear()


# --- the worker ---------------------------------------------------------------------------


class _Forward(logging.Handler):
    """Sends what the worker's client logs to the builder, which logs it as its own."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.writer.write(_frame({"log": [record.levelno, record.name, record.getMessage()]}))
        except Exception:
            self.handleError(record)


def _count(client: Client, sock: socket.socket) -> None:
    """Answer token counts, one at a time, until the builder closes the socket."""
    while True:
        try:
            text = _receive(sock)["count"]
        except ConnectionError:
            return
        try:
            answer: dict[str, Any] = {"tokens": client.count_tokens(text)}
        except Exception as error:
            answer = {"error": f"{client.model}: cannot count tokens: {error}"}
        sock.sendall(_frame(answer))


async def _serve(sock: socket.socket, counts: socket.socket) -> None:
    import aiohttp  # noqa: F401  (the fast path's; imported while a spare waits for its settings)

    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        settings = LLMSettings(**await _read(reader))
    except (asyncio.IncompleteReadError, ConnectionError):
        return  # a spare no model took
    client = make_client(settings)
    try:
        client.preflight()
    except LLMCallError as error:
        writer.write(_frame({"refused": str(error)}))
        await writer.drain()
        return
    writer.write(_frame({"ready": None}))
    threading.Thread(target=_count, args=(client, counts), daemon=True).start()
    forward = _Forward(writer)
    package = logging.getLogger("wikitrace")
    package.addHandler(forward)
    package.setLevel(logging.INFO)
    package.propagate = False
    calls: set[asyncio.Task[None]] = set()
    saving: set[asyncio.Task[None]] = set()

    async def call(number: int, messages: list[Message], save: list[str] | None) -> None:
        try:
            reply = await client.complete(messages)
            frame: dict[str, Any] = {"id": number, "reply": dataclasses.asdict(reply)}
            if save is not None:
                # Saved here, as it arrives: the builder may be busy, or killed, by the time
                # it reads the frame; a reply it paid for is then not asked again.
                try:
                    ResponseCache.save_at(Path(save[0]), save[1], reply)
                    frame["saved"] = True
                except OSError:
                    frame["saved"] = False  # the builder saves it, or says it cannot
        except LLMCallError as error:
            frame = {"id": number, "error": str(error), "fatal": error.fatal}
        except Exception as error:  # never lose a call: the builder waits for its answer
            frame = {"id": number, "error": f"{type(error).__name__}: {error}", "fatal": False}
        with contextlib.suppress(ConnectionError):  # the builder has gone: no one waits
            writer.write(_frame(frame))
            await writer.drain()

    while True:
        try:
            frame = await _read(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            break  # the builder has closed the socket, or has died
        save = frame.get("save")
        task = asyncio.create_task(call(frame["id"], frame["messages"], save))
        (saving if save is not None else calls).add(task)
        task.add_done_callback(saving.discard if save is not None else calls.discard)
    # The builder has gone (closed, or killed). A call in flight is paid for whether or not
    # anyone reads it: those that save to a cache are finished and saved, so the build run
    # again does not pay for them twice; the rest are dropped.
    for task in calls:
        task.cancel()
    if saving:
        await asyncio.gather(*saving, return_exceptions=True)
    package.removeHandler(forward)


def main() -> None:
    # Ctrl-C reaches the whole process group: the builder handles it and closes the socket.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    calls, counts = (socket.socket(fileno=int(fd)) for fd in sys.argv[1:3])
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    asyncio.run(_serve(calls, counts))
    # Then end at once: tearing down litellm's modules and objects takes about a second, which
    # the builder would wait for. Exit handlers run first, as they would have.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
