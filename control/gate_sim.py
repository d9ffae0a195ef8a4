"""The sequential gate on simulated lessons whose true effects are known, task by task.

A simulated lesson meets tasks drawn from a population; each task has its own fixed nature
(solved without the lesson or not; helped, broken or left alone by it; cited where it should
not apply or not), as real tasks do: a lesson always cited on some tasks is never cited on
others. Each run's outcome may then be flipped by run-to-run noise. The pairs go through the
gate's own code: `TaskDraws` (distinct tasks first, seeds second), `Sequential`, `decide`, and
`together` with `Schedule.for_evidence` across several lessons (`gate --dry-run`,
`benchmarks/gate_bench.py`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from .probes import TaskDraws
from .sequential import (
    NARROWED_SHARE,
    Outcome,
    Pair,
    Rates,
    Schedule,
    Sequential,
    decide,
    together,
)

SOLVED = {"target": 0.2, "falsify": 0.7, "regress": 0.85}
"""Chance a task is solved without the lesson, by kind, in the simulations."""


@dataclass(frozen=True)
class Truth:
    """A lesson's true effects, as shares of the tasks of each kind."""

    gain: float
    """Net gain on its targets: tasks it turns from failed to solved, minus those it breaks."""
    p_fail: float
    """Falsification tasks it is cited on (where it should not apply)."""
    d_reg: float
    """Solved regression tasks it breaks."""
    d_falsify: float | None = None
    """Solved falsification tasks it breaks (None: d_reg)."""
    hurt: float | None = None
    """Solved targets it breaks (None: d_reg)."""
    target_solved: float = SOLVED["target"]

    def breaks(self, kind: str) -> float:
        if kind == "target":
            return self.d_reg if self.hurt is None else self.hurt
        if kind == "falsify" and self.d_falsify is not None:
            return self.d_falsify
        return self.d_reg

    def solved(self, kind: str) -> float:
        return self.target_solved if kind == "target" else SOLVED[kind]

    def fixes(self) -> float:
        """Share of failed targets it turns to solved."""
        lost = self.target_solved * self.breaks("target")
        return min(1.0, max(0.0, (self.gain + lost) / (1 - self.target_solved)))


@dataclass(frozen=True)
class World:
    """How the simulated tasks behave."""

    fixed: bool = True
    """Each task's nature is fixed (False: drawn afresh for every pair, as if every pair
    were a new task)."""
    noise: float = 0.0
    """Chance each run's outcome is flipped, independently."""
    tasks: int = 64
    """Probe tasks of each kind a lesson's test draws from."""


@dataclass(frozen=True)
class Task:
    name: str
    solved: bool
    with_lesson: bool
    cited: bool


def names(kind: str, n: int) -> list[str]:
    return [f"{kind}{i}" for i in range(n)]


def draw_task(rng: random.Random, truth: Truth, kind: str, name: str) -> Task:
    solved = rng.random() < truth.solved(kind)
    if solved:
        with_lesson = rng.random() >= truth.breaks(kind)
    else:
        with_lesson = kind == "target" and rng.random() < truth.fixes()
    cited = kind == "falsify" and rng.random() < truth.p_fail
    return Task(name, solved, with_lesson, cited)


@dataclass
class SimulatedLesson:
    """One lesson's tests and the tasks its pairs come from."""

    truth: Truth
    world: World
    rng: random.Random
    tests: Sequential
    runs: int = 0
    singles: list[Pair] = field(default_factory=list)
    """Falsification runs with the lesson alone, not yet run without it."""

    def __post_init__(self) -> None:
        n = self.world.tasks
        self.pool: dict[str, dict[Hashable, Task]] = {
            kind: {name: draw_task(self.rng, self.truth, kind, name) for name in names(kind, n)}
            for kind in ("target", "falsify", "regress")
        }
        self.draws = {kind: TaskDraws(list(tasks), self.rng) for kind, tasks in self.pool.items()}

    def pair(self, kind: str, base: bool) -> Pair:
        if base and kind == "falsify" and self.singles:  # its run without the lesson now
            single = self.singles.pop(0)
            task = self.pool[kind][single.task]
            solved = task.solved != (self.rng.random() < self.world.noise)
            return dataclasses.replace(single, without=solved, completed=True)
        name, _ = self.draws[kind].next()
        task = self.pool[kind][name]
        if not self.world.fixed:
            task = draw_task(self.rng, self.truth, kind, task.name)
            self.pool[kind][name] = task
        noise = self.world.noise
        solved = task.solved != (self.rng.random() < noise)
        with_lesson = task.with_lesson != (self.rng.random() < noise)
        cited = task.cited if kind == "falsify" else None
        found = Pair(kind, solved if base else None, with_lesson, cited, task=name)
        if not base:
            self.singles.append(found)
        return found

    def sample(self, wanted: dict[str, int]) -> list[Pair]:
        pairs = []
        for kind, count in wanted.items():
            base = self.tests.needs_base(kind)
            pairs += [self.pair(kind, base) for _ in range(count)]
        return pairs

    def go_on(self, schedule: Schedule) -> Outcome:
        outcome = decide(self.tests, self.sample, schedule, spent=self.runs)
        self.runs = outcome.runs
        return outcome


def lesson(
    rng: random.Random, truth: Truth, rates: Rates, world: World, scale: float = 1.0
) -> SimulatedLesson:
    return SimulatedLesson(truth, world, rng, Sequential(rates, scale=scale))


def simulate(
    rng: random.Random,
    truth: Truth,
    rates: Rates,
    schedule: Schedule,
    world: World = World(),
    *,
    narrowed: bool = False,
) -> tuple[bool, int]:
    """One lesson through `decide`, the loop the gate runs: (committed, agent runs). With
    `narrowed`, a lesson that fails gets a second, unchanged try on new tasks at
    NARROWED_SHARE of alpha, as after a narrowing that changed nothing."""
    first = lesson(rng, truth, rates, world)
    verdict = first.go_on(schedule).verdict
    if verdict == "committed" or not narrowed:
        return verdict == "committed", first.runs
    second = lesson(rng, truth, rates, world, NARROWED_SHARE)
    verdict = second.go_on(schedule).verdict
    return verdict == "committed", first.runs + second.runs


def simulate_call(
    rng: random.Random,
    truths: Sequence[Truth],
    rates: Rates,
    schedule: Schedule,
    world: World = World(),
) -> list[tuple[bool, int]]:
    """Several lessons in one gate call, as the gate runs them: each decided alone, then e-BH
    across them (`together`), a lesson it asks for more evidence going on; each with the
    budget `Schedule.for_evidence` gives for the most evidence e-BH may ask (m / alpha).
    (committed, agent runs) for each."""
    budget = schedule.for_evidence(1 / len(truths), rates.alpha)
    lessons = [lesson(rng, truth, rates, world) for truth in truths]
    committed = [one.go_on(budget).verdict == "committed" for one in lessons]

    def go_on(i: int) -> bool:
        return lessons[i].go_on(budget).verdict == "committed"

    together([one.tests for one in lessons], committed, go_on, rates.alpha)
    return [(c, one.runs) for c, one in zip(committed, lessons, strict=True)]


def dry_run_text(rates: Rates, schedule: Schedule, reps: int = 400) -> str:
    """What the sequential gate does with these settings, by simulation (`gate --dry-run`)."""
    rng = random.Random(0)
    grown = schedule.through_noise(rates.flip_rate)
    # noise grows every lesson's runs by about the budget's factor: fewer lessons a line keep
    # the simulation's time near the noise-free one's
    reps = max(50, reps * schedule.max_runs // grown.max_runs)
    schedule = grown
    world = World(tasks=max(8, schedule.max_runs // 2), noise=rates.flip_rate)
    shares: list[float] = []

    def run(truth: Truth) -> str:
        outcomes = [simulate(rng, truth, rates, schedule, world) for _ in range(reps)]
        runs = sorted(r for _, r in outcomes)
        share = sum(c for c, _ in outcomes) / reps
        shares.append(share)
        return (
            f"{truth.gain:7.2f} {truth.p_fail:6.2f} {truth.d_reg:5.2f}  {share:9.3f}  "
            f"{runs[len(runs) // 2]:11d}"
        )

    low = (rates.delta / 3, rates.beta / 3)
    lines = [
        f"sequential gate: alpha {rates.alpha:g}, alpha_miss {rates.alpha_miss:g}, eta "
        f"{rates.eta:g}, delta {rates.delta:g}, beta {rates.beta:g}, at most "
        f"{schedule.max_runs} agent runs a lesson ({schedule.per_round} pairs of each kind a "
        f"round); simulated, {reps} lessons a line, each meeting {world.tasks} tasks a "
        f"kind whose effects are fixed per task (solved without the lesson: targets "
        f"{SOLVED['target']:g}, falsification {SOLVED['falsify']:g}, regression "
        f"{SOLVED['regress']:g}; "
        + (f"outcomes flipped at {rates.flip_rate:g})" if rates.flip_rate else "no outcome noise)"),
        "",
        f"{'true G':>7} {'P_fail':>6} {'D_reg':>5}  {'committed':>9}  {'median runs':>11}",
    ]
    smallest = None
    for step in range(1, 13):
        gain = step * 0.05
        lines.append(run(Truth(gain, *low)))
        if shares[-1] >= 0.8 and smallest is None:
            smallest = gain
        if shares[-1] >= 0.95:
            break
    for truth in (
        Truth(0.34, rates.delta, low[1]),
        Truth(0.34, low[0], rates.beta),
        Truth(0.34, rates.delta + 0.1, low[1]),
        Truth(0.34, low[0], rates.beta + 0.1),
        Truth(rates.eta, *low),
        Truth(0.0, *low),
    ):
        lines.append(run(truth))
    lines.append("")
    if smallest is None:
        lines.append("no gain up to 0.60 is committed 80% of the time: raise --max-runs")
    else:
        lines.append(
            f"smallest true G committed at least 80% of the time (P_fail and D_reg a third of "
            f"their limits): {smallest:.2f}"
        )
    lines.append(
        f"guaranteed whatever the agent, over the tasks the probes are drawn from: P_fail >= "
        f"{rates.delta:g}, D_reg >= {rates.beta:g} on falsification or regression probes, or a "
        f"net gain of at most {rates.eta:g} committed at most {rates.alpha:g} of the time (a "
        "quarter of that again when narrowed)"
        + (
            f"; the rates noise-free, read through outcomes flipped at {rates.flip_rate:g} "
            "(D_reg's and P_fail's from outcomes hold if the agent flips no more often than "
            "that, the gain's if no less often)"
            if rates.flip_rate
            else "; the rates as the outcomes show them"
        )
    )
    return "\n".join(lines)
