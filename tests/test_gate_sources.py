"""The gate and `update` on a corpus where two sources share a task id (real τ-bench and
τ²-bench runs, both with a task "6"): each source's task is its own task, run with its source
(`{origin}`, $WIKITRACE_TASK_ORIGIN) through a fake runner that records what it was asked; a
runner told the id alone is refused, with the fix named."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.control.figures import Rule
from wikitrace.control.gate import gate_insights
from wikitrace.control.gate_inputs import GateOptions
from wikitrace.control.pool import read_pool
from wikitrace.control.probes import TaskDraws
from wikitrace.control.runner import RunnerSpec
from wikitrace.control.update import UpdateOptions, mixed_set, named, update_corpus
from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.ledger import UpdateState, read_agent_runs
from wikitrace.corpus_schema.tasks import task_key
from wikitrace.versions import Store

from helpers import DATA, FakeLLM

MIXED = DATA / "mixed-tau"
TAU = "tau-bench/airline"
TAU2 = "tau2-bench/telecom"
MODEL = "fake/compiler"
AGENT = """
import json, os, sys
log, task, origin = sys.argv[1:4]
with open(log, "a") as out:
    out.write(json.dumps([task, origin, os.environ["WIKITRACE_TASK_ORIGIN"]]) + "\\n")
print(json.dumps({"success": origin != "tau2-bench/telecom"}))
"""


def recording_runner(tmp_path: Path, *, origin: bool = True) -> tuple[RunnerSpec, Path]:
    """A runner whose agent appends (task id, {origin}, $WIKITRACE_TASK_ORIGIN) to a log and
    succeeds on τ-bench's tasks only; `origin=False`: a template that names no source."""
    agent, log = tmp_path / "agent.py", tmp_path / "asked.jsonl"
    agent.write_text(AGENT)
    told = "{origin}" if origin else "told-nothing"
    template = f"{sys.executable} {agent} {log} {{task_id}} {told} {{memory}}"
    return RunnerSpec(template, concurrency=2, timeout_seconds=60, retries=0), log


def asked(log: Path) -> set[tuple[str, ...]]:
    return {tuple(json.loads(line)) for line in log.read_text().splitlines()}


@pytest.mark.parametrize(("rule", "insight"), [("bounds", "1"), ("sequential", "2")])
def test_the_gate_runs_each_sources_task_with_its_source(
    tmp_path: Path, rule: Rule, insight: str
) -> None:
    """Fixed probes (insight-0001: a target, a falsification and a regression probe, the
    three tasks) and the sequential rule's draws (insight-0002's first rounds)."""
    llm = FakeLLM(model=MODEL)
    corpus = tmp_path / "corpus"
    build_corpus(
        BuildOptions(inputs=[MIXED], output=corpus, model=MODEL, cache_dir=tmp_path / "cache"),
        llm=llm,
    )
    spec, log = recording_runner(tmp_path)
    options = GateOptions(runner=spec, rule=rule, targets=2, falsify=2, regress=2, max_runs=24)
    report = gate_insights(corpus, [insight], options, llm=llm)
    (decision,) = report.decisions
    probed = {(p.task_id, p.origin) for p in decision.probes}
    # Each task asked with its own source, as argument and variable.
    assert asked(log) == {(task_id, origin, origin) for task_id, origin in probed}
    if rule == "bounds":  # three tasks, two of them "6"
        assert probed == {("1", TAU), ("6", TAU), ("6", TAU2)}
    else:
        assert ("6", TAU2) in probed
    runs = read_agent_runs(Store(corpus).runs_path)
    for probe in decision.probes:
        ran = [runs[i] for i in (*probe.base_runs, *probe.lesson_runs)]
        assert ran and {(r.task_id, r.origin) for r in ran} == {(probe.task_id, probe.origin)}
        # The agent fails τ²-bench's task 6 and solves τ-bench's: two tasks, not one.
        assert {r.success for r in ran} == {probe.origin == TAU}
    shown = (corpus / "gate" / f"{decision.id}.md").read_text()
    assert all(f"| {origin}:{task_id} |" in shown for task_id, origin in probed)


def test_a_runner_told_the_id_alone_is_refused_and_told_to_add_origin(tmp_path: Path) -> None:
    llm = FakeLLM(model=MODEL)
    corpus = tmp_path / "corpus"
    build_corpus(
        BuildOptions(inputs=[MIXED], output=corpus, model=MODEL, cache_dir=tmp_path / "cache"),
        llm=llm,
    )
    spec, log = recording_runner(tmp_path, origin=False)
    options = GateOptions(runner=spec, rule="bounds", targets=2, falsify=2, regress=2)
    with pytest.raises(InputError) as refused:
        gate_insights(corpus, ["1"], options, llm=llm)
    message = str(refused.value)
    assert f"task 6 of {TAU}, {TAU2}" in message and "add {origin} to the runner" in message
    assert not log.exists()  # nothing ran
    # A pool that names τ-bench's task 6 by its source is one task each: it runs.
    pool = tmp_path / "pool.jsonl"
    pool.write_text("1\n" + json.dumps({"task_id": "6", "origin": TAU}) + "\n")
    one_each = GateOptions(
        runner=spec, pool=read_pool(pool), rule="bounds", targets=2, falsify=2, regress=2
    )
    (decision,) = gate_insights(corpus, ["1"], one_each, llm=llm).decisions
    assert {(p.task_id, p.origin) for p in decision.probes} <= {("1", TAU), ("6", TAU)}
    assert {task for task, _, _ in asked(log)} <= {"1", "6"}


def test_distinct_task_draws_count_two_sources_task_of_one_id_as_two() -> None:
    tau, tau2 = task_key(TAU, "6"), task_key(TAU2, "6")
    draws = TaskDraws([tau, tau2], random.Random(0))
    first = [draws.next() for _ in range(2)]
    assert sorted(task.name for task, _ in first) == [f"{TAU}:6", f"{TAU2}:6"]
    assert [times for _, times in first] == [0, 0]  # both new tasks before any runs again
    assert draws.next()[1] == 1


def test_update_compares_each_sources_task_with_its_source(tmp_path: Path) -> None:
    llm = FakeLLM(model=MODEL)
    corpus = tmp_path / "corpus"
    tau_runs, tau2_runs = sorted(MIXED.iterdir())
    build_corpus(
        BuildOptions(inputs=[tau_runs], output=corpus, model=MODEL, cache_dir=tmp_path / "cache"),
        llm=llm,
    )
    build = BuildOptions(inputs=[tau2_runs], output=corpus, cache_dir=tmp_path / "cache")

    spec, log = recording_runner(tmp_path, origin=False)
    with pytest.raises(InputError, match=r"add \{origin\} to the runner"):
        update_corpus(build, UpdateOptions(runner=spec, always_compare=True), llm=llm)
    assert not log.exists()

    spec, log = recording_runner(tmp_path)
    options = UpdateOptions(runner=spec, always_compare=True, rerun_band=False, coverage=4)
    record = update_corpus(build, options, llm=llm).record
    assert record is not None
    tasks = {(t.task_id, t.origin): t for t in record.tasks}
    assert tasks[("6", TAU2)].group == "fresh" and tasks[("6", TAU)].group == "coverage"
    assert (tasks[("6", TAU2)].old, tasks[("6", TAU)].old) == (0.0, 1.0)
    assert asked(log) == {(task_id, origin, origin) for task_id, origin in tasks}
    runs = read_agent_runs(Store(corpus).runs_path)
    for (task_id, origin), result in tasks.items():
        ran = [runs[i] for i in (*result.old_runs, *result.new_runs)]
        assert {(r.task_id, r.origin) for r in ran} == {(task_id, origin)}


def test_an_update_state_names_tasks_by_name_and_old_ones_by_id() -> None:
    """The update state keeps tasks by name (`source:id`); one written before sources were
    kept names a task by id, which is that id's task in every source."""
    tau, tau2, one = task_key(TAU, "6"), task_key(TAU2, "6"), task_key(TAU, "1")
    known = [tau, tau2, one]
    assert named([f"{TAU2}:6"], known) == [tau2]
    assert named(["6", "1"], known) == [tau, tau2, one]
    assert named(["9"], known) == [task_key(None, "9")]
    state = UpdateState(fresh_tasks=["6"], boundary_tasks=[f"{TAU}:1"])
    spec = RunnerSpec("run {task_id} {origin} {memory}")
    chosen = mixed_set(UpdateOptions(runner=spec), state, [], [tau], known)
    assert chosen == [(tau2, "fresh"), (tau, "fresh"), (one, "boundary")]
    pool = UpdateOptions(runner=spec, task_pool=[f"{TAU}:6", "1"])
    assert mixed_set(pool, state, [], [], known) == [(tau, "fresh"), (one, "boundary")]
