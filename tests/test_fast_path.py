"""The fast path (transport/fast_path.py): a plain OpenAI-compatible endpoint called with one
shared HTTP client instead of litellm, sending, reading, retrying and failing as litellm's
calls do; checked against litellm's real code path through local stub servers."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from wikitrace.transport.clients import make_client
from wikitrace.transport.fast_path import (
    FastClient,
    environment_proxy,
    may_be_priced,
    takes_fast_path,
)
from wikitrace.transport.llm import LiteLLMClient, LLMCallError, LLMSettings

from helpers import Stub, build_with_stub, chat_completion

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "hello"}]


def test_only_a_plain_openai_compatible_endpoint_takes_the_fast_path() -> None:
    def fast(model: str, api_base: str | None = "http://127.0.0.1:8000/v1", **more: Any) -> bool:
        return takes_fast_path(LLMSettings(model=model, api_base=api_base, **more))

    for local in ["openai/stub-model", "openai/Qwen/Qwen2.5-7B-Instruct", "openai/gpt-oss-20b"]:
        assert fast(local) and fast(local, reasoning_effort="high")
        assert isinstance(make_client(LLMSettings(model=local, api_base="http://h/v1")), FastClient)
    assert not fast("openai/stub-model", fast_path=False)  # fast-path = false
    assert not fast("openai/stub-model", None)  # OpenAI's own API: its models' quirks
    assert not fast("openai/stub-model", "https://h.example/v1?api-version=1")
    # Names litellm rewrites requests for, or prices: litellm's.
    for named in ["openai/gpt-4o-mini", "openai/o3-mini", "openai/my-gpt-5-tune", "openai/gpt-4o"]:
        assert not fast(named)
    for other in ["ollama/llama3", "hosted_vllm/llama3", "anthropic/claude-x", "gpt-4o-mini"]:
        assert not fast(other)
    slow = make_client(LLMSettings(model="openai/gpt-4o-mini", api_base="http://h/v1"))
    assert isinstance(slow, LiteLLMClient)


def test_litellm_prices_no_name_the_fast_path_would_leave_unpriced() -> None:
    """may_be_priced must hold for every name litellm puts a price on as an `openai/` model's
    reply: else a reply cached by the fast path would lack the cost litellm's call recorded.
    A sample of the price list's names (every 7th), as written, without their provider and
    with a date appended."""
    from wikitrace.transport.llm import _import_litellm

    litellm = _import_litellm()
    names = sorted(litellm.model_cost)[::7]
    names += [name.split("/", 1)[-1] for name in names] + [f"{name}-2099-01-01" for name in names]
    priced = []
    for name in names:
        response = litellm.ModelResponse(**chat_completion(name, "hi"))
        try:
            litellm.completion_cost(
                completion_response=response, model="stub-model", custom_llm_provider="openai"
            )
        except Exception:
            continue
        priced.append(name)
    assert len(priced) > 50  # the check checks something
    assert [name for name in priced if not may_be_priced(name)] == []
    assert not may_be_priced("Qwen/Qwen2.5-7B-Instruct") and not may_be_priced("stub-model")


def _pages(corpus: Path) -> dict[str, bytes]:
    return {
        p.relative_to(corpus).as_posix(): p.read_bytes()
        for p in corpus.rglob("*")
        if p.is_file() and p.name != "manifest.json"
    }


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.json")}


@pytest.mark.parametrize("workers", [0, 1])
def test_the_fast_path_and_litellm_send_and_keep_the_same(
    runs_file: Path, tmp_path: Path, openai_stub: Stub, workers: int
) -> None:
    """The same replies make the same corpus, the same cache (keys and bytes) and the same
    report; the requests are the same JSON, key for key; a rebuild through the other path
    makes no call."""
    made = {}
    for fast in (True, False):
        folder = tmp_path / ("fast" if fast else "litellm")
        folder.mkdir()
        openai_stub.script += [(429, "slow down")]
        report = build_with_stub(
            runs_file,
            folder / "corpus",
            openai_stub,
            fast_path=fast,
            call_workers=workers,
            concurrency=1,
        )
        bodies = [json.dumps(body) for body in openai_stub.requests]
        openai_stub.requests.clear()
        made[fast] = (report, bodies, _pages(folder / "corpus"), _files(folder / "cache"))
    (fast_report, *fast_made), (slow_report, *slow_made) = made[True], made[False]
    assert fast_made == slow_made and len(fast_made[1]) > 10 and len(fast_made[2]) == 3
    for field in ["compiled", "llm_calls", "http_attempts", "prompt_tokens", "cost_usd"]:
        assert getattr(fast_report, field) == getattr(slow_report, field), field
    assert fast_report.http_attempts == 4  # the 429 retried
    again = build_with_stub(
        runs_file, tmp_path / "litellm" / "again", openai_stub, cache_dir=tmp_path / "fast/cache"
    )
    assert again.complete and again.llm_calls == 0 and not openai_stub.requests


class _Server:
    """A chat completions server that answers as `model`, after `delay` seconds, or with the
    statuses of `script` first (status, body, headers)."""

    def __init__(self) -> None:
        self.model = "stub-model"
        self.delay = 0.0
        self.script: list[tuple[int, str, dict[str, str]]] = []
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                server.requests += 1
                status, body, headers = (
                    server.script.pop(0)
                    if server.script
                    else (200, json.dumps(chat_completion(server.model, "answer")), {})
                )
                time.sleep(server.delay)
                data = body.encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                chunked = headers.get("transfer-encoding") == "chunked"
                if not chunked:
                    self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if chunked:  # in pieces of 7 bytes, each written on its own
                    for at in range(0, len(data), 7):
                        piece = data[at : at + 7]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                    data = b"0\r\n\r\n"
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_port}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[_Server]:
    made = _Server()
    yield made
    made.http.shutdown()
    made.http.server_close()


def _error(message: str) -> str:
    return json.dumps({"error": {"message": message, "type": "stub_error"}})


def _call(client: Any) -> Any:
    return asyncio.run(client.complete(HELLO))


def test_a_reply_naming_a_priced_model_costs_what_litellm_says(server: _Server) -> None:
    server.model = "gpt-4o-mini"  # a proxy answering as a model litellm has a price for
    settings = LLMSettings(model="openai/stub-model", api_base=server.url)
    fast = _call(FastClient(settings))
    assert fast.cost_usd is not None and fast.cost_usd > 0
    assert fast == _call(LiteLLMClient(settings))
    server.model = "stub-model"
    assert _call(FastClient(settings)).cost_usd is None


def test_retries_errors_and_time_outs_as_litellm_has_them(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    def client(**more: Any) -> FastClient:
        settings = LLMSettings(
            **{"model": "openai/m", "api_base": server.url, "max_retries": 2, **more}
        )
        return FastClient(settings, sleep=sleep)

    # A rate limit waits what Retry-After asks; a server error backs off; both are retried.
    server.script += [(429, _error("slow down"), {"retry-after": "7"}), (502, "<html>", {})]
    with caplog.at_level(logging.INFO, logger="wikitrace"):
        reply = _call(client())
    assert reply.text == "answer" and reply.attempts == 3 and waited[0] == 7.0
    assert any("RateLimitError, retrying in 7.0s" in r.getMessage() for r in caplog.records)
    server.script += [(500, _error("boom"), {})] * 3
    with pytest.raises(LLMCallError, match=r"^openai/m: gave up after 3 attempts: "):
        _call(client())
    # A bad key or an unknown model stops the build at once; a bad request fails its call.
    server.requests = 0
    stops = [(401, "AuthenticationError"), (403, "PermissionDeniedError"), (404, "NotFoundError")]
    for status, kind in stops:
        server.script.append((status, _error("invalid api key"), {}))
        with pytest.raises(
            LLMCallError, match=f"^openai/m: {kind}: HTTP {status}: invalid api"
        ) as no:
            _call(client())
        assert no.value.fatal
    server.script.append((400, _error("too long"), {}))
    with pytest.raises(LLMCallError) as bad:
        _call(client())
    assert not bad.value.fatal and "BadRequestError: HTTP 400: too long" in str(bad.value)
    assert server.requests == 4  # none of them retried
    server.delay = 0.5
    with pytest.raises(LLMCallError, match="gave up after 2 attempts: Timeout"):
        _call(client(timeout_seconds=0.1, max_retries=1))
    server.delay = 0.0
    server.script.append((200, '{"choices": []}', {}))
    with pytest.raises(LLMCallError, match="not a chat completion"):
        _call(client())


def test_a_chunked_reply_is_read_whole(server: _Server) -> None:
    settings = LLMSettings(model="openai/stub-model", api_base=server.url)
    body = json.dumps(chat_completion("stub-model", "a chunked answer"))
    server.script.append((200, body, {"transfer-encoding": "chunked"}))
    assert _call(FastClient(settings)).text == "a chunked answer"


def test_the_environments_proxy_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        for spelled in (name, name.upper()):
            monkeypatch.delenv(spelled, raising=False)
    url = "http://models.internal:8000/v1/chat/completions"
    assert environment_proxy(url) is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert environment_proxy(url) == "http://proxy:3128"
    assert environment_proxy("https://models.internal/v1/chat/completions") is None
    monkeypatch.setenv("ALL_PROXY", "http://every:3128")
    assert environment_proxy("https://models.internal/v1/chat/completions") == "http://every:3128"
    monkeypatch.setenv("NO_PROXY", "models.internal")
    assert environment_proxy(url) is None
    # Given as host:port, as shells often set it: an http:// proxy (aiohttp refuses the bare
    # form, and every call would fail as a connection error).
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("HTTP_PROXY", "127.0.0.1:3128")
    assert environment_proxy(url) == "http://127.0.0.1:3128"


def test_nothing_listening_is_a_connection_error_retried() -> None:
    async def sleep(seconds: float) -> None:
        pass

    settings = LLMSettings(model="openai/m", api_base="http://127.0.0.1:9/v1", max_retries=1)
    with pytest.raises(LLMCallError, match="gave up after 2 attempts: APIConnectionError"):
        _call(FastClient(settings, sleep=sleep))


def test_token_counts_are_litellms(server: _Server) -> None:
    settings = LLMSettings(model="openai/stub-model", api_base=server.url)
    text = "a longer text, with punctuation; " * 40
    assert FastClient(settings).count_tokens(text) == LiteLLMClient(settings).count_tokens(text)


@pytest.mark.parametrize("worker", [True, False])
def test_a_build_on_the_fast_path_never_imports_litellm(
    runs_file: Path, tmp_path: Path, openai_stub: Stub, worker: bool
) -> None:
    """Neither the build's process nor its call worker imports litellm (8 s, 190 MiB): every
    process started prints what it imports (PYTHONPROFILEIMPORTTIME) on the stderr caught."""
    code = (
        "import subprocess, sys\n"
        "started = []\n"
        "class Popen(subprocess.Popen):\n"
        "    def __init__(self, args, **kwargs):\n"
        "        started.append(' '.join(map(str, args)))\n"
        "        super().__init__(args, **kwargs)\n"
        "subprocess.Popen = Popen\n"
        "from wikitrace.cli.main import main\n"
        "try:\n"
        f"    main(['-q', 'build', {str(runs_file)!r}, '-o', {str(tmp_path / 'c')!r}, "
        f"'--model', 'openai/stub-model', '--api-base', {openai_stub.url!r}])\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "print(any('call_worker' in a for a in started))\n"
    )
    env = {
        **os.environ,
        "PYTHONPROFILEIMPORTTIME": "1",
        "WIKITRACE_CACHE_DIR": str(tmp_path / "cache"),
        "WIKITRACE_CALL_WORKERS": "1" if worker else "0",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "orjson" in imported and "aiohttp" in imported  # the profile is there; the fast path ran
    assert done.stdout.split()[-1] == str(worker) and len(openai_stub.requests) == 3
    assert [name for name in imported if name.split(".")[0] in ("litellm", "openai")] == []
