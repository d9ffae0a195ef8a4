"""How often the gate's real decision code commits lessons whose true effects are known, task
by task.

Each scenario is a lesson whose effects belong to the task (`control.gate_sim.Truth`): on a
share of its targets it turns a failure into a success (on some it may break a success), it is
cited on a share of its falsification tasks, and it breaks a share of the solved falsification
and regression tasks; every task keeps its nature on every seed, and each run's outcome may be
flipped by noise. Each lesson meets its own probe tasks (`--tasks` a kind, drawn from the
population), and its pairs go through the gate's code: `TaskDraws` (distinct tasks first),
`Sequential`, `decide`, and for several lessons in one call `together` (e-BH) with
`Schedule.for_evidence`. Monitoring's anytime test is simulated the same way.

    python benchmarks/gate_bench.py              # 2,000 lessons a scenario
    python benchmarks/gate_bench.py --reps 300   # quicker
    python benchmarks/gate_bench.py --reps 100 --noise 0 --only "no gain" --skip tasks calls
    # one scenario; the verdict then speaks of it alone

For each scenario it prints the share committed (Wilson's 95% interval), the median agent runs
per decision (a narrowed lesson's two tests are two decisions) and per lesson, the bound for the
gate's procedure (`procedure_bound`, which the runs target of issue 52 is judged against) and
Wald's bound as first computed (`wald_bound`), each with its ratio, and whether each target of
issue 52 is met.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from wikitrace.control.figures import Thresholds, gate_figures
from wikitrace.control.gate_sim import Truth, World, lesson, simulate_call
from wikitrace.control.probes import Probe
from wikitrace.control.sequential import (
    FIRST_LOOK,
    NARROWED_SHARE,
    WORTH,
    Rates,
    Schedule,
    Watch,
)
from wikitrace.control.stats import wilson
from wikitrace.corpus_schema.tasks import TaskKey


@dataclass(frozen=True)
class Scenario:
    name: str
    truth: Truth
    goal: str
    """commit>=X or admit<=X (X may be alpha)."""
    narrowed: bool = True
    """A lesson that fails gets a second, unchanged try on new tasks (as after a narrowing
    that changed nothing) at a quarter of alpha."""


SCENARIOS = (
    Scenario("helpful-strong", Truth(0.34, 0.05, 0.02), "commit>=0.95", narrowed=False),
    Scenario("helpful-modest", Truth(0.20, 0.10, 0.05), "commit>=0.80", narrowed=False),
    Scenario("harmful D_reg .40", Truth(0.34, 0.05, 0.40), "admit<=0.02"),
    Scenario("harmful D_reg .50", Truth(0.34, 0.05, 0.50), "admit<=0.02"),
    Scenario("harmful P_fail .40", Truth(0.34, 0.40, 0.02), "admit<=0.02"),
    Scenario("harmful P_fail .50", Truth(0.34, 0.50, 0.02), "admit<=0.02"),
    Scenario("breaks .50 of solved (regress only)", Truth(0.34, 0.05, 0.5, 0.0), "admit<=0.02"),
    Scenario("breaks .40 on falsify only", Truth(0.34, 0.05, 0.02, 0.40), "admit<=0.02"),
    Scenario(
        "net zero: helps 1/5, hurts 1/5",
        Truth(0.0, 0.05, 0.02, hurt=0.5, target_solved=0.4),
        "admit<=0.05",
    ),
    Scenario("below eta: gain 0.057", Truth(0.057, 0.05, 0.02), "admit<=0.05"),
    Scenario("no gain", Truth(0.0, 0.05, 0.02), "admit<=0.05"),
    Scenario("at the limit D_reg .30", Truth(0.34, 0.05, 0.30), "admit<=alpha", narrowed=False),
    Scenario("at the limit P_fail .30", Truth(0.34, 0.30, 0.02), "admit<=alpha", narrowed=False),
    Scenario("at eta: gain 0.10", Truth(0.10, 0.05, 0.02), "admit<=alpha", narrowed=False),
)


# --- Wald's bound: the expected runs of the best sequential test of each kind ---------------


def _flip(outcome: int, noise: float) -> list[tuple[int, float]]:
    return [(outcome, 1 - noise), (1 - outcome, noise)] if noise else [(outcome, 1.0)]


def pair_law(truth: Truth, kind: str, noise: float) -> dict[tuple[int, int], float]:
    """(solved without, solved with) as observed -> probability, over tasks and noise."""
    s, b = truth.solved(kind), truth.breaks(kind)
    f = truth.fixes() if kind == "target" else 0.0
    law: dict[tuple[int, int], float] = {}
    for (base, with_it), p in (
        ((1, 0), s * b),
        ((1, 1), s * (1 - b)),
        ((0, 1), (1 - s) * f),
        ((0, 0), (1 - s) * (1 - f)),
    ):
        for seen_base, q in _flip(base, noise):
            for seen_with, r in _flip(with_it, noise):
                key = (seen_base, seen_with)
                law[key] = law.get(key, 0.0) + p * q * r
    return law


def growth(values: Sequence[tuple[float, float]], lowest: float | None = None) -> float:
    """The best growth rate of wealth betting that E[Y] > 0: the largest E log(1 + lam * Y)
    over the stakes allowed (Kelly; for a 0-or-1 outcome, the KL divergence). `lowest`: the
    least outcome the test must allow, whatever the truth (a valid test keeps its wealth
    above 0 on every outcome its null allows); None allows only what the truth can give."""
    low = min(y for y, p in values if p > 0) if lowest is None else lowest
    top = 1 / -low if low < 0 else 50.0
    best = 0.0
    for i in range(1, 400):
        lam = top * i / 400
        best = max(best, sum(p * math.log1p(lam * y) for y, p in values if p > 0))
    return best


Tests = dict[str, tuple[float, float, int]]
"""Test -> (growth to commit, growth to stop it for futility, agent runs an outcome)."""


def tests_of(truth: Truth, rates: Rates, noise: float, *, valid: bool = False) -> Tests:
    """Each test's best growth rates. With `valid`, a stake must keep the wealth above 0 on
    every outcome the test can meet (a pair better with a harmful lesson included), not only
    on those the truth gives."""
    r = rates

    def low(value: float) -> float | None:
        return value if valid else None

    eta = r.seen_margin(r.eta)
    worth = WORTH * eta
    target = pair_law(truth, "target", noise)
    x = [(float(w - b), p) for (b, w), p in target.items()]
    found = {
        "help": (
            growth([(v - eta, p) for v, p in x], low(-1 - eta)),
            growth([(worth - v, p) for v, p in x], low(worth - 1)),
            2,
        )
    }
    cited = [(1.0, truth.p_fail), (0.0, 1 - truth.p_fail)]
    found["P_fail"] = (
        growth([(r.delta - c, p) for c, p in cited], low(r.delta - 1)),
        growth([(c - r.delta / 2, p) for c, p in cited], low(-r.delta / 2)),
        1,
    )
    for kind in ("falsify", "regress"):
        law = pair_law(truth, kind, noise)
        net = [
            (float(b > w) - float(w > b), r.seen_solved(bool(b)), p) for (b, w), p in law.items()
        ]
        found[f"D_reg {kind}"] = (
            growth([(r.beta * b - z, p) for z, b, p in net], low(r.beta * (1 - r.flip_rate) - 1)),
            growth([(z - r.beta / 2 * b, p) for z, b, p in net], low(-1.0)),
            # with P_fail read first, a falsification pair adds only its run without the lesson
            1 if kind == "falsify" else 2,
        )
    return found


def wald_bound(truth: Truth, rates: Rates, noise: float, commit: bool) -> float:
    """Wald's approximate expected sample size, log(1 / alpha) over the best growth, in agent
    runs, as the bench first computed it (printed beside `procedure_bound` for comparison). A
    lesson to commit must pass every test: the sum over the tests (at alpha). A lesson to
    reject needs only its most telling futility test (at alpha_miss): the least over them."""
    tests = tests_of(truth, rates, noise)
    if commit:
        total = 0.0
        for up, _, cost in tests.values():
            total += math.log(1 / rates.alpha) / up * cost if up > 0 else math.inf
        return total
    return min(
        (math.log(1 / rates.alpha_miss) / down * cost if down > 0 else math.inf)
        for _, down, cost in tests.values()
    )


def procedure_bound(truth: Truth, rates: Rates, noise: float, commit: bool) -> float:
    """Wald's bound for the gate's procedure: what the best valid tests would take, in agent
    runs, if they knew the truth but had to run as the gate does. Three things differ from
    `wald_bound`:

    - every stake is one the test may bet whatever the truth (`tests_of(valid=True)`): no
      valid test may bet as if an outcome the truth rules out (a pair better with a harmful
      lesson) could not happen;
    - P_fail is read alone first, from falsification runs with the lesson alone (what brings
      a misfiring lesson's rejection to a few runs), until its evidence is FIRST_LOOK of the
      way to 1 / alpha in log (`Sequential.first_look`): a lesson rejected by another test
      pays for that look (FIRST_LOOK times log(1 / alpha) over P_fail's growth, one run
      each), and a lesson committed pays for the rest of P_fail's evidence in falsification
      pairs (free where D_reg on falsification probes reads that many pairs anyway);
    - a falsification outcome for D_reg costs one run (its run without the lesson) only while
      runs with the lesson read alone are left to complete; after that, a pair's two.

    To commit: P_fail's look, every other test's runs, and P_fail's rest where D_reg's pairs
    do not cover it. To reject: the least, over the futility tests, of P_fail's own (when
    P_fail is the one rejecting) or P_fail's look and that test's runs. (Until issue 52's
    fourth try the gate read P_fail alone until it was shown, and this bound assumed so:
    `_procedure_bound` with look 1 gives that one.)"""
    return _procedure_bound(truth, rates, noise, commit, FIRST_LOOK)


def _procedure_bound(truth: Truth, rates: Rates, noise: float, commit: bool, look: float) -> float:
    tests = tests_of(truth, rates, noise, valid=True)

    def runs(growth_rate: float, level: float) -> float:
        return math.log(1 / level) / growth_rate if growth_rate > 0 else math.inf

    p_fail = runs(tests["P_fail"][0], rates.alpha)
    alone = look * p_fail  # runs read alone, before the other tests start

    def cost(name: str, outcomes: float) -> float:
        if name == "D_reg falsify":
            return min(outcomes, alone) + 2 * max(0.0, outcomes - alone)
        return outcomes * tests[name][2]

    if commit:
        others = [cost(n, runs(t[0], rates.alpha)) for n, t in tests.items() if n != "P_fail"]
        falsify_pairs = max(0.0, runs(tests["D_reg falsify"][0], rates.alpha) - alone)
        rest = 2 * max(0.0, p_fail - alone - falsify_pairs)
        return alone + sum(others) + rest
    found = [runs(tests["P_fail"][1], rates.alpha_miss)]
    for name, (_, down, _) in tests.items():
        if name != "P_fail":
            found.append(alone + cost(name, runs(down, rates.alpha_miss)))
    return min(found)


# --- the tables -----------------------------------------------------------------------------


def decide_lesson(
    rng: random.Random, s: Scenario, rates: Rates, schedule: Schedule, world: World
) -> tuple[bool, list[int]]:
    """One lesson as the gate decides it: (committed, the runs of each of its tests)."""
    first = lesson(rng, s.truth, rates, world)
    if first.go_on(schedule).verdict == "committed" or not s.narrowed:
        return first.tests.verdict() == "committed", [first.runs]
    second = lesson(rng, s.truth, rates, world, NARROWED_SHARE)
    return second.go_on(schedule).verdict == "committed", [first.runs, second.runs]


def met(goal: str, rate: float, alpha: float) -> bool:
    if goal.startswith("commit>="):
        return rate >= float(goal.split(">=")[1])
    limit = goal.split("<=")[1]
    return rate <= (alpha if limit == "alpha" else float(limit))


def gate_table(
    reps: int,
    noise: float,
    seed: int,
    tasks: int,
    schedule: Schedule,
    rates: Rates,
    only: Sequence[str] = (),
) -> bool:
    schedule = schedule.through_noise(rates.flip_rate)
    tasks = tasks or schedule.max_runs // 2
    world = World(noise=noise, tasks=tasks)
    print(f"\n## The gate, {reps} lessons a scenario, outcome noise {noise:g} on each side")
    print(
        f"alpha {rates.alpha:g}, alpha_miss {rates.alpha_miss:g}, eta {rates.eta:g}, delta "
        f"{rates.delta:g}, beta {rates.beta:g}, stated flip rate {rates.flip_rate:g} (the "
        f"gate's --flip-rate); at most {schedule.max_runs} runs a test; "
        f"{tasks} probe tasks a kind, effects fixed per task; harmful, net-zero and below-eta "
        "lessons get narrowing's second try"
    )
    print(
        f"{'scenario':36} | {'committed [Wilson 95%]':22} | {'runs/decision':>13} "
        f"{'per lesson':>10} {'bound':>5} {'x':>5} {'Wald':>5} {'x':>5} | goal"
    )
    ok = True
    for s in SCENARIOS:
        if only and not any(part in s.name for part in only):
            continue
        rng = random.Random(f"{seed}:{s.name}:{noise}")
        results = [decide_lesson(rng, s, rates, schedule, world) for _ in range(reps)]
        commits = sum(c for c, _ in results)
        per_test = [r for _, runs in results for r in runs]
        per_lesson = [sum(runs) for _, runs in results]
        rate = commits / reps
        low, high = wilson(commits, reps)
        good = met(s.goal, rate, rates.alpha)
        commit = s.goal.startswith("commit")
        bound = procedure_bound(s.truth, rates, noise, commit)
        wald = wald_bound(s.truth, rates, noise, commit)
        median = statistics.median(per_test)
        ratio = median / bound if bound and math.isfinite(bound) else math.inf
        old_ratio = median / wald if wald and math.isfinite(wald) else math.inf
        if noise == 0 and s.goal != "admit<=alpha":
            ok &= good and ratio <= 1.5
        print(
            f"{s.name:36} | {rate:6.3f} [{low:.3f}, {high:.3f}] | {median:13.0f} "
            f"{statistics.median(per_lesson):10.0f} {bound:5.0f} {ratio:5.2f} {wald:5.0f} "
            f"{old_ratio:5.2f} | {s.goal} {'met' if good else 'NOT MET'}; runs <= 1.5x bound "
            f"{'met' if ratio <= 1.5 else 'NOT MET'} (<= 1.5x Wald: "
            f"{'met' if old_ratio <= 1.5 else 'not met'})"
        )
    return ok


def pfail_runs(reps: int, seed: int, tasks: int, schedule: Schedule) -> bool:
    rng = random.Random(f"{seed}:pfail")
    runs = [
        lesson(rng, Truth(0.34, 0.40, 0.02), Rates(), World(tasks=tasks)).go_on(schedule).runs
        for _ in range(reps)
    ]
    median = statistics.median(runs)
    print(
        f"\nP_fail 0.40, first test alone: median {median:.0f} runs to reject (goal <= 30: "
        f"{'met' if median <= 30 else 'NOT MET'})"
    )
    return median <= 30


def tasks_table(reps: int, seed: int, schedule: Schedule) -> None:
    """The task is the unit: a lesson cited on 40% of falsification tasks, admitted with
    narrowing's second try, against how many distinct tasks a kind its tests may draw."""
    print("\n## Distinct probe tasks a kind (P_fail .40 and D_reg .40, narrowing's second try)")
    for n in (8, 16, 32, 64, 160):
        line = []
        for name in ("harmful P_fail .40", "harmful D_reg .40"):
            s = next(s for s in SCENARIOS if s.name == name)
            rng = random.Random(f"{seed}:{name}:{n}")
            done = [decide_lesson(rng, s, Rates(), schedule, World(tasks=n)) for _ in range(reps)]
            line.append(f"{name} admitted {sum(c for c, _ in done) / reps:.3f}")
        print(f"{n:4d} tasks: " + "; ".join(line))


def published(rng: random.Random, truth: Truth, world: World) -> bool:
    """The method's rule (`--rule estimates`): estimates on 8 target, 16 falsification and 16
    regression probe tasks, each run once on both sides, through `control.figures`."""
    one = lesson(rng, truth, Rates(), world)
    probes: list[Probe] = []
    pairs: dict[tuple[TaskKey, int], tuple[float, float, bool]] = {}
    cited: dict[tuple[TaskKey, int], bool] = {}
    for kind, n in (("target", 8), ("falsify", 16), ("regress", 16)):
        for _ in range(n):
            pair = one.pair(kind, True)
            probe = Probe(str(pair.task), kind, "")  # type: ignore[arg-type]
            probes.append(probe)
            assert pair.without is not None
            pairs[(probe.key, 0)] = (float(pair.without), float(pair.with_lesson), pair.without)
            if pair.cited is not None:
                cited[(probe.key, 0)] = pair.cited
    return gate_figures(probes, pairs, Thresholds(rule="estimates"), cited).passes


def published_table(reps: int, seed: int, tasks: int) -> None:
    print(f"\n## The method's rule (estimates on 8 / 16 / 16 probe tasks), {reps} lessons")
    for s in SCENARIOS[2:5]:
        rng = random.Random(f"{seed}:published:{s.name}")
        world = World(tasks=tasks)
        once = [published(rng, s.truth, world) for _ in range(reps)]
        twice = [a or published(rng, s.truth, world) for a in once]
        print(
            f"{s.name:36} committed {sum(once) / reps:.3f}, with a second try "
            f"{sum(twice) / reps:.3f}"
        )


def call_table(reps: int, seed: int, tasks: int, schedule: Schedule) -> bool:
    """Several lessons in one gate call: e-BH across them, each with the grown budget."""
    modest = SCENARIOS[1].truth
    harmful = SCENARIOS[4].truth
    print(f"\n## Lessons in one call ({reps} calls; e-BH at alpha {Rates().alpha:g})")
    ok = True
    for m_modest, m_harmful, goal in ((1, 0, None), (1, 2, 0.75), (4, 4, None)):
        rng = random.Random(f"{seed}:call:{m_modest}:{m_harmful}")
        truths = [modest] * m_modest + [harmful] * m_harmful
        calls = [
            simulate_call(rng, truths, Rates(), schedule, World(tasks=tasks)) for _ in range(reps)
        ]
        rate = sum(c for call in calls for c, _ in call[:m_modest]) / (reps * m_modest)
        bad = sum(c for call in calls for c, _ in call[m_modest:])
        runs = statistics.median(r for call in calls for _, r in call[:m_modest])
        budget = schedule.for_evidence(1 / len(truths), Rates().alpha).max_runs
        text = ""
        if goal is not None:
            ok &= rate >= goal
            text = f" | goal >= {goal:g}: {'met' if rate >= goal else 'NOT MET'}"
        print(
            f"{m_modest} modest + {m_harmful} harmful (P_fail .40): modest committed "
            f"{rate:.3f} (median {runs:.0f} runs, budget {budget}), harmful admitted "
            f"{bad} of {reps * m_harmful}{text}"
        )
    return ok


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
        low, high = wilson(retired, reps)
        print(
            f"{name:36} retired {share:6.3f} [{low:.3f}, {high:.3f}] (median at episode "
            f"{median:.0f}) | {goal} "
            f"{'met' if good else 'NOT MET'}"
        )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-runs", type=int, default=Schedule().max_runs)
    parser.add_argument(
        "--tasks", type=int, default=0, help="probe tasks a kind (default: max-runs / 2)"
    )
    parser.add_argument("--noise", type=float, nargs="*", default=[0.0, 0.15, 0.30])
    parser.add_argument(
        "--eta",
        type=float,
        default=Rates().eta,
        help="the gate's --eta (the scenarios' gains stay as they are; e.g. eta times 1 - 2 "
        "noise: the margin on the gain outcomes show through that noise)",
    )
    parser.add_argument(
        "--flip-rate",
        default="0",
        help="the gate's --flip-rate: a number, or 'same' to state each table's noise (what "
        "an agent whose flip rate was measured would state)",
    )
    parser.add_argument("--skip", nargs="*", default=[], help="tasks, published, calls, monitor")
    parser.add_argument(
        "--only",
        nargs="*",
        default=[],
        help="the gate's scenarios whose names hold one of these (default: all); the verdict "
        "on every target then speaks of those alone",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    schedule = Schedule(max_runs=args.max_runs)
    tasks = args.tasks or args.max_runs // 2
    ok = True
    for noise in args.noise:
        flip = noise if args.flip_rate == "same" else float(args.flip_rate)
        rates = Rates(eta=args.eta, flip_rate=flip)
        good = gate_table(args.reps, noise, args.seed, args.tasks, schedule, rates, args.only)
        ok &= good if noise == 0 else True
    ok &= pfail_runs(args.reps, args.seed, tasks, schedule)
    if "tasks" not in args.skip:
        tasks_table(max(100, args.reps // 4), args.seed, schedule)
    if "published" not in args.skip:
        published_table(max(100, args.reps // 4), args.seed, tasks)
    if "calls" not in args.skip:
        ok &= call_table(max(100, args.reps // 4), args.seed, tasks, schedule)
    watched = True if "monitor" in args.skip else monitor_table(args.reps, args.seed)
    print(
        f"\n{time.process_time():.1f} s CPU ({time.perf_counter() - start:.1f} s); every gate "
        f"target met without noise: {('yes' if ok else 'no') if 0.0 in args.noise else 'not run'}; "
        "monitoring: "
        f"{'yes' if watched else 'no'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
