"""Gain, Regression and success rate per method and suite, with task-level bootstrap intervals.

Per task, B is the majority outcome of its no-memory trials. Gain is the share of a method's
trials that succeed on tasks where B failed; Regression, the share that fail where B succeeded.
A second set of no-memory runs (the rerun) scored the same way gives the noise band: a method is
judged by its Gain (and Regression) minus the rerun's, paired by task (the same tasks drawn
for both in each bootstrap resample), and only when at least `min_tasks` tasks stand behind
the comparison.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.setting_fields import default

from .rows import SUCCESS_THRESHOLD, Row

AVERAGE = "average"

MIN_TASKS = 20
"""Fewest tasks behind Gain (B failed) or Regression (B succeeded), run by both the method and
the rerun, before either is judged against the rerun: with fewer the task-level bootstrap's
intervals cover less than they say (benchmarks/lift_bench.py), and a single task shows
[1.000, 1.000]."""


@dataclass
class EvalOptions:
    baseline: str = default("baseline")
    rerun: str = default("rerun")
    success_threshold: float = SUCCESS_THRESHOLD
    """A trial with only a score succeeds when score >= this."""
    resamples: int = default("resamples")
    seed: int = default("seed")
    confidence: float = 0.95
    strict: bool = False
    min_tasks: int = MIN_TASKS
    """Fewest tasks behind a paired comparison with the rerun before it is judged at all."""


@dataclass
class Interval:
    value: float | None
    low: float | None
    high: float | None

    def cell(self) -> str:
        if self.value is None:
            return "n/a"
        if self.low is None or self.high is None:
            return f"{self.value:.3f}"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass
class MethodResult:
    suite: str
    method: str
    tasks: int
    trials: int
    success_rate: Interval
    mean_score: Interval | None
    gain: Interval
    gain_tasks: int
    gain_trials: int
    regression: Interval
    regression_tasks: int
    regression_trials: int
    gain_beats_noise: bool | None = None
    """Gain minus the rerun's Gain has its interval wholly above 0 (None: no rerun, or fewer
    than `min_tasks` tasks behind it)."""
    regression_beyond_noise: bool | None = None
    """Regression minus the rerun's has its interval wholly above 0 (None as for Gain)."""
    regression_below_noise: bool | None = None
    """Regression minus the rerun's has its interval wholly below 0: it breaks less than noise
    does."""
    gain_over_rerun: Interval | None = None
    """Gain minus the rerun's Gain (the method's headline figure), paired by task: the
    interval of the difference with the same tasks drawn for both (None: no rerun)."""
    gain_over_rerun_tasks: int = 0
    """Tasks behind `gain_over_rerun`: B failed, and both the method and the rerun ran them."""
    regression_over_rerun: Interval | None = None
    """Regression minus the rerun's Regression, paired by task as Gain is."""
    regression_over_rerun_tasks: int = 0
    min_tasks: int = MIN_TASKS
    """Fewest tasks behind a comparison with the rerun before it is judged."""

    def verdict(self) -> str:
        if self.gain_over_rerun is None:
            return "no rerun band"
        if self.gain_beats_noise is None:
            behind = _tasks_count(self.gain_over_rerun_tasks)
            gain = f"Gain not judged ({behind}, fewer than {self.min_tasks})"
        else:
            gain = "Gain beats noise" if self.gain_beats_noise else "Gain within noise"
        if self.regression_beyond_noise is None:
            behind = _tasks_count(self.regression_over_rerun_tasks)
            regression = f"Regression not judged ({behind}, fewer than {self.min_tasks})"
        elif self.regression_beyond_noise:
            regression = "Regression beyond noise"
        elif self.regression_below_noise:
            regression = "Regression below noise"
        else:
            regression = "Regression within noise"
        return f"{gain}; {regression}"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict()
        return data


def _tasks_count(number: int) -> str:
    return f"{number} task" + ("" if number == 1 else "s")


@dataclass
class EvalReport:
    results: list[MethodResult]
    warnings: list[str] = field(default_factory=list)
    options: EvalOptions = field(default_factory=EvalOptions)


@dataclass
class _Tasks:
    """One method's trials in one suite, by task: successes, trials, score sums, baseline."""

    successes: NDArray[np.float64]
    trials: NDArray[np.float64]
    scores: NDArray[np.float64] | None
    baseline_success: NDArray[np.bool_]
    ids: list[str] = field(default_factory=list)
    """The task ids, in the order of the arrays."""


def _ratio(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> Any:
    with np.errstate(invalid="ignore", divide="ignore"):
        return numerator / denominator


class _Bootstrap:
    """Task-level resampling, the same resamples for every statistic of a (suite, method)."""

    CHUNK = 500
    """Resamples drawn at once: memory is a chunk x tasks matrix, whatever --resamples says."""

    def __init__(self, tasks: int, options: EvalOptions, key: str) -> None:
        self.tasks = tasks
        self.resamples = options.resamples
        self.seed = [options.seed, zlib.crc32(key.encode())]
        tail = (1 - options.confidence) / 2 * 100
        self.percentiles = (tail, 100 - tail)

    def ratios(
        self, statistics: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]
    ) -> dict[str, Any]:
        """Each statistic sum(numerator) / sum(denominator), over every resample of the tasks.

        How often each task is drawn in a resample makes a sum over tasks one matrix product;
        the resamples come a chunk at a time from one generator, so the draws do not depend
        on the chunk size."""
        if not self.tasks:
            return {name: np.full(1, np.nan) for name in statistics}
        rng = np.random.default_rng(self.seed)
        sums: dict[str, tuple[list[Any], list[Any]]] = {name: ([], []) for name in statistics}
        for start in range(0, self.resamples, self.CHUNK):
            size = min(self.CHUNK, self.resamples - start)
            draws = rng.integers(0, self.tasks, size=(size, self.tasks))
            draws += (np.arange(size) * self.tasks)[:, None]
            counts = np.bincount(draws.ravel(), minlength=size * self.tasks)
            counts = counts.reshape(size, self.tasks).astype(np.float64)
            for name, (numerator, denominator) in statistics.items():
                sums[name][0].append(counts @ numerator)
                sums[name][1].append(counts @ denominator)
        return {
            name: _ratio(np.concatenate(top), np.concatenate(bottom))
            for name, (top, bottom) in sums.items()
        }

    def interval(self, value: float | None, samples: Any) -> Interval:
        finite = samples[np.isfinite(samples)]
        if value is None or not finite.size:
            return Interval(value, None, None)
        low, high = np.percentile(finite, self.percentiles)
        return Interval(value, float(low), float(high))


def _point(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> float | None:
    total = float(denominator.sum())
    return float(numerator.sum()) / total if total else None


def _measure(
    suite: str, method: str, tasks: _Tasks, options: EvalOptions
) -> tuple[MethodResult, dict[str, Any]]:
    boot = _Bootstrap(len(tasks.trials), options, f"{suite}\0{method}")
    failed = ~tasks.baseline_success
    gain_k, gain_n = _parts(tasks, "gain")
    reg_k, reg_n = _parts(tasks, "regression")
    statistics = {
        "success_rate": (tasks.successes, tasks.trials),
        "gain": (gain_k, gain_n),
        "regression": (reg_k, reg_n),
    }
    if tasks.scores is not None:
        statistics["mean_score"] = (tasks.scores, tasks.trials)
    samples = boot.ratios(statistics)
    points = {name: _point(*pair) for name, pair in statistics.items()}
    mean_score = None
    if tasks.scores is not None:
        mean_score = boot.interval(points["mean_score"], samples["mean_score"])
    result = MethodResult(
        suite=suite,
        method=method,
        tasks=len(tasks.trials),
        trials=int(tasks.trials.sum()),
        success_rate=boot.interval(points["success_rate"], samples["success_rate"]),
        mean_score=mean_score,
        gain=boot.interval(points["gain"], samples["gain"]),
        gain_tasks=int(failed.sum()),
        gain_trials=int(gain_n.sum()),
        regression=boot.interval(points["regression"], samples["regression"]),
        regression_tasks=int(tasks.baseline_success.sum()),
        regression_trials=int(reg_n.sum()),
    )
    return result, {"points": points, "samples": samples, "boot": boot, "tasks": tasks}


def _average(
    method: str,
    per_suite: Sequence[dict[str, Any]],
    results: Sequence[MethodResult],
    options: EvalOptions,
) -> MethodResult:
    """The mean over suites of each statistic; its interval from the per-suite resamples."""
    boot: _Bootstrap = per_suite[0]["boot"]

    def mean_interval(name: str) -> Interval | None:
        points = [s["points"].get(name) for s in per_suite]
        if any(p is None for p in points):
            return Interval(None, None, None) if name != "mean_score" else None
        samples = np.mean([s["samples"][name] for s in per_suite], axis=0)
        return boot.interval(float(np.mean(points)), samples)

    success_rate = mean_interval("success_rate")
    gain = mean_interval("gain")
    regression = mean_interval("regression")
    assert success_rate is not None and gain is not None and regression is not None
    return MethodResult(
        suite=AVERAGE,
        method=method,
        tasks=sum(r.tasks for r in results),
        trials=sum(r.trials for r in results),
        success_rate=success_rate,
        mean_score=mean_interval("mean_score"),
        gain=gain,
        gain_tasks=sum(r.gain_tasks for r in results),
        gain_trials=sum(r.gain_trials for r in results),
        regression=regression,
        regression_tasks=sum(r.regression_tasks for r in results),
        regression_trials=sum(r.regression_trials for r in results),
    )


def _success_only(result: MethodResult) -> None:
    empty = Interval(None, None, None)
    result.gain, result.regression = empty, empty
    result.gain_tasks = result.gain_trials = result.regression_tasks = result.regression_trials = 0


COMPARED = ("gain", "regression")
"""What is compared with the rerun, paired by task."""


def _parts(tasks: _Tasks, name: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per task, the numerator and denominator of Gain (successes where B failed) or
    Regression (failures where B succeeded)."""
    if name == "gain":
        failed = ~tasks.baseline_success
        return np.where(failed, tasks.successes, 0.0), np.where(failed, tasks.trials, 0.0)
    solved = tasks.baseline_success
    return (
        np.where(solved, tasks.trials - tasks.successes, 0.0),
        np.where(solved, tasks.trials, 0.0),
    )


@dataclass
class _Paired:
    """A method's statistic minus the rerun's, over the tasks both ran."""

    value: float | None
    samples: Any
    """The difference in each resample, the same tasks drawn for both."""
    tasks: int
    """Tasks behind it (counted by both sides)."""


def _paired(key: str, mine: _Tasks, band: _Tasks, options: EvalOptions) -> dict[str, _Paired]:
    """Gain and Regression of `mine` minus the rerun's (`band`), paired by task: each
    resample draws the tasks both ran once, for both, so what the tasks share (how hard each
    is, how B fell on it) cancels out of the difference."""
    at_band = {task: index for index, task in enumerate(band.ids)}
    common = [(index, at_band[task]) for index, task in enumerate(mine.ids) if task in at_band]
    mine_at = np.array([m for m, _ in common], dtype=int)
    band_at = np.array([b for _, b in common], dtype=int)
    statistics: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = {}
    for name in COMPARED:
        k, n = _parts(mine, name)
        band_k, band_n = _parts(band, name)
        statistics[name] = (k[mine_at], n[mine_at])
        statistics[f"{name} band"] = (band_k[band_at], band_n[band_at])
    samples = _Bootstrap(len(common), options, f"{key}\0paired").ratios(statistics)
    found = {}
    for name in COMPARED:
        mine_point = _point(*statistics[name])
        band_point = _point(*statistics[f"{name} band"])
        value = None if mine_point is None or band_point is None else mine_point - band_point
        counted = (statistics[name][1] > 0) & (statistics[f"{name} band"][1] > 0)
        found[name] = _Paired(value, samples[name] - samples[f"{name} band"], int(counted.sum()))
    return found


def _t_quantile(level: float, freedom: int) -> float:
    """Student's t quantile (Cornish-Fisher from the normal's; within 0.001 for 7 or more
    degrees of freedom at the levels used here), without scipy at run time."""
    z = NormalDist().inv_cdf(level)
    v = float(freedom)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def expanded_tail(confidence: float, tasks: int) -> float:
    """The percentile (of 100) each tail of a bootstrap interval over `tasks` tasks is cut at:
    the expanded percentile interval (Hesterberg 2015), which widens the plain one as
    Student's t and the n / (n - 1) variance correction would, so that few tasks do not give
    intervals that cover less than they say."""
    alpha = 1 - confidence
    if tasks < 2:
        return alpha / 2 * 100
    widened = math.sqrt(tasks / (tasks - 1)) * _t_quantile(1 - alpha / 2, tasks - 1)
    return NormalDist().cdf(-widened) * 100


def _difference(paired: _Paired, options: EvalOptions) -> Interval:
    """The (expanded) percentile interval of a paired difference."""
    finite = paired.samples[np.isfinite(paired.samples)]
    if paired.value is None or not finite.size:
        return Interval(paired.value, None, None)
    tail = expanded_tail(options.confidence, paired.tasks)
    low, high = np.percentile(finite, (tail, 100 - tail))
    return Interval(paired.value, float(low), float(high))


def _against_rerun(
    report: EvalReport, details: dict[str, list[tuple[MethodResult, dict[str, Any]]]]
) -> None:
    """Each memory method's Gain and Regression minus the rerun's, paired by task, per suite
    and on average over suites (each suite resampled on its own), and whether each is beyond
    noise: judged only with at least `min_tasks` tasks behind it."""
    options = report.options
    band_tasks = {
        result.suite: detail["tasks"] for result, detail in details.get(options.rerun, [])
    }
    by_key: dict[tuple[str, str], dict[str, _Paired]] = {}
    for method, per_suite in details.items():
        if method in (options.rerun, options.baseline):
            continue
        found = []
        for result, detail in per_suite:
            band = band_tasks.get(result.suite)
            if band is None:
                continue
            key = f"{result.suite}\0{method}"
            found.append(_paired(key, detail["tasks"], band, options))
            by_key[(result.suite, method)] = found[-1]
        if len(found) == len(per_suite) > 1:
            by_key[(AVERAGE, method)] = {
                name: _Paired(
                    None
                    if any(f[name].value is None for f in found)
                    else float(np.mean([f[name].value for f in found])),
                    np.mean([f[name].samples for f in found], axis=0),
                    sum(f[name].tasks for f in found),
                )
                for name in COMPARED
            }
    for result in report.results:
        paired = by_key.get((result.suite, result.method))
        if paired is None:
            continue
        gain, regression = paired["gain"], paired["regression"]
        result.min_tasks = options.min_tasks
        result.gain_over_rerun = _difference(gain, options)
        result.gain_over_rerun_tasks = gain.tasks
        result.regression_over_rerun = _difference(regression, options)
        result.regression_over_rerun_tasks = regression.tasks
        low = result.gain_over_rerun.low
        if gain.tasks >= options.min_tasks and low is not None:
            result.gain_beats_noise = low > 0
        interval = result.regression_over_rerun
        if regression.tasks >= options.min_tasks and interval.low is not None:
            assert interval.high is not None
            result.regression_beyond_noise = interval.low > 0
            result.regression_below_noise = interval.high < 0


Trials = dict[tuple[str, str, str], dict[int, tuple[bool, float | None]]]
"""(suite, method, task) -> trial -> (succeeded, score)."""
Warn = Callable[[str], None]


def _trials(rows: Sequence[Row], options: EvalOptions, warn: Warn) -> Trials:
    """Each row's outcome by suite, method, task and trial; of a trial given twice, the first."""
    trials: Trials = defaultdict(dict)
    where: dict[tuple[str, str, str, int], str] = {}
    for item in rows:
        row = item.row
        key = (row.suite, row.method, row.task_id)
        if row.trial in trials[key]:
            warn(
                f"{item.where}: duplicate trial {row.trial} of {row.method} on task "
                f"{row.task_id} ({row.suite}); the first, at "
                f"{where[(*key, row.trial)]}, is kept"
            )
            continue
        where[(*key, row.trial)] = item.where
        success = row.succeeded(options.success_threshold)
        trials[key][row.trial] = (success, row.score)
    return trials


def _baseline(trials: Trials, suite: str, options: EvalOptions, warn: Warn) -> dict[str, bool]:
    """B per task of `suite`: whether most of the baseline's trials succeeded (a tie leaves the
    task out)."""
    baseline: dict[str, bool] = {}
    for (s, method, task), by_trial in trials.items():
        if s != suite or method != options.baseline:
            continue
        wins = sum(success for success, _ in by_trial.values())
        if wins * 2 == len(by_trial):
            warn(
                f"{suite}: task {task}: the baseline's trials tie ({wins} of "
                f"{len(by_trial)}); the task is left out"
            )
            continue
        baseline[task] = wins * 2 > len(by_trial)
    return baseline


def _tasks(
    trials: Trials,
    suite: str,
    method: str,
    baseline: dict[str, bool],
    options: EvalOptions,
    warn: Warn,
) -> _Tasks | None:
    """`method`'s trials in `suite` on the tasks B is known for; None when there are none."""
    tasks = sorted(t for (s, m, t) in trials if s == suite and m == method)
    missing = [t for t in tasks if t not in baseline]
    for task in missing:
        warn(f"{suite}: {method}: task {task} has no {options.baseline} baseline; left out")
    kept = [t for t in tasks if t in baseline]
    if not kept:
        return None
    outcomes = [list(trials[(suite, method, t)].values()) for t in kept]
    scored = all(score is not None for trial in outcomes for _, score in trial)
    return _Tasks(
        successes=np.array([sum(s for s, _ in o) for o in outcomes], dtype=float),
        trials=np.array([len(o) for o in outcomes], dtype=float),
        scores=np.array([sum(sc or 0.0 for _, sc in o) for o in outcomes]) if scored else None,
        baseline_success=np.array([baseline[t] for t in kept], dtype=bool),
        ids=kept,
    )


def _averages(
    report: EvalReport,
    details: dict[str, list[tuple[MethodResult, dict[str, Any]]]],
    methods: list[str],
    suites: int,
    warn: Warn,
) -> None:
    """Each method's average over suites, for a method measured in every one of them."""
    options = report.options
    for method in methods:
        per_suite = details.get(method, [])
        if len(per_suite) == suites and suites > 1:
            average = _average(
                method, [d for _, d in per_suite], [r for r, _ in per_suite], options
            )
            if method == options.baseline:
                _success_only(average)
            report.results.append(average)
        elif per_suite and suites > 1:
            warn(f"{method} is missing from some suites: no average over suites for it")


def evaluate(rows: Sequence[Row], options: EvalOptions) -> EvalReport:
    """All metrics for every method of every suite, and their average over suites."""
    report = EvalReport(results=[], options=options)
    warn = report.warnings.append
    trials = _trials(rows, options, warn)
    suites = sorted({suite for suite, _, _ in trials})
    # The baseline is listed for its success rate; its Gain and Regression, against the
    # majority of its own trials, would only measure that majority's bias.
    methods = sorted({method for _, method, _ in trials})
    if not any(method == options.baseline for _, method, _ in trials):
        raise InputError(
            f"no rows of the baseline method {options.baseline!r}",
            hint="name it with --baseline",
        )
    details: dict[str, list[tuple[MethodResult, dict[str, Any]]]] = defaultdict(list)
    for suite in suites:
        baseline = _baseline(trials, suite, options, warn)
        for method in methods:
            data = _tasks(trials, suite, method, baseline, options, warn)
            if data is None:
                continue
            result, detail = _measure(suite, method, data, options)
            if method == options.baseline:
                _success_only(result)
            report.results.append(result)
            details[method].append((result, detail))
    _averages(report, details, methods, len(suites), warn)
    _against_rerun(report, details)
    if options.strict and report.warnings:
        raise InputError(f"{len(report.warnings)} warnings and --strict: {report.warnings[0]}")
    return report
