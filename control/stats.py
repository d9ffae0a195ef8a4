"""Finite-sample confidence bounds for rates: exact (Clopper-Pearson) one-sided binomial bounds;
and e-BH, the error-rate control across several tests' e-values.

With k events in n trials, `upper(k, n, confidence)` is the largest rate p for which seeing at
most k events still had probability at least 1 - confidence: the true rate is below it with
probability at least `confidence`, whatever n is. The gate's probes are few (tens), where
normal approximations and Bernstein-type bounds for bounded variables are loose or wrong, and
its outcomes are events (a probe got better or worse), so exact binomial bounds fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _log_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, sum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1)))


def upper(k: int, n: int, confidence: float) -> float:
    """One-sided upper bound on a rate from k events in n trials (1.0 when n is 0)."""
    _check(k, n, confidence)
    if n == 0 or k == n:
        return 1.0
    alpha = 1.0 - confidence
    low, high = k / n, 1.0
    for _ in range(100):  # P(X <= k) falls as p grows: find where it crosses alpha
        middle = (low + high) / 2
        if binomial_cdf(k, n, middle) > alpha:
            low = middle
        else:
            high = middle
    return high


def lower(k: int, n: int, confidence: float) -> float:
    """One-sided lower bound on a rate from k events in n trials (0.0 when n is 0)."""
    _check(k, n, confidence)
    if n == 0 or k == 0:
        return 0.0
    return 1.0 - upper(n - k, n, confidence)


def _check(k: int, n: int, confidence: float) -> None:
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's two-sided interval for a rate from k events in n trials (95% at z 1.96): what
    the benchmarks print beside each simulated rate."""
    share = k / n
    middle = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, middle - half), min(1.0, middle + half)


def e_bh(e_values: Sequence[float], alpha: float) -> set[int]:
    """The e-Benjamini-Hochberg procedure (Wang and Ramdas, 2022): the indices whose nulls are
    rejected so that the expected share of true nulls among them is at most alpha, under any
    dependence between the e-values."""
    m = len(e_values)
    order = sorted(range(m), key=lambda i: -e_values[i])
    chosen = 0
    for k in range(1, m + 1):
        if e_values[order[k - 1]] >= m / (alpha * k):
            chosen = k
    return set(order[:chosen])
