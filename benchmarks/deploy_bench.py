"""How often `wikitrace update` deploys a candidate memory whose true effect is known.

A comparison runs the agent on 16 tasks (the defaults: 4 fresh, 4 boundary, 8 coverage) with
the current and the candidate memory on the same seeds, and the current memory once more (the
rerun band). Each task has its own chance of being solved with the current memory (drawn
uniformly from 0.1 to 0.9); the candidate's effect is fixed per task (it helps: the chance
goes up by the scenario's lift; it hurts: down). Three harnesses:

- `fresh`: every run is a fresh draw, whatever its seed (a model sampled at temperature > 0);
- `seeded`: the seed fixes the outcome (a run succeeds when the seed's uniform number for the
  task is below its chance: the same seed with a better memory can only do better);
- `seeded, text`: the seed fixes the outcome for a given memory, but any change to the memory's
  text draws anew (a model at temperature 0 whose trajectory any changed word alters).

Outcomes go through the decision code `update` runs (`control.update.net_gain`, `rerun_band`,
`deploys`, `own_band`). Printed per harness and scenario: how often the candidate is
deployed with the rerun band on the same seeds (what `update` does: where the rerun moves no
outcome and the candidate did some task worse, its gain must pass its own band), on other
seeds (the rule before, with the same fallback, which a rerun on other seeds seldom
triggers), and under the plain higher-mean rule.

    python benchmarks/deploy_bench.py [--reps 4000] [--tasks 16] [--trials 1 3]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass

from wikitrace.control.update import deploys, net_gain, own_band, rerun_band
from wikitrace.corpus_schema.ledger import TaskResult


@dataclass(frozen=True)
class Scenario:
    name: str
    helps: int
    """Tasks (of the first ones) the candidate helps by `lift`."""
    hurts: int
    lift: float


def scenarios(tasks: int) -> tuple[Scenario, ...]:
    return (
        Scenario("no effect", 0, 0, 0.0),
        Scenario("+0.10 on every task", tasks, 0, 0.10),
        Scenario("+0.6 on 4 tasks", 4, 0, 0.6),
        Scenario("+0.6 on 8 tasks", 8, 0, 0.6),
        Scenario("+0.6 on 4, -0.6 on 4", 4, 4, 0.6),
        Scenario("-0.6 on 2 tasks", 0, 2, 0.6),
        Scenario("-0.6 on 4 tasks", 0, 4, 0.6),
    )


HARNESSES = ("fresh", "seeded", "seeded, text")

Draw = Callable[[int, int, str], float]
"""(task, seed, memory) -> the uniform number the run's outcome is read from."""


def harness_draw(rng: random.Random, harness: str) -> Draw:
    fixed: dict[tuple[int, int, str], float] = {}

    def draw(task: int, seed: int, memory: str) -> float:
        if harness == "fresh":
            return rng.random()
        key = (task, seed, memory if harness == "seeded, text" else "")
        if key not in fixed:
            fixed[key] = rng.random()
        return fixed[key]

    return draw


def compare(
    rng: random.Random, harness: str, scenario: Scenario, tasks: int, trials: int, same_seeds: bool
) -> list[TaskResult]:
    draw = harness_draw(rng, harness)
    seeds = list(range(trials))
    rerun_seeds = seeds if same_seeds else [trials + s for s in seeds]
    results = []
    for index in range(tasks):
        chance = rng.uniform(0.1, 0.9)
        shift = (
            scenario.lift
            if index < scenario.helps
            else -scenario.lift
            if index < scenario.helps + scenario.hurts
            else 0.0
        )
        changed = min(1.0, max(0.0, chance + shift))

        def mean(p: float, memory: str, on: list[int], task: int = index) -> float:
            return sum(draw(task, seed, memory) < p for seed in on) / len(on)

        results.append(
            TaskResult(
                task_id=f"t{index}",
                group="coverage",
                old_runs=[],
                new_runs=[],
                old=mean(chance, "old", seeds),
                new=mean(changed, "new", seeds),
                compared=True,
                rerun=mean(chance, "old", rerun_seeds),
            )
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--trials", type=int, nargs="+", default=[1, 3])
    args = parser.parse_args()
    rng = random.Random(11)
    print(
        f"{args.reps} comparisons a case, {args.tasks} tasks; a task's chance with the current "
        "memory uniform in [0.1, 0.9], moved per task by the scenario's lift"
    )
    print(
        f"{'harness':13} {'trials':>6} {'scenario':24} {'same seeds':>10} {'other seeds':>11} "
        f"{'higher mean':>11}"
    )
    for harness in HARNESSES:
        for trials in args.trials:
            for scenario in scenarios(args.tasks):
                same = other = plain = 0
                for _ in range(args.reps):
                    paired = compare(rng, harness, scenario, args.tasks, trials, True)
                    gain = net_gain(paired)
                    same += deploys(gain, rerun_band(paired), own_band(paired))
                    plain += deploys(gain, None)
                    apart = compare(rng, harness, scenario, args.tasks, trials, False)
                    other += deploys(net_gain(apart), rerun_band(apart), own_band(apart))
                print(
                    f"{harness:13} {trials:6} {scenario.name:24} {same / args.reps:10.3f} "
                    f"{other / args.reps:11.3f} {plain / args.reps:11.3f}"
                )


if __name__ == "__main__":
    main()
