"""The options of `wikitrace gate` (declared in corpus_schema/setting_fields.py, GATE_SETTINGS:
the probes, the rule and its budget, the rates, ...), and what they make: `GateSettings`, which
the command receives as `gate`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema.setting_fields import GATE_SETTINGS

from .common import Command, options


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
    return options(GATE_SETTINGS, "gate", lambda values: GateSettings(**values))(function)
