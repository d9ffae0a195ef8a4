"""A task is its source and its id (corpus_schema/tasks.py): every importer names the source
its log came from, runs of two sources never share a task (no divergence, no "runs of this
task", no leave-one-task-out across them), the pages that compare runs name each one's task,
and a corpus or a native run without sources reads as before (a task known by its id)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import frontmatter
import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun
from wikitrace.corpus_schema import InputError, RunRecord
from wikitrace.corpus_schema.catalog import read_catalog
from wikitrace.corpus_schema.tasks import TaskKey, task_key
from wikitrace.tools.audit import audit_insight, audit_step
from wikitrace.tools.memory import Memory
from wikitrace.versions import FrozenVersion, leave_out

from helpers import DATA, make_run, write_runs

MIXED = DATA / "mixed-tau"
"""Real τ-bench airline results (task 1 failed and succeeded, task 6 succeeded) and a real
τ²-bench telecom simulation (failed) whose task id is "6" too: see tests/data/README.md."""
IMPORTERS = DATA / "importers"
SESSIONS = DATA / "sessions"


def read(*paths: Path) -> list[SourceRun]:
    found = list(plan_inputs(list(paths)).items())
    assert [item for item in found if not isinstance(item, SourceRun)] == []
    return [item for item in found if isinstance(item, SourceRun)]


def origins(*paths: Path) -> list[str | None]:
    """The source of each run read, labelled or not (a session's log holds no outcome)."""
    found = list(plan_inputs(list(paths)).items())
    assert [item for item in found if isinstance(item, InputError)] == []
    return [
        item.record.origin if isinstance(item, SourceRun) else item.data.get("origin")
        for item in found
        if not isinstance(item, InputError)
    ]


def divergences(corpus: Path) -> list[dict[str, Any]]:
    """The mined divergences of a corpus, each page's header joined with its data file."""
    found = []
    for path in sorted((corpus / "insight").glob("insight-*.md")):
        post = frontmatter.load(path)
        data = json.loads((corpus / str(post["data"])).read_text())
        if (data.get("mined") or {}).get("kind") == "divergence":
            found.append({**post.metadata, **data, "id": post["id"], "body": post.content})
    return found


def build(inputs: list[Path], corpus: Path) -> Path:
    build_corpus(BuildOptions(inputs=inputs, output=corpus))
    return corpus


# --- the key --------------------------------------------------------------------------------


def test_a_task_is_its_source_and_its_id() -> None:
    tau, tau2 = task_key("tau-bench/airline", "3"), task_key("tau2-bench/airline", "3")
    assert tau != tau2 and len({tau, tau2, task_key("tau-bench/airline", "3")}) == 2
    assert tau.name == "tau-bench/airline:3" and str(tau) == "task 3 of tau-bench/airline"
    # Without a source (an old corpus, a native run naming none) the id alone, as before.
    old = task_key(None, "3")
    assert old == task_key("", "3") == TaskKey(None, "3")
    assert old.name == "3" and str(old) == "task 3" and old != tau
    # Named to be left out: by its full name (that source's alone) or its id (every source's).
    assert tau.named_in({"tau-bench/airline:3"}) and not tau2.named_in({"tau-bench/airline:3"})
    assert tau.named_in({"3"}) and tau2.named_in({"3"}) and old.named_in({"3"})
    assert not old.named_in({"tau-bench/airline:3"}) and not tau.named_in({"4"})


def test_the_native_format_takes_a_source_and_does_without_one() -> None:
    given = RunRecord.model_validate(make_run("3", origin="tau2-bench/airline"))
    assert given.task_key == TaskKey("tau2-bench/airline", "3")
    assert RunRecord.model_validate(make_run("3")).task_key == TaskKey(None, "3")
    with pytest.raises(ValueError, match="must not be empty"):
        RunRecord.model_validate(make_run("3", origin=" "))


# --- every importer names the source --------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (MIXED / "tau-bench-airline-3results.json", {"tau-bench/airline"}),
        (MIXED / "tau2-bench-telecom-1simulation.json", {"tau2-bench/telecom"}),
        (IMPORTERS / "tau2-telecom-2sims.json", {"tau2-bench/telecom"}),
        (IMPORTERS / "inspect-popularity.json", {"inspect/popularity"}),
        (IMPORTERS / "openhands-prontoqa-2runs.jsonl", {"openhands/ProntoQA"}),
        (IMPORTERS / "alfworld-2episodes.out", {"alfworld"}),
        (IMPORTERS / "hotpotqa-trial1-excerpt.txt", {"hotpotqa"}),
        (SESSIONS / "claude-code" / "minimal_showcase", {"claude-code"}),
        (SESSIONS / "codex" / "codex_session.jsonl", {"codex"}),
        (DATA / "tau-bench-airline-3runs.jsonl", {None}),  # native, naming none: as before
    ],
)
def test_each_importer_names_the_source_its_log_says(path: Path, expected: set[str | None]) -> None:
    found = origins(path)
    assert found and set(found) == expected


def test_swe_bench_and_harbor_runs_name_their_benchmark() -> None:
    swe = IMPORTERS / "mini-swe-agent"
    assert set(origins(swe)) == {"swe-bench"}
    assert origins(IMPORTERS / "atif-harbor-golden") == ["atif"]  # no trial result beside it


# --- two sources never share a task ---------------------------------------------------------


def test_a_mixed_build_has_no_divergence_across_two_benchmarks(tmp_path: Path) -> None:
    corpus = build([MIXED], tmp_path / "corpus")
    found = divergences(corpus)
    # τ-bench's task 1 (one failed, one successful run) diverges; its task 6 (succeeded)
    # and τ²-bench's task 6 (failed) are two tasks, so they are not compared.
    assert [(d["mined"]["task_id"], d["mined"]["task_origin"]) for d in found] == [
        ("1", "tau-bench/airline")
    ]
    page = found[0]
    assert "task 1 of tau-bench/airline: 1 of its 2 runs succeeded" in page["body"]
    for step in page["mined"]["runs"]:  # each compared run named with its task
        assert f"{step} (task 1 of tau-bench/airline, " in page["body"]
    # The raw layer keeps the source: the page's header, its title and the index.
    headers = {
        frontmatter.load(path)["origin"]
        for path in sorted((corpus / "raw").glob("step-*/metadata.md"))
    }
    assert headers == {"tau-bench/airline", "tau2-bench/telecom"}
    index = (corpus / "raw" / "_index.md").read_text()
    assert "tau-bench/airline:6: " in index and "tau2-bench/telecom:6: " in index


def test_without_sources_the_same_runs_are_one_task_as_before(tmp_path: Path) -> None:
    """The same runs in the native format, their sources left out: task 6 is then one task
    of two runs, and a divergence compares them (what every build did before sources)."""
    lines = []
    for run in read(MIXED):
        data = run.record.model_dump(mode="json", exclude={"origin"})
        data["metadata"] = {}
        lines.append(data)
    corpus = build([write_runs(tmp_path / "runs.jsonl", lines)], tmp_path / "corpus")
    found = divergences(corpus)
    assert sorted(d["mined"]["task_id"] for d in found) == ["1", "6"]
    assert all(d["mined"]["task_origin"] is None for d in found)
    assert "task 6: 1 of its 2 runs succeeded" in found[-1]["body"]


def test_audit_names_each_compared_runs_task(tmp_path: Path) -> None:
    corpus = build([MIXED], tmp_path / "corpus")
    (page,) = divergences(corpus)
    text = audit_insight(corpus, page["id"])
    assert "## The runs it compares, each with its task" in text
    for step in page["mined"]["runs"]:
        assert f"- {step}: task 1 of tau-bench/airline" in text
    steps = {
        frontmatter.load(path)["origin"]: path.parent.name
        for path in sorted((corpus / "raw").glob("step-*/metadata.md"))
        if frontmatter.load(path)["task_id"] == "6"
    }
    assert audit_step(corpus, steps["tau2-bench/telecom"]).startswith(
        f"# {steps['tau2-bench/telecom']}: task 6 of tau2-bench/telecom (failure)"
    )


def test_the_catalog_and_views_keep_tasks_of_two_sources_apart(tmp_path: Path) -> None:
    corpus = build([MIXED], tmp_path / "corpus")
    runs, insights, *_ = read_catalog(corpus)
    assert {run.task_key for run in runs} == {
        TaskKey("tau-bench/airline", "1"),
        TaskKey("tau-bench/airline", "6"),
        TaskKey("tau2-bench/telecom", "6"),
    }
    assert {item.source_task for item in insights if item.pattern} == {
        TaskKey("tau-bench/airline", "1")
    }
    base = FrozenVersion.load("v1", corpus)
    # Its full name leaves out one source's task 6 alone; its id, every source's.
    one = leave_out(base, tmp_path / "one", ["tau2-bench/telecom:6"], force=False)
    assert one.runs_left_out == 1 and one.runs == 3
    both = leave_out(base, tmp_path / "both", ["6"], force=False)
    assert both.runs_left_out == 2
    with pytest.raises(InputError, match="no task 'tau2-bench/airline:6'"):
        leave_out(base, tmp_path / "none", ["tau2-bench/airline:6"], force=False)
    memory = Memory.load(corpus)

    def found(*excluded: str) -> set[TaskKey]:
        hits = memory.search("mobile data", ["tasks"], exclude_tasks=excluded)
        return {memory.task_of[hit.id] for hit in hits}

    assert found("tau-bench/airline:6") == found() == {TaskKey("tau2-bench/telecom", "6")}
    assert found("6") == found("tau2-bench/telecom:6") == set()


def test_a_corpus_made_before_sources_reads_by_task_id(tmp_path: Path) -> None:
    """The format 1 corpus of tests/data: no source anywhere; each task is its id alone."""
    corpus = tmp_path / "old"
    shutil.copytree(DATA / "format1-corpus", corpus)
    memory = Memory.load(corpus)
    assert memory.runs and all(run.origin is None for run in memory.runs)
    assert {run.task_key for run in memory.runs} == {TaskKey(None, "1")}
    assert all(item.source_task == TaskKey(None, "1") for item in memory.insights)
    assert all(memory.drawn_from(item, {"1"}) for item in memory.insights)
    view = leave_out(FrozenVersion.load("old", corpus), tmp_path / "view", ["1"], force=False)
    assert view.runs == 0


def test_the_site_has_a_page_for_each_task_of_each_source(tmp_path: Path) -> None:
    from wikitrace.tools.site import build_site, task_page

    corpus = build([MIXED], tmp_path / "corpus")
    build_site(corpus, tmp_path / "site")
    pages = {path.name for path in (tmp_path / "site" / "task").glob("*.html")}
    names = ["tau-bench/airline:1", "tau-bench/airline:6", "tau2-bench/telecom:6"]
    assert pages == {task_page(name) for name in names}
    page = (tmp_path / "site" / "task" / task_page("tau2-bench/telecom:6")).read_text()
    assert "tau2-bench/telecom:6" in page
    assert "None: a divergence needs a successful and a failed run of the task" in page
