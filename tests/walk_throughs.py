"""The commands and output a page of the docs shows, read from its text; and the toy
walk-throughs of docs/ (growing.md's update, gate.md's gate and monitor) run from that text
once a test session, by whichever test (and pytest-xdist worker) asks first.

A walk-through takes tens of seconds of agent runs: the tests that check what it printed or
wrote share one run (a session fixture in conftest.py), and only read what it left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from wikitrace.corpus_schema.writing import remove_tree

from helpers import free_port

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def page(name: str) -> str:
    """A page of docs/."""
    return (ROOT / "docs" / name).read_text()


def section(title: str, text: str = README) -> str:
    """The text under a heading, up to the next heading of any level."""
    start = text.index(f"\n{title}\n")
    end = re.search(r"\n#{2,3} ", text[start + len(title) + 2 :])
    return text[start : start + len(title) + 2 + (end.start() if end else len(text))]


def fenced(text: str) -> list[tuple[str, str]]:
    """Each fenced block of `text`: its language ("" for none) and its content."""
    found: list[tuple[str, str]] = []
    language: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if language is None and line.startswith("```"):
            language, lines = line[3:].strip(), []
        elif language is not None and line.strip() == "```":
            found.append((language, "\n".join(lines) + "\n"))
            language = None
        elif language is not None:
            lines.append(line)
    return found


def blocks(text: str, language: str = "sh") -> list[str]:
    return [content for kind, content in fenced(text) if kind == language]


def plain(text: str) -> list[str]:
    """Fenced blocks without a language: the output the page shows."""
    return blocks(text, "")


def shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`script` run by bash -e in `cwd`, with this test's wikitrace first on PATH. What it
    started in the background (a walk-through's model server) ends with it, even when a
    command failed before the script's own `kill %1`."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("WIKITRACE_CORPUS", None)
    with subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


WALK_THROUGHS = {
    "update": ("growing.md", "## Walk-through: the toy environment"),
    "gate": ("gate.md", "## Walk-through: gate and monitor the toy's lessons"),
}
"""Each walk-through: its page and its heading."""


def walk_through_text(name: str) -> str:
    """The section of its page that holds the walk-through `name`."""
    page_name, heading = WALK_THROUGHS[name]
    return section(heading, page(page_name))


def walk_through_script(name: str) -> str:
    """The commands of the walk-through, as pasted, the model server on a free port (a port a
    run: another run's server may not have gone yet)."""
    return "\n".join(blocks(walk_through_text(name))).replace("8321", str(free_port()))


@dataclass(frozen=True)
class WalkThrough:
    """A walk-through's commands run once in `folder` (examples/ copied in): what they
    printed and left there. Tests read it; none may change it."""

    folder: Path
    returncode: int
    stdout: str
    stderr: str


def run_in_scratch(name: str, folder: Path) -> WalkThrough:
    """The walk-through `name` run in `folder`, a new folder with examples/ copied in."""
    shutil.copytree(ROOT / "examples", folder / "examples")
    result = shell(walk_through_script(name), folder)
    return WalkThrough(folder, result.returncode, result.stdout, result.stderr)


def shared_walk_through(name: str, factory: pytest.TempPathFactory) -> WalkThrough:
    """The walk-through `name`, run by the first process of this test session to ask (each
    pytest-xdist worker is one; their temporary folders share a parent) and read back by the
    others, so that it runs once however the tests are spread."""
    shared = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    folder, record = shared / f"walk-through-{name}", shared / f"walk-through-{name}.json"
    with open(shared / f"walk-through-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            remove_tree(folder)  # what a run stopped half-way left (its asker was killed)
            done = run_in_scratch(name, folder)
            partial = record.with_suffix(".part")
            partial.write_text(json.dumps([done.returncode, done.stdout, done.stderr]))
            os.replace(partial, record)
        returncode, stdout, stderr = json.loads(record.read_text())
    return WalkThrough(folder, returncode, stdout, stderr)
