"""Recall through the catalog's index (corpus_schema/catalog_index.py) answers what reading the
whole catalog answers, byte for byte, and what the hook answered before the index was written
(`tests/data/hooks/recalled-before-the-index.json`, recorded with wikitrace at 3e41233), on a
corpus whose lessons are checked against a git checkout: one deleted, one renamed, one changed
file since their runs. A corpus with no index, or one that does not match its catalog, is read
whole; the index reads the project's lines alone. The message's template, compiled once and
kept for the next call, renders alike."""

from __future__ import annotations

import json
import shutil
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jinja2
import pytest
from test_code_drift import git

from wikitrace.corpus_schema import catalog_runs
from wikitrace.corpus_schema.catalog import read_catalog
from wikitrace.corpus_schema.catalog_index import IndexedCatalog
from wikitrace.corpus_schema.layout import CATALOG, CATALOG_INDEX, catalog_page_rel
from wikitrace.prompts import CompiledTemplates, environment
from wikitrace.tools.hook_recall import RecallPayload, recall
from wikitrace.tools.memory import Memory

from helpers import (
    build_lessons,
    make_run,
    unpaged_catalog,
    version_1_index,
)

PROJECT = "github.com/acme/app"
OTHER = "github.com/acme/web"
RECORDED = Path(__file__).parent / "data" / "hooks" / "recalled-before-the-index.json"
TITLES = {
    "a1": "Run src/a.py's `parse_args` with --strict",
    "a2": "Keep src/b.py's defaults in sync with the docs",
    "a3": "Call `load_config` in src/c.py before the server starts",
    "a4": "Restart the server after config edits",
    "a5": "Run the strict flags check of src/a.py and src/c.py together",
    "w1": "Restart the web server after its config edits",
    "w2": "Clear the web cache before a release",
}
PROMPTS = {
    "prompt, lessons bear on it": "Fix the strict flags check that fails in src/a.py",
    "prompt, no lesson bears on it": "Translate the welcome page into Italian",
}
WEB_PROMPT = "The web server fails to restart after its config edits: fix it"


def checkout(path: Path, remote: str) -> str:
    """A checkout whose first commit (every run's) holds src/a.py, src/b.py and src/c.py, the
    same ids every time; then src/a.py deleted, src/b.py renamed, src/c.py changed."""
    (path / "src").mkdir(parents=True)
    (path / "src" / "a.py").write_text("def parse_args():\n    return 1\n")
    (path / "src" / "b.py").write_text("DEFAULTS = {}\n")
    (path / "src" / "c.py").write_text("def load_config():\n    return {}\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "remote", "add", "origin", f"https://{remote}.git")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    first = git(path, "rev-parse", "HEAD")
    git(path, "rm", "-q", "src/a.py")
    git(path, "commit", "-q", "-m", "drop a", date="2026-03-02T10:00:00+00:00")
    git(path, "mv", "src/b.py", "src/defaults.py")
    git(path, "commit", "-q", "-m", "rename b", date="2026-03-03T10:00:00+00:00")
    (path / "src" / "c.py").write_text("def read_settings():\n    return {}\n")
    git(path, "commit", "-q", "-am", "change c", date="2026-03-04T10:00:00+00:00")
    return first


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A corpus of five runs of the project, each with one lesson naming its files, and two
    of another project; beside it, the project's checkout (`app`), the other's (`web`) and
    one of a project with no runs (`new`)."""
    return build(tmp_path_factory.mktemp("indexed"))


@pytest.fixture(scope="module")
def built_in_pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same, its catalog's runs in pages of 2 (four pages, the last not full)."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(catalog_runs, "CATALOG_PAGE_RUNS", 2)
        return build(tmp_path_factory.mktemp("paged"))


def build(base: Path) -> tuple[Path, Path]:
    """The corpus of `built` in `base`, and `base`."""
    commit = checkout(base / "app", PROJECT)
    checkout(base / "web", OTHER)
    checkout(base / "new", "github.com/acme/new")
    # Three days before now, so that each lesson's age reads the same on any day.
    started = (datetime.now(UTC) - timedelta(days=3, hours=1)).isoformat()
    runs = []
    for task_id, title in TITLES.items():
        project = PROJECT if task_id.startswith("a") else OTHER
        run = make_run(task_id, task=f"Work on {title.lower()}", task_type="coding")
        run.update(project=project, kind="fix-bug", success=task_id in ("a2", "w2"))
        run["repo"] = {
            "commit": commit,
            "started": started,
            "files": ["src/a.py", "src/b.py", "src/c.py"],
        }
        runs.append(run)

    def fields(task_id: str) -> dict[str, str]:
        title = TITLES[task_id]
        return {"title": title, "guideline": f"{title}: the run that did not failed."}

    return build_lessons(runs, base, fields), base


def answers(corpus: Path, base: Path) -> dict[str, str]:
    """What the hook answers for each event (the corpus's and checkouts' folders named)."""
    app, web, new = base / "app", base / "web", base / "new"
    payloads = {
        "session start": RecallPayload("SessionStart", "s", str(app)),
        **{
            name: RecallPayload("UserPromptSubmit", "s", str(app), text)
            for name, text in PROMPTS.items()
        },
        "session start, other project": RecallPayload("SessionStart", "s", str(web)),
        "prompt, other project": RecallPayload("UserPromptSubmit", "s", str(web), WEB_PROMPT),
        # A repository with no runs here: the same kind of work's lessons of other projects
        # that bear on the prompt.
        "prompt, project without runs": RecallPayload(
            "UserPromptSubmit", "s", str(new), PROMPTS["prompt, lessons bear on it"]
        ),
        "session start, project without runs": RecallPayload("SessionStart", "s", str(new)),
    }
    said = {}
    for name, payload in payloads.items():
        found = recall(corpus, payload)
        text = found.output().decode() or f"(nothing: {found.reason})"
        for folder, shown in ((corpus, "CORPUS"), (base, "BASE")):
            text = text.replace(str(folder.absolute()), shown)
        said[name] = text
    return said


def copied(corpus: Path, where: Path) -> Path:
    """A writable copy of a frozen corpus."""
    shutil.copytree(corpus, where)
    for path in [where, *where.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return where


def test_recall_through_the_index_answers_as_before_it(built: tuple[Path, Path]) -> None:
    corpus, base = built
    assert IndexedCatalog.read(corpus) is not None
    said = answers(corpus, base)
    assert said == json.loads(RECORDED.read_text())
    # What the recording holds: the checks against today's code, and another project's own.
    start = said["session start"]
    assert "deleted since the run" in start and "renamed to src/defaults.py" in start
    assert "load_config\\\\` no longer in src/c.py" in start and "3 days ago" in start
    assert "insight-0006" not in start and "insight-0006" in said["session start, other project"]
    assert said["prompt, no lesson bears on it"].startswith("(nothing: ")


def test_a_corpus_without_an_index_or_with_a_stale_one_is_read_whole_alike(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, base = built
    indexed = answers(corpus, base)
    bare = copied(corpus, tmp_path / "bare")
    (bare / CATALOG_INDEX).unlink()
    assert IndexedCatalog.read(bare) is None
    assert answers(bare, base) == indexed
    stale = copied(corpus, tmp_path / "stale")
    index = json.loads((stale / CATALOG_INDEX).read_text())
    (stale / CATALOG_INDEX).write_text(json.dumps({**index, "bytes": index["bytes"] + 1}))
    assert IndexedCatalog.read(stale) is None
    (stale / CATALOG_INDEX).write_bytes(b"\x00not json")
    assert IndexedCatalog.read(stale) is None
    assert answers(stale, base) == indexed


def test_a_catalog_in_pages_is_recalled_through_its_index_as_before(
    built_in_pages: tuple[Path, Path],
) -> None:
    # Its index says where each page's lines start (a part a page, made as they were
    # written): recall opens the pages of the project's runs alone.
    corpus, base = built_in_pages
    assert (corpus / catalog_page_rel(4)).is_file() and not (corpus / catalog_page_rel(5)).exists()
    assert len(json.loads((corpus / CATALOG_INDEX).read_text())["pages"]) == 4
    assert IndexedCatalog.read(corpus) is not None
    assert answers(corpus, base) == json.loads(RECORDED.read_text())
    test_the_index_reads_the_project_s_lines_alone(built_in_pages)


def test_an_older_corpus_is_recalled_through_its_index_as_before(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    # Catalog version 2 (every line in catalog.jsonl) with index version 1 (its offsets).
    corpus, base = built
    old = copied(corpus, tmp_path / "old")
    (old / CATALOG).write_bytes(b"".join(line + b"\n" for line in unpaged_catalog(old)))
    (old / CATALOG_INDEX).write_bytes(version_1_index(old / CATALOG))
    assert IndexedCatalog.read(old) is not None
    assert answers(old, base) == answers(corpus, base)
    test_the_index_reads_the_project_s_lines_alone((old, base))


def test_the_index_reads_the_project_s_lines_alone(built: tuple[Path, Path]) -> None:
    corpus, base = built
    runs, insights, offline, withheld, leaders = read_catalog(corpus)
    index = IndexedCatalog.read(corpus)
    assert index is not None
    assert list(index.runs) == runs and list(index.insights) == insights
    assert list(index.leaders) == leaders
    assert (index.offline, index.withheld) == (offline, withheld)
    assert index.runs_of([PROJECT]) == [i for i, r in enumerate(runs) if r.project == PROJECT]
    steps = {run.step for run in runs if run.project == PROJECT}
    assert index.insights_of([PROJECT]) == [
        i for i, item in enumerate(insights) if item.source_step in steps
    ]
    memory = Memory.load(corpus, indexed=True)
    recall_options = {"project": PROJECT, "checkout": base / "app", "project_found": False}
    shown = memory.first_message(PROMPTS["prompt, lessons bear on it"], **recall_options)
    whole = Memory.load(corpus).first_message(
        PROMPTS["prompt, lessons bear on it"], **recall_options
    )
    assert shown == whole and shown.insights
    assert memory.runs.made <= len(steps) < len(runs)  # type: ignore[attr-defined]
    assert memory.insights.made <= len(steps) < len(insights)  # type: ignore[attr-defined]


def _not_compiled(*_: object, **__: object) -> None:
    raise AssertionError("a template was compiled again")


def test_the_template_compiled_once_is_kept_for_the_next_call_and_renders_alike(
    built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, base = built
    payload = RecallPayload("SessionStart", "s", str(base / "app"))
    plain = recall(corpus, payload).text
    kept = tmp_path / "cache" / "templates"
    assert recall(corpus, payload, compiled_templates=kept).text == plain
    files = sorted(kept.iterdir())
    assert files and all(path.suffix == ".jinja" for path in files)
    assert stat.S_IMODE(kept.stat().st_mode) == stat.S_IRWXU  # the user's alone
    # Read back by another environment (a new process's), not compiled again; a damaged
    # file is compiled anew.
    environment.cache_clear()
    with monkeypatch.context() as patched:
        patched.setattr(jinja2.Environment, "compile", _not_compiled)
        assert recall(corpus, payload, compiled_templates=kept).text == plain
    for path in files:
        path.write_bytes(b"\x00garbage")
    environment.cache_clear()
    assert recall(corpus, payload, compiled_templates=kept).text == plain
    # A folder others may write to is not used: what it holds would run as code.
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert CompiledTemplates.at(shared, environment()) is None
    assert recall(corpus, payload, compiled_templates=shared).text == plain
    assert list(shared.iterdir()) == []
