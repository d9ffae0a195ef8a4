"""Recall through coding agents' hooks (`wikitrace hooks`): installed into each agent's own
settings, run as the agent runs it (a shell command, the hook's JSON on stdin), answering in its
format, and never in its way. The payloads are tests/data/hooks/, Claude Code's and Codex's as
their CLIs sent them (see tests/data/README.md); tests/test_live_agents.py runs the CLIs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from wikitrace.corpus_schema.lock import build_lock
from wikitrace.integrations.agent_hooks import is_ours

from helpers import DATA, Stub, make_run, run, write_runs

PAYLOADS = DATA / "hooks"
SHOWCASE = DATA / "sessions/claude-code/minimal_showcase"
SESSION = "55550000-0000-4000-8000-000000000001"
THREAD = "22222222-2222-4222-8222-222222222222"
HARD_LIMIT = 60.0
"""No hook run here may take this long: each is expected well within a second or two on a quiet
machine, and within a few at a load of 10 on 2 cores."""
RECALL_LIMIT = ["--time-limit", "10"]
"""The recall limit of the tests that are not about it: the default (1 s) answers nothing on a
busy machine (at a load of 12 on 2 cores, one recall in ten)."""


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


def wait_for(log: Path, text: str, seconds: float = 300.0) -> str:
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
    code, out, err = run(["hooks", "install", "claude-code", str(corpus), *RECALL_LIMIT])
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
        payload(
            "claude-code-session-end",
            session_id=SESSION,
            cwd=str(app),
            transcript_path=str(transcript),
        ),
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
    code, _, err = run(["hooks", "install", "codex", str(corpus), *RECALL_LIMIT])
    assert code == 0, err
    commands = installed(home / ".codex/hooks.json")
    assert set(commands) == {"SessionStart", "UserPromptSubmit", "Stop"}
    config = (home / ".codex/config.toml").read_text()
    assert config == 'model = "gpt-5.1-codex"\n\n[features]\nhooks = true\nweb = true\n'

    # A turn stops: the rollout its payload names is captured.
    (rollout,) = (home / ".codex/sessions").glob(f"*/*/*/rollout-*-{THREAD}.jsonl")
    stopped = shell(
        commands["Stop"], payload("codex-stop", cwd=str(app), transcript_path=str(rollout))
    )
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


# --- never in the agent's way -------------------------------------------------------------------

WIKITRACE = [str(Path(sys.executable).with_name("wikitrace"))]


def recall(corpus: Path, stdin: str, log: Path, *more: str) -> tuple[int, str, float]:
    """`hooks recall` as an agent runs it: exit code, stdout, seconds taken."""
    command = [*WIKITRACE, "hooks", "recall", str(corpus), "--hook-log", str(log), *more]
    began = time.monotonic()
    done = subprocess.run(command, input=stdin, text=True, capture_output=True, timeout=HARD_LIMIT)
    return done.returncode, done.stdout, time.monotonic() - began


@pytest.fixture
def offline_copy(tmp_path: Path) -> Path:
    """A writable copy of a small corpus built offline (no lesson), to damage."""
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    assert run(["-q", "build", str(runs), "-o", str(tmp_path / "built")])[0] == 0
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "built", copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


@pytest.mark.parametrize("damage", ["missing", "garbage catalog", "no manifest", "empty folder"])
def test_a_missing_or_damaged_corpus_answers_nothing_and_logs_why(
    home: Path, offline_copy: Path, tmp_path: Path, damage: str
) -> None:
    app = git_repository(tmp_path / "app", "git@github.com:me/app.git")
    if damage == "missing":
        shutil.rmtree(offline_copy)
    elif damage == "garbage catalog":
        (offline_copy / "catalog.jsonl").write_bytes(b"\x00\xff{not json\n")
    elif damage == "no manifest":
        (offline_copy / "catalog.jsonl").unlink()
        (offline_copy / "manifest.json").unlink()
    else:
        shutil.rmtree(offline_copy)
        offline_copy.mkdir()
    log = tmp_path / "hook.log"
    stdin = payload("claude-code-session-start", cwd=str(app))
    code, out, _ = recall(offline_copy, stdin, log, *RECALL_LIMIT)  # the damage, not the clock
    assert (code, out) == (0, "")
    assert re.search(r" ERROR recall from .*copy: nothing recalled: .+", log.read_text())


def test_a_hung_read_is_cut_at_the_time_limit(
    home: Path, offline_copy: Path, tmp_path: Path
) -> None:
    """A catalog that never gives its bytes (a FIFO no one writes: a hung disk) holds the
    hook only until --time-limit."""
    app = git_repository(tmp_path / "app", "git@github.com:me/app.git")
    for name in ("catalog.jsonl", "catalog-index.json"):
        (offline_copy / name).unlink()
        os.mkfifo(offline_copy / name)
    log = tmp_path / "hook.log"
    stdin = payload("codex-session-start", cwd=str(app))
    code, out, seconds = recall(offline_copy, stdin, log, "--time-limit", "0.5")
    assert (code, out) == (0, "")
    assert "ERROR recall: no answer within 0.5 s: nothing recalled" in log.read_text()
    assert seconds < HARD_LIMIT / 2


def test_a_held_build_lock_does_not_stop_recall(home: Path, corpus: Path, tmp_path: Path) -> None:
    """Reading a version takes no lock: an add under way does not hold the agent up."""
    other = git_repository(tmp_path / "other", "git@github.com:me/other.git")
    log = tmp_path / "hook.log"
    with build_lock(corpus):
        # A recall that waited for the lock would run into its limit and log that instead.
        stdin = payload("gemini-session-start", cwd=str(other))
        code, out, _ = recall(corpus, stdin, log, *RECALL_LIMIT)
    assert (code, out) == (0, "")
    assert (
        "SessionStart c0ffee00-0000-4000-8000-000000000009: nothing recalled: " in log.read_text()
    )


@pytest.mark.parametrize(
    ("stdin", "logged"),
    [
        ("", "no hook payload"),
        ("[1, 2]", "the hook payload is a JSON list, not an object"),
        ('{"session_id": "x"}', "hook payload field 'hook_event_name': missing"),
    ],
)
def test_a_bad_payload_answers_nothing_and_logs_why(
    home: Path, offline_copy: Path, tmp_path: Path, stdin: str, logged: str
) -> None:
    log = tmp_path / "hook.log"
    assert recall(offline_copy, stdin, log, *RECALL_LIMIT)[:2] == (0, "")
    assert logged in log.read_text()


def test_what_gemini_cli_s_session_start_recalled_does_not_scope_its_prompt(
    home: Path, offline_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini CLI's BeforeAgent prompt begins with what the SessionStart hook answered (the
    recorded payload): the first message is made for the user's words alone."""
    from wikitrace.tools.hook_recall import parse_recall_payload, recall
    from wikitrace.tools.memory import Memory

    asked: list[str] = []
    made = Memory.first_message

    def first_message(memory: Memory, task: str, options: Any) -> Any:
        asked.append(task)
        return made(memory, task, options)

    monkeypatch.setattr(Memory, "first_message", first_message)
    app = git_repository(tmp_path / "app", "git@github.com:me/app.git")
    sent = json.loads(payload("gemini-before-agent", cwd=str(app)))
    assert sent["prompt"].startswith("<hook_context>MARKER-SessionStart-CONTEXT</hook_context>")
    recall(offline_copy, parse_recall_payload(json.dumps(sent).encode()))
    assert asked == ["Fix the failing test in the parser module"]


# --- installing into the agents' settings ---------------------------------------------------------

THEIRS = {
    "model": "opus",
    "hooks": {
        "SessionStart": [
            {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}
        ],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    },
}


def test_install_keeps_every_other_key_and_hook_and_twice_is_once(
    home: Path, offline_copy: Path
) -> None:
    settings = home / ".claude/settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(THEIRS, indent=4))
    original = settings.read_text()
    code, out, err = run(["hooks", "install", "claude-code", str(offline_copy)])
    assert code == 0, err
    assert out.endswith(f"(the file before: {settings}.wikitrace-backup)\n")
    assert Path(f"{settings}.wikitrace-backup").read_text() == original
    first = json.loads(settings.read_text())
    assert first["model"] == "opus"
    assert first["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    assert first["hooks"]["SessionStart"][0] == THEIRS["hooks"]["SessionStart"][0]
    (ours,) = first["hooks"]["SessionStart"][1]["hooks"]
    assert ours["timeout"] == 5 and ours["command"].endswith(f"hooks recall {offline_copy}")

    code, out, _ = run(["hooks", "install", "claude-code", str(offline_copy)])
    assert code == 0 and out.endswith(": already so, not changed\n")
    assert json.loads(settings.read_text()) == first
    code, _, _ = run(["hooks", "install", "claude-code", str(offline_copy), "--max-tokens", "800"])
    again = json.loads(settings.read_text())
    assert len(again["hooks"]["SessionStart"]) == 2
    assert again["hooks"]["SessionStart"][1]["hooks"][0]["command"].endswith("--max-tokens 800")
    # A recall allowed longer than the agent's 5 s: the agent waits 4 s more than it.
    code, _, _ = run(["hooks", "install", "claude-code", str(offline_copy), "--time-limit", "10"])
    (longer,) = json.loads(settings.read_text())["hooks"]["SessionStart"][1]["hooks"]
    assert code == 0 and longer["command"].endswith("--time-limit 10")
    assert longer["timeout"] == 14

    code, out, err = run(["hooks", "remove", "claude-code"])
    assert code == 0, err
    assert json.loads(settings.read_text()) == THEIRS
    code, out, _ = run(["hooks", "remove", "claude-code"])
    assert out.endswith(": already so, not changed\n")


def test_a_settings_file_that_is_not_json_is_refused_with_its_line(
    home: Path, offline_copy: Path
) -> None:
    settings = home / ".gemini/settings.json"
    settings.parent.mkdir()
    settings.write_text('{\n  "theme": "dark",\n  "hooks": {,\n}\n')
    before = settings.read_bytes()
    code, out, err = run(["hooks", "install", "gemini", str(offline_copy)])
    assert (code, out) == (2, "")
    assert f"{settings}, line 3, column 13: not valid JSON" in err
    assert settings.read_bytes() == before
    settings.write_text('{"hooks": {"SessionStart": {"command": "x"}}}')
    code, _, err = run(["hooks", "install", "gemini", str(offline_copy)])
    assert code == 2 and "field 'hooks.SessionStart' is a dict, not a list" in err


def test_codex_s_config_that_is_not_toml_is_refused_and_hooks_json_left_alone(
    home: Path, offline_copy: Path
) -> None:
    codex = home / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text('model = "x"\n[features\n')
    code, _, err = run(["hooks", "install", "codex", str(offline_copy)])
    assert code == 2
    assert f"{codex / 'config.toml'}: not valid TOML" in err and "line 2" in err
    assert not (codex / "hooks.json").exists()


@pytest.mark.parametrize(
    ("features", "written"),
    [
        # An earlier install's flag, under the name Codex 0.171 warns of at every start.
        ("codex_hooks = true # ours\nweb = true\n", "hooks = true\nweb = true\n"),
        ("hooks = true\ncodex_hooks = true\n", "hooks = true\n"),
        ("hooks = true\n", None),
    ],
)
def test_codex_s_hooks_flag_is_written_under_its_current_name(
    home: Path, offline_copy: Path, features: str, written: str | None
) -> None:
    config = home / ".codex/config.toml"
    config.parent.mkdir()
    config.write_text(f'model = "x"\n\n[features]\n{features}')
    code, out, err = run(["hooks", "install", "codex", str(offline_copy)])
    assert code == 0, err
    assert config.read_text() == f'model = "x"\n\n[features]\n{written or features}'
    flag = f"{config}: [features] hooks = true (Codex's hooks turned on)"
    said = ": already so, not changed\n" if written is None else f" (the file before: {config}."
    assert flag + said in out
    # Codex 0.171 skips a hook its user has not trusted, without a word: install says so.
    assert "Codex runs a new or changed hook only once you have trusted it" in err


@pytest.mark.parametrize("flag", ["hooks = false", "codex_hooks = false"])
def test_codex_s_hooks_turned_off_are_left_so(home: Path, offline_copy: Path, flag: str) -> None:
    config = home / ".codex/config.toml"
    config.parent.mkdir()
    config.write_text(f"[features]\n{flag}\n")
    code, out, err = run(["hooks", "install", "codex", str(offline_copy)])
    assert (code, out) == (2, "")
    assert f"{config}: [features] {flag.replace(' = ', ' is ')}: Codex would not run" in err
    assert config.read_text() == f"[features]\n{flag}\n"
    assert not (home / ".codex/hooks.json").exists()


def test_a_codex_stop_that_names_no_transcript_is_found_by_its_session_id(home: Path) -> None:
    """Codex's schema lets transcript_path be null (a session kept on no file): the rollout,
    if there is one, is then found by the session's id."""
    from wikitrace.cli.hook import parse_payload

    copy_logs(DATA / "sessions/codex/sessions", home / ".codex/sessions", "/x", home)
    call = parse_payload(payload("codex-stop", transcript_path=None).encode())
    assert call is not None
    assert call.transcript.name.endswith(f"-{THREAD}.jsonl")
    assert call.transcript.is_relative_to(home / ".codex/sessions")


def test_gemini_hooks_are_named_and_timed_in_milliseconds(
    home: Path, offline_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = git_repository(tmp_path / "app", "git@github.com:me/app.git")
    (app / "src").mkdir()
    monkeypatch.chdir(app / "src")
    code, out, err = run(["hooks", "install", "gemini", str(offline_copy), "--repo"])
    assert code == 0, err
    settings = app / ".gemini/settings.json"
    assert out == f"{settings}: wikitrace's hooks on SessionStart, BeforeAgent, SessionEnd\n"
    hooks = json.loads(settings.read_text())["hooks"]
    assert hooks["BeforeAgent"][0]["hooks"][0] | {"command": ""} == {
        "type": "command",
        "command": "",
        "name": "wikitrace-recall",
        "timeout": 5000,
    }
    assert hooks["SessionEnd"][0]["hooks"][0]["command"].endswith(f"add {offline_copy} --from-hook")
    assert not (home / ".gemini").exists()
    assert run(["hooks", "remove", "gemini", "--repo"])[0] == 0
    assert json.loads(settings.read_text()) == {}
