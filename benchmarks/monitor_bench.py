"""How often `wikitrace monitor` retires a lesson whose true violation rate is known.

Each simulated lesson is cited on a stream of episodes, checked after every one (as running
`monitor` after each episode would), through the code `monitor` runs: `BaseRates.failure`
picks each episode's base failure rate and `control.sequential.Watch` is the anytime test
(`--max-violation-rate` 0.3, `--confidence` 0.95, `--min-judged` 5). Episodes fall on new tasks,
the normal case after deployment: a pool of 200 tasks the corpus never ran, each with its own
chance of failing without the lesson (drawn once per task from a Beta distribution with the
case's mean: effects fixed per task). The corpus holds `--type-runs` runs of the lesson's task
type (drawn from the same population) for the task-type base rate. Cases:

- harmless: the lesson changes nothing; episodes fail as the task does without it;
- harmful: on top of the task's own failures, the lesson breaks half the episodes the task
  would have solved (failure 0.4 -> 0.7): violated half the time beyond the base;
- checked: the report's own check judges the lesson (no base needed), violated at 0.3 (the
  limit) or 0.5.

Printed: the share retired within 100 and within 1,000 episodes (Wilson's 95% interval), and
the median episode of retirement, with issue 52's target where it has one; the checked cases
also exactly, over every path of violations (`exactly`). For each base: none (nothing known of
the new tasks nor of the lesson's task type: `monitor` judges no such episode, so the lesson is
kept; before issue 52 every failure counted in full), the task type's `--type-runs` corpus runs
at their upper bound, and control episodes: one of each task (pooled over all, at the upper
bound) or five of each (each task's own rate).

    python benchmarks/monitor_bench.py               # 1,000 lessons a case
    python benchmarks/monitor_bench.py --reps 200    # quicker
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from wikitrace.control.monitor import BaseRates, MonitorOptions
from wikitrace.control.sequential import Watch
from wikitrace.control.stats import wilson
from wikitrace.corpus_schema.tasks import TaskKey


@dataclass(frozen=True)
class Case:
    name: str
    base: float
    """Mean chance a task fails without the lesson."""
    harm: float
    """Share of the episodes the task would have solved that the lesson breaks."""
    checked: float | None = None
    """The report's own check judges each episode: violated with this chance."""
    goal: str = ""
    """retire<=X within N or retire>=X within N (issue 52's targets), or empty: reported."""

    def met(self, early: float, late: float) -> str:
        if not self.goal:
            return ""
        rule, _, within = self.goal.split()
        share = early if within == "100" else late
        limit = float(rule[len("retire<=") :])
        good = share <= limit if rule.startswith("retire<=") else share >= limit
        return f"{self.goal}: {'met' if good else 'NOT MET'}"


CASES = (
    Case("harmless, tasks fail 0.4 anyway", 0.4, 0.0, goal="retire<=0.05 within 1000"),
    Case("harmless, tasks fail 0.7 anyway", 0.7, 0.0, goal="retire<=0.05 within 1000"),
    Case("harmful, 0.4 -> 0.7", 0.4, 0.5),
    Case("checked, violated at 0.3", 0.0, 0.0, checked=0.3, goal="retire<=0.05 within 1000"),
    Case("checked, violated half the time", 0.0, 0.0, checked=0.5, goal="retire>=0.95 within 100"),
)
BASES = ("none", "task type", "controls 1", "controls 5")
"""none: nothing known of the new tasks; task type: the corpus's runs of the lesson's type;
controls N: N control episodes of each of the 200 tasks (1: pooled, 5: each task's own)."""
CONCENTRATION = 6.0
"""Beta(mean * c, (1 - mean) * c): tasks differ, a task's chance is fixed."""


def task_chance(rng: random.Random, mean: float) -> float:
    if mean <= 0.0:
        return 0.0
    return rng.betavariate(mean * CONCENTRATION, (1 - mean) * CONCENTRATION)


def one_lesson(
    rng: random.Random, case: Case, base: str, episodes: int, type_runs: int
) -> int | None:
    """The episode the lesson is retired at, or None."""
    options = MonitorOptions()
    chances = [task_chance(rng, case.base) for _ in range(200)]
    failed = sum(rng.random() < task_chance(rng, case.base) for _ in range(type_runs))
    tally: dict[TaskKey, tuple[int, int]] = {}
    if base.startswith("controls"):
        controls = int(base.split()[1])
        for task, chance in enumerate(chances):
            lost = sum(rng.random() < chance for _ in range(controls))
            tally[TaskKey(None, str(task))] = (lost, controls)
    rates = BaseRates(
        types={"type": (failed, type_runs)} if base == "task type" else {},
        controls=tally,
        confidence=options.confidence,
    )
    watch = Watch(options.max_violation_rate, 1.0 - options.confidence)
    judged = 0
    for episode in range(1, episodes + 1):
        task = rng.randrange(len(chances))
        if case.checked is not None:
            watch.observe(rng.random() < case.checked, 0.0)
            judged += 1
        else:
            chance = chances[task]
            failure = chance + case.harm * (1 - chance)
            allowance = rates.failure(TaskKey(None, str(task)), "type")
            violated = rng.random() < failure
            if not allowance.judged:
                continue  # as `monitor` does: no base rate, not judged
            judged += 1
            watch.observe(violated, allowance.failure)
        if judged >= options.min_judged and watch.retire():
            return episode
    return None


def exactly(rate: float, within: int) -> float:
    """The chance a lesson whose report's check finds it violated with chance `rate` is retired
    within `within` episodes, over every path of violations (no simulation): with the limit
    the same for every episode, the test's wealth depends only on how many of n episodes
    violated it, each violation and each clean episode moving its log by one fixed step
    (taken from `Watch` itself)."""
    options = MonitorOptions()
    steps = []
    for violated in (True, False):
        watch = Watch(options.max_violation_rate, 1.0 - options.confidence)
        watch.observe(violated, 0.0)
        steps.append(watch.test.log_wealth)
    up, down = steps
    needed = -math.log(1.0 - options.confidence)
    alive = {0: 1.0}  # violations so far -> chance, among paths not yet retired
    retired = 0.0
    for n in range(1, within + 1):
        grown: dict[int, float] = {}
        for k, chance in alive.items():
            grown[k + 1] = grown.get(k + 1, 0.0) + chance * rate
            grown[k] = grown.get(k, 0.0) + chance * (1 - rate)
        alive = {}
        for k, chance in grown.items():
            if n >= options.min_judged and k * up + (n - k) * down >= needed:
                retired += chance
            else:
                alive[k] = chance
    return retired


def _rate(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k / n:6.3f} [{low:.3f}, {high:.3f}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--type-runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(
        f"{args.reps} lessons a case, checked after each of {args.episodes} episodes on new "
        f"tasks; {args.type_runs} corpus runs of the lesson's task type"
    )
    print(
        f"{'case':34} {'base':10} {'by 100 [Wilson 95%]':>22} {'by 1000 [Wilson 95%]':>22} "
        f"{'median':>6}  target"
    )
    for case in CASES:
        for base in BASES if case.checked is None else ("checked",):
            rng = random.Random(f"{args.seed}:{case.name}:{base}")
            when = [
                one_lesson(rng, case, base, args.episodes, args.type_runs) for _ in range(args.reps)
            ]
            retired = [w for w in when if w is not None]
            by_100 = sum(w <= 100 for w in retired)
            early, late = by_100 / args.reps, len(retired) / args.reps
            median = statistics.median(retired) if retired else float("nan")
            print(
                f"{case.name:34} {base:10} {_rate(by_100, args.reps)} "
                f"{_rate(len(retired), args.reps)} {median:6.0f}  {case.met(early, late)}"
            )
    for case in CASES:
        if case.checked is not None:
            early, late = exactly(case.checked, 100), exactly(case.checked, args.episodes)
            print(
                f"{case.name:34} {'exactly':10} {early:22.4f} {late:22.4f} {'':6}  "
                f"{case.met(early, late)}"
            )
    print(
        f"\n{time.process_time():.1f} s CPU ({time.perf_counter() - started:.0f} s). With no "
        "base an episode is not judged, so nothing is retired on outcomes alone, harmful or "
        "not: give control episodes (--controls) or checks"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
