"""What a gate call is given: its options, and the candidate lessons it tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.setting_fields import default

from .figures import Rule
from .pool import PoolTask
from .runner import RunnerSpec


@dataclass
class GateOptions:
    runner: RunnerSpec
    pool: list[PoolTask] | None = None
    """The tasks the runner can run; None: the tasks of the corpus's runs."""
    targets: int = default("targets")
    falsify: int = default("falsify")
    regress: int = default("regress")
    given: dict[str, list[str]] = field(default_factory=dict)
    """Explicit probe lists by kind (target, falsify, regress), instead of choosing."""
    trials: int = default("trials")
    seed: int = default("seed")
    confidence: float = default("bound-confidence")
    """Of the bounds rule's exact binomial bounds."""
    alpha: float = default("alpha")
    """Sequential rule: chance, at most, that a lesson with D_reg >= beta, P_fail >= delta
    or no help on its targets is committed (over one call's lessons, the expected share of
    such lessons among those committed: e-BH)."""
    alpha_miss: float = default("alpha-miss")
    """Sequential rule: chance, at most, that a lesson worth committing is stopped early."""
    max_runs: int = default("max-runs")
    """Sequential rule: agent runs a lesson may take (both sides of each pair), then it is
    rejected if not shown to pass."""
    flip_rate: float = default("flip-rate")
    """Sequential rule: the agent's run-to-run flip rate (`Rates.flip_rate`); above 0 the
    tests judge noise-free effects and the budget grows to max_runs / (1 - 2 flip_rate)^4."""
    per_round: int = 2
    """Sequential rule: pairs of each kind still needed, run together in one round."""
    eta: float = default("eta")
    """Least transfer gain G (its lower bound) to commit."""
    delta: float = default("delta")
    """Most falsification failure rate P_fail (its upper bound) to commit."""
    beta: float = default("beta")
    """Most regression damage D_reg (its upper bound) to commit."""
    rule: Rule = default("rule")  # noqa: RUF009 (a string, declared once)
    """How the figures decide: sequential tests (ours), exact bounds on fixed probes, or the
    estimates (the method's)."""
    p_fail: Literal["citations", "outcomes"] = default("p-fail")
    """citations: a falsification probe fails when the run with the lesson cited it (used it
    where it should not apply), for runs whose agent returned a citation report, outcome
    harm otherwise; outcomes: outcome harm always."""
    narrow: bool = True
    prompts_dir: Path | None = None
    """Templates that override ours (narrow.j2), as `build`'s `prompts-dir` setting."""


@dataclass
class Candidate:
    ident: str
    header: InsightHeader
    guideline: str
    alike: list[str] = field(default_factory=list)
    """Ungated near-duplicates (the same lesson drawn from other runs): they take its
    decision, and are not tested again."""

    @property
    def precondition(self) -> str:
        return self.header.precondition


RunProgress = Callable[[int, int], None]
