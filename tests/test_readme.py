"""The commands of the README and the docs, run from their own text, so that they cannot drift
from what the tool does.

The README's Quick start (less its set-up, which CI runs on a fresh clone) and the two toy
walk-throughs of docs/ run in a scratch folder with this test's wikitrace first on PATH; what
they print is compared with the output the page shows. Each walk-through runs once a session
(tests/walk_throughs.py), and again, pasted a second time, in the slow tier. The README's
links must lead to files (and headings) that exist.
"""

from __future__ import annotations

import re
import shutil
import unicodedata
from pathlib import Path

import pytest

from walk_throughs import (
    README,
    ROOT,
    WalkThrough,
    blocks,
    plain,
    section,
    shell,
    walk_through_script,
    walk_through_text,
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
    assert "ok: 86 files match the manifest" in result.stdout


def _history(done: WalkThrough) -> list[str]:
    """`versions --history`'s lines as the page shows them: without their time."""
    assert done.returncode == 0, done.stderr
    return [
        re.sub(r"^\S+\s+", "", line)
        for line in done.stdout.splitlines()
        if re.match(r"^\d{4}-\d\d-\d\dT", line)
    ]


def _numbered(lines: list[str]) -> list[str]:
    return [re.sub(r"v\d{4}", "vN", line) for line in lines]


UPDATE_SHOWN = [
    re.sub(r"^\.\.\.\s+", "", line) for line in plain(walk_through_text("update"))[0].splitlines()
]
"""The update walk-through's history as the page shows it."""


@pytest.mark.integration
def test_the_update_walk_through(update_walk_through: WalkThrough) -> None:
    history = _history(update_walk_through)
    assert history == UPDATE_SHOWN
    assert history[0].startswith("built ") and "--force" not in history[0]


@pytest.mark.integration
@pytest.mark.slow
def test_the_update_walk_through_pasted_again(
    update_walk_through: WalkThrough, tmp_path: Path
) -> None:
    # In a copy of the first run's folder: the build replaces the corpus (--force), its first
    # line says so, and the versions are numbered on; the rest is the same.
    again = tmp_path / "again"
    shutil.copytree(update_walk_through.folder, again, symlinks=True)
    result = shell(walk_through_script("update"), again)
    history = _history(WalkThrough(again, result.returncode, result.stdout, result.stderr))
    assert _numbered(history[1:]) == _numbered(UPDATE_SHOWN[1:])
    assert history[0].startswith("built ") and "--force" in history[0]


def _gate_lines_shown() -> list[str]:
    """What the gate walk-through's page shows on stderr: the decisions, then the monitor's."""
    shown = plain(walk_through_text("gate"))
    return shown[0].splitlines() + shown[1].splitlines()


@pytest.mark.integration
def test_the_gate_walk_through(gate_walk_through: WalkThrough) -> None:
    assert gate_walk_through.returncode == 0, gate_walk_through.stderr
    for line in _gate_lines_shown():
        assert line in gate_walk_through.stderr, line


@pytest.mark.integration
@pytest.mark.slow
def test_the_gate_walk_through_pasted_again(gate_walk_through: WalkThrough, tmp_path: Path) -> None:
    # In a copy of the first run's folder: it replaces the gated corpus (--force) and prints
    # the same.
    again = tmp_path / "again"
    shutil.copytree(gate_walk_through.folder, again, symlinks=True)
    result = shell(walk_through_script("gate"), again)
    assert result.returncode == 0, result.stderr
    for line in _gate_lines_shown():
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
