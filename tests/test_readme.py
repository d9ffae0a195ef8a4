"""The README's commands, run from its own text, so that it cannot drift from what the tool does.

The Quick start (less its set-up, which CI runs on a fresh clone) and the two toy walk-throughs
run in a scratch folder with this test's wikitrace first on PATH, each walk-through twice in a
row as pasted; what they print is compared with the output the README shows.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    """The README's text under a heading, up to the next heading of any level."""
    start = README.index(f"\n{title}\n")
    end = re.search(r"\n#{2,3} ", README[start + len(title) + 2 :])
    return README[start : start + len(title) + 2 + (end.start() if end else len(README))]


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
    """Fenced blocks without a language: the output the README shows."""
    return blocks(text, "")


def shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("WIKITRACE_CORPUS", None)
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    return tmp_path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_quick_start(scratch: Path) -> None:
    setup, look = blocks(section("## Quick start"))[0], blocks(section("## Quick start"))[2]
    build = setup.strip().rsplit(" && ", 1)[1].replace(".venv/bin/", "")
    result = shell(build + "\n" + look.replace(".venv/bin/", ""), scratch)
    assert result.returncode == 0, result.stderr
    assert "# Corpus" in result.stdout or "step-0001" in result.stdout
    assert "ok: 71 files match the manifest" in result.stdout


@pytest.mark.integration
def test_the_update_walk_through_twice(scratch: Path) -> None:
    text = section("### Walk-through: the toy environment")
    (script,) = blocks(text)
    script = script.replace("8321", str(free_port()))
    expected = [re.sub(r"^\.\.\.\s+", "", line) for line in plain(text)[0].splitlines()]

    def numbered(lines: list[str]) -> list[str]:
        return [re.sub(r"v\d{4}", "vN", line) for line in lines]

    for again in (False, True):
        result = shell(script, scratch)
        assert result.returncode == 0, result.stderr
        history = [
            re.sub(r"^\S+\s+", "", line)
            for line in result.stdout.splitlines()
            if re.match(r"^\d{4}-\d\d-\d\dT", line)
        ]
        # Run again, the build replaces the corpus (--force): its first line says so, and the
        # versions are numbered on; the rest is the same.
        assert numbered(history[1:]) == numbered(expected[1:])
        assert history[0].startswith("built ") and ("--force" in history[0]) is again


@pytest.mark.integration
def test_the_gate_walk_through_twice(scratch: Path) -> None:
    text = section("### Walk-through: gate and monitor the toy's lessons")
    script = "\n".join(blocks(text)).replace("8321", str(free_port()))
    decisions = plain(text)[0].splitlines()
    retired = plain(text)[1].splitlines()
    for _ in range(2):
        result = shell(script, scratch)
        assert result.returncode == 0, result.stderr
        for line in decisions + retired:
            assert line in result.stderr, line
