"""The gate's pure parts: probe choice over a pool, and the figures from probe outcomes."""

from __future__ import annotations

from typing import TypeVar

import pytest

from wikitrace.control import stats
from wikitrace.control.figures import (
    Thresholds,
    gate_figures,
    marks,
    separable,
    summary,
    why_not_narrowed,
)
from wikitrace.control.gate_inputs import GateOptions
from wikitrace.control.gate_probes import ProbeChooser
from wikitrace.control.pool import PoolTask
from wikitrace.control.probes import Budget, Lesson, Probe, choose_probes, given_probes
from wikitrace.control.runner import RunnerSpec
from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.indexes import RunRow
from wikitrace.corpus_schema.tasks import TaskKey, shared_ids, task_key

T = TypeVar("T")
POOL = [
    PoolTask("a1", "open the locked drawer with the key under the doormat", "drawer"),
    PoolTask("a2", "open the locked drawer in the attic", "drawer"),
    PoolTask("a3", "find a pen on the desk", "drawer"),
    PoolTask("b1", "open the locked safe with the doormat key", "safe"),
    PoolTask("b2", "count the coins", "safe"),
]
LESSON = Lesson("Look under the doormat for the drawer key", "drawer", "open the locked drawer")


def keys(*ids: str) -> list[TaskKey]:
    """Tasks of no source, by id."""
    return [task_key(None, task_id) for task_id in ids]


def keyed(by_id: dict[tuple[str, int], T]) -> dict[tuple[TaskKey, int], T]:
    """(task id, seed) -> value, keyed by the task (of no source) as the gate keys it."""
    return {(task_key(None, task_id), seed): value for (task_id, seed), value in by_id.items()}


def test_targets_are_the_most_similar_tasks_of_the_lessons_type() -> None:
    probes = choose_probes(LESSON, POOL, keys("a3", "b2"), Budget(targets=2, falsify=3, regress=2))
    assert [(p.task_id, p.kind) for p in probes] == [
        ("a1", "target"),
        ("a2", "target"),
        ("a3", "falsify"),  # boundary: same type, less similar
        ("b1", "falsify"),  # look-alike: another type, similar words
        ("b2", "falsify"),  # decoy: another type, least similar
    ]
    assert probes[2].why.startswith("boundary") and probes[4].why.startswith("decoy")
    assert len({p.task_id for p in probes}) == len(probes)  # solved ones were taken already


def test_regression_probes_are_solved_tasks_not_taken_otherwise() -> None:
    probes = choose_probes(
        LESSON, POOL, keys("b2", "a3", "zz"), Budget(targets=1, falsify=1, regress=5)
    )
    assert [p.task_id for p in probes if p.kind == "regress"] == ["b2", "a3"]


def test_a_pool_without_types_picks_targets_by_similarity_alone() -> None:
    safe = Lesson(LESSON.text, "safe", LESSON.source_task)
    typed = choose_probes(safe, POOL, [], Budget(targets=2, falsify=0, regress=0))
    assert [p.task_id for p in typed] == ["b1", "b2"]
    untyped = [PoolTask(t.task_id, t.task, None) for t in POOL]
    probes = choose_probes(safe, untyped, [], Budget(targets=2, falsify=0, regress=0))
    assert [p.task_id for p in probes] == ["a1", "a2"]


def test_given_probes_must_be_in_a_given_pool() -> None:
    given = {"target": ["a1"], "regress": ["b2"]}
    assert given_probes(given, POOL, pool_given=True) == [
        Probe("a1", "target", "given"),
        Probe("b2", "regress", "given"),
    ]
    with pytest.raises(InputError, match="probe task zz is not in the task pool"):
        given_probes({"falsify": ["zz"]}, POOL, pool_given=True)
    assert given_probes({"falsify": ["zz"]}, POOL, pool_given=False)[0].task_id == "zz"


def test_figures_count_pairs_and_bound_them() -> None:
    probes = [Probe(f"t{i}", "target", "") for i in range(4)] + [
        Probe("f1", "falsify", ""),
        Probe("f2", "falsify", ""),
    ]
    pairs = {
        ("t0", 0): (0.0, 1.0, False),
        ("t1", 0): (0.0, 1.0, False),
        ("t2", 0): (0.0, 1.0, False),
        ("t3", 0): (1.0, 1.0, True),
        ("f1", 0): (1.0, 0.0, True),
        ("f2", 0): (None, 1.0, False),  # an error: counted, never a failure
        ("gone", 0): None,
    }
    figures = gate_figures(probes, keyed(pairs), Thresholds(confidence=0.9))
    assert (figures.n_target, figures.gains, figures.losses, figures.gain) == (4, 3, 0, 0.75)
    assert (figures.n_falsify, figures.failures, figures.errors) == (1, 1, 1)
    assert (figures.n_regress, figures.damaged, figures.d_reg) == (2, 1, 0.5)
    assert figures.gain_rate_lower == round(stats.lower(3, 4, 0.9), 6)
    assert figures.p_fail_upper == round(stats.upper(1, 1, 0.9), 6)
    assert not figures.passes
    assert summary(figures, Thresholds()).startswith("G 0.750 (>= ")


def test_narrowing_needs_a_real_gain_and_no_task_both_helped_and_hurt() -> None:
    probes = [Probe(f"t{i}", "target", "") for i in range(8)] + [Probe("f", "falsify", "")]
    helped = keyed({(f"t{i}", 0): (0.0, 1.0, False) for i in range(8)})
    hurt = {**helped, **keyed({("f", 0): (1.0, 0.0, True)})}
    figures = gate_figures(probes, hurt, Thresholds())
    f, t0 = keys("f", "t0")
    assert marks(hurt)[f] == {"HURT"} and marks(hurt)[t0] == {"HELPED"}
    assert separable(hurt, figures, Thresholds(eta=0.1))
    mixed = {**hurt, **keyed({("f", 1): (0.0, 1.0, False)})}
    assert not separable(mixed, gate_figures(probes, mixed, Thresholds()), Thresholds(eta=0.1))
    assert why_not_narrowed(figures, Thresholds(), narrow=False) == "narrowing is off (--no-narrow)"
    weak = gate_figures(probes[:1] + probes[-1:], hurt, Thresholds())
    assert not separable(hurt, weak, Thresholds(eta=0.9))
    assert why_not_narrowed(weak, Thresholds(eta=0.9), narrow=True).startswith(
        "not narrowed: the gain is not real"
    )


def test_p_fail_counts_citations_where_the_runs_report_them() -> None:
    """The method's P_fail: did the lesson activate where it should not? A falsification pair
    whose run cited the lesson fails, whatever its outcome; without reports, outcome harm."""
    probes = [Probe("t", "target", ""), Probe("f1", "falsify", ""), Probe("f2", "falsify", "")]
    pairs: dict[tuple[str, int], tuple[float, float, bool] | None] = {
        ("t", 0): (0.0, 1.0, False),
        ("f1", 0): (1.0, 1.0, True),  # used where it should not apply, and no harm done
        ("f2", 0): (1.0, 0.0, True),  # harmed, and not cited
    }
    by_outcome = gate_figures(probes, keyed(pairs), Thresholds())
    assert (by_outcome.p_fail_basis, by_outcome.failures, by_outcome.n_falsify) == (
        "outcomes",
        1,
        2,
    )
    cited = {("t", 0): True, ("f1", 0): True, ("f2", 0): False}
    by_citation = gate_figures(probes, keyed(pairs), Thresholds(), keyed(cited))
    assert (by_citation.p_fail_basis, by_citation.failures, by_citation.n_falsify) == (
        "citations",
        1,
        2,
    )
    assert "), P_fail (cited) 0.500 (<= " in summary(by_citation, Thresholds())
    # Only the pairs whose run reported count: one report among the falsification probes.
    partial = gate_figures(probes, keyed(pairs), Thresholds(), keyed({("f2", 0): False}))
    assert (partial.failures, partial.n_falsify) == (0, 1)


def test_the_published_rule_decides_on_the_estimates() -> None:
    """6 of 8 targets better and one falsification failure in 8: the method's estimates pass
    (G 0.75, P_fail 0.125); our bounds do not (P_fail's upper bound at 90% is 0.42 > 0.3)."""
    probes = [Probe(f"t{i}", "target", "") for i in range(8)]
    probes += [Probe(f"f{i}", "falsify", "") for i in range(8)]
    pairs: dict[tuple[str, int], tuple[float, float, bool] | None] = {
        (f"t{i}", 0): (0.0, 1.0 if i < 6 else 0.0, False) for i in range(8)
    }
    pairs |= {(f"f{i}", 0): (1.0, 0.0 if i == 0 else 1.0, True) for i in range(8)}
    bounds = gate_figures(probes, keyed(pairs), Thresholds())
    estimates = gate_figures(probes, keyed(pairs), Thresholds(rule="estimates"))
    assert (bounds.gain, bounds.p_fail) == (0.75, 0.125) and bounds.p_fail_upper > 0.3
    assert not bounds.passes and estimates.passes
    assert summary(estimates, Thresholds(rule="estimates")).endswith("rule: estimates")
    # One more falsification failure: 2 of 8 is 0.25, still within delta 0.3 by estimate;
    # three (0.375) is not.
    pairs[("f1", 0)] = (1.0, 0.0, True)
    assert gate_figures(probes, keyed(pairs), Thresholds(rule="estimates")).passes
    pairs[("f2", 0)] = (1.0, 0.0, True)
    assert not gate_figures(probes, keyed(pairs), Thresholds(rule="estimates")).passes


def test_the_sequential_budget_takes_every_covered_task_but_few_by_similarity() -> None:
    """Sequential probes are as many distinct tasks as the budget allows; a lesson whose
    precondition no task has still takes only `similar` targets by similarity."""
    many = [PoolTask(f"d{i}", f"open the locked drawer number {i}", "drawer") for i in range(30)]
    many += [PoolTask(f"p{i}", f"find pen {i} on the desk", "drawer") for i in range(30)]
    wide = Budget(targets=64, falsify=64, regress=64, similar=8)
    lesson = Lesson("Look under the doormat", "drawer", precondition="A locked drawer.")
    probes = choose_probes(lesson, many, [], wide)
    assert sum(p.kind == "target" for p in probes) == 30
    assert sum(p.kind == "falsify" for p in probes) == 30
    vague = Lesson("Look under the doormat", "drawer", precondition="A locked pen.")  # no task
    probes = choose_probes(vague, many, [], wide)
    assert sum(p.kind == "target" for p in probes) == 8


def test_a_sequential_decision_of_an_earlier_version_still_reads() -> None:
    """Decisions written before D_reg was tested per probe kind keep one damage figure."""
    probes = [Probe("t", "target", ""), Probe("r", "regress", "")]
    pairs = {("t", 0): (0.0, 1.0, False), ("r", 0): (1.0, 1.0, True)}
    figures = gate_figures(probes, keyed(pairs), Thresholds(rule="sequential"))
    old = {"help": 4.0, "damage": 2.0, "failure": 3.0, "needed": 10.0}
    text = summary(figures.model_copy(update={"tests": old}), Thresholds(rule="sequential"))
    assert "evidence it helps 4" in text and "evidence below 0.3 2)" in text
    new = {**old, "damage_falsify": 5.0, "damage_regress": 6.0}
    text = summary(figures.model_copy(update={"tests": new}), Thresholds(rule="sequential"))
    assert "net gain above 0.1 4" in text and "on regression probes 6" in text


class _Corpus:
    """What ProbeChooser reads of a frozen version: its run rows and their tasks' text."""

    def __init__(self, rows: list[RunRow]) -> None:
        self.rows = rows

    def task_text(self, step: int) -> str:
        return next(row.task for row in self.rows if row.step == step)


def test_the_gate_refuses_to_run_two_sources_task_of_one_id_as_one() -> None:
    """The runner knows a task by its id: τ-bench's task 3 and τ²-bench's task 3 would be run,
    drawn and counted as one task, so the gate names them and stops; tasks without a source
    (a corpus made before sources were kept), or an id of one source, are read as before."""
    rows = [
        RunRow(1, "3", "airline", "success", 4, "Book a flight.", origin="tau-bench/airline"),
        RunRow(2, "3", "airline", "failure", 4, "Cancel a trip.", origin="tau2-bench/airline"),
        RunRow(3, "4", "airline", "success", 4, "Change a seat.", origin="tau2-bench/airline"),
        RunRow(4, "4", "airline", "failure", 4, "Change a seat.", origin=None),
    ]
    options = GateOptions(runner=RunnerSpec("run {task_id} {memory}"))
    with pytest.raises(InputError, match=r"task 3 of tau-bench/airline, tau2-bench/airline"):
        ProbeChooser(_Corpus(rows), options, split=False)  # type: ignore[arg-type]
    one_each = GateOptions(runner=options.runner, pool=[PoolTask("4", "Change a seat.", None)])
    chooser = ProbeChooser(_Corpus(rows), one_each, split=False)  # type: ignore[arg-type]
    assert [task.task_id for task in chooser.pool] == ["4"]
    # A runner told the source runs both tasks of id 3 (and task 4 as the corpus keys it).
    told = GateOptions(runner=RunnerSpec("run {task_id} {origin} {memory}"))
    chooser = ProbeChooser(_Corpus(rows), told, split=False)  # type: ignore[arg-type]
    assert [task.key.name for task in chooser.pool] == [
        "tau-bench/airline:3",
        "tau2-bench/airline:3",
        "tau2-bench/airline:4",
        "4",
    ]
    assert shared_ids(row.task_key for row in rows) == {
        "3": ["tau-bench/airline", "tau2-bench/airline"]
    }
