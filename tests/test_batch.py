"""`--batch`: compile calls through a provider's batch API, reached through litellm's real code
path against a local stub of OpenAI's files and batches endpoints (tests/batch_stub.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wikitrace.corpus_schema import verify
from wikitrace.transport.batch import BatchLLM, BatchSettings, Deferred
from wikitrace.transport.llm import CachedLLM, LLMCallError, ResponseCache

from batch_stub import BatchStub, default_answer, serving
from helpers import FakeLLM, ctrl_c_at_its_default, good_answer, make_run, run, write_runs

pytestmark = pytest.mark.integration

WIKITRACE = str(Path(sys.executable).parent / "wikitrace")


@pytest.fixture
def stub() -> Iterator[BatchStub]:
    with serving() as server:
        yield server


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return write_runs(
        tmp_path / "runs.jsonl",
        [make_run(f"t{n}", success=n % 2 == 0) for n in range(4)],
    )


def model_args(stub: BatchStub) -> list[str]:
    return ["--model", "openai/stub-model", "--api-base", stub.url]


def knobs(cache: Path, **more: str) -> dict[str, str]:
    """The settings with no flag a batch test sets: its reply cache, a quick poll, `more`."""
    return {"WIKITRACE_CACHE_DIR": str(cache), "WIKITRACE_BATCH_POLL": "0.1", **more}


def build(
    runs: Path, corpus: Path, stub: BatchStub, cache: Path, **more: str
) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(
        ["build", str(runs), "-o", str(corpus), "--json", "--batch", *model_args(stub)],
        env=knobs(cache, **more),
    )
    return code, json.loads(out) if out.strip() else {}, err


def pages(corpus: Path, layer: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((corpus / layer).glob("*.md"))}


def test_a_batch_build_writes_what_a_build_at_once_writes(
    runs: Path, tmp_path: Path, stub: BatchStub
) -> None:
    code, report, err = build(runs, tmp_path / "batched", stub, tmp_path / "cache")
    assert code == 0, err
    assert stub.chat_calls == 0 and stub.uploads == 1 and len(stub.batches) == 1
    requests = stub.requests_of("batch_1")
    assert len(requests) == 4 and len({r["custom_id"] for r in requests}) == 4
    body = requests[0]["body"]
    assert body["model"] == "stub-model" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"} and body["max_tokens"] == 4096
    assert requests[0]["url"] == "/v1/chat/completions"
    assert report["llm_calls"] == 4 and report["cache_hits"] == 0 and report["compiled"] == 4
    assert report["batches"] == [
        {"batch": "batch_1", "requests": 4, "status": "completed", "unanswered": 0}
    ]
    assert "batch batch_1: submitted 4 requests" in err and "batch_1: completed" in err
    assert verify(tmp_path / "batched").ok
    assert not list((tmp_path / "cache" / "batches").iterdir())  # nothing left waiting

    # The same runs compiled at once (the stub answers chat calls alike): the same pages.
    code, _, err = run(
        ["build", str(runs), "-o", str(tmp_path / "direct"), *model_args(stub)],
        env=knobs(tmp_path / "k"),
    )
    assert code == 0, err
    assert stub.chat_calls == 4
    for layer in ("compilation", "insight"):
        assert pages(tmp_path / "batched", layer) == pages(tmp_path / "direct", layer)

    # A rebuild is answered by the cache: nothing submitted, nothing paid.
    code, again, err = build(runs, tmp_path / "again", stub, tmp_path / "cache")
    assert code == 0, err
    assert stub.uploads == 1 and again["llm_calls"] == 0 and again["cache_hits"] == 4
    assert again["batches"] == []


def test_quote_repairs_go_in_a_second_batch(runs: Path, tmp_path: Path, stub: BatchStub) -> None:
    def answer(body: dict[str, Any]) -> str:
        first = body["messages"][0]["content"]
        return good_answer(first, wrong_quote=len(body["messages"]) == 1)

    stub.answer = answer
    code, report, err = build(runs, tmp_path / "c", stub, tmp_path / "cache")
    assert code == 0, err
    assert len(stub.batches) == 2
    repairs = stub.requests_of("batch_2")
    assert len(repairs) == 4 and all(len(r["body"]["messages"]) == 3 for r in repairs)
    assert report["quote_repairs"] == 4 and report["unverified_quotes"] == 0
    assert report["llm_calls"] == 8 and report["compiled"] == 4


def test_an_invalid_answer_is_corrected_in_the_next_batch_and_not_kept(
    runs: Path, tmp_path: Path, stub: BatchStub
) -> None:
    def answer(body: dict[str, Any]) -> str:
        if len(body["messages"]) == 1:
            return "I cannot answer in JSON, sorry."
        return good_answer(body["messages"][0]["content"])

    stub.answer = answer
    cache = tmp_path / "cache"
    code, report, err = build(runs, tmp_path / "c", stub, cache)
    assert code == 0, err
    # Two rounds, not a loop: the invalid answers stay cached until the build is done.
    assert len(stub.batches) == 2 and report["invalid_retries"] == 4 and report["compiled"] == 4
    kept = [json.loads(p.read_bytes())["text"] for p in cache.glob("??/*.json")]
    assert len(kept) == 4 and not any(text.startswith("I cannot") for text in kept)


def test_requests_a_batch_refuses_fail_their_runs_and_are_submitted_again(
    runs: Path, tmp_path: Path, stub: BatchStub
) -> None:
    def answer(body: dict[str, Any]) -> str | None:
        if "Put the t1 mug" in body["messages"][0]["content"]:
            return None  # the stub's error line for this request
        return default_answer(body)

    stub.answer = answer
    corpus = tmp_path / "c"
    code, report, err = build(runs, corpus, stub, tmp_path / "cache")
    assert code == 1, err
    assert report["compiled"] == 3 and len(report["failed"]) == 1
    assert "stub refused this request" in report["failed"][0]["error"]
    assert report["batches"][0]["status"] == "completed"
    stub.answer = default_answer
    code, report, err = build(runs, corpus, stub, tmp_path / "cache")
    assert code == 0, err
    assert stub.requests_of("batch_2") and len(stub.requests_of("batch_2")) == 1
    assert report["compiled"] == 4 and report["cache_hits"] == 3


def test_an_expired_batch_gives_what_it_answered(
    runs: Path, tmp_path: Path, stub: BatchStub
) -> None:
    stub.end = "expired"
    code, report, err = build(runs, tmp_path / "c", stub, tmp_path / "cache")
    assert code == 1, err
    assert report["compiled"] == 2 and len(report["failed"]) == 2
    assert all("ended expired" in f["error"] for f in report["failed"])
    assert report["batches"] == [
        {"batch": "batch_1", "requests": 4, "status": "expired", "unanswered": 2}
    ]


def test_a_failed_batch_fails_its_runs(runs: Path, tmp_path: Path, stub: BatchStub) -> None:
    stub.end = "failed"
    code, report, err = build(runs, tmp_path / "c", stub, tmp_path / "cache")
    # No reply for any run: nothing is made current (a corpus of failures would be).
    assert (code, report) == (1, {}), err
    assert "not built: " in err and "the model giving no reply" in err
    assert "ended failed: no" in err
    assert not (tmp_path / "c").exists()


def test_stopped_while_waiting_the_same_command_waits_for_the_same_batch(
    runs: Path, tmp_path: Path, stub: BatchStub
) -> None:
    stub.hold = True
    corpus, cache = tmp_path / "c", tmp_path / "cache"
    command = [WIKITRACE, "build", str(runs), "-o", str(corpus), "--json", "--batch"]
    command += model_args(stub)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **knobs(cache)}
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=ctrl_c_at_its_default,
    )
    try:
        # Generous deadlines, each met as soon as it can be: at a load of 17 on 2 cores the
        # whole test took 100 s (23 to 65 s at 10 to 15).
        deadline = time.monotonic() + 300
        while stub.polls < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stub.polls >= 3, "the build never waited for its batch"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "the same command again waits for them and submits nothing twice" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "runs.jsonl"]  # no corpus
    recorded = list((cache / "batches").glob("*.json"))
    assert [p.name for p in recorded] == ["batch_1.json"]
    assert not list((cache / "batches").glob("*.jsonl"))  # the submitted file is not kept

    stub.hold = False
    code, report, err = build(runs, corpus, stub, cache)
    assert code == 0, err
    assert stub.uploads == 1 and len(stub.batches) == 1  # nothing submitted twice
    assert report["compiled"] == 4 and report["llm_calls"] == 4
    assert verify(corpus).ok


def test_batch_needs_the_cache_and_a_provider_litellm_batches_for(
    runs: Path, tmp_path: Path, stub: BatchStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = build(runs, tmp_path / "c", stub, tmp_path / "cache", WIKITRACE_NO_CACHE="1")
    assert code == 2 and "drop no-cache" in err
    code, _, err = run(["build", str(runs), "-o", str(tmp_path / "e"), "--batch"])
    assert code == 2 and "give --model" in err and not (tmp_path / "e").exists()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    model = ["--model", "anthropic/claude-3-5-haiku-latest"]
    code, _, err = run(
        ["build", str(runs), "-o", str(tmp_path / "d"), "--batch", *model],
        env=knobs(tmp_path / "k"),
    )
    assert code != 0 and "--batch: litellm submits batches for openai" in err
    assert "not anthropic" in err and not (tmp_path / "d").exists()
    assert stub.uploads == 0


def test_add_batches_only_the_runs_it_adds(runs: Path, tmp_path: Path, stub: BatchStub) -> None:
    corpus, cache = tmp_path / "c", tmp_path / "cache"
    code, _, err = build(runs, corpus, stub, cache)
    assert code == 0, err
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9", success=True)])
    given = ["--json", "--batch", "--api-base", stub.url]
    code, out, err = run(["add", str(corpus), str(more), *given], env=knobs(cache))
    assert code == 0, err
    report = json.loads(out)
    assert report["runs"] == 1 and report["llm_calls"] == 1 and report["version"] == "v0002"
    assert len(stub.batches) == 2 and len(stub.requests_of("batch_2")) == 1
    assert "Put the t9 mug" in stub.requests_of("batch_2")[0]["body"]["messages"][0]["content"]
    assert verify(corpus).ok and stub.chat_calls == 0


def test_requests_are_split_into_files_of_at_most_the_limit(tmp_path: Path) -> None:
    class Api:  # the request body is all a queued call needs of the provider
        def body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
            return {"model": "m", "messages": messages}

    cached = CachedLLM(FakeLLM(), ResponseCache(tmp_path / "cache"))
    batch = BatchLLM(cached, Api(), BatchSettings(max_requests=2))  # type: ignore[arg-type]
    batch.start_round()
    for n in [1, 2, 3, 2, 4, 5]:  # one asked twice: queued once
        with pytest.raises(Deferred):
            asyncio.run(batch.complete([{"role": "user", "content": f"run {n}"}]))
    assert not batch.finish_round()
    files = list(batch._round.files)
    assert [len(keys) for _, keys in files] == [2, 2, 1]
    for path, keys in files:
        assert [json.loads(line)["custom_id"] for line in path.read_text().splitlines()] == keys
    batch.discard()
    assert not any(path.exists() for path, _ in files)


def test_after_the_pass_the_build_takes_every_answer_from_the_cache(tmp_path: Path) -> None:
    class Api:
        def body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
            return {"model": "m", "messages": messages}

        def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
            return 0.5

    inner = FakeLLM(answer=lambda messages: "an answer")
    cached = CachedLLM(inner, ResponseCache(tmp_path / "cache"))
    batch = BatchLLM(cached, Api(), BatchSettings())  # type: ignore[arg-type]
    old, new, refused, unasked = ([{"role": "user", "content": n}] for n in "abcd")
    asyncio.run(cached.complete(old))  # in the cache before this build
    batch.start_round()
    with pytest.raises(Deferred):
        asyncio.run(batch.complete(new))
    batch.forget(old)  # the pass forgets nothing: the build must find the same answers
    assert not batch.finish_round() and batch.waiting == 1
    line = {"custom_id": ResponseCache.key(cached.cache_identity(), new)}
    line["response"] = {"status_code": 200, "body": {"choices": [{"message": {"content": "x"}}]}}
    batch._answer("batch_1", "file-1", 1, json.dumps(line).encode())
    batch.settled.add("batch_1")
    batch.failed[ResponseCache.key(cached.cache_identity(), refused)] = "batch_1 refused it"

    answers = batch.answers()
    made = asyncio.run(answers.complete(new))  # a batch this process waited for: a call
    assert (made.text, made.cached, made.attempts, made.cost_usd) == ("x", False, 1, 0.5)
    assert asyncio.run(answers.complete(old)).cached  # answered before: a cache hit
    with pytest.raises(LLMCallError, match="batch_1 refused it"):
        asyncio.run(answers.complete(refused))
    with pytest.raises(LLMCallError, match="no batch answered this request"):
        asyncio.run(answers.complete(unasked))  # never sent at once, never deferred
    assert len(inner.calls) == 1  # only the call made before the build
    answers.forget(old)  # the build forgets what it cannot use
    assert cached.cache.get(ResponseCache.key(cached.cache_identity(), old)) is None
