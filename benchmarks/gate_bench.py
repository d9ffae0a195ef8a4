"""How often the gate's real decision code commits lessons whose true effects are known.

Each scenario is a lesson with a true transfer gain G on its targets (net share of target pairs
it improves), a true falsification failure rate P_fail (it is cited where it should not apply)
and a true regression damage D_reg (share of solved pairs it breaks). Probe pairs are drawn
from those rates (with run-to-run outcome noise on each side, independently, when asked) and
fed to `wikitrace.control.sequential.decide`, the loop `wikitrace gate` runs, or to the
published rule (`control.figures.gate_figures`, estimates on 8 / 16 / 16 probes) for contrast.
Monitoring's anytime test is simulated the same way.

    python benchmarks/gate_bench.py              # 2,000 lessons a scenario
    python benchmarks/gate_bench.py --reps 300   # quicker

It prints, for each scenario, the share committed with its 95% interval and the agent runs a
decision took (median and 90th percentile), then whether each target of issue 38 is met.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from wikitrace.control import stats
from wikitrace.control.figures import Thresholds, gate_figures
from wikitrace.control.gate_sequential import NARROWED_SHARE
from wikitrace.control.probes import Probe
from wikitrace.control.sequential import (
    Pair,
    Rates,
    Schedule,
    Watch,
    simulate,
    simulated_pair,
)


@dataclass(frozen=True)
class Scenario:
    name: str
    gain: float
    p_fail: float
    d_reg: float
    goal: str
    """commit>=X or admit<=X."""
    narrowed: bool = False
    """Gets a second, unchanged try (as after narrowing that changed nothing)."""


SCENARIOS = (
    Scenario("helpful-strong", 0.34, 0.05, 0.02, "commit>=0.95"),
    Scenario("helpful-modest", 0.20, 0.10, 0.05, "commit>=0.80"),
    Scenario("harmful D_reg .40", 0.34, 0.05, 0.40, "admit<=0.02"),
    Scenario("harmful D_reg .50", 0.34, 0.05, 0.50, "admit<=0.02"),
    Scenario("harmful P_fail .40", 0.34, 0.40, 0.02, "admit<=0.02"),
    Scenario("harmful P_fail .50", 0.34, 0.50, 0.02, "admit<=0.02"),
    Scenario("harmful D_reg .40, narrowed", 0.34, 0.05, 0.40, "admit<=0.02", narrowed=True),
    Scenario("harmful P_fail .40, narrowed", 0.34, 0.40, 0.02, "admit<=0.02", narrowed=True),
    Scenario("useless", 0.0, 0.05, 0.02, "admit<=0"),
    Scenario("at the limits (D_reg .30)", 0.34, 0.05, 0.30, "admit<=alpha"),
    Scenario("at the limits (P_fail .30)", 0.34, 0.30, 0.02, "admit<=alpha"),
)


def draw(rng: random.Random, s: Scenario, kind: str, noise: float) -> Pair:
    return simulated_pair(rng, kind, s.gain, s.p_fail, s.d_reg, noise)


def sequential(rng: random.Random, s: Scenario, rates: Rates, schedule: Schedule, noise: float):
    truth = (s.gain, s.p_fail, s.d_reg)
    first = simulate(rng, truth, rates, schedule, noise=noise)
    if first.verdict == "committed" or not s.narrowed:
        return first.verdict == "committed", first.runs
    # As the gate does after narrowing: a second test at a quarter of alpha.
    second = simulate(rng, truth, rates, schedule, noise=noise, scale=NARROWED_SHARE)
    return second.verdict == "committed", first.runs + second.runs


def published(rng: random.Random, s: Scenario, noise: float) -> tuple[bool, int]:
    """The method's rule: estimates on 8 target, 16 falsification, 16 regression probes."""
    counts = {"target": 8, "falsify": 16, "regress": 16}
    probes: list[Probe] = []
    pairs = {}
    cited = {}
    for kind, n in counts.items():
        for i in range(n):
            pair = draw(rng, s, kind, noise)
            probes.append(Probe(f"{kind}{i}", kind, ""))  # type: ignore[arg-type]
            pairs[(f"{kind}{i}", 0)] = (float(pair.without), float(pair.with_lesson), pair.without)
            if pair.cited is not None:
                cited[(f"{kind}{i}", 0)] = pair.cited
    figures = gate_figures(probes, pairs, Thresholds(rule="estimates"), cited)
    return figures.passes, 2 * sum(counts.values())


def interval(k: int, n: int) -> tuple[float, float]:
    """Exact (Clopper-Pearson) 95% interval, from the gate's own binomial bounds."""
    return stats.lower(k, n, 0.975), stats.upper(k, n, 0.975)


def met(goal: str, rate: float, alpha: float) -> bool:
    if goal.startswith("commit>="):
        return rate >= float(goal.split(">=")[1])
    limit = goal.split("<=")[1]
    return rate <= (alpha if limit == "alpha" else float(limit))


def gate_table(reps: int, noise: float, seed: int) -> tuple[bool, list[int]]:
    rates, schedule = Rates(), Schedule()
    print(f"\n## The gate, {reps} lessons a scenario, outcome noise {noise:g} on each side")
    print(
        f"sequential: alpha {rates.alpha:g}, alpha_miss {rates.alpha_miss:g}, "
        f"eta {rates.eta:g}, delta {rates.delta:g}, beta {rates.beta:g}, "
        f"{schedule.per_round} target and falsification pairs a round "
        f"({schedule.round_of({'regress': True})['regress']} regression), "
        f"at most {schedule.max_runs} runs"
    )
    header = (
        f"{'scenario':32} {'G':>5} {'P_fail':>6} {'D_reg':>5} | {'committed':>22} "
        f"{'runs med':>8} {'p90':>4} | {'published':>9} | goal"
    )
    print(header)
    ok = True
    all_runs: list[int] = []
    for s in SCENARIOS:
        rng = random.Random(f"{seed}:{s.name}:{noise}")
        results = [sequential(rng, s, rates, schedule, noise) for _ in range(reps)]
        commits = sum(c for c, _ in results)
        runs = sorted(r for _, r in results)
        all_runs.extend(runs)
        rate = commits / reps
        low, high = interval(commits, reps)
        paper = [published(rng, s, noise) for _ in range(min(reps, 2000))]
        paper_first = sum(c for c, _ in paper) / len(paper)
        if s.narrowed:  # a second, unchanged try under the published rule too
            again = [published(rng, s, noise)[0] for _ in range(len(paper))]
            paper_first = sum(a or b for (a, _), b in zip(paper, again, strict=True)) / len(paper)
        good = met(s.goal, rate, rates.alpha)
        ok &= good
        p90 = runs[int(0.9 * (len(runs) - 1))]
        print(
            f"{s.name:32} {s.gain:5.2f} {s.p_fail:6.2f} {s.d_reg:5.2f} | "
            f"{rate:6.3f} [{low:.3f}, {high:.3f}] {statistics.median(runs):8.0f} {p90:4d} | "
            f"{paper_first:9.3f} | {s.goal} {'met' if good else 'NOT MET'}"
        )
    median = statistics.median(all_runs)
    print(
        f"median agent runs a decided lesson, all scenarios: {median:.0f} (goal <= 48: "
        f"{'met' if median <= 48 else 'NOT MET'})"
    )
    return ok and median <= 48, all_runs


def monitor_table(reps: int, seed: int) -> bool:
    """Checked after every episode for 100 episodes: how often a lesson is retired."""
    print(f"\n## Monitoring, {reps} lessons a case, checked after each of 100 episodes")
    ok = True
    cases = (
        ("violated at the threshold (0.30)", 0.30, "retire<=0.05"),
        ("harmless (violated 0.10)", 0.10, "retire<=0.05"),
        ("violated half the time", 0.50, "retire>=0.95"),
    )
    for name, rate, goal in cases:
        rng = random.Random(f"{seed}:{name}")
        retired = 0
        when = []
        for _ in range(reps):
            watch = Watch(max_violation_rate=0.3)
            for episode in range(1, 101):
                watch.observe(rng.random() < rate)
                if watch.retire():
                    retired += 1
                    when.append(episode)
                    break
        share = retired / reps
        good = share <= float(goal[8:]) if goal.startswith("retire<=") else share >= float(goal[8:])
        ok &= good
        median = statistics.median(when) if when else float("nan")
        print(
            f"{name:36} retired {share:6.3f} (median at episode {median:.0f}) | {goal} "
            f"{'met' if good else 'NOT MET'}"
        )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    ok, _ = gate_table(args.reps, 0.0, args.seed)
    noisy, _ = gate_table(args.reps, 0.15, args.seed)
    watched = monitor_table(args.reps, args.seed)
    print(
        f"\n{time.perf_counter() - start:.1f} s; every target met without noise: "
        f"{'yes' if ok else 'no'}; with 0.15 noise: {'yes' if noisy else 'no'}; monitoring: "
        f"{'yes' if watched else 'no'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
