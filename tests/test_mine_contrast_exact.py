"""Contrasts counted the fast way (compiler/mine_contrast.py: each pattern's runs found in one
pass, orders compared as arrays, Fisher's test from a table of log-factorials) give what
counting each pattern over every run gave, to the bit: the lessons a corpus holds, and their
p- and q-values, are the same as before."""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.compiler.mine_contrast import (
    MAX_KINDS_FOR_ORDER,
    MIN_SUPPORT,
    MIN_TASKS,
    MiningReport,
    _tried,
    benjamini_hochberg,
    contrasts,
    fisher_exact,
)
from wikitrace.compiler.mine_table import RunPatterns

# --- the counting as it was: every pattern over every run ----------------------------------


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def reference_fisher(a: int, b: int, c: int, d: int) -> float:
    row1, col1, n = a + b, a + c, a + b + c + d
    low, high = max(0, row1 + col1 - n), min(row1, col1)
    denominator = _log_choose(n, col1)

    def log_p(x: int) -> float:
        return _log_choose(row1, x) + _log_choose(n - row1, col1 - x) - denominator

    observed = log_p(a)
    total = 0.0
    for x in range(low, high + 1):
        value = log_p(x)
        if value <= observed + 1e-7:
            total += math.exp(value)
    return min(1.0, total)


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
        if failed >= MIN_SUPPORT and len(members) - failed >= MIN_SUPPORT:
            yield task_type, members


def reference_tried(runs: Sequence[RunPatterns]) -> list[tuple[object, ...]]:
    """(task type, pattern, counts, p-value) of every contrast tried, in order."""
    tried: list[tuple[object, ...]] = []
    for task_type, members in minable_types(runs):
        splits: set[bytes] = set()
        for pattern, present, population in reference_candidates(members):
            shown = set(present)
            absent = [i for i in population if i not in shown]
            if min(len(present), len(absent)) < MIN_SUPPORT:
                continue
            tasks = [len({members[i].task_id for i in side}) for side in (present, absent)]
            if min(tasks) < MIN_TASKS:
                continue
            key = hashlib.blake2b(repr((present, absent)).encode()).digest()
            if key in splits:
                continue
            splits.add(key)
            a = sum(not members[i].success for i in present)
            c = sum(not members[i].success for i in absent)
            p_value = reference_fisher(a, len(present) - a, c, len(absent) - c)
            tried.append((task_type, pattern, (len(present), a, len(absent), c), p_value))
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
        tried += [(c.task_type, c.pattern, c.counts, c.p_value) for c in _tried(task_type, members)]
    return tried


def check_the_same(runs: list[RunPatterns]) -> int:
    """Every contrast tried, in order, with its counts and p-value to the bit; those kept with
    their q-values. Returns how many were kept."""
    expected = reference_tried(runs)
    assert tried_now(runs) == expected
    report = MiningReport()
    kept = contrasts(runs, report)
    assert report.patterns_tried == len(expected)
    q_values = dict(
        zip(
            [(t, p) for t, p, _, _ in expected],
            benjamini_hochberg([value for _, _, _, value in expected]),
            strict=True,
        )
    )
    for contrast in kept:
        assert contrast.q_value == q_values[(contrast.task_type, contrast.pattern)]
    return len(kept)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 400))
def test_contrasts_tried_are_those_counting_every_run_gave(seed: int, count: int) -> None:
    check_the_same(made_runs(seed, count))


@given(st.lists(st.integers(0, 60), min_size=4, max_size=4))
def test_fisher_from_a_table_of_log_factorials_is_the_same_float(cells: list[int]) -> None:
    assert fisher_exact(*cells) == reference_fisher(*cells)


def test_with_patterns_that_separate_outcomes_the_same_are_kept() -> None:
    kept = 0
    for seed in range(12):
        runs = made_runs(seed, 600)
        for run in runs[: len(runs) // 3]:  # planted: failed runs used tool0 first
            if not run.success:
                run.patterns = {"uses:tool0": 0, **run.patterns}
        kept += check_the_same(runs)
    assert kept > 0
