"""The exact statistics of mining's contrasts (compiler/mine_contrast.py): the exact test
stratified by task that a pattern makes no difference to failure within any task, and the
Benjamini-Hochberg adjustment of every p-value tried; and what a pattern's test within its
tasks found (`Within`, made by mine_contrast.within_tasks), with its exact sums."""

from __future__ import annotations

import functools
import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeAlias

__all__ = [
    "TIE",
    "KnownTests",
    "Stratum",
    "Within",
    "benjamini_hochberg",
    "over_runs",
    "strata_key",
    "stratified_exact",
]

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
        law = _convolve(law, _task_law(runs, failed, shown))
        seen += shown_failed - low
    observed = law[seen] * (1 + TIE)
    rarest = law.min() * (1 + TIE)
    p_value = math.fsum(law[law <= observed].tolist())
    smallest = math.fsum(law[law <= rarest].tolist())
    return min(1.0, p_value), min(1.0, smallest)


@functools.lru_cache(maxsize=4096)
def _task_law(runs: int, failed: int, shown: int) -> Any:
    """The law of a task's failures among its runs with the pattern, from the fewest its
    counts allow (hypergeometric; each probability a ratio of binomial coefficients, correctly
    rounded). Kept once made, read-only: the tests of a task type's patterns meet the same
    tasks' counts again and again (a task of 3 runs has a few dozen)."""
    import numpy as np

    low, high = max(0, shown + failed - runs), min(shown, failed)
    total = math.comb(runs, shown)
    law = np.array(
        [
            math.comb(failed, x) * math.comb(runs - failed, shown - x) / total
            for x in range(low, high + 1)
        ]
    )
    law.flags.writeable = False
    return law


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


# --- a pattern within its tasks ---------------------------------------------------------------


@dataclass(frozen=True)
class Within:
    """A pattern compared within the tasks that can say something of it (each with runs with
    and without it, and runs of both outcomes). Its other figures (`expected`, `odds_ratio`,
    `more`, `fewer`) are exact sums over the tasks, made when first asked for: a build tries
    hundreds of patterns and keeps a few."""

    tasks: int
    """How many tasks were compared: the strata of the test."""
    with_pattern: tuple[int, int]
    """[failed, total] among their runs that show the pattern."""
    without_pattern: tuple[int, int]
    """[failed, total] among their runs that do not."""
    p_value: float
    smallest_p: float
    """The smallest p-value the tasks' counts allow: a pattern that cannot reach the false
    discovery rate is not tried (Tarone; it cannot be a discovery, and counting it would only
    weaken the correction for the others)."""
    strata_key: str
    """`strata_key` of the tasks compared."""
    counts: Any = field(repr=False, compare=False)
    """Each compared task's `Stratum`, in order: an int64 numpy array of shape (tasks, 4)."""
    taken: bool = False
    """Whether the p-values were taken from the parent's tests rather than computed (checked
    should the pattern be kept: `contrasts_of_types`)."""

    @property
    def compared(self) -> list[Stratum]:
        """The tasks compared, each its `Stratum`."""
        return [(n, m, t, a) for n, m, t, a in self.counts.tolist()]

    @functools.cached_property
    def _sums(self) -> tuple[float, float, int, int]:
        compared = self.compared
        # Exact sums of fractions, each denominator once (tasks share few run counts).
        expected = over_runs((n, t * m) for n, m, t, _ in compared)
        odds_for = over_runs((n, a * (n - m - t + a)) for n, m, t, a in compared)
        odds_against = over_runs((n, (t - a) * (m - a)) for n, m, t, a in compared)
        more = sum(a * (n - t) > (m - a) * t for n, m, t, a in compared)
        fewer = sum(a * (n - t) < (m - a) * t for n, m, t, a in compared)
        odds = float(odds_for / odds_against) if odds_against else math.inf
        return float(expected), odds, more, fewer

    @property
    def expected(self) -> float:
        """Failures expected among the runs with the pattern had it made no difference within
        their task (the sum over tasks of its runs with the pattern times its failure rate)."""
        return self._sums[0]

    @property
    def odds_ratio(self) -> float:
        """The Mantel-Haenszel common odds ratio of failure with the pattern (inf: never
        lower)."""
        return self._sums[1]

    @property
    def more(self) -> int:
        """Tasks whose runs with the pattern failed at a higher rate than those without."""
        return self._sums[2]

    @property
    def fewer(self) -> int:
        """...at a lower rate (the rest: at the same)."""
        return self._sums[3]

    @property
    def harmful(self) -> bool:
        return self.with_pattern[0] > self.expected


KnownTests: TypeAlias = "Mapping[str, tuple[float, float]]"
"""`stratified_exact`'s p-values of the tests a parent made, by `strata_key` of their tasks."""


def strata_key(compared: Any) -> str:
    """A digest of a test's tasks' counts (`Stratum`s, or their (tasks, 4) array), in order:
    `stratified_exact` is a function of them alone (their order included: its sums are of
    floats)."""
    import numpy as np

    flat = np.ascontiguousarray(np.asarray(compared, dtype=np.int64).reshape(-1))
    return hashlib.blake2b(flat.tobytes(), digest_size=16).hexdigest()
