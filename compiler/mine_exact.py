"""The exact statistics of mining's contrasts (compiler/mine_contrast.py): the exact test
stratified by task that a pattern makes no difference to failure within any task, and the
Benjamini-Hochberg adjustment of every p-value tried."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any, TypeAlias

__all__ = ["TIE", "Stratum", "benjamini_hochberg", "over_runs", "stratified_exact"]

Stratum: TypeAlias = "tuple[int, int, int, int]"
"""A task's runs, as the stratified test counts them: how many, how many failed, how many
show the pattern, how many of those failed."""


TIE = 1e-7
"""Relative tolerance under which two totals are equally likely (as exact tests use): the
law is summed in floats."""


def stratified_exact(strata: Iterable[Stratum]) -> tuple[float, float]:
    """Two-sided p-value of the exact conditional test that a pattern makes no difference to
    failure within any task (the exact form of the Cochran-Mantel-Haenszel test), and the
    smallest p-value the tasks' counts allow whatever the outcomes fall on.

    Given each task's runs, failures and runs with the pattern, the failures among its runs
    with the pattern are hypergeometric (each probability a ratio of binomial coefficients,
    correctly rounded); the statistic is their sum over tasks, whose law is the convolution of
    the tasks' laws. The p-value is the probability of every total no more likely than the
    one seen (`TIE`). With one task it is Fisher's exact test."""
    import numpy as np

    law = np.ones(1)
    seen = 0
    for runs, failed, shown, shown_failed in strata:
        low, high = max(0, shown + failed - runs), min(shown, failed)
        if low == high:
            continue  # one total only: nothing to add
        total = math.comb(runs, shown)
        task = np.array(
            [
                math.comb(failed, x) * math.comb(runs - failed, shown - x) / total
                for x in range(low, high + 1)
            ]
        )
        law = _convolve(law, task)
        seen += shown_failed - low
    observed = law[seen] * (1 + TIE)
    rarest = law.min() * (1 + TIE)
    p_value = math.fsum(law[law <= observed].tolist())
    smallest = math.fsum(law[law <= rarest].tolist())
    return min(1.0, p_value), min(1.0, smallest)


def _convolve(law: Any, task: Any) -> Any:
    """The law of the sum of two independent totals: `np.convolve`, but made of elementwise
    products and sums in a fixed order, so that the same counts give the same bits on every
    CPU (np.convolve goes through the BLAS, whose kernel, and so its rounding, depends on the
    CPU: a parent's p-values, kept in `raw/_contrast_tests.json`, must be what an add on
    another machine computes)."""
    import numpy as np

    short, long = (law, task) if len(law) <= len(task) else (task, law)
    out = np.zeros(len(law) + len(task) - 1)
    for shift, weight in enumerate(short.tolist()):
        out[shift : shift + len(long)] += long * weight
    return out


def over_runs(terms: Iterable[tuple[int, int]]) -> Fraction:
    """The exact sum of numerator / runs over (runs, numerator) pairs: the numerators of
    each denominator summed as integers first."""
    by_runs: dict[int, int] = defaultdict(int)
    for runs, numerator in terms:
        by_runs[runs] += numerator
    return sum((Fraction(total, runs) for runs, total in sorted(by_runs.items())), Fraction(0))


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Adjusted p-values (q-values), in the order given."""
    count = len(p_values)
    order = sorted(range(count), key=lambda i: p_values[i])
    adjusted = [1.0] * count
    running = 1.0
    for rank in range(count, 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * count / rank)
        adjusted[index] = running
    return adjusted
