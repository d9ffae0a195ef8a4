"""Finite-sample confidence bounds for rates: exact (Clopper-Pearson) one-sided binomial bounds;
the betting e-processes the gate's and monitoring's anytime tests are made of (`EProcess`,
`Mixture`, `lr_bet`: control/sequential.py says what each test bets on); and e-BH, the
error-rate control across several tests' e-values.

With k events in n trials, `upper(k, n, confidence)` is the largest rate p for which seeing at
most k events still had probability at least 1 - confidence: the true rate is below it with
probability at least `confidence`, whatever n is. The gate's probes are few (tens), where
normal approximations and Bernstein-type bounds for bounded variables are loose or wrong, and
its outcomes are events (a probe got better or worse), so exact binomial bounds fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


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


def lr_bet(null: float, alternative: float) -> float:
    """The bet under which wealth is the likelihood ratio of two rates: betting against the
    null rate `null` on a 0-or-1 outcome X as 1 - bet * (X - null), the wealth after n
    outcomes is P(outcomes | alternative) / P(outcomes | null) (a sequential probability
    ratio test). Negative when the alternative is the higher rate."""
    return (null - alternative) / (null * (1.0 - null))


@dataclass
class EProcess:
    """Wealth betting against the null E[V] >= 0 at a fixed stake: each outcome V multiplies
    it by 1 - stake * V. A stake above 0 bets that E[V] < 0 (it needs V <= 1 / stake), one
    below 0 that E[V] > 0 (against the null E[V] <= 0; it needs V >= 1 / stake)."""

    stake: float = 0.0
    log_wealth: float = 0.0

    def observe(self, value: float, stake: float | None = None) -> None:
        """One outcome; `stake`, if given, is this outcome's own (set before it was seen)."""
        stake = self.stake if stake is None else stake
        factor = 1.0 - stake * value
        if factor < 0:
            raise ValueError(f"outcome {value} out of the range a stake of {stake} allows")
        self.log_wealth += math.log(factor) if factor > 0 else -math.inf

    @property
    def wealth(self) -> float:
        return math.exp(self.log_wealth)

    def rejects(self, alpha: float) -> bool:
        """The null is rejected at level alpha. A test that has rejected stops betting (its
        owner stops feeding it), so its wealth stays where it crossed: an e-value."""
        return self.log_wealth >= -math.log(alpha)


@dataclass
class Mixture:
    """The average wealth of bets at several fixed stakes, each chosen before any outcome: an
    average of test supermartingales is one, so it is a test at every alpha too. It grows
    nearly as fast as its best stake for the truth at hand, whichever that is, for the price
    of log(len(stakes)) in evidence."""

    stakes: tuple[float, ...]
    parts: list[EProcess] = field(init=False)

    def __post_init__(self) -> None:
        self.parts = [EProcess(stake) for stake in self.stakes]

    def observe(self, value: float) -> None:
        for part in self.parts:
            part.observe(value)

    @property
    def wealth(self) -> float:
        return sum(part.wealth for part in self.parts) / len(self.parts)

    @property
    def log_wealth(self) -> float:
        wealth = self.wealth
        return math.log(wealth) if wealth > 0 else -math.inf

    def rejects(self, alpha: float) -> bool:
        return self.wealth >= 1 / alpha
