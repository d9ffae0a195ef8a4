"""The sequential gate's tests: valid however long they look, and what they decide."""

from __future__ import annotations

import random

import pytest

from wikitrace.control.sequential import (
    EProcess,
    Pair,
    Rates,
    Schedule,
    Sequential,
    Watch,
    decide,
    e_bh,
    lr_bet,
    simulate,
)


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
        ((0.34, 0.05, 0.30), 0.1),  # D_reg at its limit
        ((0.34, 0.30, 0.02), 0.1),  # P_fail at its limit
        ((0.0, 0.05, 0.02), 0.0),  # no gain at all: never
    ],
)
def test_lessons_at_the_limits_are_committed_at_most_alpha_of_the_time(
    truth: tuple[float, float, float], at_most: float
) -> None:
    """A bounded slice of benchmarks/gate_bench.py: 400 lessons each, through `decide`."""
    rng = random.Random(1)
    outcomes = [simulate(rng, truth, Rates(), Schedule()) for _ in range(400)]
    committed = sum(o.verdict == "committed" for o in outcomes) / len(outcomes)
    # alpha 0.1 is a bound; 400 draws put a true 0.1 under 0.14 with 99.5% chance.
    assert committed <= at_most + (0.04 if at_most else 0.0)
    assert all(o.runs <= Schedule().max_runs for o in outcomes)


def test_a_helpful_lesson_is_committed_and_a_harmful_one_stopped_early() -> None:
    rng = random.Random(2)
    helpful = [simulate(rng, (0.34, 0.05, 0.02), Rates(), Schedule()) for _ in range(200)]
    assert sum(o.verdict == "committed" for o in helpful) >= 190
    harmful = [simulate(rng, (0.34, 0.05, 0.6), Rates(), Schedule()) for _ in range(200)]
    assert all(o.verdict == "rejected" for o in harmful)
    assert sorted(o.runs for o in harmful)[100] < Schedule().max_runs  # futility stops it
    assert "regression damage is shown to be above" in harmful[0].reason


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


def test_falsification_probes_skip_the_base_run_once_only_their_citation_tells() -> None:
    tests = Sequential(Rates())
    assert tests.needs_base("falsify") and tests.needs_base("regress")
    while not tests.safe:  # solved without the lesson and with it: nothing broken
        tests.observe(Pair("regress", True, True))
    assert tests.needs_base("falsify")  # no citation report seen yet
    tests.observe(Pair("falsify", True, True, cited=False))
    assert not tests.needs_base("falsify") and tests.needs_base("target")
    before = tests.failure.log_wealth
    tests.observe(Pair("falsify", None, True, cited=False))  # counts for P_fail alone
    assert tests.failure.log_wealth > before
    tests.observe(Pair("falsify", None, False, cited=None))  # no report: it tells nothing
    assert tests.failure.log_wealth > before and tests.needs_base("falsify")
    # Without citations P_fail reads outcomes, which need the base run.
    assert Sequential(Rates(), citations=False).needs_base("falsify")


def test_a_round_runs_fewer_regression_pairs_and_counts_one_run_for_a_half_pair() -> None:
    assert Schedule().round_of({"target": True, "falsify": True, "regress": True}) == {
        "target": 2,
        "falsify": 2,
        "regress": 1,
    }
    tests = Sequential(Rates())
    rounds = iter([[Pair("falsify", None, True, cited=True), Pair("target", False, False)]])
    outcome = decide(tests, lambda wanted: next(rounds, []), Schedule())
    assert outcome.runs == 3 and outcome.verdict == "rejected"
