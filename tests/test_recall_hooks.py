"""Recall through coding agents' hooks (`wikitrace hooks`): installed into each agent's own
settings, run as the agent runs it (a shell command, the hook's JSON on stdin), answering in its
format, and never in its way. The payloads are tests/data/hooks/ (see tests/data/README.md)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from wikitrace.integrations.agent_hooks import is_ours

from helpers import DATA, Stub, make_run, run, write_runs

PAYLOADS = DATA / "hooks"
SHOWCASE = DATA / "sessions/claude-code/minimal_showcase"
SESSION = "55550000-0000-4000-8000-000000000001"
THREAD = "22222222-2222-4222-8222-222222222222"
HARD_LIMIT = 20.0
"""No hook run here may take this long: each is expected well within a second or two."""


def payload(name: str, **fields: Any) -> str:
    return json.dumps(json.loads((PAYLOADS / f"{name}.json").read_text()) | fields)


def shell(command: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """A hook's command as Claude Code, Codex and Gemini CLI run it: by a shell, JSON on stdin."""
    return subprocess.run(
        command, shell=True, input=stdin, text=True, capture_output=True, timeout=HARD_LIMIT
    )


def git_repository(path: Path, remote: str) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=30)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


def copy_logs(source: Path, dest: Path, folder: str, repository: Path) -> None:
    """Session logs copied as if recorded in `repository`: the working folder they name
    (`folder`) made its path on this machine."""
    for path in sorted(source.rglob("*")):
        if path.is_file():
            target = dest / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text().replace(folder, str(repository)))


def wait_for(log: Path, text: str, seconds: float = 60.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = log.read_text() if log.exists() else ""
        if text in found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in {log}:\n{found}")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home with nothing in it: the agents' settings, caches and logs all land here."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for name in ("CLAUDE_CONFIG_DIR", "WIKITRACE_HOOK_LOG", "WIKITRACE_USER_SETTINGS"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def corpus(tmp_path: Path, openai_stub: Stub) -> Path:
    """A corpus compiled by a model (the local stub): one tau run, with its lesson, of no
    repository."""
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    pointer = tmp_path / "corpus"
    model = ["--model", "openai/stub", "--api-base", openai_stub.url]
    code, _, err = run(["-q", "build", str(runs), "-o", str(pointer), *model])
    assert code == 0, err
    return pointer


def installed(settings: Path) -> dict[str, str]:
    """Event -> the command of our handler in an agent's settings file."""
    found = {}
    for event, groups in json.loads(settings.read_text())["hooks"].items():
        for group in groups:
            for handler in group["hooks"]:
                if is_ours(handler):
                    found[event] = handler["command"]
    return found


def insight_ids(corpus: Path) -> set[str]:
    return {page.stem for page in (corpus / "insight").glob("*.md") if page.stem != "_index"}


def listed(context: str) -> set[str]:
    """The lessons a recalled text lists (`- **insight-NNNN: title**`)."""
    return set(re.findall(r"^- \*\*(insight-\d+):", context, re.M))


def label_and_add(corpus: Path, session: str, stub: Stub, tmp_path: Path) -> set[str]:
    """Label the sessions the hook kept aside, and add them (compiled by the stub model):
    the lessons added."""
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({session: False}))
    before = insight_ids(corpus)
    kept = corpus.with_name("corpus.unlabelled")
    model = ["--api-base", stub.url]
    code, _, err = run(["-q", "add", str(corpus), str(kept), "--labels", str(labels), *model])
    assert code == 0, err
    return insight_ids(corpus) - before


def test_claude_code_session_start_recalls_the_lesson_of_its_repository_only(
    home: Path, corpus: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    app = git_repository(tmp_path / "work/app", "git@github.com:me/app.git")
    other = git_repository(tmp_path / "work/other", "git@github.com:me/other.git")
    code, out, err = run(["hooks", "install", "claude-code", str(corpus)])
    assert code == 0, err
    settings = home / ".claude/settings.json"
    assert out.startswith(f"{settings}: wikitrace's hooks on SessionStart")
    commands = installed(settings)
    assert set(commands) == {"SessionStart", "UserPromptSubmit", "SessionEnd"}

    # The session ends and is captured (unlabelled: kept beside the corpus).
    transcript = tmp_path / "projects/-work-app" / f"{SESSION}.jsonl"
    copy_logs(SHOWCASE, transcript.parent, "/workspace/example-app", app)
    ended = shell(
        commands["SessionEnd"],
        payload("claude-code-session-end", cwd=str(app), transcript_path=str(transcript)),
    )
    assert (ended.returncode, ended.stdout) == (0, "")
    wait_for(home / ".cache/wikitrace/hook.log", "not added, unlabelled")
    added = label_and_add(corpus, SESSION, openai_stub, tmp_path)
    assert len(added) == 1

    # The next session in that repository starts with the lesson; one elsewhere, with nothing.
    start = payload("claude-code-session-start", cwd=str(app / "src"))
    (app / "src").mkdir()
    started = shell(commands["SessionStart"], start)
    assert started.returncode == 0, started.stderr
    answer = json.loads(started.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("# Memory: lessons from past runs\n")
    assert listed(context) == added
    elsewhere = shell(
        commands["SessionStart"], payload("claude-code-session-start", cwd=str(other))
    )
    assert (elsewhere.returncode, elsewhere.stdout) == (0, "")
    log = (home / ".cache/wikitrace/hook.log").read_text()
    assert "SessionStart 77770000-0000-4000-8000-000000000007: recalled 1 lessons" in log
    assert "github.com/me/other has no runs in" in log

    # A prompt in the repository is answered in the same format, for its event.
    prompted = shell(
        commands["UserPromptSubmit"], payload("claude-code-user-prompt-submit", cwd=str(app))
    )
    answer = json.loads(prompted.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert listed(answer["hookSpecificOutput"]["additionalContext"]) == added


def test_codex_session_start_recalls_the_lesson_of_its_repository_only(
    home: Path, corpus: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    app = git_repository(tmp_path / "work/app", "https://github.com/me/app")
    other = git_repository(tmp_path / "work/other", "https://github.com/me/other")
    copy_logs(
        DATA / "sessions/codex/sessions",
        home / ".codex/sessions",
        "/workspace/synthetic-project",
        app,
    )
    (home / ".codex/config.toml").write_text('model = "gpt-5.1-codex"\n\n[features]\nweb = true\n')
    code, _, err = run(["hooks", "install", "codex", str(corpus)])
    assert code == 0, err
    commands = installed(home / ".codex/hooks.json")
    assert set(commands) == {"SessionStart", "UserPromptSubmit", "Stop"}
    config = (home / ".codex/config.toml").read_text()
    assert config == 'model = "gpt-5.1-codex"\n\n[features]\ncodex_hooks = true\nweb = true\n'

    # A turn stops: Codex gives no transcript_path; the rollout is found by the session's id.
    stopped = shell(commands["Stop"], payload("codex-stop", cwd=str(app)))
    assert (stopped.returncode, stopped.stdout) == (0, "")
    wait_for(home / ".cache/wikitrace/hook.log", "not added, unlabelled")
    added = label_and_add(corpus, THREAD, openai_stub, tmp_path)
    assert len(added) == 1

    started = shell(commands["SessionStart"], payload("codex-session-start", cwd=str(app)))
    answer = json.loads(started.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert listed(answer["hookSpecificOutput"]["additionalContext"]) == added
    elsewhere = shell(commands["SessionStart"], payload("codex-session-start", cwd=str(other)))
    assert (elsewhere.returncode, elsewhere.stdout) == (0, "")
