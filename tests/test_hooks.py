"""Live capture: `wikitrace add CORPUS --from-hook` fed the payloads Claude Code's SessionEnd and
Stop hooks and Codex's notify give (built from their documented schemas), with real session
logs as the transcripts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import click
import frontmatter
import pytest
from click.testing import CliRunner

from wikitrace.cli.main import main
from wikitrace.corpus_schema import CorpusError
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.versions import Store

from helpers import DATA, make_run, run, write_runs

SESSION = "55550000-0000-4000-8000-000000000001"
OTHER = "66660000-0000-4000-8000-000000000002"
THREAD = "22222222-2222-4222-8222-222222222222"
SHOWCASE = DATA / "sessions/claude-code/minimal_showcase"
GROWING = Path(__file__).resolve().parent.parent / "docs" / "growing.md"


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(ctx: click.Context) -> None:
    main(list(ctx.args))


def hook(args: list[str], payload: str | None = None) -> tuple[int, str, str]:
    """The CLI as a hook runs it: `payload` on stdin."""
    result = CliRunner().invoke(_entry, args, input=payload)
    return result.exit_code, result.stdout, result.stderr


def session_end(transcript: Path, session: str = SESSION, event: str = "SessionEnd") -> str:
    """A Claude Code hook's input: common fields, then the event's own (code.claude.com/docs/
    en/hooks: SessionEnd has `reason`, Stop has `stop_hook_active`)."""
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": "/workspace/example-app",
        "permission_mode": "default",
        "hook_event_name": event,
    }
    if event == "SessionEnd":
        payload["reason"] = "prompt_input_exit"
    else:
        payload.update(stop_hook_active=False, last_assistant_message="Done.")
    return json.dumps(payload)


def codex_notify(thread: str = THREAD) -> str:
    """Codex's notify argument (openai/codex, codex-rs/hooks/src/legacy_notify.rs)."""
    return json.dumps(
        {
            "type": "agent-turn-complete",
            "thread-id": thread,
            "turn-id": "12345",
            "cwd": "/workspace/synthetic-project",
            "client": "codex-tui",
            "input-messages": ["Spawn a synthetic researcher."],
            "last-assistant-message": "Done: see https://example.com//docs.",
        }
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    pointer = tmp_path / "corpus"
    assert run(["-q", "build", str(runs), "-o", str(pointer)])[0] == 0
    return pointer


def _project_copy(tmp_path: Path, session: str) -> Path:
    """The showcase session (and its sub-agents) as it lies in ~/.claude/projects/<project>/,
    under the id `session`."""
    project = tmp_path / "projects" / "-workspace-example-app"
    for source in sorted(SHOWCASE.rglob("*")):
        if source.is_file():
            dest = project / str(source.relative_to(SHOWCASE)).replace(SESSION, session)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(source.read_text().replace(SESSION, session))
    return project / f"{session}.jsonl"


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    return _project_copy(tmp_path, SESSION)


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({SESSION: True, OTHER: False, THREAD: True}))
    return path


@pytest.fixture
def hook_log(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "hook.log"


def add_args(corpus: Path, labels: Path | None, hook_log: Path, *more: str) -> list[str]:
    given = ["--labels", str(labels)] if labels else []
    return ["add", str(corpus), "--from-hook", *more, *given, "--hook-log", str(hook_log)]


def raw_pages(corpus: Path) -> list[frontmatter.Post]:
    return [frontmatter.load(p) for p in sorted((corpus / "raw").glob("step-*/metadata.md"))]


def resume(transcript: Path, prompt: str, answer: str) -> None:
    """Go on with the session as `claude --resume` does: new records appended to its log."""
    last = json.loads(transcript.read_text().splitlines()[-1])
    common = {k: last[k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version")}
    prompted = {
        **common,
        "type": "user",
        "uuid": f"{last['uuid']}-u",
        "parentUuid": last["uuid"],
        "timestamp": "2026-06-16T09:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": prompt}]},
    }
    answered = {
        **common,
        "type": "assistant",
        "uuid": f"{last['uuid']}-a",
        "parentUuid": prompted["uuid"],
        "timestamp": "2026-06-16T09:00:05.000Z",
        "message": {
            "id": f"msg-{last['uuid']}-a",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5-20251001",
            "stop_reason": "end_turn",
            "content": [{"type": "text", "text": answer}],
        },
    }
    with transcript.open("a") as handle:
        handle.write(json.dumps(prompted) + "\n" + json.dumps(answered) + "\n")


# --- Claude Code ------------------------------------------------------------------------------


def test_a_session_end_adds_the_session(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path
) -> None:
    code, out, err = hook(add_args(corpus, labels, hook_log, "--wait"), session_end(transcript))
    assert code == 0, err
    assert out == f"{Store(corpus).version_path('v0002')}\n"
    added = f"SessionEnd {SESSION}: added v0002 to {corpus}: part 1, turns 1-11 of 11"
    assert added in err
    page = raw_pages(corpus)[-1]
    assert page["task_id"] == SESSION and page["outcome"] == "success"
    assert page["metadata"]["counts"]["subagents"] == 2  # read with its sub-agents
    assert page["metadata"]["capture"] == {
        "event": "SessionEnd",
        "format": "claude-code",
        "log": f"{SESSION}.jsonl",
        "part": 1,
        "first_turn": 1,
    }
    assert added in hook_log.read_text()


def test_the_same_payload_again_adds_nothing(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path
) -> None:
    args = add_args(corpus, labels, hook_log, "--wait")
    assert hook(args, session_end(transcript))[0] == 0
    stop = session_end(transcript, event="Stop")  # Stop, then SessionEnd, end it twice
    code, out, err = hook(args, stop)
    assert (code, out) == (0, "")
    assert err == f"Stop {SESSION}: nothing new: {corpus} holds its 11 turns\n"
    assert Store(corpus).versions() == ["v0001", "v0002"]


def test_a_resumed_session_adds_its_new_part(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path
) -> None:
    args = add_args(corpus, labels, hook_log, "--wait")
    assert hook(args, session_end(transcript))[0] == 0
    resume(transcript, "Now add a README section on the jobs.", "Added a Jobs section.")
    code, _, err = hook(args, session_end(transcript))
    assert code == 0, err
    assert f"added v0003 to {corpus}: part 2, turns 12-13 of 13" in err
    first, part = raw_pages(corpus)[-2:]
    assert first["task_id"] == SESSION and first["turns"] == 11
    assert part["task_id"] == f"{SESSION}/part-2" and part["turns"] == 2
    assert "Now add a README section on the jobs." in part.content  # its task: its own prompt
    capture = part["metadata"]["capture"]
    assert (capture["part"], capture["first_turn"]) == (2, 12)
    # What the importer counted over the whole session is kept apart from the part.
    assert "counts" not in part["metadata"] and "counts" in capture["whole_session"]
    assert hook(args, session_end(transcript))[2].startswith(f"SessionEnd {SESSION}: nothing new")
    assert Store(corpus).versions() == ["v0001", "v0002", "v0003"]


def test_a_session_whose_captured_turns_changed_is_added_whole_again(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path
) -> None:
    args = add_args(corpus, labels, hook_log, "--wait")
    assert hook(args, session_end(transcript))[0] == 0
    text = transcript.read_text()
    transcript.write_text(text.replace("Both modules are surveyed", "The modules were surveyed"))
    code, _, err = hook(args, session_end(transcript))
    assert code == 0, err
    assert "part 2, turns 1-11 of 11 (its earlier turns changed since captured" in err
    page = raw_pages(corpus)[-1]
    assert page["task_id"] == f"{SESSION}/part-2" and page["turns"] == 11
    assert page["metadata"]["capture"]["restarted"] is True
    assert "nothing new" in hook(args, session_end(transcript))[2]  # held since part 2


def test_an_unlabelled_session_is_kept_beside_the_corpus(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path
) -> None:
    # A secret in the session's log: the copy kept beside the corpus is redacted too.
    secret = "ghp_" + "R8x2Kq7Lm3Np9Vt4Wz6Yb1Cd5Fg0Hj2Ks8Q"
    lines = transcript.read_text().splitlines()
    record = json.loads(lines[-1])
    record["message"]["content"] = [{"type": "text", "text": f"export GITHUB_TOKEN={secret}"}]
    transcript.write_text("\n".join([*lines[:-1], json.dumps(record)]) + "\n")
    code, out, err = hook(add_args(corpus, None, hook_log, "--wait"), session_end(transcript))
    kept = corpus.with_name("corpus.unlabelled")
    assert (code, out) == (0, "")
    assert f"not added, unlabelled; its log is kept in {kept} until labelled" in err
    assert Store(corpus).versions() == ["v0001"]
    copy = (kept / transcript.name).read_text()
    assert secret not in copy and "[REDACTED:" in copy
    assert len(copy.splitlines()) == len(transcript.read_text().splitlines())  # a line a record
    assert len(list((kept / SESSION / "subagents").glob("agent-*.jsonl"))) == 2
    # Labelled later, it is added as any session is; a capture then finds it held.
    assert run(["-q", "add", str(corpus), str(kept), "--labels", str(labels)])[0] == 0
    code, _, err = hook(add_args(corpus, labels, hook_log, "--wait"), session_end(transcript))
    assert code == 0 and "nothing new" in err


def _repository(tmp_path: Path) -> Path:
    """A checkout on this machine whose remote is github.com/me/app."""
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git/config").write_text('[remote "origin"]\n\turl = git@github.com:me/app.git\n')
    return checkout


def test_a_session_labelled_later_keeps_the_hook_s_project(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path, tmp_path: Path
) -> None:
    """The log was written in a container (its cwd, /workspace/example-app, is no folder
    here); the hook ran in a checkout of github.com/me/app. Kept unlabelled and labelled
    later, the session is that repository's, as a capture would have made it."""
    payload = json.loads(session_end(transcript)) | {"cwd": str(_repository(tmp_path))}
    code, _, err = hook(add_args(corpus, None, hook_log, "--wait"), json.dumps(payload))
    kept = corpus.with_name("corpus.unlabelled")
    assert code == 0 and "not added, unlabelled" in err
    said = json.loads((kept / f".{transcript.name}.hook.json").read_text())
    assert said == {"cwd": str(tmp_path / "checkout"), "project": "github.com/me/app"}
    assert run(["-q", "add", str(corpus), str(kept), "--labels", str(labels)])[0] == 0
    assert raw_pages(corpus)[-1]["task_id"] == SESSION
    assert raw_pages(corpus)[-1]["project"] == "github.com/me/app"


def test_a_damaged_hook_folder_beside_a_kept_session_is_named(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path, tmp_path: Path
) -> None:
    payload = json.loads(session_end(transcript)) | {"cwd": str(_repository(tmp_path))}
    assert hook(add_args(corpus, None, hook_log, "--wait"), json.dumps(payload))[0] == 0
    kept = corpus.with_name("corpus.unlabelled")
    (kept / f".{transcript.name}.hook.json").write_text('{"cwd": 1}\n')
    code, _, err = run(["add", str(corpus), str(kept), "--labels", str(labels)])
    assert code == 2
    assert f".{transcript.name}.hook.json" in err and "field 'cwd'" in err
    assert "remove that file" in err


def test_a_missing_transcript_exits_0_and_is_logged(
    corpus: Path, tmp_path: Path, labels: Path, hook_log: Path
) -> None:
    gone = tmp_path / "projects" / "gone" / f"{SESSION}.jsonl"
    code, out, err = hook(add_args(corpus, labels, hook_log), session_end(gone))
    said = f"not added: SessionEnd {SESSION}: its log {gone}: does not exist"
    assert (code, out) == (0, "")
    assert said in err and said in hook_log.read_text()
    assert Store(corpus).versions() == ["v0001"]
    code, _, err = hook(add_args(corpus, labels, hook_log, "--wait"), session_end(gone))
    assert code == 2 and said in err  # --wait: add's own exit codes


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ("not json", "not added: the hook payload is not JSON"),
        ('{"hook_event_name": "Stop"}', "not added: hook payload field 'session_id': Field"),
        ('{"foo": 1}', "not added: not a hook payload wikitrace reads"),
    ],
)
def test_a_bad_payload_exits_0_and_is_logged(
    corpus: Path, hook_log: Path, payload: str, said: str
) -> None:
    code, out, err = hook(add_args(corpus, None, hook_log), payload)
    assert (code, out) == (0, "")
    assert said in err and said in hook_log.read_text()


def test_other_events_are_ignored(corpus: Path, transcript: Path, hook_log: Path) -> None:
    payload = session_end(transcript, event="PreToolUse")
    code, out, err = hook(add_args(corpus, None, hook_log), payload)
    assert (code, out, err) == (0, "", "")
    assert f"PreToolUse {SESSION}: not a session-end event, ignored" in hook_log.read_text()


def test_add_without_a_hook_still_needs_its_inputs(corpus: Path) -> None:
    code, _, err = run(["add", str(corpus)])
    assert code == 2 and "Missing argument 'INPUTS...'" in err
    code, _, err = run(["add", str(corpus), "runs.jsonl", "--wait"])
    assert code == 2 and "--wait goes with --from-hook" in err


# --- Codex --------------------------------------------------------------------------------------


def test_codex_notify_gives_its_payload_as_the_argument(
    corpus: Path, tmp_path: Path, labels: Path, hook_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "codex"
    shutil.copytree(DATA / "sessions/codex/sessions", home / "sessions")
    monkeypatch.setenv("CODEX_HOME", str(home))
    args = [*add_args(corpus, labels, hook_log, "--wait"), codex_notify()]
    code, _, err = hook(args)
    assert code == 0, err
    assert f"agent-turn-complete {THREAD}: added v0002 to {corpus}: part 1" in err
    page = raw_pages(corpus)[-1]
    assert page["task_id"] == THREAD
    assert page["metadata"]["capture"]["log"].endswith(f"-{THREAD}.jsonl")
    code, _, err = hook([*add_args(corpus, labels, hook_log), codex_notify("7777-nope")])
    assert code == 0
    assert f"not added: agent-turn-complete 7777-nope: no rollout of that thread in {home}" in err


# --- two sessions ending at once ----------------------------------------------------------------


def _wait_for(path: Path, text: str, count: int, seconds: float = 300.0) -> str:
    """The log once it says `text` `count` times (the captures run in processes of their own)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        logged = path.read_text() if path.exists() else ""
        if logged.count(text) >= count:
            return logged
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not logged {count} times:\n{logged}")


def test_two_sessions_ending_at_once_both_land(
    corpus: Path, tmp_path: Path, labels: Path, hook_log: Path
) -> None:
    first, second = _project_copy(tmp_path, SESSION), _project_copy(tmp_path, OTHER)
    command = [sys.executable, "-m", "wikitrace.cli", *add_args(corpus, labels, hook_log)]
    with build_lock(corpus):  # a third add holds the corpus while both sessions end
        ends = {SESSION: first, OTHER: second}
        hooks = {
            session: subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            for session in ends
        }
        for session, process in hooks.items():
            out, _ = process.communicate(session_end(ends[session], session), timeout=60)
            assert (process.returncode, out) == (0, "")  # the agents are free at once
        _wait_for(hook_log, "waiting for another add into", 2)
    logged = _wait_for(hook_log, ": added v000", 2)
    assert Store(corpus).versions() == ["v0001", "v0002", "v0003"]
    assert {page["task_id"] for page in raw_pages(corpus)} == {"t1", SESSION, OTHER}
    assert "ERROR" not in logged


def test_the_lock_is_waited_for_then_given_up(tmp_path: Path) -> None:
    told: list[str] = []
    pointer = tmp_path / "corpus"
    with (
        build_lock(pointer),
        pytest.raises(CorpusError, match=r"is running .* \(waited 0\.3 s\)"),
        build_lock(pointer, 0.3, lambda: told.append("waiting")),
    ):
        pass
    assert told == ["waiting"]
    # The holder lets go once the second build says it waits: no clock to race on a busy
    # machine (a holder that slept 0.3 s could be gone before the second build started).
    held, waited = threading.Event(), threading.Event()

    def hold_until_waited_for() -> None:
        with build_lock(pointer):
            held.set()
            waited.wait(60)

    thread = threading.Thread(target=hold_until_waited_for)
    thread.start()
    assert held.wait(60)
    with build_lock(pointer, 120, waited.set):  # taken once the holder lets go
        assert waited.is_set()
    thread.join()


# --- the docs' configurations -------------------------------------------------------------------


def test_the_documented_hook_configurations_capture(
    corpus: Path, transcript: Path, labels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = GROWING.read_text().split("## Capturing sessions as they end", 1)[1].split("\n#", 1)[0]
    blocks = dict(re.findall(r"```(json|toml)\n(.*?)```", text, re.S))
    (entry,) = json.loads(blocks["json"])["hooks"]["SessionEnd"]
    (claude_code,) = entry["hooks"]
    notify = tomllib.loads(blocks["toml"])["notify"]
    ours = {
        "/home/me/.venv/bin/wikitrace": str(Path(sys.executable).with_name("wikitrace")),
        "/home/me/corpus": str(corpus),
        "/home/me/labels.json": str(labels),
    }

    def here(text: str) -> str:
        for theirs, path in ours.items():
            text = text.replace(theirs, path)
        return text

    home = tmp_path / "codex"
    shutil.copytree(DATA / "sessions/codex/sessions", home / "sessions")
    monkeypatch.setenv("CODEX_HOME", str(home))
    # Claude Code runs the command with a shell, the input on stdin; Codex runs the program
    # with its JSON appended, no shell.
    claude = subprocess.run(
        here(claude_code["command"]),
        shell=True,
        input=session_end(transcript),
        text=True,
        timeout=60,
    )
    codex = subprocess.run([*map(here, notify), codex_notify()], timeout=60)
    assert (claude.returncode, codex.returncode) == (0, 0)
    logged = _wait_for(tmp_path / "xdg-cache" / "wikitrace" / "hook.log", ": added v000", 2)
    assert "ERROR" not in logged
    assert {page["task_id"] for page in raw_pages(corpus)} == {"t1", SESSION, THREAD}


def test_the_hook_s_working_folder_names_the_run_s_project(
    corpus: Path, transcript: Path, labels: Path, hook_log: Path, tmp_path: Path
) -> None:
    """The payload's cwd is read on this machine: a worktree of a repository is that
    repository's project (its remote), whatever folder the log names."""
    main = tmp_path / "app"
    (main / ".git/worktrees/feature").mkdir(parents=True)
    (main / ".git/config").write_text('[remote "origin"]\n\turl = git@github.com:me/app.git\n')
    (main / ".git/worktrees/feature/commondir").write_text("../..\n")
    tree = tmp_path / "app-worktrees/feature"
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {main}/.git/worktrees/feature\n")
    payload = json.loads(session_end(transcript))
    code, _, err = hook(add_args(corpus, labels, hook_log, "--wait"), json.dumps(payload))
    assert code == 0, err
    assert raw_pages(corpus)[-1]["project"] == "example-app"  # the log's folder, as named
    other = _project_copy(tmp_path / "again", OTHER)
    payload = json.loads(session_end(other, OTHER)) | {"cwd": str(tree)}
    code, _, err = hook(add_args(corpus, labels, hook_log, "--wait"), json.dumps(payload))
    assert code == 0, err
    assert raw_pages(corpus)[-1]["project"] == "github.com/me/app"
