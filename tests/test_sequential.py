"""The sequential gate's tests: valid however long they look, and what they decide."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from wikitrace.control.gate_sim import Truth, World, simulate, simulate_call
from wikitrace.control.probes import TaskDraws
from wikitrace.control.sequential import (
    EProcess,
    Pair,
    Rates,
    Schedule,
    Sequential,
    Watch,
    decide,
    lr_bet,
    together,
)
from wikitrace.control.stats import e_bh


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
    assert sum(call[0][0] for call in calls) >= 40  # near its rate alone (0.80 at 320 runs)
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
    while not tests.falsification_holds:
        tests.observe(Pair("falsify", None, True, cited=False, task="f"))
    # Then the other tests together (a run alone is completed by its run without the lesson).
    assert tests.needs() == {"target": True, "falsify": True, "regress": True}
    assert tests.needs_base("falsify")
    wealth = tests.failure.log_wealth
    tests.observe(Pair("falsify", True, True, cited=False, task="f", completed=True))
    assert tests.failure.log_wealth == wealth and tests.damage["falsify"].log_wealth > 0
    assert Pair("falsify", True, True, completed=True).runs == 1
    while not tests.safe:
        tests.observe(Pair("falsify", True, True, completed=True))
        tests.observe(Pair("regress", True, True))
    assert tests.needs() == {"target": True, "falsify": False, "regress": False}
    assert tests.focused is None
    # A run without a citation report: P_fail reads outcomes, which need the base run.
    silent = Sequential(Rates())
    silent.observe(Pair("falsify", None, False, cited=None))
    assert silent.needs_base("falsify") and silent.failure.log_wealth == 0
    assert Sequential(Rates(), citations=False).needs_base("falsify")


def test_damage_is_tested_on_each_kind_of_probe() -> None:
    tests = Sequential(Rates())
    for _ in range(40):  # falsification probes untouched, half the solved regressions broken
        tests.observe(Pair("falsify", True, True, cited=False))
        tests.observe(Pair("regress", True, False))
        if tests.verdict() != "continue":
            break
    assert tests.verdict() == "rejected" and "on its regression probes" in tests.reason
    assert not tests.damage_high["falsify"].rejects(0.1) and not tests.safe


def test_once_a_futility_test_leans_only_its_kind_is_drawn_until_it_no_longer_does() -> None:
    tests = Sequential(Rates())
    while not tests.falsification_holds:
        tests.observe(Pair("falsify", None, True, cited=False))
    assert tests.needs() == {"target": True, "falsify": True, "regress": True}
    tests.observe(Pair("target", False, True))  # helped: help's futility leans away
    tests.observe(Pair("falsify", True, True, completed=True))
    tests.observe(Pair("regress", True, False))  # a solved regression probe broken
    assert tests.needs() == {"target": False, "falsify": False, "regress": True}
    assert tests.focused == "regress"
    tests.observe(Pair("falsify", True, False, completed=True))  # falsify leans more now,
    assert tests.needs()["regress"]  # but regress keeps the focus while it leans at all
    for _ in range(4):  # four kept pairs outweigh one broken
        assert tests.needs()["regress"]
        tests.observe(Pair("regress", True, True))
    assert tests.damage_high["regress"].log_wealth <= 0
    assert tests.needs() == {"target": False, "falsify": True, "regress": False}
    # A lesson that changes nothing on its targets: help's futility leads, then stops it.
    idle = Sequential(Rates())
    while not idle.falsification_holds:
        idle.observe(Pair("falsify", None, True, cited=False))
    for _ in range(2):
        idle.observe(Pair("target", False, False))
    assert idle.needs() == {"target": True, "falsify": False, "regress": False}
    while idle.verdict() == "continue":
        idle.observe(Pair("target", False, False))
    assert "net gain on its targets is shown to be below" in idle.reason


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
