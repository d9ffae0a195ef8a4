"""Contrasts counted the fast way (compiler/mine_contrast.py: each pattern's runs found in one
pass, orders compared as arrays, each task's counts by bincount, the stratified test as a
convolution in floats) give what counting each pattern over every run, task by task, and the
test's law summed in exact fractions give: the same contrasts tried, the same counts to the
unit, p- and q-values within 1e-9 of the exact ones (and the p-value the same as counting
every placing of the failures, and as Fisher's with one task)."""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from wikitrace.compiler.mine_contrast import (
    FDR,
    MAX_KINDS_FOR_ORDER,
    MIN_SUPPORT,
    MIN_TASKS,
    MiningReport,
    _tried,
    contrasts,
    strata_key,
    within_tasks,
)
from wikitrace.compiler.mine_exact import TIE, benjamini_hochberg, stratified_exact
from wikitrace.compiler.mine_table import RunPatterns

# --- the counting as it was: every pattern over every run ----------------------------------


def _hypergeometric(runs: int, failed: int, shown: int) -> dict[int, Fraction]:
    """P(x failures among the `shown` runs) of a task, as fractions."""
    total = math.comb(runs, shown)
    return {
        x: Fraction(math.comb(failed, x) * math.comb(runs - failed, shown - x), total)
        for x in range(0, min(failed, shown) + 1)
        if shown - x <= runs - failed
    }


def reference_stratified(strata: Sequence[tuple[int, int, int, int]]) -> tuple[float, float]:
    """The stratified exact test summed plainly: each task's law in fractions, convolved as a
    dictionary of totals; p the probability of every total no more likely than the one seen."""
    law: dict[int, Fraction] = {0: Fraction(1)}
    for runs, failed, shown, _ in strata:
        task = _hypergeometric(runs, failed, shown)
        mixed: dict[int, Fraction] = defaultdict(Fraction)
        for total, p in law.items():
            for x, q in task.items():
                mixed[total + x] += p * q
        law = dict(mixed)
    tie = 1 + Fraction(TIE)  # equally likely, as the test counts them
    seen = law[sum(s[3] for s in strata)] * tie
    rarest = min(law.values()) * tie
    p_value = sum((p for p in law.values() if p <= seen), Fraction(0))
    smallest = sum((p for p in law.values() if p <= rarest), Fraction(0))
    return float(min(p_value, Fraction(1))), float(min(smallest, Fraction(1)))


def enumerated_stratified(strata: Sequence[tuple[int, int, int, int]]) -> float:
    """The same p-value by brute force: every way the failures of each task could have fallen
    on its runs (margins fixed), counted."""
    per_task = []
    for runs, failed, shown, _ in strata:
        # Runs 0..shown-1 show the pattern; each placing of the failures, its count among them.
        per_task.append(
            [
                sum(1 for r in chosen if r < shown)
                for chosen in itertools.combinations(range(runs), failed)
            ]
        )
    totals: Counter[int] = Counter()
    for placing in itertools.product(*per_task):
        totals[sum(placing)] += 1
    everything = sum(totals.values())
    seen = totals[sum(s[3] for s in strata)]
    return sum(count for count in totals.values() if count <= seen) / everything


def _first_before(run: RunPatterns, first: str, second: str) -> bool | None:
    at_first, at_second = run.patterns.get(first), run.patterns.get(second)
    if at_first is None or at_second is None or at_first == at_second:
        return None
    return at_first < at_second


def reference_candidates(runs: Sequence[RunPatterns]) -> Iterator[tuple[str, list[int], list[int]]]:
    everyone = list(range(len(runs)))
    kinds = sorted({p for run in runs for p in run.patterns if not p.startswith("order")})
    for pattern in kinds:
        yield pattern, [i for i in everyone if pattern in runs[i].patterns], everyone
    used: Counter[str] = Counter()
    for run in runs:
        used.update(p for p in run.patterns if p.startswith("uses:"))
    common = [k for k, _ in used.most_common(MAX_KINDS_FOR_ORDER)]
    for i, first in enumerate(common):
        for second in common[i + 1 :]:
            a_first, b_first, both = [], [], []
            for index, run in enumerate(runs):
                before = _first_before(run, first, second)
                if before is not None:
                    (a_first if before else b_first).append(index)
                    both.append(index)
            if len(a_first) >= len(b_first):
                yield f"order:{first[5:]}<{second[5:]}", a_first, both
            else:
                yield f"order:{second[5:]}<{first[5:]}", b_first, both


def minable_types(
    runs: Sequence[RunPatterns],
) -> Iterator[tuple[str | None, list[RunPatterns]]]:
    """Each task type with enough successes and failures to mine, in mining's order."""
    by_type: dict[str | None, list[RunPatterns]] = defaultdict(list)
    for run in runs:
        by_type[run.task_type].append(run)
    for task_type, members in sorted(by_type.items(), key=lambda kv: kv[0] or ""):
        failed = sum(not run.success for run in members)
        outcomes: dict[str, set[bool]] = defaultdict(set)
        for run in members:
            outcomes[run.task_id].add(run.success)
        mixed = sum(len(seen) == 2 for seen in outcomes.values())
        if failed >= MIN_SUPPORT and len(members) - failed >= MIN_SUPPORT and mixed >= MIN_TASKS:
            yield task_type, members


def reference_tried(runs: Sequence[RunPatterns]) -> list[tuple[object, ...]]:
    """(task type, pattern, pooled counts, within-task counts, p-value) of every contrast
    tried, in order: each task's runs counted one by one."""
    tried: list[tuple[object, ...]] = []
    for task_type, members in minable_types(runs):
        splits: set[bytes] = set()
        for pattern, present, population in reference_candidates(members):
            shown = set(present)
            absent = [i for i in population if i not in shown]
            if min(len(present), len(absent)) < MIN_SUPPORT:
                continue
            key = hashlib.blake2b(repr((present, absent)).encode()).digest()
            if key in splits:
                continue
            splits.add(key)
            strata = []
            for task in dict.fromkeys(members[i].task_id for i in population):
                mine = [i for i in population if members[i].task_id == task]
                failed = [i for i in mine if not members[i].success]
                with_it = [i for i in mine if i in shown]
                if 0 < len(with_it) < len(mine) and 0 < len(failed) < len(mine):
                    strata.append(
                        (len(mine), len(failed), len(with_it), len(set(failed) & set(with_it)))
                    )
            runs_with = sum(s[2] for s in strata)
            runs_in = sum(s[0] for s in strata)
            if len(strata) < MIN_TASKS or min(runs_with, runs_in - runs_with) < MIN_SUPPORT:
                continue
            p_value, smallest = reference_stratified(strata)
            if smallest > FDR:
                continue
            a = sum(not members[i].success for i in present)
            c = sum(not members[i].success for i in absent)
            failed_with = sum(s[3] for s in strata)
            failed_without = sum(s[1] for s in strata) - failed_with
            within = (failed_with, runs_with, failed_without, runs_in - runs_with, len(strata))
            counts = (len(present), a, len(absent), c)
            tried.append((task_type, pattern, counts, within, p_value))
    return tried


# --- the runs ------------------------------------------------------------------------------


def made_runs(seed: int, count: int) -> list[RunPatterns]:
    """Runs of a few types and tasks, each with some of a few patterns (ties of turns too)."""
    rng = random.Random(seed)
    kinds = [f"uses:tool{k}" for k in range(rng.randint(2, 15))] + ["retry_after_error", "stuck"]
    runs = []
    for step in range(1, count + 1):
        chosen = rng.sample(kinds, rng.randint(0, len(kinds)))
        runs.append(
            RunPatterns(
                step=step,
                task_id=f"task-{rng.randint(0, rng.choice([2, 6, 30]))}",
                task_type=rng.choice(["shop", "air", None]),
                success=rng.random() < rng.choice([0.3, 0.5, 0.8]),
                judged=False,
                patterns={kind: rng.randint(0, 6) for kind in chosen},
            )
        )
    return runs


def tried_now(runs: Sequence[RunPatterns]) -> list[tuple[object, ...]]:
    tried: list[tuple[object, ...]] = []
    for task_type, members in minable_types(runs):
        tried += [
            (
                c.task_type,
                c.pattern,
                c.counts,
                (*c.within.with_pattern, *c.within.without_pattern, c.within.tasks),
                c.p_value,
            )
            for c in _tried(task_type, members)
        ]
    return tried


def check_the_same(runs: list[RunPatterns]) -> int:
    """Every contrast tried, in order, with its counts to the unit and its p-value to 1e-9 of
    the exact fraction; those kept with their q-values. Returns how many were kept."""
    expected = reference_tried(runs)
    now = tried_now(runs)
    assert [item[:-1] for item in now] == [item[:-1] for item in expected]
    assert [item[-1] for item in now] == pytest.approx([item[-1] for item in expected], rel=1e-9)
    report = MiningReport()
    kept = contrasts(runs, report)
    assert report.patterns_tried == len(expected)
    q_values = dict(
        zip(
            [(t, p) for t, p, *_ in expected],
            benjamini_hochberg([item[-1] for item in expected]),
            strict=True,
        )
    )
    for contrast in kept:
        assert contrast.q_value == pytest.approx(
            q_values[(contrast.task_type, contrast.pattern)], rel=1e-9
        )
    return len(kept)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 400))
def test_contrasts_tried_are_those_counting_every_run_gave(seed: int, count: int) -> None:
    check_the_same(made_runs(seed, count))


@st.composite
def _strata(draw: st.DrawFn, most: int = 40) -> list[tuple[int, int, int, int]]:
    found = []
    for _ in range(draw(st.integers(1, 6))):
        runs = draw(st.integers(1, most))
        failed, shown = draw(st.integers(0, runs)), draw(st.integers(0, runs))
        low, high = max(0, failed + shown - runs), min(failed, shown)
        found.append((runs, failed, shown, draw(st.integers(low, high))))
    return found


@given(_strata())
def test_the_stratified_test_is_the_plain_sum_in_fractions(strata: list[tuple[int, ...]]) -> None:
    found = stratified_exact(strata)  # type: ignore[arg-type]
    assert found == pytest.approx(reference_stratified(strata), rel=1e-9, abs=1e-300)  # type: ignore[arg-type]


@settings(max_examples=40)
@given(_strata(most=6))
def test_the_stratified_test_counts_every_placing_of_the_failures(
    strata: list[tuple[int, int, int, int]],
) -> None:
    assert stratified_exact(strata)[0] == pytest.approx(enumerated_stratified(strata), rel=1e-12)


@given(st.lists(st.integers(0, 60), min_size=4, max_size=4))
def test_with_one_task_it_is_fisher_s_exact_test(cells: list[int]) -> None:
    a, b, c, d = cells
    expected = scipy_stats.fisher_exact([[a, b], [c, d]]).pvalue
    p_value, _ = stratified_exact([(a + b + c + d, a + c, a + b, a)])
    assert p_value == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_with_patterns_that_separate_outcomes_the_same_are_kept() -> None:
    kept = 0
    for seed in range(12):
        runs = made_runs(seed, 600)
        for run in runs[: len(runs) // 3]:  # planted: failed runs used tool0 first
            if not run.success:
                run.patterns = {"uses:tool0": 0, **run.patterns}
        kept += check_the_same(runs)
    assert kept > 0


_SAME_BITS = """
import random
from wikitrace.compiler.mine_exact import stratified_exact
rng = random.Random(5)
for _ in range(200):
    strata = []
    for _ in range(rng.randrange(3, 15)):
        n = rng.randrange(4, 60)
        m, t = rng.randrange(1, n), rng.randrange(1, n)
        strata.append((n, m, t, rng.randrange(max(0, t + m - n), min(t, m) + 1)))
    print(*(value.hex() for value in stratified_exact(strata)))
"""


def test_the_p_values_are_the_same_bits_whatever_kernel_the_cpu_gives_the_blas() -> None:
    # A parent's p-values are kept (raw/_contrast_tests.json) and an add, maybe on another
    # machine, must compute the same: numpy's OpenBLAS picks its kernel by CPU, and the
    # kernels round np.convolve's sums differently (150 of 300 tests differed between
    # Prescott and Haswell before the convolution was made of elementwise steps).
    import os
    import subprocess
    import sys

    outputs = set()
    for core in ("Prescott", "Haswell", "SkylakeX", "Sandybridge"):
        env = {**os.environ, "OPENBLAS_CORETYPE": core}
        done = subprocess.run(
            [sys.executable, "-c", _SAME_BITS], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1 and len(next(iter(outputs)).splitlines()) == 200


def test_a_tasks_law_kept_once_made_gives_the_bits_made_anew() -> None:
    # Each task's law is kept once made (`_task_law`); a test met first, or after other tests
    # filled the cache, or with every law made anew, gives one p-value to the bit.
    from wikitrace.compiler import mine_exact

    rng = random.Random(11)
    tests = []
    for _ in range(40):
        strata = []
        for _ in range(rng.randrange(3, 30)):
            n = rng.randrange(2, 8)
            m, t = rng.randrange(1, n), rng.randrange(1, n)
            strata.append((n, m, t, rng.randrange(max(0, t + m - n), min(t, m) + 1)))
        tests.append(strata)
    mine_exact._task_law.cache_clear()
    first = [stratified_exact(strata) for strata in tests]
    assert mine_exact._task_law.cache_info().hits > 0
    again = [stratified_exact(strata) for strata in reversed(tests)][::-1]
    anew = []
    for strata in tests:
        mine_exact._task_law.cache_clear()
        anew.append(stratified_exact(strata))
    assert [p.hex() for pair in first for p in pair] == [p.hex() for pair in again for p in pair]
    assert [p.hex() for pair in first for p in pair] == [p.hex() for pair in anew for p in pair]
    for found, strata in zip(first, tests, strict=True):
        assert found == pytest.approx(reference_stratified(strata), rel=1e-9, abs=1e-300)
    with pytest.raises(ValueError):
        mine_exact._task_law(3, 1, 1)[0] = 0.5  # kept laws are read-only


def test_a_tests_digest_is_the_one_a_parent_wrote() -> None:
    # `raw/_contrast_tests.json` of corpora already made names each test by this digest of its
    # tasks' counts: an add takes a test's p-values only if it computes the same digest.
    compared = [(10, 4, 5, 3), (8, 2, 3, 1), (6, 3, 2, 1)]
    assert strata_key(compared) == "233c85e5bcb0bc2e244836ad39eed0f2"
    assert strata_key(np.array(compared)) == strata_key(compared)


@settings(max_examples=60, deadline=None)
@given(_strata(most=12))
def test_within_tasks_sums_are_exact_over_the_tasks_compared(
    strata: list[tuple[int, int, int, int]],
) -> None:
    within = within_tasks(strata)
    compared = [s for s in strata if 0 < s[2] < s[0] and 0 < s[1] < s[0]]
    if within is None:
        shown = sum(s[2] for s in compared)
        runs = sum(s[0] for s in compared)
        assert len(compared) < MIN_TASKS or min(shown, runs - shown) < MIN_SUPPORT
        return
    assert within.compared == compared and not within.taken
    expected = sum((Fraction(t * m, n) for n, m, t, _ in compared), Fraction(0))
    odds_for = sum((Fraction(a * (n - m - t + a), n) for n, m, t, a in compared), Fraction(0))
    odds_against = sum((Fraction((t - a) * (m - a), n) for n, m, t, a in compared), Fraction(0))
    assert within.expected == float(expected)
    assert within.odds_ratio == (float(odds_for / odds_against) if odds_against else math.inf)
    assert within.more == sum(a * (n - t) > (m - a) * t for n, m, t, a in compared)
    assert within.fewer == sum(a * (n - t) < (m - a) * t for n, m, t, a in compared)
    assert (within.p_value, within.smallest_p) == stratified_exact(compared)
    # A test of the same counts known from a parent: its p-values taken, not computed.
    taken = within_tasks(strata, {within.strata_key: (0.5, 0.25)})
    assert taken is not None and taken.taken and taken.compared == compared
    assert (taken.p_value, taken.smallest_p, taken.expected) == (0.5, 0.25, within.expected)
