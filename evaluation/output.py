"""The eval report as a markdown table, CSV, JSON, or a picture."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import WikitraceError

from .metrics import AVERAGE, EvalReport, Interval, MethodResult


def _role(result: MethodResult, report: EvalReport) -> str:
    if result.method == report.options.baseline:
        return "(the baseline: B is its majority)"
    if result.method == report.options.rerun:
        return "(the band)"
    return result.verdict()


def _with_trials(interval: Interval, trials: int, tasks: int) -> str:
    if interval.value is None and not trials:
        return "-"
    return f"{interval.cell()} on {_count(tasks, 'task')}, {_count(trials, 'trial')}"


def _count(number: int, what: str) -> str:
    return f"{number} {what}" + ("" if number == 1 else "s")


def over_rerun(interval: Interval | None, tasks: int) -> str:
    """A paired difference with the rerun and the tasks behind it ('-': no rerun)."""
    return "-" if interval is None else f"{interval.cell()} on {_count(tasks, 'task')}"


def markdown(report: EvalReport) -> str:
    level = f"{report.options.confidence:.0%}"
    lines = [
        f"| suite | method | tasks | trials | success rate | Gain ({level} CI) | "
        f"Regression ({level} CI) | Gain - {report.options.rerun} Gain | "
        f"against the {report.options.rerun} band |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.results:
        lines.append(
            f"| {r.suite} | {r.method} | {r.tasks} | {r.trials} | {r.success_rate.cell()} "
            f"| {_with_trials(r.gain, r.gain_trials, r.gain_tasks)} "
            f"| {_with_trials(r.regression, r.regression_trials, r.regression_tasks)} "
            f"| {over_rerun(r.gain_over_rerun, r.gain_over_rerun_tasks)} | "
            f"{_role(r, report)} |"
        )
    return "\n".join(lines) + "\n"


def _flat(result: MethodResult, report: EvalReport) -> dict[str, Any]:
    row: dict[str, Any] = {"suite": result.suite, "method": result.method}
    row.update(tasks=result.tasks, trials=result.trials)
    for name in ("success_rate", "mean_score", "gain", "regression"):
        interval: Interval | None = getattr(result, name)
        row[name] = interval.value if interval else None
        row[f"{name}_low"] = interval.low if interval else None
        row[f"{name}_high"] = interval.high if interval else None
    for name in ("gain_over_rerun", "regression_over_rerun"):
        over: Interval | None = getattr(result, name)
        row[name] = over.value if over else None
        row[f"{name}_low"] = over.low if over else None
        row[f"{name}_high"] = over.high if over else None
        row[f"{name}_tasks"] = getattr(result, f"{name}_tasks")
    row["min_tasks"] = result.min_tasks
    row.update(
        gain_tasks=result.gain_tasks,
        gain_trials=result.gain_trials,
        regression_tasks=result.regression_tasks,
        regression_trials=result.regression_trials,
        gain_beats_noise=result.gain_beats_noise,
        regression_beyond_noise=result.regression_beyond_noise,
        regression_below_noise=result.regression_below_noise,
        verdict=_role(result, report),
    )
    return row


def as_json(report: EvalReport) -> str:
    data = {"results": [_flat(r, report) for r in report.results], "warnings": report.warnings}
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()


def as_csv(report: EvalReport) -> str:
    rows = [_flat(r, report) for r in report.results]
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def plot(report: EvalReport, path: Path) -> None:
    """Gain and Regression per method with intervals, the rerun band shaded; a panel a suite."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise WikitraceError("--plot needs matplotlib: pip install 'wikitrace[plot]'") from None
    rerun = report.options.rerun
    suites = sorted({r.suite for r in report.results} - {AVERAGE})
    if any(r.suite == AVERAGE for r in report.results):
        suites.append(AVERAGE)
    figure, axes = plt.subplots(
        1, len(suites), figsize=(4.5 * len(suites), 4), squeeze=False, sharey=True
    )
    for axis, suite in zip(axes[0], suites, strict=True):
        results = [r for r in report.results if r.suite == suite]
        band = next((r for r in results if r.method == rerun), None)
        shown = [r for r in results if r.method not in (rerun, report.options.baseline)]
        for name, colour, offset in (("gain", "tab:green", -0.12), ("regression", "tab:red", 0.12)):
            if band is not None:
                interval = getattr(band, name)
                if interval.low is not None:
                    axis.axhspan(interval.low, interval.high, color=colour, alpha=0.15)
            for x, result in enumerate(shown):
                interval = getattr(result, name)
                if interval.value is None:
                    continue
                low = interval.value - (
                    interval.low if interval.low is not None else interval.value
                )
                high = (
                    interval.high if interval.high is not None else interval.value
                ) - interval.value
                axis.errorbar(
                    x + offset,
                    interval.value,
                    yerr=[[low], [high]],
                    fmt="o",
                    color=colour,
                    capsize=4,
                    label=name.capitalize() if x == 0 else None,
                )
        axis.set_xticks(range(len(shown)), [r.method for r in shown], rotation=20)
        axis.set_title(suite)
        axis.set_ylim(0, 1)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share of trials")
    axes[0][0].legend(loc="upper left")
    figure.suptitle(f"Gain and Regression (shaded: the {rerun} band)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
