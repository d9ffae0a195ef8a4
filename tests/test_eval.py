"""`wikitrace eval`: metrics checked by hand, intervals against scipy, bad rows named."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from wikitrace.cli.main import cli
from wikitrace.corpus_schema import InputError
from wikitrace.evaluation import EvalOptions, evaluate, read_rows
from wikitrace.evaluation.metrics import MIN_TASKS, Interval, _Bootstrap, expanded_tail


def rows_file(
    path: Path, outcomes: dict[tuple[str, str, str], list[Any]], key: str = "success"
) -> Path:
    lines = []
    for (suite, method, task), trials in outcomes.items():
        for trial, value in enumerate(trials):
            lines.append(
                json.dumps(
                    {"suite": suite, "method": method, "task_id": task, "trial": trial, key: value}
                )
            )
    path.write_text("\n".join(lines) + "\n")
    return path


T, F = True, False
HAND = {
    ("s", "no-memory", "a"): [F, F, T],  # B = fail
    ("s", "no-memory", "b"): [T, T, F],  # B = success
    ("s", "no-memory", "c"): [T, T, T],  # B = success
    ("s", "memory", "a"): [T, T, F],
    ("s", "memory", "b"): [F, T, T],
    ("s", "memory", "c"): [F, F, F],
}


def only(report: Any, suite: str, method: str) -> Any:
    (result,) = [r for r in report.results if r.suite == suite and r.method == method]
    return result


def test_metrics_by_hand(tmp_path: Path) -> None:
    report = evaluate(read_rows([rows_file(tmp_path / "r.jsonl", HAND)]), EvalOptions())
    result = only(report, "s", "memory")
    assert result.gain.value == pytest.approx(2 / 3)  # 2 of the 3 trials on task a succeed
    assert (result.gain_tasks, result.gain_trials) == (1, 3)
    assert result.regression.value == pytest.approx(4 / 6)  # 1 on b and 3 on c fail
    assert (result.regression_tasks, result.regression_trials) == (2, 6)
    assert result.success_rate.value == pytest.approx(4 / 9)
    assert (result.tasks, result.trials) == (3, 9)
    assert result.verdict() == "no rerun band" and report.warnings == []


def test_scores_and_the_threshold(tmp_path: Path) -> None:
    scores = {k: [1.0 if v else 0.4 for v in trials] for k, trials in HAND.items()}
    path = rows_file(tmp_path / "r.jsonl", scores, key="score")
    result = only(evaluate(read_rows([path]), EvalOptions()), "s", "memory")
    assert result.gain.value == pytest.approx(2 / 3)
    assert result.mean_score.value == pytest.approx((4 * 1.0 + 5 * 0.4) / 9)
    lenient = only(evaluate(read_rows([path]), EvalOptions(success_threshold=0.3)), "s", "memory")
    assert lenient.success_rate.value == 1.0 and lenient.gain.value is None  # no task fails


def test_csv_rows_read_the_same(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    lines = ["suite,method,task_id,trial,success"]
    for (suite, method, task), trials in HAND.items():
        lines += [f"{suite},{method},{task},{n},{str(v).lower()}" for n, v in enumerate(trials)]
    path.write_text("\n".join(lines) + "\n")
    result = only(evaluate(read_rows([path]), EvalOptions()), "s", "memory")
    assert result.gain.value == pytest.approx(2 / 3)


def random_outcomes(
    tasks: int, seed: int, suite: str = "s"
) -> dict[tuple[str, str, str], list[bool]]:
    rng = np.random.default_rng(seed)
    outcomes = {}
    for task in range(tasks):
        hard = rng.random() < 0.5
        for method, p in (
            ("no-memory", 0.2 if hard else 0.8),
            ("no-memory-rerun", 0.2 if hard else 0.8),
            ("memory", 0.5 if hard else 0.8),
        ):
            outcomes[(suite, method, f"t{task}")] = [bool(x) for x in rng.random(3) < p]
    return outcomes


def test_intervals_shrink_as_tasks_are_added(tmp_path: Path) -> None:
    widths = []
    for tasks in (50, 200, 800):
        path = rows_file(tmp_path / f"r{tasks}.jsonl", random_outcomes(tasks, seed=tasks))
        gain = only(evaluate(read_rows([path]), EvalOptions()), "s", "memory").gain
        widths.append(gain.high - gain.low)
    assert widths[0] > widths[1] > widths[2]


def test_the_bootstrap_agrees_with_scipy() -> None:
    rng = np.random.default_rng(3)
    trials = np.full(300, 3.0)
    successes = rng.binomial(3, 0.4, size=300).astype(float)
    failed = rng.random(300) < 0.5
    k, n = np.where(failed, successes, 0.0), np.where(failed, trials, 0.0)
    boot = _Bootstrap(300, EvalOptions(resamples=20_000), "scipy")
    ours = boot.interval(k.sum() / n.sum(), boot.ratios({"gain": (k, n)})["gain"])
    theirs = stats.bootstrap(
        (k, n),
        lambda k, n, axis: k.sum(axis=axis) / n.sum(axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=20_000,
        random_state=np.random.default_rng(4),
    ).confidence_interval
    assert ours.low == pytest.approx(theirs.low, abs=0.01)
    assert ours.high == pytest.approx(theirs.high, abs=0.01)


def test_the_rerun_band_and_the_average(tmp_path: Path) -> None:
    outcomes = {
        **random_outcomes(300, seed=1, suite="a"),
        **random_outcomes(300, seed=2, suite="b"),
    }
    report = evaluate(read_rows([rows_file(tmp_path / "r.jsonl", outcomes)]), EvalOptions())
    average = only(report, "average", "memory")
    a, b = only(report, "a", "memory"), only(report, "b", "memory")
    assert average.gain.value == pytest.approx((a.gain.value + b.gain.value) / 2)
    assert average.gain.high - average.gain.low < a.gain.high - a.gain.low
    band = only(report, "average", "no-memory-rerun")
    assert average.gain.low > band.gain.high and average.gain_beats_noise is True
    assert average.verdict().startswith("Gain beats noise")
    # Gain minus the rerun's Gain: the method's headline figure, per suite and on average.
    over = average.gain_over_rerun
    assert over is not None and over.value == pytest.approx(average.gain.value - band.gain.value)
    assert over.low is not None and over.high is not None and 0 < over.low < over.value < over.high
    a_band = only(report, "a", "no-memory-rerun")
    assert a.gain_over_rerun is not None
    assert a.gain_over_rerun.value == pytest.approx(a.gain.value - a_band.gain.value)
    # Its interval is wider than either Gain's: two resampled estimates, each uncertain.
    assert over.high - over.low > average.gain.high - average.gain.low
    assert band.gain_over_rerun is None
    # Seeded: the same rows give the same intervals.
    again = evaluate(read_rows([rows_file(tmp_path / "r.jsonl", outcomes)]), EvalOptions())
    assert only(again, "average", "memory").gain == average.gain


def test_a_single_task_is_never_judged_against_noise(tmp_path: Path) -> None:
    outcomes = {
        ("s", "no-memory", "a"): [F, F, F],
        ("s", "no-memory-rerun", "a"): [F, F, F],
        ("s", "memory", "a"): [T, T, T],
    }
    rows = read_rows([rows_file(tmp_path / "r.jsonl", outcomes)])
    result = only(evaluate(rows, EvalOptions()), "s", "memory")
    assert result.gain.cell() == "1.000 [1.000, 1.000]"
    assert (result.gain_over_rerun_tasks, result.regression_over_rerun_tasks) == (1, 0)
    assert result.gain_beats_noise is None and result.regression_beyond_noise is None
    assert result.verdict() == (
        f"Gain not judged (1 task, fewer than {MIN_TASKS}); "
        f"Regression not judged (0 tasks, fewer than {MIN_TASKS})"
    )
    # The same rows with the minimum at one task are judged: the minimum is what held it back.
    lenient = only(evaluate(rows, EvalOptions(min_tasks=1)), "s", "memory")
    assert lenient.gain_beats_noise is True and lenient.verdict().startswith("Gain beats noise")


def test_the_comparison_with_the_rerun_is_paired_by_task(tmp_path: Path) -> None:
    outcomes = random_outcomes(80, seed=7)
    for (suite, method, task), trials in list(outcomes.items()):
        if method == "no-memory-rerun":
            outcomes[(suite, "same-as-rerun", task)] = trials
    report = evaluate(read_rows([rows_file(tmp_path / "r.jsonl", outcomes)]), EvalOptions())
    # The same tasks drawn for both sides in every resample: nothing is left of the difference.
    same = only(report, "s", "same-as-rerun")
    assert same.gain_over_rerun == Interval(0.0, 0.0, 0.0)
    assert same.regression_over_rerun == Interval(0.0, 0.0, 0.0)
    assert same.gain_beats_noise is False and same.regression_beyond_noise is False
    memory = only(report, "s", "memory")
    assert memory.gain_over_rerun_tasks == memory.gain_tasks >= MIN_TASKS
    # Paired, the difference's interval is narrower than two Gains resampled on their own.
    band = only(report, "s", "no-memory-rerun")
    assert memory.gain_over_rerun is not None and memory.gain_over_rerun.low is not None
    paired = memory.gain_over_rerun.high - memory.gain_over_rerun.low
    unpaired = math.hypot(memory.gain.high - memory.gain.low, band.gain.high - band.gain.low)
    assert paired < unpaired


def test_paired_intervals_cover_the_population_s_truth() -> None:
    """A bounded slice of benchmarks/lift_bench.py: 60 suites of 80 tasks, memory's effect
    fixed per task (+0.3 on 30% of them); the truth from 400,000 tasks of the population."""
    from wikitrace.evaluation.rows import ResultRow, Row

    rng = np.random.default_rng(11)

    def chances(tasks: int) -> tuple[Any, Any]:
        base = rng.uniform(0.1, 0.9, tasks)
        return base, np.clip(base + np.where(rng.random(tasks) < 0.3, 0.3, 0.0), 0, 1)

    base, memory = chances(400_000)
    failed = stats.binom.cdf(1, 3, base)  # B fails: at most 1 of 3 trials succeeds
    truth = float(np.sum(failed * (memory - base)) / np.sum(failed))
    covered = beats = 0
    for suite in range(60):
        base, memory = chances(80)
        rows = []
        for method, chance in (("no-memory", base), ("no-memory-rerun", base), ("m", memory)):
            outcomes = rng.random((80, 3)) < chance[:, None]
            rows += [
                Row(
                    "sim",
                    ResultRow(
                        suite="s",
                        method=method,
                        task_id=str(task),
                        trial=trial,
                        success=bool(outcomes[task, trial]),
                    ),
                )
                for task in range(80)
                for trial in range(3)
            ]
        result = only(evaluate(rows, EvalOptions(resamples=500, seed=suite)), "s", "m")
        over = result.gain_over_rerun
        covered += over.low <= truth <= over.high
        beats += bool(result.gain_beats_noise)
    assert 0.08 < truth < 0.10  # lift_bench: 0.089
    assert 54 <= covered <= 60  # 95% intervals: 57 expected
    assert beats >= 6  # it is detected, sometimes, at 80 tasks


@pytest.mark.parametrize("tasks", [8, 20, 50, 200])
def test_the_expanded_interval_widens_as_students_t_does(tasks: int) -> None:
    widened = math.sqrt(tasks / (tasks - 1)) * stats.t.ppf(0.975, tasks - 1)
    assert expanded_tail(0.95, tasks) == pytest.approx(stats.norm.cdf(-widened) * 100, rel=0.01)


def test_bad_rows_are_named(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"suite": "s", "method": "m", "task_id": "a", "trial": 0}\n')
    with pytest.raises(
        InputError, match=r"r.jsonl:1: needs 'success' \(true or false\) or 'score'"
    ):
        read_rows([path])
    path.write_text('{"suite": "s", "method": "m", "trial": 0, "success": true}\n')
    with pytest.raises(InputError, match=r"r\.jsonl:1: field 'task_id': Field required"):
        read_rows([path])
    csv_path = tmp_path / "r.csv"
    csv_path.write_text("suite,method,task_id,trial,success\ns,m,a,0,maybe\n")
    with pytest.raises(InputError, match=r"r\.csv:2: field 'success'"):
        read_rows([csv_path])


def test_warnings_and_strict(tmp_path: Path) -> None:
    outcomes = dict(HAND)
    outcomes[("s", "memory", "d")] = [T]  # no baseline for d
    path = rows_file(tmp_path / "r.jsonl", outcomes)
    with path.open("a") as handle:  # a duplicate trial
        handle.write(
            json.dumps(
                {"suite": "s", "method": "memory", "task_id": "a", "trial": 0, "success": False}
            )
            + "\n"
        )
    report = evaluate(read_rows([path]), EvalOptions())
    assert any("task d has no no-memory baseline" in w for w in report.warnings)
    assert any("duplicate trial 0 of memory on task a" in w for w in report.warnings)
    assert only(report, "s", "memory").gain.value == pytest.approx(2 / 3)  # the first is kept
    with pytest.raises(InputError, match="2 warnings and --strict"):
        evaluate(read_rows([path]), EvalOptions(strict=True))
    with pytest.raises(InputError, match="no rows of the baseline method 'none'"):
        evaluate(read_rows([path]), EvalOptions(baseline="none"))


def test_the_command(tmp_path: Path) -> None:
    path = rows_file(tmp_path / "r.jsonl", random_outcomes(40, seed=5))
    runner = CliRunner()
    table = runner.invoke(cli, ["lift", "eval", str(path)])
    assert table.exit_code == 0
    assert table.stdout.startswith(
        "| suite | method | tasks | trials | success rate | Gain (95% CI)"
    )
    cells = [line.count(" | ") for line in table.stdout.splitlines() if not line.startswith("|---")]
    assert len(cells) == 4 and set(cells) == {8}  # the header and 3 rows, 9 columns each
    data = json.loads(runner.invoke(cli, ["lift", "eval", str(path), "--json"]).stdout)
    assert [r["method"] for r in data["results"]] == ["memory", "no-memory", "no-memory-rerun"]
    baseline = data["results"][1]
    assert baseline["gain"] is None and baseline["success_rate"] is not None
    assert baseline["verdict"] == "(the baseline: B is its majority)"
    lines = runner.invoke(cli, ["lift", "eval", str(path), "--csv"]).stdout.splitlines()
    assert lines[0].startswith("suite,method,tasks,trials,success_rate,") and len(lines) == 4
    picture = tmp_path / "eval.png"
    result = runner.invoke(cli, ["lift", "eval", str(path), "--plot", str(picture)])
    assert result.exit_code == 0 and picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
