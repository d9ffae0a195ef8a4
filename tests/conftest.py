"""Shared fixtures: a network guard, a fake at our LLM boundary, an OpenAI-compatible stub, the
toy walk-throughs of docs/ (run once a session), and the test tiers."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    TIERS,
    Stub,
    chat_completion,
    good_answer,
    local_server,
    make_run,
    write_runs,
)
from walk_throughs import WalkThrough, shared_walk_through

# --- the tiers: the default leaves out the tests marked with these -----------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=("default", "rest", "all"),
        default="default",
        help=f"default: leave out the tests marked {', '.join(TIERS)}; rest: only those; "
        "all: every test (as CI runs them). An explicit -m picks by marker instead.",
    )


def _tiered(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(marker) for marker in TIERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tier = config.getoption("--tier")
    # An explicit -m picks by marker itself (`-m integration` runs those tests alone), and a
    # run that names a test (tests/test_x.py::test_y) runs it whatever its tier.
    named = any("::" in arg for arg in config.args)
    if tier == "all" or config.option.markexpr or named:
        return
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        (kept if _tiered(item) == (tier == "rest") else left_out).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect(self, address)


def _guard(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """Fail any connection that leaves this machine; keep caches out of the home folder."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    # The user's own settings and trusted folders: never the developer's.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cache.with_name(cache.name + "-config")))
    monkeypatch.delenv("WIKITRACE_USER_SETTINGS", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "WIKITRACE_MODEL", "WIKITRACE_CORPUS"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session", autouse=True)
def no_network_for_shared_fixtures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The guard below, for the fixtures shared by a module or a session too: they are made
    before any test's own fixtures, and their cache is this process's (an xdist worker's)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _guard(monkeypatch, tmp_path_factory.mktemp("xdg-cache"))
        yield


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fail any connection that leaves this machine; keep caches out of the home folder."""
    _guard(monkeypatch, tmp_path / "xdg-cache")


@pytest.fixture(autouse=True)
def wikitrace_loggers_as_imported() -> Iterator[None]:
    """The package's loggers as importing it leaves them, before each test and after it: a
    command run in this process sets the package logger's handler, level and propagation
    (cli/common.set_verbosity), a call worker served in a thread stops its propagation, a
    library's `logging.config.dictConfig` disables every logger made before it, and a later
    test's caplog would not see a warning that no longer reaches the root logger."""

    def as_imported() -> None:
        package = logging.getLogger("wikitrace")
        package.handlers[:] = []
        package.setLevel(logging.NOTSET)
        package.propagate = True
        for name, made in logging.root.manager.loggerDict.items():
            if name.startswith("wikitrace.") and isinstance(made, logging.Logger):
                made.disabled = False
                made.setLevel(logging.NOTSET)
                made.propagate = True
        package.disabled = False

    as_imported()
    yield
    as_imported()


@pytest.fixture
def runs_file(tmp_path: Path) -> Path:
    runs = [make_run("t1"), make_run("t2", success=True), make_run("t1", success=True)]
    return write_runs(tmp_path / "runs.jsonl", runs)


# --- a local OpenAI-compatible HTTP stub ------------------------------------------------------


@pytest.fixture
def openai_stub() -> Iterator[Stub]:
    requests: list[dict[str, Any]] = []
    script: list[tuple[int, str]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with lock:
                requests.append(body)
                status, text = script.pop(0) if script else (200, "")
            if status != 200:
                payload = json.dumps({"error": {"message": text, "type": "stub_error"}})
            elif self.path.endswith("/embeddings"):
                # A vector per input: counts of a, b and c, so texts alike point alike.
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                payload = json.dumps(
                    {
                        "object": "list",
                        "model": body["model"],
                        "data": [
                            {
                                "object": "embedding",
                                "index": i,
                                "embedding": [float(t.count(c)) for c in "abc"],
                            }
                            for i, t in enumerate(texts)
                        ],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    }
                )
            else:
                content = text or good_answer(body["messages"][0]["content"])
                payload = json.dumps(
                    chat_completion(body["model"], content, f"chatcmpl-{len(requests)}")
                )
            data = payload.encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            if status == 429:
                self.send_header("retry-after", "0")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    with local_server(Handler) as port:
        yield Stub(url=f"http://127.0.0.1:{port}/v1", requests=requests, script=script)


# --- the toy example's model server (examples/toy/model_server.py) ----------------------------

TOY = Path(__file__).resolve().parent.parent / "examples" / "toy"


@contextlib.contextmanager
def serving_toy() -> Iterator[str]:
    """The toy's stand-in model, served on a free port of 127.0.0.1; yields its --api-base."""
    import sys

    sys.path.insert(0, str(TOY))
    from model_server import Handler  # type: ignore[import-not-found]

    with local_server(Handler) as port:
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def toy_server() -> Iterator[str]:
    """The toy's stand-in model, served on a free port; yields its --api-base URL."""
    with serving_toy() as url:
        yield url


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus with a model's insights: the toy's runs compiled by the toy model server,
    through litellm's real code path (README: the toy walk-through)."""
    import os

    from helpers import run

    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    root = tmp_path_factory.mktemp("toy") / "toy-corpus"
    runs = [str(TOY / "runs" / name) for name in ("start.jsonl", "mat.jsonl", "force.jsonl")]
    with serving_toy() as url:
        model = ["--model", "openai/toy", "--api-base", url]
        cache = {"WIKITRACE_CACHE_DIR": str(root.parent)}
        code, _, err = run(["-q", "build", *runs, "-o", str(root), *model], env=cache)
    assert code == 0, err
    return root


# --- the toy walk-throughs of docs/, run once a session ---------------------------------------


@pytest.fixture(scope="session")
def update_walk_through(tmp_path_factory: pytest.TempPathFactory) -> WalkThrough:
    """docs/growing.md's walk-through (build, three updates, versions), run once as pasted."""
    return shared_walk_through("update", tmp_path_factory)


@pytest.fixture(scope="session")
def gate_walk_through(tmp_path_factory: pytest.TempPathFactory) -> WalkThrough:
    """docs/gate.md's walk-through (build, gate, episodes, monitor), run once as pasted."""
    return shared_walk_through("gate", tmp_path_factory)
