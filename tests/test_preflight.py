"""Fail fast at the start of a model build: a missing key before litellm is imported, a server
that accepts connections but never answers within ANSWER_SECONDS."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from wikitrace.transport import llm
from wikitrace.transport.llm import LLMCallError, check_key, check_reachable

from helpers import make_run, write_runs


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server on 127.0.0.1 that accepts connections and never answers; it stops itself."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


def test_a_server_that_never_answers_is_refused_at_the_start(
    silent_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llm, "ANSWER_SECONDS", 0.5)
    with pytest.raises(LLMCallError, match="accepts connections but does not answer") as caught:
        check_reachable(silent_server)
    assert caught.value.fatal


def test_a_server_that_answers_anything_passes(openai_stub: object) -> None:
    check_reachable(openai_stub.url)  # type: ignore[attr-defined]


def test_a_missing_key_is_reported_before_litellm_is_imported(tmp_path: Path) -> None:
    with pytest.raises(LLMCallError, match="needs ANTHROPIC_API_KEY"):
        check_key("anthropic/claude-sonnet-4", None)
    check_key("openai/local", "http://127.0.0.1:8000/v1")  # a local server needs no key
    check_key("ollama/llama3", None)  # left to litellm
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1")])
    # Through the CLI, in a process of its own: litellm never imported on the way to the error.
    script = (
        "import sys\n"
        "from wikitrace.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    print('litellm' in sys.modules, done.code)\n"
    )
    argv = ["build", str(runs), "-o", str(tmp_path / "c"), "--model", "anthropic/claude-x"]
    found = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        },
        timeout=120,
    )
    assert found.stdout.split() == ["False", "1"], found.stderr
    assert "--model anthropic/claude-x needs ANTHROPIC_API_KEY in the environment" in found.stderr
    assert not (tmp_path / "c").exists()
