"""The commands of the README and the docs, run from their own text, so that they cannot drift
from what the tool does.

The README's Quick start (less its set-up, which CI runs on a fresh clone) and the two toy
walk-throughs of docs/ run in a scratch folder with this test's wikitrace first on PATH, each
walk-through twice in a row as pasted; what they print is compared with the output the page
shows. The README's links must lead to files (and headings) that exist.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

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


def test_the_quick_start(scratch: Path) -> None:
    setup, look = blocks(section("## Quick start"))[0], blocks(section("## Quick start"))[2]
    build = setup.strip().rsplit(" && ", 1)[1].replace(".venv/bin/", "")
    result = shell(build + "\n" + look.replace(".venv/bin/", ""), scratch)
    assert result.returncode == 0, result.stderr
    assert "# Corpus" in result.stdout or "step-0001" in result.stdout
    assert "ok: 94 files match the manifest" in result.stdout


@pytest.mark.integration
def test_the_update_walk_through_twice(scratch: Path) -> None:
    text = section("## Walk-through: the toy environment", page("growing.md"))
    (script,) = blocks(text)
    expected = [re.sub(r"^\.\.\.\s+", "", line) for line in plain(text)[0].splitlines()]

    def numbered(lines: list[str]) -> list[str]:
        return [re.sub(r"v\d{4}", "vN", line) for line in lines]

    for again in (False, True):
        # A port a run: the first run's server may not have gone yet when the second starts.
        result = shell(script.replace("8321", str(free_port())), scratch)
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
    text = section("## Walk-through: gate and monitor the toy's lessons", page("gate.md"))
    script = "\n".join(blocks(text))
    decisions = plain(text)[0].splitlines()
    retired = plain(text)[1].splitlines()
    for _ in range(2):
        result = shell(script.replace("8321", str(free_port())), scratch)
        assert result.returncode == 0, result.stderr
        for line in decisions + retired:
            assert line in result.stderr, line


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs makes it (Python-Markdown's toc slugify)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_the_readme_links_lead_somewhere() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert any(link.startswith("docs/") for link in local)
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        assert target.exists(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {slug(h) for h in headings}, link
