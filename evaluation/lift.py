"""`wikitrace lift`: what memory did, per suite, in the one table a reviewer reads.

Success, Gain and Regression against the rerun band come from `evaluate` (metrics.py); this
adds, per suite and method, what the rows carry besides their outcome: tokens and seconds per
episode, whether a memory episode stayed at its first message or descended into the memory
(and how each kind ended), and, when a judge was asked, the causes of the Regression episodes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from .metrics import AVERAGE, EvalOptions, EvalReport, MethodResult, evaluate
from .output import over_rerun
from .rows import Row


@dataclass
class Usage:
    """Per episode, on average, over the episodes whose rows say it."""

    episodes: int
    tokens: float | None = None
    tokens_episodes: int = 0
    seconds: float | None = None
    seconds_episodes: int = 0


@dataclass
class StayDescent:
    """Memory episodes that stayed at the first message, and those that read the memory past
    it; each with the share that succeeded. Only rows that say how often the agent drilled
    down count."""

    stayed: int = 0
    stayed_succeeded: int = 0
    descended: int = 0
    descended_succeeded: int = 0

    def cell(self) -> str:
        if not self.stayed + self.descended:
            return "-"
        return (
            f"stay {self.stayed} ({_share(self.stayed_succeeded, self.stayed)} ok) / "
            f"descent {self.descended} ({_share(self.descended_succeeded, self.descended)} ok)"
        )


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "n/a"


@dataclass
class LiftLine:
    """One method in one suite: its eval result and what else the rows say."""

    result: MethodResult
    usage: Usage
    stay_descent: StayDescent | None
    """None for the baseline and the rerun (they have no memory)."""
    causes: dict[str, int] | None = None
    """Regression episodes by cause (A-E), when a judge was asked."""
    not_counted: int = 0
    """Regression episodes the judge's answer does not count (see `wikitrace lift attribute`)."""

    def as_dict(self, report: EvalReport) -> dict[str, Any]:
        data = self.result.as_dict()
        if self.result.method in (report.options.baseline, report.options.rerun):
            data["verdict"] = None
        data["usage"] = asdict(self.usage)
        data["stay_descent"] = asdict(self.stay_descent) if self.stay_descent else None
        data["regression_causes"] = self.causes
        data["regression_not_counted"] = self.not_counted if self.causes is not None else None
        return data


@dataclass
class LiftReport:
    lines: list[LiftLine]
    eval_report: EvalReport
    warnings: list[str] = field(default_factory=list)
    judged: bool = False


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def lift(rows: Sequence[Row], options: EvalOptions, attribution: Any | None = None) -> LiftReport:
    """The eval report of `rows`, each method's line completed with its usage, Stay/Descent
    and (given an AttributionReport from `wikitrace lift attribute`'s core) its Regression
    causes."""
    report = evaluate(rows, options)
    by_key: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for item in rows:
        by_key[(item.row.suite, item.row.method)].append(item)
        by_key[(AVERAGE, item.row.method)].append(item)
    causes: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    not_counted: Counter[tuple[str, str]] = Counter()
    if attribution is not None:
        for episode in attribution.episodes:
            for suite in (episode.suite, AVERAGE):
                if episode.cause is None:
                    not_counted[(suite, episode.method)] += 1
                else:
                    causes[(suite, episode.method)][episode.cause] += 1
    without_memory = (options.baseline, options.rerun)
    lines = []
    for result in report.results:
        episodes = by_key[(result.suite, result.method)]
        tokens = [float(i.row.tokens) for i in episodes if i.row.tokens is not None]
        seconds = [i.row.seconds for i in episodes if i.row.seconds is not None]
        usage = Usage(len(episodes), _mean(tokens), len(tokens), _mean(seconds), len(seconds))
        stay = None
        if result.method not in without_memory:
            stay = StayDescent()
            for item in episodes:
                if item.row.drilldowns is None:
                    continue
                success = item.row.succeeded(options.success_threshold)
                if item.row.drilldowns:
                    stay.descended += 1
                    stay.descended_succeeded += success
                else:
                    stay.stayed += 1
                    stay.stayed_succeeded += success
        line = LiftLine(result, usage, stay)
        if attribution is not None and result.method not in without_memory:
            found = causes[(result.suite, result.method)]
            line.causes = {cause: found[cause] for cause in "ABCDE"}
            line.not_counted = not_counted[(result.suite, result.method)]
        lines.append(line)
    return LiftReport(lines, report, list(report.warnings), judged=attribution is not None)


def _number(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def markdown(report: LiftReport) -> str:
    options = report.eval_report.options
    level = f"{options.confidence:.0%}"
    header = [
        "suite",
        "method",
        "tasks",
        "trials",
        f"success ({level} CI)",
        f"Gain ({level} CI)",
        f"Regression ({level} CI)",
        f"Gain - {options.rerun} Gain",
        f"against the {options.rerun} band",
    ]
    if report.judged:
        header.append("Regression causes")
    header += ["Stay / Descent", "tokens / episode", "seconds / episode"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for line in report.lines:
        r = line.result
        memory = r.method not in (options.baseline, options.rerun)
        role = {options.baseline: "(the baseline)", options.rerun: "(the band)"}
        cells = [
            r.suite,
            r.method,
            str(r.tasks),
            str(r.trials),
            r.success_rate.cell(),
            _behind(r.gain.cell(), r.gain_tasks, r.gain_trials),
            _behind(r.regression.cell(), r.regression_tasks, r.regression_trials),
            over_rerun(r.gain_over_rerun, r.gain_over_rerun_tasks),
            r.verdict() if memory else role.get(r.method, "-"),
        ]
        if report.judged:
            cells.append(_causes(line) if memory else "-")
        cells += [
            line.stay_descent.cell() if line.stay_descent else "-",
            _number(line.usage.tokens, 0),
            _number(line.usage.seconds, 1),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _behind(cell: str, tasks: int, trials: int) -> str:
    """A rate with the tasks and trials behind it ('-': none)."""
    if not trials:
        return "-"
    return f"{cell} ({tasks} task{'' if tasks == 1 else 's'}, {trials} trials)"


def _causes(line: LiftLine) -> str:
    if line.causes is None:
        return "-"
    named = ", ".join(f"{cause} {count}" for cause, count in line.causes.items() if count)
    shown = named or "none"
    return shown + (f" ({line.not_counted} not counted)" if line.not_counted else "")


def as_json(report: LiftReport) -> str:
    data = {
        "results": [line.as_dict(report.eval_report) for line in report.lines],
        "warnings": report.warnings,
        "baseline": report.eval_report.options.baseline,
        "rerun": report.eval_report.options.rerun,
    }
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
