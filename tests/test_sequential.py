"""The sequential gate's tests: valid however long they look, and what they decide."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from wikitrace.control.gate_sim import Truth, World, simulate, simulate_call
from wikitrace.control.probes import TaskDraws
from wikitrace.control.sequential import (
    FIRST_LOOK,
    NARROWED_SHARE,
    WORTH,
    Pair,
    Rates,
    Schedule,
    Sequential,
    Watch,
    decide,
    together,
)
from wikitrace.control.stats import EProcess, e_bh, lr_bet


def test_a_bet_at_the_likelihood_ratio_is_the_likelihood_ratio() -> None:
    test = EProcess(lr_bet(0.3, 0.1))
    outcomes = [0, 0, 1, 0, 0, 0]
    for x in outcomes:
        test.observe(x - 0.3)
    ratio = (0.1 / 0.3) ** sum(outcomes) * (0.9 / 0.7) ** (len(outcomes) - sum(outcomes))
    assert test.wealth == pytest.approx(ratio)
    with pytest.raises(ValueError, match="out of the range"):
        EProcess(2.0).observe(1.0)


@pytest.mark.parametrize(
    ("truth", "at_most"),
    [
        # alpha 0.1 is a bound; 300 draws put a true 0.1 under 0.145 with 99.5% chance.
        (Truth(0.34, 0.05, 0.30), 0.145),  # D_reg at its limit
        (Truth(0.34, 0.30, 0.02), 0.145),  # P_fail at its limit
        (Truth(0.34, 0.05, 0.02, d_falsify=0.30), 0.145),  # D_reg at its limit on falsify only
        (Truth(0.10, 0.05, 0.02), 0.145),  # net gain at eta
        # Helps as often as it hurts: issue 52's target is 5% (gate_bench measures about 1.5%).
        (Truth(0.0, 0.05, 0.02, hurt=0.5, target_solved=0.4), 0.05),
    ],
)
def test_lessons_at_the_limits_are_committed_at_most_alpha_of_the_time(
    truth: Truth, at_most: float
) -> None:
    """A bounded slice of benchmarks/gate_bench.py: 300 lessons each, effects fixed per task,
    through `decide` and the gate's task draws."""
    rng = random.Random(1)
    schedule = Schedule(max_runs=160)
    outcomes = [simulate(rng, truth, Rates(), schedule, World(tasks=80)) for _ in range(300)]
    committed = sum(c for c, _ in outcomes) / len(outcomes)
    assert committed <= at_most
    assert all(runs <= schedule.max_runs for _, runs in outcomes)


def test_a_helpful_lesson_is_committed_and_a_harmful_one_stopped_early() -> None:
    rng = random.Random(2)
    helpful = [simulate(rng, Truth(0.34, 0.05, 0.02), Rates(), Schedule()) for _ in range(100)]
    assert sum(c for c, _ in helpful) >= 95
    # Breaks half of what the agent solved, on its regression probes alone: D_reg is tested
    # on each kind, so the falsification probes it leaves alone do not dilute it.
    breaks = Truth(0.34, 0.05, 0.5, d_falsify=0.0)
    harmful = [simulate(rng, breaks, Rates(), Schedule()) for _ in range(100)]
    assert not any(c for c, _ in harmful)
    assert sorted(r for _, r in harmful)[50] < 80  # futility stops it, before any target
    misfires = [simulate(rng, Truth(0.34, 0.4, 0.02), Rates(), Schedule()) for _ in range(100)]
    assert sorted(r for _, r in misfires)[50] <= 30  # P_fail first, from single runs


def test_several_lessons_in_one_call_share_alpha_and_get_the_budget_to_reach_it() -> None:
    rng = random.Random(5)
    modest, harmful = Truth(0.20, 0.10, 0.05), Truth(0.34, 0.05, 0.5)
    calls = [simulate_call(rng, [modest, harmful, harmful], Rates(), Schedule()) for _ in range(60)]
    assert sum(call[0][0] for call in calls) >= 40  # near its rate alone (0.88 at 400 runs)
    assert sum(c for call in calls for c, _ in call[1:]) <= 2
    assert Schedule(max_runs=100).for_evidence(1 / 3, 0.1).max_runs == 148  # log 30 / log 10
    assert Schedule(max_runs=100).for_evidence(1.0, 0.1).max_runs == 100


def test_together_admits_by_e_bh_and_asks_the_rest_for_more() -> None:
    strong, weak = Sequential(Rates(), scale=0.01), Sequential(Rates())
    for test, gains in ((strong, 40), (weak, 12)):
        for _ in range(gains):
            test.observe(Pair("target", False, True))
            test.observe(Pair("regress", True, True))
            test.observe(Pair("falsify", True, True, cited=False))
    strong.scale = 1.0  # it has evidence 1 / 0.001 or more: e-BH admits it
    assert strong.verdict() == weak.verdict() == "committed"
    asked: list[int] = []

    def go_on(i: int) -> bool:
        asked.append(i)
        return False

    committed = [True, True, False]
    assert together([strong, weak, None], committed, go_on, 0.1) == asked == [1]
    assert committed == [True, False, False] and weak.scale == pytest.approx(2 / 3)


def test_tasks_are_drawn_each_once_before_any_again() -> None:
    draws = TaskDraws(["a", "b", "c"], random.Random(0))
    first = [draws.next() for _ in range(3)]
    assert sorted(task for task, _ in first) == ["a", "b", "c"]
    assert all(times == 0 for _, times in first)
    assert [times for _, times in (draws.next() for _ in range(3))] == [1, 1, 1]


def test_a_test_that_has_passed_stops_betting_and_can_go_on_when_asked_for_more() -> None:
    tests = Sequential(Rates())
    for _ in range(8):
        tests.observe(Pair("target", without=False, with_lesson=True))
    assert tests.helps
    wealth = tests.help.wealth
    tests.observe(Pair("target", without=True, with_lesson=False))  # a loss, after passing
    assert tests.help.wealth == wealth and tests.helps
    tests.scale = 0.01  # e-BH asks for more: it bets again
    assert not tests.helps
    tests.observe(Pair("target", without=False, with_lesson=True))
    assert tests.help.wealth > wealth


def test_citations_decide_p_fail_where_reported() -> None:
    cited = Sequential(Rates())
    plain = Sequential(Rates(), citations=False)
    for _ in range(20):
        pair = Pair("falsify", without=True, with_lesson=True, cited=True)
        cited.observe(pair)
        plain.observe(pair)
    assert cited.verdict() == "rejected" and "falsification failure" in cited.reason
    assert plain.falsification_holds  # no harm to the outcome: it holds by outcomes


def test_e_bh_admits_by_rank() -> None:
    assert e_bh([100.0, 1.0, 12.0], alpha=0.1) == {0}  # 12 < 3 / (0.1 * 2)
    assert e_bh([100.0, 1.0, 40.0], alpha=0.1) == {0, 2}
    assert e_bh([5.0, 5.0], alpha=0.1) == set()


def test_monitoring_allows_for_how_often_a_task_fails_anyway() -> None:
    rng = random.Random(3)
    retired_plain = retired_allowed = 0
    for _ in range(300):
        plain, allowed = Watch(0.3), Watch(0.3)
        for _ in range(100):
            failed = rng.random() < 0.4  # a harmless lesson on tasks failing 40% anyway
            plain.observe(failed)
            allowed.observe(failed, base_failure=0.4)
        retired_plain += plain.retire()
        retired_allowed += allowed.retire()
    assert retired_allowed <= 15 < retired_plain  # 5% of 300


def test_p_fail_is_read_first_from_runs_with_the_lesson_alone_then_the_others() -> None:
    tests = Sequential(Rates())
    assert tests.needs() == {"target": False, "falsify": True, "regress": False}
    assert not tests.needs_base("falsify") and tests.needs_base("regress")
    before = tests.failure.log_wealth
    tests.observe(Pair("falsify", None, True, cited=False))  # counts for P_fail alone
    assert tests.failure.log_wealth > before and not tests.needs_base("falsify")
    while tests.failure.wealth < 10**FIRST_LOOK:
        tests.observe(Pair("falsify", None, True, cited=False, task="f"))
    # Halfway to its evidence (in log), P_fail stops being read alone: falsification probes
    # run as pairs (a run alone is completed by its run without the lesson first), and the
    # kinds are drawn one a round, falsification first while no futility test leans.
    assert not tests.falsification_holds and tests.needs_base("falsify")
    assert tests.needs() == {"target": False, "falsify": True, "regress": False}
    wealth = tests.failure.log_wealth
    tests.observe(Pair("falsify", True, True, cited=False, task="f", completed=True))
    assert tests.failure.log_wealth == wealth and tests.damage["falsify"].log_wealth > 0
    assert Pair("falsify", True, True, completed=True).runs == 1
    tests.observe(Pair("falsify", True, True, cited=False, task="g"))  # a new pair: P_fail too
    assert tests.failure.log_wealth > wealth
    # Kept falsification pairs lean its futility away: targets next, then regression probes.
    assert tests.needs() == {"target": True, "falsify": False, "regress": False}
    tests.observe(Pair("target", False, True))
    assert tests.needs() == {"target": False, "falsify": False, "regress": True}
    while not tests.safe or not tests.falsification_holds:
        tests.observe(Pair("falsify", True, True, cited=False))
        tests.observe(Pair("regress", True, True))
    assert tests.needs() == {"target": True, "falsify": False, "regress": False}
    # A run without a citation report: P_fail reads outcomes, which need the base run.
    silent = Sequential(Rates())
    silent.observe(Pair("falsify", None, False, cited=None))
    assert silent.needs_base("falsify") and silent.failure.log_wealth == 0
    assert Sequential(Rates(), citations=False).needs_base("falsify")


def test_a_narrowed_lesson_reads_p_fail_alone_no_longer_than_a_first_one() -> None:
    """A narrowed lesson's tests ask for four times the evidence; P_fail is still read alone
    only until the evidence of alpha as set reaches (1 / alpha) ** FIRST_LOOK, so a lesson
    another test rejects does not pay for P_fail's larger bar first."""
    first, narrowed = Sequential(Rates()), Sequential(Rates(), scale=NARROWED_SHARE)
    runs = []
    for tests in (first, narrowed):
        n = 0
        while not tests.needs_base("falsify") and n < 50:
            tests.observe(Pair("falsify", None, True, cited=False))
            n += 1
        runs.append(n)
    assert runs[0] == runs[1] == 6  # 1.214 ** 6 > 10 ** 0.5: six uncited runs
    assert narrowed.needs_base("falsify") and not narrowed.falsification_holds


def test_each_round_draws_the_kind_whose_futility_test_leans_most() -> None:
    tests = Sequential(Rates())
    while tests.first_look():
        tests.observe(Pair("falsify", None, True, cited=False))
    assert tests.needs() == {"target": False, "falsify": True, "regress": False}
    tests.observe(Pair("falsify", True, True, completed=True))  # kept: it leans away
    assert tests.needs() == {"target": True, "falsify": False, "regress": False}
    tests.observe(Pair("target", False, True))  # helped: help's futility leans away
    assert tests.needs() == {"target": False, "falsify": False, "regress": True}
    assert tests.focused == "regress"
    tests.observe(Pair("regress", True, False))  # a solved regression probe broken
    tests.observe(Pair("falsify", True, False, completed=True))  # falsify leans less
    assert tests.needs() == {"target": False, "falsify": False, "regress": True}
    for _ in range(2):  # two kept regression pairs: falsify's futility leans most now
        tests.observe(Pair("regress", True, True))
    assert tests.leaning("falsify") > tests.leaning("regress") > tests.leaning("target")
    assert tests.needs() == {"target": False, "falsify": True, "regress": False}
    # A lesson that changes nothing on its targets: help's futility leads, then stops it.
    idle = Sequential(Rates())
    while idle.first_look():
        idle.observe(Pair("falsify", None, True, cited=False))
    for _ in range(2):
        idle.observe(Pair("target", False, False))
    assert idle.needs() == {"target": True, "falsify": False, "regress": False}
    while idle.verdict() == "continue":
        idle.observe(Pair("target", False, False))
    assert "net gain on its targets is shown to be below" in idle.reason


def test_a_lesson_that_breaks_only_regression_probes_stops_on_that_test_alone() -> None:
    """Every solved regression probe broken, nothing else wrong: after P_fail's first look,
    one round of falsification pairs and one of targets (each leans away at once), then
    only regression pairs until their damage test rejects. Drawing every kind each round
    until a futility test leaned took 30 runs here."""
    rounds = []

    def sample(wanted: dict[str, int]) -> list[Pair]:
        nonlocal alone
        rounds.append(dict(wanted))
        pairs = []
        for kind, count in wanted.items():
            for _ in range(count):
                if kind == "regress":
                    pairs.append(Pair(kind, True, False))
                elif kind == "target":
                    pairs.append(Pair(kind, False, True))
                elif not tests.needs_base(kind):
                    alone += 1
                    pairs.append(Pair(kind, None, True, cited=False))
                elif alone:  # a run alone completed by its run without the lesson
                    alone -= 1
                    pairs.append(Pair(kind, True, True, cited=False, completed=True))
                else:
                    pairs.append(Pair(kind, True, True, cited=False))
        return pairs

    tests = Sequential(Rates())
    alone = 0

    outcome = decide(tests, sample, Schedule())
    assert outcome.verdict == "rejected" and "on its regression probes" in tests.reason
    assert outcome.runs == 24  # 6 alone, 2 falsification pairs, 2 target, 3 regression
    assert [set(r) for r in rounds[3:]] == [{"falsify"}, {"target"}] + [{"regress"}] * 3


def test_the_default_budget_commits_a_lesson_of_twice_eta_with_a_margin() -> None:
    """Issue 52's helpful-modest (net gain 0.20, P_fail 0.10, D_reg 0.05; effects fixed per
    task) is committed at least 80% of the time within the default --max-runs: gate_bench
    measures 87.6% over seeds 0 to 3 at 400 runs and 79.5% at 320, where most misses ran out of
    budget with help not yet shown. 400 lessons put 0.876 above 0.83 with 99.7% chance."""
    rng = random.Random(7)
    schedule = Schedule()
    world = World(tasks=schedule.max_runs // 2)
    modest = Truth(0.20, 0.10, 0.05)
    outcomes = [simulate(rng, modest, Rates(), schedule, world) for _ in range(400)]
    assert sum(c for c, _ in outcomes) / len(outcomes) >= 0.83
    assert all(runs <= schedule.max_runs for _, runs in outcomes)


def test_help_must_beat_eta() -> None:
    tests = Sequential(Rates())
    for i in range(200):  # better one pair in twenty: a net gain of 0.05, below eta 0.1
        tests.observe(Pair("target", i % 20 != 0, True))
    assert not tests.helps and tests.below_worth.rejects(0.1)


def test_a_round_counts_one_run_for_a_run_alone() -> None:
    assert Schedule().round_of({"target": True, "falsify": True, "regress": True}) == {
        "target": 2,
        "falsify": 2,
        "regress": 2,
    }
    tests = Sequential(Rates())
    rounds = iter([[Pair("falsify", None, True, cited=True), Pair("falsify", None, True)]])
    outcome = decide(tests, lambda wanted: next(rounds, []), Schedule())
    assert outcome.runs == 2 and outcome.verdict == "rejected"


@pytest.mark.parametrize("flip", [0.0, 0.1, 0.15, 0.3])
@pytest.mark.parametrize("solved", [0.5, 0.85])
def test_a_stated_flip_rate_tests_the_noise_free_damage_and_gain(
    flip: float, solved: float
) -> None:
    """Outcomes flipped at the stated rate: a lesson whose noise-free D_reg is exactly beta
    gives the damage test outcomes of mean 0 (its null's edge), and one whose noise-free net
    gain is exactly eta gives the help test outcomes of mean 0, whatever the noise."""
    rates = Rates(flip_rate=flip)

    def seen(true: bool) -> list[tuple[bool, float]]:
        return [(true, 1 - flip), (not true, flip)]

    def law(cells: dict[tuple[bool, bool], float]) -> dict[tuple[bool, bool], float]:
        found: dict[tuple[bool, bool], float] = {}
        for (without, with_it), p in cells.items():
            for b, q in seen(without):
                for w, r in seen(with_it):
                    found[(b, w)] = found.get((b, w), 0.0) + p * q * r
        return found

    beta = rates.beta
    damage = sum(
        p * (float(b and not w) - float(w and not b) - beta * rates.seen_solved(b))
        for (b, w), p in law(
            {
                (True, False): solved * beta,
                (True, True): solved * (1 - beta),
                (False, False): 1 - solved,
            }
        ).items()
    )
    assert damage == pytest.approx(0.0, abs=1e-12)
    fixes = rates.eta / (1 - solved)  # turns that share of failed targets into solved
    gain = sum(
        p * (float(w and not b) - float(b and not w) - rates.seen_margin(rates.eta))
        for (b, w), p in law(
            {
                (False, True): (1 - solved) * fixes,
                (False, False): (1 - solved) * (1 - fixes),
                (True, True): solved,
            }
        ).items()
    )
    assert gain == pytest.approx(0.0, abs=1e-12)


def test_with_the_flip_rate_stated_noise_neither_admits_harm_nor_blocks_help() -> None:
    """A bounded slice of `gate_bench.py --noise 0.15 --flip-rate same`: outcomes flipped at
    15%, the gate told so. A lesson that breaks 40% of the solved falsification tasks shows
    about 0.31 through that noise (at the limit for a test of what the runs show); judged
    noise-free it is admitted rarely, and a strong lesson still passes."""
    rng = random.Random(7)
    rates = Rates(flip_rate=0.15)
    schedule = Schedule(max_runs=160).through_noise(0.15)
    assert schedule.max_runs == 667  # 160 / 0.7^4
    world = World(noise=0.15, tasks=schedule.max_runs // 2)
    breaks = Truth(0.34, 0.05, 0.02, d_falsify=0.40)
    harmful = [simulate(rng, breaks, rates, schedule, world, narrowed=True) for _ in range(150)]
    # gate_bench: 1.0% at 500 lessons (--max-runs 320); 6 of these 150 without --flip-rate
    assert sum(c for c, _ in harmful) <= 4
    strong = [simulate(rng, Truth(0.34, 0.05, 0.02), rates, schedule, world) for _ in range(60)]
    assert sum(c for c, _ in strong) >= 45  # 33 of these 60 without --flip-rate


def _flipped(cells: dict[tuple[bool, bool], float], flip: float) -> dict[tuple[bool, bool], float]:
    """(solved without, solved with) as seen through flips at `flip` -> its chance."""
    found: dict[tuple[bool, bool], float] = {}
    for (without, with_it), p in cells.items():
        for b, q in ((without, 1 - flip), (not without, flip)):
            for w, r in ((with_it, 1 - flip), (not with_it, flip)):
                found[(b, w)] = found.get((b, w), 0.0) + p * q * r
    return found


def _ever_crosses(values: dict[float, float], stake: float, level: float) -> float:
    """Lundberg's bound on the chance that wealth betting `stake` on i.i.d. outcomes of this
    law ever reaches 1 / level: level ** r, r > 0 where E[(1 - stake * V) ** r] = 1."""
    low, high = 1e-9, 50.0
    for _ in range(200):
        middle = (low + high) / 2
        if sum(p * (1 - stake * v) ** middle for v, p in values.items()) < 1:
            low = middle
        else:
            high = middle
    return level**low


def test_at_a_stated_flip_rate_help_bets_near_its_best_and_futility_seldom_stops_on_noise() -> None:
    """Helpful-modest (noise-free gain 0.20, D_reg 0.05) with outcomes flipped at 15%: help's
    stake is within 2% of the best growth a fixed stake gets (a mixture of two stakes paid log
    2 for little), and its futility tests bet less than at 1 - 2e, so noise alone makes them
    cross their bar (and reject a lesson worth committing) about half as often: the bound on
    ever crossing, 2.3% and 1.7% for the damage tests at 1 - 2e, 8.5% for help's."""
    flip = 0.15
    rates = Rates(flip_rate=flip)
    tests = Sequential(rates)
    fixes = (0.20 + 0.2 * 0.05) / 0.8  # failed targets it solves (net gain 0.20)
    target = _flipped(
        {
            (False, True): 0.8 * fixes,
            (False, False): 0.8 * (1 - fixes),
            (True, False): 0.2 * 0.05,
            (True, True): 0.2 * 0.95,
        },
        flip,
    )
    gain: dict[float, float] = {}
    for (b, w), p in target.items():
        x = float(w and not b) - float(b and not w)
        gain[x] = gain.get(x, 0.0) + p
    eta = rates.seen_margin(rates.eta)

    def growth(stake: float) -> float:
        return sum(p * math.log(1 - stake * (x - eta)) for x, p in gain.items())

    best = max(growth(-i / 1000) for i in range(1, 900))
    assert growth(tests.help.stake) >= 0.98 * best
    worth = WORTH * eta
    below = {x - worth: p for x, p in gain.items()}
    assert sum(_ever_crosses(below, part.stake, 0.1) for part in tests.below_worth.parts) < 0.07
    for kind, solved, limit in (("falsify", 0.7, 0.015), ("regress", 0.85, 0.012)):
        law = _flipped(
            {
                (True, False): solved * 0.05,
                (True, True): solved * 0.95,
                (False, False): 1 - solved,
            },
            flip,
        )
        values: dict[float, float] = {}
        for (b, w), p in law.items():
            v = float(b and not w) - float(w and not b) - rates.beta / 2 * rates.seen_solved(b)
            values[v] = values.get(v, 0.0) + p
        assert _ever_crosses(values, tests.damage_high[kind].stake, 0.1) < limit


def test_gate_dry_run_with_a_flip_rate_simulates_that_noise_within_the_grown_budget(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from wikitrace.cli.main import cli

    args = [
        "gate",
        str(tmp_path / "corpus"),
        "--runner",
        "run {task_id} {memory}",
        "--dry-run",
        "--max-runs",
        "40",
    ]
    done = CliRunner().invoke(cli, [*args, "--flip-rate", "0.15"])
    assert done.exit_code == 0, done.output
    assert "at most 167 agent runs a lesson" in done.output  # 40 / 0.7^4
    assert "outcomes flipped at 0.15" in done.output and "noise-free" in done.output
    refused = CliRunner().invoke(cli, [*args, "--flip-rate", "0.4"])
    assert refused.exit_code == 2 and "--flip-rate" in refused.output
