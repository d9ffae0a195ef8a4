"""Integration: the compile calls made by a worker process (transport/call_worker.py), through
litellm's real code path against the local OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
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


def test_the_worker_ends_when_the_builder_is_gone(openai_stub: Stub) -> None:
    llm = _worker(openai_stub)
    llm.preflight()
    process = llm._process
    assert process is not None and process.poll() is None
    # A builder killed closes its sockets: the kernel does it, as here.
    assert llm._socket is not None and llm._counts is not None
    llm._socket.close()
    llm._counts.close()
    assert process.wait(timeout=20) == 0


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
