"""A bounded slice of benchmarks/recall_bench.py: the same measurements on small excerpts of
real logs in tests/data (and the bundled example), asserting what must hold (issue 51)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data"
SPOTTER = "github.com/marot/spotter"
WAYS = ["the repository's name", "its remote", "nothing, inside it"]
"""The ways of naming the project the slice asks `wikitrace prompt` with (each a process)."""


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "recall_bench", ROOT / "benchmarks/recall_bench.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = _bench()


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One corpus of seven families, measured once: τ-bench airline (12 runs, six tasks of
    two trials), τ²-bench telecom, SWE-bench, ALFWorld, HotpotQA, and two Claude Code projects
    of one repository (its main folder, and a worktree: the folder names are the ones Claude
    Code gave them, as marot/spotter's fixtures README lists)."""
    data = tmp_path_factory.mktemp("data")
    claude = data / "claude"
    worktree = claude / "-home-marco-projects-spotter-worktrees-spotter-a0y"
    with tarfile.open(DATA / "sessions/claude-code/spotter-project.tar.gz") as archive:
        archive.extractall(worktree, filter="data")
    shutil.copytree(
        DATA / "sessions/claude-code/spotter-main", claude / "-home-marco-projects-spotter"
    )
    family = bench.Family
    families = [
        family("tau-bench", str(ROOT / "examples/tau-bench-airline.jsonl"), "airline"),
        family("tau2-bench", str(DATA / "importers/tau2-telecom-2sims.json"), "telecom"),
        family("mini-swe-agent", str(DATA / "importers/mini-swe-agent"), "coding"),
        family("alfworld", str(DATA / "importers/alfworld-2episodes.out"), "household"),
        family("hotpotqa", str(DATA / "importers/hotpotqa-trial1-excerpt.txt"), "qa"),
        family("spotter", str(claude), "coding", SPOTTER, session=True),
    ]
    work = tmp_path_factory.mktemp("work")
    return bench.measure(families, data, work, max_tokens=6000, ways=WAYS)


def test_every_family_is_read_and_asked(figures: Any) -> None:
    assert all(count > 0 for count in figures.families.values()), figures.families
    assert figures.queries == figures.runs
    assert figures.project_not_given.messages == figures.runs
    assert figures.project_known.messages == 3  # the three sessions
    assert figures.quote_recall.of > 0


def test_no_other_domain_is_shown_when_the_project_is_known(figures: Any) -> None:
    shown = figures.project_known
    assert shown.wrong_domain_lessons.of + shown.wrong_domain_runs.of > 0
    assert shown.wrong_domain_lessons.hits == 0
    assert shown.wrong_domain_runs.hits == 0


def test_no_other_domain_is_shown_when_no_project_is_given(figures: Any) -> None:
    shown = figures.project_not_given
    assert shown.wrong_domain_lessons.hits == 0
    assert shown.wrong_domain_runs.hits == 0


def test_the_identical_task_is_among_the_similar_runs(figures: Any) -> None:
    # Every τ-bench task here has two runs: with one left out, the other is in the top 3.
    assert figures.same_task_top3.of >= 12
    assert figures.same_task_top3.hits == figures.same_task_top3.of
    assert figures.same_task_first.hits == figures.same_task_first.of
    assert figures.other_source_twin_top3.hits == 0


def test_no_divergence_compares_two_tasks(figures: Any) -> None:
    assert figures.divergences_across_tasks.of > 0  # τ-bench tasks 1 and 2 diverge
    assert figures.divergences_across_tasks.hits == 0
    assert figures.tasks_across_families.of > 10
    assert figures.tasks_across_families.hits == 0


def test_a_repository_with_worktrees_is_one_project(figures: Any) -> None:
    assert len(figures.projects_per_repo[SPOTTER]) == 1, figures.projects_per_repo


def test_search_finds_a_compilation_quote_by_its_own_words(figures: Any) -> None:
    assert figures.quote_recall.hits == figures.quote_recall.of


def test_search_answers_no_match_to_unrelated_questions(figures: Any) -> None:
    assert figures.no_match.hits == figures.no_match.of


def test_the_report_prints_every_figure_with_its_denominator(figures: Any) -> None:
    text = "\n".join(bench.report(figures, "test"))
    for part in ("(a) project known", "(b) same-task", "(c) right kind", "(d) search recall@5"):
        assert part in text
    assert f"lessons from another domain: {figures.project_known.wrong_domain_lessons}" in text
    assert bench.as_json(figures)["same_task_top3"] == {
        "hits": figures.same_task_top3.hits,
        "of": figures.same_task_top3.of,
    }


@pytest.mark.parametrize(
    "way",
    WAYS,
)
def test_a_coding_task_gets_its_projects_lessons_however_the_project_is_named(
    figures: Any, way: str
) -> None:
    named = figures.named[way]
    assert named.messages == 3
    # Its lessons shown, or (none bearing on the task) counted and said so.
    assert named.with_own.hits + named.said_none == named.messages
    assert named.wrong_domain.of > 0
    assert named.wrong_domain.hits == 0
    assert named.own_lessons.hits == named.own_lessons.of


SCOPED_BY_ITS_WORDS = {"Plan a three day trip to Rome with two museum visits": "airline"}
"""The one foreign task the slice's corpus scopes, and not to be fixed by words: two of its six
τ-bench tasks plan a trip ("For your upcoming trip from ..."), and nothing else shares a word
with it. A floor at the distance between the domain's own tasks turned it away, and with it
tasks of the domain worded otherwise than the benchmark's ("Fetch the key from drawer 3" in
the toy), and was not kept (docs/measuring.md)."""


def test_tasks_of_a_domain_the_corpus_lacks_get_no_item(figures: Any) -> None:
    assert figures.foreign_shown.of == len(bench.FOREIGN) >= 20
    assert figures.foreign_scoped == SCOPED_BY_ITS_WORDS
