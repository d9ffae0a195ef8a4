"""Integration: the compile calls made by a worker process (transport/call_worker.py), through
litellm's real code path against the local OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from wikitrace.transport.call_worker import WorkerLLM, WorkerPool
from wikitrace.transport.llm import LiteLLMClient, LLMCallError, LLMSettings

from helpers import Stub, build_with_stub

pytestmark = pytest.mark.integration


def build(runs_file: Path, corpus: Path, stub: Stub, **options: Any) -> Any:
    return build_with_stub(runs_file, corpus, stub, use_cache=False, **options)


def pages(corpus: Path) -> dict[str, bytes]:
    return {
        p.relative_to(corpus).as_posix(): p.read_bytes()
        for p in corpus.rglob("*")
        if p.is_file() and p.name != "manifest.json"
    }


def test_a_worker_makes_the_corpus_the_build_makes_in_its_own_process(
    runs_file: Path, tmp_path: Path, openai_stub: Stub, caplog: pytest.LogCaptureFixture
) -> None:
    openai_stub.script += [(429, "slow down")]  # the worker retries, and the build says so
    with caplog.at_level(logging.INFO, logger="wikitrace"):
        report = build(runs_file, tmp_path / "worker", openai_stub, concurrency=1)
    assert report.complete and report.http_attempts == 4 and len(openai_stub.requests) == 4
    assert any("RateLimitError, retrying in" in r.getMessage() for r in caplog.records)
    alone = build(runs_file, tmp_path / "alone", openai_stub, call_workers=0)
    assert alone.complete and alone.http_attempts == 3
    assert pages(tmp_path / "worker") == pages(tmp_path / "alone")
    assert len(pages(tmp_path / "alone")) > 10
    pool = build(runs_file, tmp_path / "pool", openai_stub, call_workers=2)
    assert pool.complete and pool.http_attempts == 3
    assert pages(tmp_path / "pool") == pages(tmp_path / "alone")


def _worker(stub: Stub) -> WorkerLLM:
    return WorkerLLM(LLMSettings(model="openai/stub-model", api_base=stub.url, max_retries=0))


def test_calls_made_on_two_event_loops_share_one_worker(openai_stub: Stub) -> None:
    openai_stub.script += [(200, f"answer {n}") for n in range(12)]
    llm = _worker(openai_stub)
    try:
        message = [{"role": "user", "content": "hello"}]

        async def calls(count: int) -> list[Any]:
            return await asyncio.gather(*(llm.complete(message) for _ in range(count)))

        first = asyncio.run(calls(5))  # a build's first round
        process = llm._process
        second = asyncio.run(calls(7))  # a batch build's next round runs a new loop
        assert llm._process is process
        assert len(first) == 5 and len(second) == 7
        # Each call has its own answer: none lost, none given twice.
        assert sorted(reply.text for reply in first + second) == sorted(
            f"answer {n}" for n in range(12)
        )
        assert len(openai_stub.requests) == 12
    finally:
        llm.close()


def test_a_pool_of_workers_shares_the_calls_and_gives_each_its_answer(
    openai_stub: Stub,
) -> None:
    openai_stub.script += [(200, f"answer {n}") for n in range(16)]
    settings = LLMSettings(model="openai/stub-model", api_base=openai_stub.url, max_retries=0)
    pool = WorkerPool(settings, 2)
    try:
        message = [{"role": "user", "content": "hello"}]

        async def calls(count: int) -> list[Any]:
            return await asyncio.gather(*(pool.complete(message) for _ in range(count)))

        replies = asyncio.run(calls(16))
        assert sorted(reply.text for reply in replies) == sorted(f"answer {n}" for n in range(16))
        # The calls that started together went to both workers, half each.
        assert [next(worker._ids) - 1 for worker in pool.workers] == [8, 8]
        processes = [worker._process for worker in pool.workers]
        assert all(p is not None and p.poll() is None for p in processes)
        assert len({p.pid for p in processes if p is not None}) == 2
        assert pool.count_tokens("one two three") == LiteLLMClient(settings).count_tokens(
            "one two three"
        )
    finally:
        pool.close()
    assert all(p is not None and p.returncode == 0 for p in processes)


def test_a_model_a_pool_refuses_starts_no_worker_and_stops_every_call(openai_stub: Stub) -> None:
    pool = WorkerPool(LLMSettings(model="anthropic/claude-x"), 3)
    with pytest.raises(LLMCallError, match="needs ANTHROPIC_API_KEY") as refused:
        pool.preflight()
    assert refused.value.fatal and all(worker._process is None for worker in pool.workers)
    with pytest.raises(LLMCallError, match="needs ANTHROPIC_API_KEY"):
        asyncio.run(pool.complete([{"role": "user", "content": "hello"}]))
    assert not openai_stub.requests


def test_token_counts_are_the_worker_clients(openai_stub: Stub) -> None:
    llm = _worker(openai_stub)
    settings = LLMSettings(model="openai/stub-model", api_base=openai_stub.url)
    try:
        for text in ["", "one two three", "a longer text, with punctuation; " * 40]:
            assert llm.count_tokens(text) == LiteLLMClient(settings).count_tokens(text)
    finally:
        llm.close()


def test_calls_wait_for_the_worker_without_holding_up_their_event_loop(
    openai_stub: Stub,
) -> None:
    """A call started before the worker is ready waits for it on the event loop, which runs
    other work meanwhile (the build's next runs); a wait of the caller's own in the middle of
    it (preflight, or a token count as a prompt is fitted) takes the worker's ready frame."""
    hello: list[Any] = [{"role": "user", "content": "hello"}]

    async def calls(wait_in_between: bool) -> tuple[bool, list[str]]:
        first = asyncio.create_task(llm.complete(hello))
        await asyncio.sleep(0)  # the first call has started the worker and waits for it
        waited = not llm._ready and llm._process is not None
        if wait_in_between:
            llm.preflight()
        second = asyncio.create_task(llm.complete(hello))
        return waited, [(await first).text, (await second).text]

    openai_stub.script += [(200, "answer")] * 4
    for wait_in_between in (False, True):
        llm = _worker(openai_stub)
        try:
            assert asyncio.run(calls(wait_in_between)) == (True, ["answer", "answer"])
        finally:
            llm.close()
    assert len(openai_stub.requests) == 4


def test_the_worker_ends_when_the_builder_is_gone(openai_stub: Stub) -> None:
    llm = _worker(openai_stub)
    llm.preflight()
    process = llm._process
    assert process is not None and process.poll() is None
    # A builder killed closes its sockets: the kernel does it, as here.
    assert llm._socket is not None and llm._counts is not None
    llm._socket.close()
    llm._counts.close()
    assert process.wait(timeout=60) == 0


def test_a_worker_that_dies_stops_the_calls_with_a_clear_error(openai_stub: Stub) -> None:
    llm = _worker(openai_stub)
    try:
        llm.preflight()
        assert llm._process is not None
        os.kill(llm._process.pid, signal.SIGKILL)
        llm._process.wait()
        message = [{"role": "user", "content": "hello"}]
        with pytest.raises(LLMCallError, match="the process that makes the model calls stopped"):
            asyncio.run(llm.complete(message))
        with pytest.raises(LLMCallError, match="stopped"):
            llm.count_tokens("hello")
    finally:
        llm.close()


def test_a_model_the_worker_refuses_stops_before_anything_is_sent(openai_stub: Stub) -> None:
    llm = WorkerLLM(LLMSettings(model="anthropic/claude-x"))
    with pytest.raises(LLMCallError, match="needs ANTHROPIC_API_KEY") as refused:
        llm.preflight()
    assert refused.value.fatal and llm._process is None
    with pytest.raises(LLMCallError, match="needs ANTHROPIC_API_KEY"):  # and every later call
        asyncio.run(llm.complete([{"role": "user", "content": "hello"}]))
    assert not openai_stub.requests


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(n) for n in (task / "children").read_text().split()]
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("kill_after", [1, 4, 9])
def test_a_builder_killed_at_any_call_repays_at_most_one(tmp_path: Path, kill_after: int) -> None:
    """kill -9 of a build with the default call worker, while calls are in flight and replies
    arrive: every reply the model server sent is in the cache once the worker is done, but
    at most one, so the build run again pays for none of them twice."""
    import subprocess
    import sys
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from helpers import chat_completion, good_answer, make_run, write_runs

    served: list[float] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            time.sleep(0.3)  # calls overlap: several are in flight at the kill
            content = good_answer(body["messages"][0]["content"])
            data = json.dumps(chat_completion(body["model"], content)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            served.append(time.monotonic())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runs = write_runs(tmp_path / "runs.jsonl", [make_run(f"t{n}") for n in range(16)])
    cache = tmp_path / "cache"
    command = [
        sys.executable, "-m", "wikitrace.cli", "build", str(runs), "-o", str(tmp_path / "c"),
        "--model", "openai/stub-model", "--api-base", f"http://127.0.0.1:{server.server_port}/v1",
        "--concurrency", "4", "--no-mine",
    ]  # fmt: skip
    env = {**os.environ, "WIKITRACE_CACHE_DIR": str(cache)}
    try:
        builder = subprocess.Popen(
            command, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + 120
        while len(served) < kill_after and builder.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        workers = _children(builder.pid)
        builder.kill()  # kill -9: nothing of the builder runs after this
        builder.wait()
        while not all(_gone(pid) for pid in workers):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.4)  # a reply the server was still sending
        saved = [p for p in cache.rglob("*.json") if "tokens" not in p.parts]
        assert workers and len(served) >= kill_after
        assert len(saved) >= len(served) - 1, (len(saved), len(served))
    finally:
        server.shutdown()
        server.server_close()
