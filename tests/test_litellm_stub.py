"""Integration: litellm's real code path against a local OpenAI-compatible stub server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wikitrace.compiler import BuildOptions, CompileLimits, build_corpus
from wikitrace.corpus_schema import verify
from wikitrace.transport.llm import LLMCallError

from helpers import Stub, build_with_stub, local_server

pytestmark = pytest.mark.integration


build = build_with_stub


def test_one_request_per_run_then_none_on_rebuild(
    runs_file: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    report = build(runs_file, tmp_path / "first", openai_stub)
    assert len(openai_stub.requests) == 3 and report.llm_calls == 3 and report.complete
    assert report.insights == 3 and report.prompt_tokens == 150 and report.completion_tokens == 30
    assert report.cost_usd is None  # litellm cannot price a model it does not know
    request = openai_stub.requests[0]
    assert request["model"] == "stub-model" and request["temperature"] == 0
    assert request["response_format"] == {"type": "json_object"}
    assert verify(tmp_path / "first").ok
    again = build(runs_file, tmp_path / "second", openai_stub)
    assert len(openai_stub.requests) == 3 and again.llm_calls == 0 and again.cache_hits == 3


def test_rate_limits_are_retried(runs_file: Path, tmp_path: Path, openai_stub: Stub) -> None:
    openai_stub.script += [(429, "slow down"), (429, "slow down")]
    report = build(runs_file, tmp_path / "c", openai_stub, concurrency=1)
    assert report.complete and report.http_attempts == 5 and len(openai_stub.requests) == 5


def test_server_errors_past_the_retry_limit_fail_that_run_only(
    runs_file: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    openai_stub.script += [(500, "boom"), (500, "boom")]
    report = build(runs_file, tmp_path / "c", openai_stub, concurrency=1, max_retries=1)
    assert report.compiled == 2 and [f["step"] for f in report.failed] == ["step-0001"]
    assert report.failed[0]["error"].startswith("openai/stub-model: gave up after 2 attempts")


def test_a_bad_key_stops_the_build(runs_file: Path, tmp_path: Path, openai_stub: Stub) -> None:
    openai_stub.script += [(401, "invalid api key")] * 3
    with pytest.raises(LLMCallError, match="AuthenticationError"):
        build(runs_file, tmp_path / "c", openai_stub, concurrency=1)
    assert not (tmp_path / "c").exists()
    assert len(openai_stub.requests) == 1


def test_an_unknown_provider_stops_before_anything_is_sent(runs_file: Path, tmp_path: Path) -> None:
    options = BuildOptions(inputs=[runs_file], output=tmp_path / "c", model="nonsense-model")
    with pytest.raises(LLMCallError, match="litellm does not know this provider"):
        build_corpus(options)
    assert not (tmp_path / "c").exists()


def test_a_missing_key_stops_before_anything_is_sent(runs_file: Path, tmp_path: Path) -> None:
    options = BuildOptions(inputs=[runs_file], output=tmp_path / "c", model="anthropic/claude-x")
    with pytest.raises(LLMCallError, match="needs ANTHROPIC_API_KEY in the environment"):
        build_corpus(options)


def test_embeddings_go_through_litellm(openai_stub: Stub) -> None:
    from wikitrace.control.embed import LiteLLMEmbedder, cosine, update_direction

    embedder = LiteLLMEmbedder("openai/stub-embed", api_base=openai_stub.url)
    vectors = embedder.embed(["aab", "c"])
    assert [list(v) for v in vectors] == [[2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert openai_stub.requests[-1]["model"] == "stub-embed"
    direction, added, _ = update_direction({"x": "aa"}, {"x": "aa", "y": "cc"}, embedder)
    assert added == ["y"] and direction is not None
    assert cosine(direction, vectors[1]) == 1.0
    assert embedder.identity == "openai/stub-embed"


def test_an_embedding_error_names_the_model(openai_stub: Stub) -> None:
    from wikitrace.control.embed import EmbeddingError, LiteLLMEmbedder

    openai_stub.script += [(401, "invalid api key")] * 3
    embedder = LiteLLMEmbedder("openai/stub-embed", api_base=openai_stub.url)
    with pytest.raises(
        EmbeddingError, match=r"^--embedding-model openai/stub-embed: Authentication"
    ):
        embedder.embed(["a"])


def test_add_calls_the_model_as_the_build_did(
    runs_file: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    from wikitrace.compiler import add_runs
    from wikitrace.corpus_schema import manifest

    from helpers import make_run, write_runs

    corpus = tmp_path / "corpus"
    build(
        runs_file,
        corpus,
        openai_stub,
        temperature=0.3,
        limits=CompileLimits(max_output_tokens=1234),
    )
    kept = manifest.load(corpus).model_settings
    assert (kept["api_base"], kept["temperature"]) == (openai_stub.url, 0.3)
    assert (kept["max_output_tokens"], openai_stub.requests[0]["max_tokens"]) == (1234, 1234)
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9")])
    # No --api-base, no key: the endpoint the corpus was built with is called again.
    report = add_runs(BuildOptions(inputs=[more], output=corpus, cache_dir=tmp_path / "cache"))
    assert report.complete and report.compiled == 1 and report.llm_calls == 1
    assert openai_stub.requests[-1]["temperature"] == 0.3
    assert openai_stub.requests[-1]["max_tokens"] == 1234
    assert manifest.load(corpus).model_settings == kept


def test_near_duplicates_by_an_embedding_model(tmp_path: Path, openai_stub: Stub) -> None:
    import json

    from helpers import FakeLLM, good_answer, make_run, run, write_runs

    # The stub embeds a text as its counts of a, b and c: "aaa bbb" and "aa bb" point alike,
    # though they share no word; "ccc" points elsewhere.
    titles = {"t1": "aaa bbb", "t2": "aa bb", "t3": "ccc"}

    def answer(messages: list[Any]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        data["insights"][0].update(title=titles[task_id], guideline="x", applicability="y")
        return json.dumps(data)

    path = write_runs(tmp_path / "runs.jsonl", [make_run(t) for t in titles])
    corpus = tmp_path / "corpus"
    build_corpus(
        BuildOptions(inputs=[path], output=corpus, model="fake", use_cache=False),
        llm=FakeLLM(answer=answer),
    )
    args = ["prompt", str(corpus), "put the mug away", "--all-types", "--json"]
    code, out, err = run(args)
    assert code == 0, err
    assert json.loads(out)["alike"] == {}  # by words: three lessons
    model = ["--embedding-model", "openai/stub-embed"]
    code, out, err = run([*args, *model], env={"WIKITRACE_EMBEDDING_API_BASE": openai_stub.url})
    assert code == 0, err
    assert json.loads(out)["alike"] == {"insight-0001": ["insight-0002"]}


@pytest.fixture
def ollama_stub() -> Any:
    """A local stand-in for Ollama's API (/api/generate and /api/chat), on 127.0.0.1."""
    import json
    from http.server import BaseHTTPRequestHandler

    from helpers import good_answer

    requests: list[tuple[str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            requests.append((self.path, body))
            prompt = body["prompt"] if "prompt" in body else body["messages"][0]["content"]
            text = good_answer(prompt)
            reply: dict[str, Any] = {
                "model": body["model"],
                "created_at": "2026-01-01T00:00:00Z",
                "done": True,
                "prompt_eval_count": 50,
                "eval_count": 10,
            }
            if self.path.endswith("/api/chat"):
                reply["message"] = {"role": "assistant", "content": text}
            else:
                reply["response"] = text
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    with local_server(Handler) as port:
        yield f"http://127.0.0.1:{port}", requests


@pytest.mark.parametrize("model", ["ollama/llama3.1", "ollama_chat/llama3.1"])
def test_a_local_ollama_model_through_litellm(
    runs_file: Path, tmp_path: Path, ollama_stub: Any, model: str
) -> None:
    url, requests = ollama_stub
    corpus = tmp_path / "corpus"
    report = build_corpus(
        BuildOptions(
            inputs=[runs_file],
            output=corpus,
            model=model,
            api_base=url,
            use_cache=False,
            backoff_seconds=0.01,
        )
    )
    assert report.complete and report.compiled == 3 and report.insights == 3
    assert report.prompt_tokens == 150 and report.completion_tokens == 30
    path, body = requests[0]
    assert path == ("/api/chat" if model.startswith("ollama_chat") else "/api/generate")
    assert body["model"] == "llama3.1" and body["format"] == "json"
    assert verify(corpus).ok


def test_reasoning_effort_reaches_the_server_and_keys_the_cache(
    runs_file: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    from wikitrace.compiler import add_runs
    from wikitrace.corpus_schema import manifest

    from helpers import make_run, write_runs

    corpus = tmp_path / "corpus"
    build(runs_file, corpus, openai_stub, reasoning_effort="high")
    assert [r.get("reasoning_effort") for r in openai_stub.requests] == ["high"] * 3
    assert manifest.load(corpus).model_settings["reasoning_effort"] == "high"
    # Another effort is another answer: not taken from the cache.
    build(runs_file, tmp_path / "low", openai_stub, reasoning_effort="low")
    assert len(openai_stub.requests) == 6 and openai_stub.requests[-1]["reasoning_effort"] == "low"
    # add calls the model as the build did, effort included.
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9")])
    add_runs(BuildOptions(inputs=[more], output=corpus, cache_dir=tmp_path / "cache"))
    assert openai_stub.requests[-1]["reasoning_effort"] == "high"


@pytest.mark.parametrize("worker", [True, False])
def test_a_rebuild_from_the_cache_never_imports_litellm(
    runs_file: Path, tmp_path: Path, openai_stub: Stub, worker: bool
) -> None:
    """Every reply and every token count is cached after the first build: the second, in a
    fresh process, neither calls the model nor imports litellm (8 s, 190 MiB), in its own
    process or in a worker's (it starts none). Through litellm: the fast path imports it for
    neither build (tests/test_fast_path.py)."""
    import os
    import subprocess
    import sys

    def build_in_a_process(name: str) -> tuple[str, str]:
        code = (
            "import subprocess, sys\n"
            "started = []\n"
            "class Popen(subprocess.Popen):\n"
            "    def __init__(self, args, **kwargs):\n"
            "        started.append(' '.join(map(str, args)))\n"
            "        super().__init__(args, **kwargs)\n"
            "subprocess.Popen = Popen\n"
            "from wikitrace.cli.main import main\n"
            f"main(['-q', 'build', {str(runs_file)!r}, '-o', {str(tmp_path / name)!r}, "
            f"'--model', 'openai/stub-model', '--api-base', {openai_stub.url!r}, "
            "])\n"
            "print('litellm' in sys.modules, any('call_worker' in a for a in started))\n"
        )
        env = {
            **os.environ,
            "WIKITRACE_CACHE_DIR": str(tmp_path / "cache"),
            "WIKITRACE_FAST_PATH": "false",
            "WIKITRACE_CALL_WORKERS": "1" if worker else "0",
        }
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        imported, started = done.stdout.split()[-2:]
        return imported, started

    # With a worker, litellm is the worker's import only; without, the build's own.
    first = ("False", "True") if worker else ("True", "False")
    assert build_in_a_process("first") == first and len(openai_stub.requests) == 3
    assert build_in_a_process("second") == ("False", "False") and len(openai_stub.requests) == 3
    first = (tmp_path / "first" / "compilation" / "step-0001.md").read_text(encoding="utf-8")
    assert (tmp_path / "second" / "compilation" / "step-0001.md").read_text() == first
