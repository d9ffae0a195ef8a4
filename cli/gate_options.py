"""The options of `wikitrace gate`, in named groups (the probes, the rule and its budget, the
rates, ...), and what they make: `GateSettings`, which the command receives as `gate`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .common import DetailedOption
from .groups import Command, option_group

TASKS = click.Path(path_type=Path, dir_okay=False, exists=True)


@dataclass(frozen=True)
class GateSettings:
    """Which probes test a lesson, and what decides it (gate's tuning options)."""

    task_pool: Path | None
    targets: int
    falsify: int
    regress: int
    target_tasks: Path | None
    falsify_tasks: Path | None
    regress_tasks: Path | None
    trials: int
    seed: int
    confidence: float
    eta: float
    delta: float
    beta: float
    rule: str
    alpha: float
    alpha_miss: float
    max_runs: int
    flip_rate: float
    p_fail: str
    no_narrow: bool

    def rates(self) -> Any:
        """The error rates and limits the sequential tests keep to."""
        from wikitrace.control.sequential import Rates

        return Rates(
            eta=self.eta,
            delta=self.delta,
            beta=self.beta,
            alpha=self.alpha,
            alpha_miss=self.alpha_miss,
            flip_rate=self.flip_rate,
        )

    def gate_options(self, runner: Any, prompts_dir: Path | None) -> Any:
        """The gate's GateOptions: these settings, the probe files read."""
        from wikitrace.control.gate_inputs import GateOptions
        from wikitrace.control.pool import read_pool

        given = {
            kind: [task.key.name for task in read_pool(path)]
            for kind, path in (
                ("target", self.target_tasks),
                ("falsify", self.falsify_tasks),
                ("regress", self.regress_tasks),
            )
            if path is not None
        }
        rule = self.rule
        return GateOptions(
            runner=runner,
            pool=read_pool(self.task_pool) if self.task_pool else None,
            targets=self.targets,
            falsify=self.falsify,
            regress=self.regress,
            given=given,
            trials=self.trials,
            seed=self.seed,
            confidence=self.confidence,
            eta=self.eta,
            delta=self.delta,
            beta=self.beta,
            rule="estimates"
            if rule == "estimates"
            else "bounds"
            if rule == "bounds"
            else "sequential",
            alpha=self.alpha,
            alpha_miss=self.alpha_miss,
            max_runs=self.max_runs,
            flip_rate=self.flip_rate,
            p_fail="outcomes" if self.p_fail == "outcomes" else "citations",
            narrow=not self.no_narrow,
            prompts_dir=prompts_dir,
        )


def gate_options(function: Command) -> Command:
    """The probes and the decision rule, as `gate: GateSettings`."""
    return option_group(_gate_option_list(), "gate", lambda values: GateSettings(**values))(
        function
    )


_task_pool_option = click.option(
    "--task-pool",
    type=TASKS,
    cls=DetailedOption,
    help="The tasks your runner can run, one a line (default: the corpus's tasks).",
    more="Each is JSON with task_id, task (its text), task_type and origin (its source, "
    "where two sources share the id), or a bare id (its text, type and source then come "
    "from the corpus).",
)
"""The tasks the probes are drawn from."""

_RULE_AND_BUDGET: list[Callable[[Any], Any]] = [
    click.option(
        "--rule",
        type=click.Choice(["sequential", "bounds", "estimates"]),
        default="sequential",
        show_default=True,
        cls=DetailedOption,
        help="What decides: sequential tests, bounds or the published estimates.",
        more="sequential: probe pairs in rounds until anytime-valid tests decide; bounds: "
        "each figure's exact one-sided bound (at --confidence) on fixed probes; estimates: "
        "the figures themselves, as published (easier to pass by luck).",
    ),
    click.option(
        "--max-runs",
        type=click.IntRange(2),
        default=320,
        show_default=True,
        help="sequential: agent runs a lesson may take (both sides of every pair).",
    ),
    click.option(
        "--flip-rate",
        type=click.FloatRange(0, 0.3),
        default=0.0,
        show_default=True,
        cls=DetailedOption,
        help="sequential: your agent's run-to-run flip rate; above 0 the tests judge the "
        "lesson's noise-free effects and --max-runs grows to --max-runs / (1 - 2 E)^4.",
        more="Measure it by running tasks twice without memory on the same seed: with D the "
        "share of tasks whose two outcomes differ, E = (1 - sqrt(1 - 2 D)) / 2. 0 judges the "
        "outcomes as the runs show them (see docs/gate.md, outcome noise).",
    ),
]
"""What decides, and the agent runs the sequential tests may spend on a lesson."""

_PROBE_COUNTS: list[Callable[[Any], Any]] = [
    click.option(
        "--targets",
        type=click.IntRange(0),
        default=8,
        show_default=True,
        hidden=True,
        help="Target probe tasks, at most: those of the insight's type its precondition "
        "covers, most similar first (BM25); under sequential, pairs are drawn from them.",
    ),
    click.option(
        "--falsify",
        type=click.IntRange(0),
        default=8,
        show_default=True,
        hidden=True,
        help="Falsification probe tasks, at most: boundary tasks, precondition violations "
        "(most alike to it), decoys of other types.",
    ),
    click.option(
        "--regress",
        type=click.IntRange(0),
        default=8,
        show_default=True,
        hidden=True,
        help="Regression probe tasks, at most: tasks the corpus shows the agent solved.",
    ),
]
"""How many probe tasks of each kind, at most."""

_GIVEN_PROBES: list[Callable[[Any], Any]] = [
    click.option(
        "--target-tasks",
        type=TASKS,
        hidden=True,
        help="Use these target probes (ids, one a line).",
    ),
    click.option(
        "--falsify-tasks", type=TASKS, hidden=True, help="Use these falsification probes."
    ),
    click.option("--regress-tasks", type=TASKS, hidden=True, help="Use these regression probes."),
]
"""Probe tasks given instead of chosen."""

_TRIALS: list[Callable[[Any], Any]] = [
    click.option(
        "--trials",
        type=click.IntRange(1),
        default=1,
        show_default=True,
        hidden=True,
        help="Runs of each probe task on each side (seeds SEED, SEED+1, ...).",
    ),
    click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        hidden=True,
        help="The first seed (SEED, SEED+1, ...).",
    ),
]
"""How often each probe runs on each side, and from which seed."""

_RATES: list[Callable[[Any], Any]] = [
    click.option(
        "--confidence",
        type=click.FloatRange(0.5, 1, max_open=True),
        default=0.9,
        show_default=True,
        hidden=True,
        help="Of each one-sided bound (exact binomial).",
    ),
    click.option(
        "--eta",
        type=float,
        default=0.1,
        show_default=True,
        hidden=True,
        help="Least transfer gain G worth having: sequential commits a lesson only once its net "
        "gain is shown above it (and stops one shown below 1.5 times it); bounds and estimates "
        "commit only at this G or more (its lower bound, or itself).",
    ),
    click.option(
        "--delta",
        type=click.FloatRange(0, 1),
        default=0.3,
        show_default=True,
        hidden=True,
        help="Most falsification failure rate P_fail to commit (sequential: shown below it; "
        "bounds: its upper bound at most this).",
    ),
    click.option(
        "--beta",
        type=click.FloatRange(0, 1),
        default=0.3,
        show_default=True,
        hidden=True,
        help="Most regression damage D_reg to commit (sequential: shown below it; bounds: "
        "its upper bound at most this).",
    ),
    click.option(
        "--alpha",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.1,
        show_default=True,
        hidden=True,
        help="sequential: chance, at most, that a lesson with D_reg >= --beta (on its "
        "falsification or its regression probes) or P_fail >= --delta, or one whose net gain "
        "is at most --eta, is committed (across one call's lessons: the expected share of such "
        "among those committed, by e-BH).",
    ),
    click.option(
        "--alpha-miss",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.1,
        show_default=True,
        hidden=True,
        help="sequential: chance, at most, that a lesson worth committing (gain >= --eta, "
        "harm at most half the limits) is stopped early.",
    ),
]
"""The figures a lesson must reach and the error rates the tests keep to."""

_FAILURES: list[Callable[[Any], Any]] = [
    click.option(
        "--p-fail",
        "p_fail",
        type=click.Choice(["citations", "outcomes"]),
        default="citations",
        show_default=True,
        hidden=True,
        help="citations: a falsification probe fails when the agent's citation report says "
        "it used the lesson there (the method's wrong activation), for runs that return "
        "one, and when the outcome got worse otherwise; outcomes: when the outcome got "
        "worse, always.",
    ),
    click.option(
        "--no-narrow",
        is_flag=True,
        hidden=True,
        help="Reject instead of narrowing a precondition.",
    ),
]
"""What counts as a falsification failure, and whether a lesson failing off-target is narrowed."""


def _gate_option_list() -> list[Callable[[Any], Any]]:
    """Every gate option, group by group, in the order --help lists them."""
    return [
        _task_pool_option,
        *_RULE_AND_BUDGET,
        *_PROBE_COUNTS,
        *_GIVEN_PROBES,
        *_TRIALS,
        *_RATES,
        *_FAILURES,
    ]
