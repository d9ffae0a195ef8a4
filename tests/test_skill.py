"""`wikitrace export skill`: an Agent Skills folder whose files are the corpus's own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import frontmatter
import pytest

from wikitrace.corpus_schema import manifest
from wikitrace.corpus_schema.writing import file_digest
from wikitrace.tools import skill as skill_module
from wikitrace.tools.memory import Memory

from helpers import DATA, make_run, run, write_runs

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("skill") / "example-corpus"
    assert run(["-q", "build", str(EXAMPLE), "-o", str(root)])[0] == 0
    return root


def test_the_skill_has_the_spec_s_frontmatter_and_stays_short(
    example: Path, tmp_path: Path
) -> None:
    dest = tmp_path / ".claude" / "skills" / "airline-memory"
    code, out, err = run(["export", "skill", str(example), "-o", str(dest), "--json"])
    assert code == 0, err
    report = json.loads(out)
    assert report["name"] == "airline-memory" and report["version"] == "v0001"
    page = frontmatter.load(str(dest / "SKILL.md"))
    assert set(page.metadata) == {"name", "description"}
    assert page["name"] == dest.name  # the spec: the name is the folder's
    assert 0 < len(page["description"]) <= 1024
    assert "12 past runs of an agent on airline tasks" in page["description"]
    assert "Use before starting such a task" in page["description"]
    lines = (dest / "SKILL.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 500 and report["skill_lines"] == len(lines)
    body = page.content
    # The drill-down rules, with paths into the skill's own folder.
    assert "an insight comes from a FAILED run" in body
    assert "scripts/turn step-NNNN 12" in body and "cat corpus/compilation/step-NNNN.md" in body
    assert "| airline | 12 | 4 | 2 |" in body
    assert '{"used": {"raw": ["step-0003"]' in body
    for line in body.splitlines():  # every file it points to is there
        for word in line.split("`"):
            if word.startswith(("corpus/", "scripts/")) and "NNNN" not in word and "*" not in word:
                assert (dest / word.split()[0]).exists(), word


def test_the_exported_corpus_verifies_and_its_scripts_are_the_corpus_s_tools(
    example: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "airline-memory"
    assert run(["-q", "export", "skill", str(example), "-o", str(dest)])[0] == 0
    code, out, _ = run(["verify", str(dest / "corpus")])
    assert code == 0 and "ok: 86 files match the manifest" in out
    listed = manifest.load(example.resolve()).files
    for name in ("actions", "turn"):
        script = dest / "scripts" / name
        assert script.resolve() == (dest / "corpus" / "tools" / name).resolve()
        assert listed[f"tools/{name}"] == file_digest(script)
    # Copies, never hard links: an agent that writes to the skill's files changes no corpus.
    page = "insight/insight-0001.md"
    assert not os.path.samefile(dest / "corpus" / page, example / page)
    # The scripts run from anywhere, as a skill's scripts are run.
    done = subprocess.run(
        [str(dest / "scripts" / "turn"), "step-0003", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("=== step-0003 turn 2 of 17 ===")


def test_scripts_copied_without_their_links_still_find_the_corpus(
    example: Path, tmp_path: Path
) -> None:
    """`cp -rL` (or a zip) turns the links into files: the tool looks beside its folder."""
    dest = tmp_path / "airline-memory"
    assert run(["-q", "export", "skill", str(example), "-o", str(dest)])[0] == 0
    flat = tmp_path / "flat" / "airline-memory"
    shutil.copytree(dest, flat, symlinks=False)
    assert not (flat / "scripts" / "actions").is_symlink()
    done = subprocess.run(
        [str(flat / "scripts" / "actions"), "3"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("step-0003: 17 turns")


def test_a_bad_name_an_occupied_folder_and_a_damaged_corpus_are_refused(
    example: Path, tmp_path: Path
) -> None:
    code, _, err = run(["export", "skill", str(example), "-o", str(tmp_path / "Airline_Memory")])
    assert code == 1 and "lowercase letters, digits and single hyphens" in err
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep me", encoding="utf-8")
    code, _, err = run(["export", "skill", str(example), "-o", str(other), "--force"])
    assert code == 1 and "is not a skill wikitrace wrote" in err
    assert (other / "mine.txt").read_text(encoding="utf-8") == "keep me"
    dest = tmp_path / "airline-memory"
    assert run(["-q", "export", "skill", str(example), "-o", str(dest)])[0] == 0
    code, _, err = run(["export", "skill", str(example), "-o", str(dest)])
    assert code == 1 and "already exists; use --force" in err
    assert run(["-q", "export", "skill", str(example), "-o", str(dest), "--force"])[0] == 0
    # A corpus whose files no longer match its manifest is not exported.
    runs = write_runs(tmp_path / "r.jsonl", [make_run("a"), make_run("b", success=True)])
    damaged = tmp_path / "damaged"
    assert run(["-q", "build", str(runs), "-o", str(damaged)])[0] == 0
    page = damaged.resolve() / "compilation" / "step-0001.md"
    page.chmod(0o644)
    page.write_text(page.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    code, _, err = run(["export", "skill", str(damaged), "-o", str(tmp_path / "damaged-memory")])
    assert code == 1 and "compilation/step-0001.md" in err and "was not written" in err
    assert not (tmp_path / "damaged-memory").exists()
    assert not any(p.name.endswith(".partial") for p in tmp_path.iterdir())


def test_an_interrupted_export_leaves_the_earlier_skill_whole(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "airline-memory"
    assert run(["-q", "export", "skill", str(example), "-o", str(dest)])[0] == 0
    before = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(skill_module, "copy_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        skill_module.export_skill(example, dest, force=True)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == before
    assert not (tmp_path / ".airline-memory.partial").exists()


def test_a_skill_of_a_corpus_with_a_model_s_insights(toy_corpus: Path, tmp_path: Path) -> None:
    dest = tmp_path / "toy-memory"
    code, _, err = run(["export", "skill", str(toy_corpus), "-o", str(dest), "--json"])
    assert code == 0, err
    body = (dest / "SKILL.md").read_text(encoding="utf-8")
    assert "with openai/toy" in body and "| task type | runs | succeeded | insights |" in body
    insights = Memory.load(toy_corpus).insights
    lessons = [i for i in insights if i.pattern != "diverge"]  # a divergence is no lesson
    assert f"and {len(lessons)} lessons drawn from them" in body
    assert run(["verify", str(dest / "corpus")])[0] == 0


def test_a_skill_of_a_corpus_with_no_lessons_says_it_holds_runs(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    assert run(["build", str(DATA / "tau-bench-airline-3runs.jsonl"), "-o", str(corpus)])[0] == 0
    assert not [i for i in Memory.load(corpus).insights if i.pattern != "diverge"]
    dest = tmp_path / "skills" / "airline-memory"
    assert run(["export", "skill", str(corpus), "-o", str(dest)])[0] == 0
    header = frontmatter.load(dest / "SKILL.md")
    assert str(header["description"]).startswith("The logs of 3 past runs of an agent")
    assert "Lessons from" not in str(header["description"])
    assert "and 0 lessons drawn from them" in header.content
