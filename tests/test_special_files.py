"""Special files among the inputs: a FIFO, a link to /dev/zero, a 10 GB sparse file, a link out
of the folder. Every reader opens regular files within a size limit only
(corpus_schema/input_files.py) and says what it skipped; convert, build and the hook finish
(each run in a process of its own with a time limit, so a regression fails, not hangs) with
no traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wikitrace.compiler.capture import keep_unlabelled
from wikitrace.corpus_schema.input_files import (
    MAX_INPUT_BYTES,
    NotAnInputFile,
    input_problem,
    read_input,
)

from helpers import make_run, write_runs

DATA = Path(__file__).parent / "data"
SHOWCASE = DATA / "sessions/claude-code/minimal_showcase"
SESSION = "55550000-0000-4000-8000-000000000001"
OPENCODE = DATA / "sessions/opencode/storage"
LIMIT_SECONDS = 180
"""A hang, not a slow start: at a load of 12 to 14 on 2 cores the slowest test here (seven
commands) took 6 to 11 s."""
TEN_GB = 10 << 30

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def wikitrace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, killed after LIMIT_SECONDS (a hang fails the test)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        [sys.executable, "-m", "wikitrace.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        stdin=subprocess.DEVNULL,
    )


def plant(folder: Path, stem: str) -> dict[str, str]:
    """A FIFO, a link to /dev/zero, a 10 GB sparse file (no disk) in `folder`: name -> what
    the skip says."""
    folder.mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / f"{stem}-fifo.jsonl")
    (folder / f"{stem}-zero.jsonl").symlink_to("/dev/zero")
    with (folder / f"{stem}-sparse.jsonl").open("wb") as handle:
        handle.truncate(TEN_GB)
    return {
        f"{stem}-fifo.jsonl": "a FIFO (named pipe)",
        f"{stem}-zero.jsonl": "a character device",
        f"{stem}-sparse.jsonl": "10.0 GB, over the 2 GB limit",
    }


def test_the_checks_name_what_a_file_is(tmp_path: Path) -> None:
    planted = plant(tmp_path, "x")
    for name, said in planted.items():
        assert said in (input_problem(tmp_path / name) or ""), name
        with pytest.raises(NotAnInputFile) as raised:
            read_input(tmp_path / name)
        assert raised.value.strerror == f"skipped: {said}" or said in str(raised.value.strerror)
    assert "a folder" in (input_problem(tmp_path) or "")
    assert "does not exist" in (input_problem(tmp_path / "gone") or "")
    (tmp_path / "ok.jsonl").write_text("{}\n")
    assert input_problem(tmp_path / "ok.jsonl") is None and read_input(tmp_path / "ok.jsonl")
    assert TEN_GB > MAX_INPUT_BYTES


def test_convert_and_build_skip_special_files_in_a_folder(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write_runs(logs / "runs.jsonl", [make_run("t1", success=True), make_run("t2")])
    planted = plant(logs, "bad")
    outside = tmp_path / "secret.jsonl"
    write_runs(outside, [make_run("leak", success=True)])
    (logs / "out.jsonl").symlink_to(outside)
    planted["out.jsonl"] = "a link out of the folder"
    planted["bad-zero.jsonl"] = "a link out of the folder"  # not followed, so never opened
    done = wikitrace("convert", "logs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for name, said in planted.items():
        assert f"skipped logs/{name}: {said}" in done.stderr, (name, done.stderr)
    assert [json.loads(line)["task_id"] for line in done.stdout.splitlines()] == ["t1", "t2"]
    built = wikitrace("-q", "build", "logs", "-o", "corpus", cwd=tmp_path)
    assert built.returncode == 0 and "Traceback" not in built.stderr, built.stderr
    assert "leak" not in "".join(p.read_text() for p in (tmp_path / "corpus").rglob("*.md"))


def test_a_special_file_given_by_name_is_refused_in_one_line(tmp_path: Path) -> None:
    planted = plant(tmp_path, "given")
    for name, said in planted.items():
        done = wikitrace("convert", name, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert said in done.stderr and len(done.stderr.splitlines()) <= 3, done.stderr


def test_a_fifo_in_opencode_storage_is_left_out(tmp_path: Path) -> None:
    storage = tmp_path / "storage"
    shutil.copytree(OPENCODE, storage)
    message = next((storage / "message").iterdir())
    os.mkfifo(message / "msg_fifo.json")
    part = next((storage / "part").iterdir())
    (part / "prt_zero.json").symlink_to("/dev/zero")
    with (part / "prt_sparse.json").open("wb") as handle:
        handle.truncate(TEN_GB)
    done = wikitrace("convert", "storage", "--unlabelled", "keep", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stdout.splitlines()) == 1  # the session, read without them


def test_special_files_beside_a_claude_code_session(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(SHOWCASE, project)
    os.mkfifo(project / "agent-fifo.jsonl")  # beside the session, as Claude Code 2.0.x kept them
    subagents = project / SESSION / "subagents"
    (subagents / "agent-zero.jsonl").symlink_to("/dev/zero")
    os.mkfifo(subagents / "agent-showcol1b.meta.json")
    with (subagents / "agent-sparse.jsonl").open("wb") as handle:
        handle.truncate(TEN_GB)
    done = wikitrace("convert", "project", "--unlabelled", "keep", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "skipped" in done.stderr
    assert json.loads(done.stdout.splitlines()[0])["task_id"]


def test_the_unlabelled_copy_does_not_follow_links(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(SHOWCASE, project)
    key = tmp_path / "id_rsa"
    key.write_text("PRIVATE KEY BODY\n")
    companions = project / SESSION
    (companions / "notes.txt").symlink_to(key)
    os.mkfifo(companions / "pipe.txt")
    kept = keep_unlabelled(tmp_path / "corpus", project / f"{SESSION}.jsonl")
    copied = {p.name for p in kept.parent.rglob("*")}
    assert "agent-showcol1.jsonl" in copied
    assert "notes.txt" not in copied and "pipe.txt" not in copied
    assert "PRIVATE KEY BODY" not in "".join(
        p.read_text() for p in kept.parent.rglob("*") if p.is_file()
    )


def test_files_given_to_prompt_eval_and_lift_are_checked(tmp_path: Path) -> None:
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo.jsonl")
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    assert wikitrace("-q", "build", str(runs), "-o", "corpus", cwd=tmp_path).returncode == 0
    for name, said in (("zero.jsonl", "a character device"), ("fifo.jsonl", "a FIFO")):
        for args in (
            ["prompt", "corpus", "--task-file", name],
            ["lift", "eval", name],
            ["lift", name],
        ):
            done = wikitrace(*args, cwd=tmp_path)
            assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)
            assert said in done.stderr, (args, done.stderr)


def test_the_hook_captures_a_session_with_special_files_beside_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(SHOWCASE, project)
    subagents = project / SESSION / "subagents"
    os.mkfifo(subagents / "agent-fifo.jsonl")
    (subagents / "agent-zero.jsonl").symlink_to("/dev/zero")
    with (subagents / "agent-sparse.jsonl").open("wb") as handle:
        handle.truncate(TEN_GB)
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    assert wikitrace("-q", "build", str(runs), "-o", "corpus", cwd=tmp_path).returncode == 0
    payload = json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(project / f"{SESSION}.jsonl"),
            "hook_event_name": "SessionEnd",
        }
    )
    log = tmp_path / "hook.log"
    args = ["add", "corpus", "--from-hook", "--wait", "--hook-log", str(log), payload]
    done = wikitrace(*args, cwd=tmp_path)  # no labels: kept in corpus.unlabelled/
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    written = log.read_text()
    assert "Traceback" not in written and "not added" in written
    for name in ("agent-fifo.jsonl", "agent-zero.jsonl", "agent-sparse.jsonl"):
        assert f"{name}: not kept" in written or f"{name}: a sub-agent's log left out" in written
    kept = tmp_path / "corpus.unlabelled" / SESSION / "subagents"
    assert sorted(p.name for p in kept.iterdir()) == sorted(
        p.name for p in subagents.iterdir() if p.is_file() and p.stat().st_size < 1 << 20
    )
