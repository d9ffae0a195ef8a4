"""Contrasts across runs (compiler/mine.py): within a task type, the action patterns whose
presence separates failed from successful runs, by Fisher's exact test with the p-values of
every pattern tried adjusted together (Benjamini-Hochberg)."""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from wikitrace.corpus_schema.tasks import TaskKey

from .mine_table import RunPatterns

FDR = 0.05
"""The false discovery rate Benjamini-Hochberg holds across every pattern tried."""
MIN_SUPPORT = 5
"""A pattern must be seen in, and missing from, at least this many runs."""
MIN_TASKS = 3
"""...and the runs on each side must come from at least this many distinct tasks."""
MAX_PER_TYPE = 3
"""At most this many contrast lessons per task type, strongest first."""
MAX_KINDS_FOR_ORDER = 12
"""Order patterns (A before B) are tried among the most used kinds of action only."""
NO_TYPE = "(no task type)"


# --- statistics --------------------------------------------------------------------------------


_LOG_FACTORIALS: list[float] = [0.0]
"""log(k!) = lgamma(k + 1) at index k, extended as a test needs more (`_log_factorials`)."""


def _log_factorials(n: int) -> list[float]:
    """`_LOG_FACTORIALS`, holding at least log(0!) to log(n!)."""
    table = _LOG_FACTORIALS
    if len(table) <= n:
        table.extend(map(math.lgamma, range(len(table) + 1, n + 2)))
    return table


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test for the table [[a, b], [c, d]]: the sum of the
    probabilities (hypergeometric, margins fixed) of every table no more likely than this one.
    Each log(k!) is lgamma(k + 1) looked up once (`_log_factorials`), the terms summed in the
    same order: the same float, to the bit, as calling lgamma for each."""
    row1, col1, n = a + b, a + c, a + b + c + d
    low, high = max(0, row1 + col1 - n), min(row1, col1)
    f = _log_factorials(n)
    denominator = f[n] - f[col1] - f[n - col1]
    rest, rest_row = n - row1, f[row1]
    rest_f = f[rest]

    def log_p(x: int) -> float:
        chosen = rest_row - f[x] - f[row1 - x]
        return chosen + (rest_f - f[col1 - x] - f[rest - col1 + x]) - denominator

    observed = log_p(a) + 1e-7  # relative tolerance, as exact tests use
    total = 0.0
    exp = math.exp
    for x in range(low, high + 1):
        value = log_p(x)
        if value <= observed:
            total += exp(value)
    return min(1.0, total)


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


# --- contrasts ------------------------------------------------------------------------------


@dataclass
class Contrast:
    """A pattern tried in the runs of a task type: how many with it and how many without it
    failed. The runs themselves (`present`, `absent`) are split out again only for the
    contrasts kept: a build tries dozens of patterns over every run of a type."""

    task_type: str | None
    pattern: str
    runs: Sequence[RunPatterns]
    """The task type's runs."""
    counts: tuple[int, int, int, int]
    """Runs with the pattern, how many of them failed; runs without it, how many failed."""
    p_value: float
    q_value: float = 1.0

    @functools.cached_property
    def _split(self) -> tuple[list[RunPatterns], list[RunPatterns]]:
        return split(self.pattern, self.runs)

    @property
    def present(self) -> list[RunPatterns]:
        return self._split[0]

    @property
    def absent(self) -> list[RunPatterns]:
        return self._split[1]

    @property
    def with_failed(self) -> int:
        return self.counts[1]

    @property
    def without_failed(self) -> int:
        return self.counts[3]

    @property
    def harmful(self) -> bool:
        """The pattern goes with failure (rather than with success)."""
        present, with_failed, absent, without_failed = self.counts
        return with_failed * absent > without_failed * present


@dataclass
class MiningReport:
    patterns_tried: int = 0
    contrasts: int = 0
    divergences: int = 0
    same_actions: int = 0
    """Tasks whose failed and successful runs took the very same actions."""
    task_types: dict[str, str] = field(default_factory=dict)
    """Task type -> why it yielded no contrast (too few runs, one outcome, nothing significant)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "patterns_tried": self.patterns_tried,
            "contrasts": self.contrasts,
            "divergences": self.divergences,
            "tasks_with_same_actions": self.same_actions,
            "task_types": dict(sorted(self.task_types.items())),
        }


def _tasks(runs: Sequence[RunPatterns], positions: Iterable[int] | None = None) -> int:
    """How many tasks `runs` (those at `positions`, if given) are of."""
    chosen = runs if positions is None else (runs[i] for i in positions)
    return len({run.task for run in chosen})


def _enough_tasks(task_ids: Sequence[TaskKey], positions: Iterable[int]) -> bool:
    """Whether the runs at `positions` come from at least `MIN_TASKS` tasks (`task_ids`: each
    run's task, RunPatterns.task); it stops as soon as they do."""
    seen: set[TaskKey] = set()
    for index in positions:
        seen.add(task_ids[index])
        if len(seen) >= MIN_TASKS:
            return True
    return False


def _positions(found: Any) -> array[int]:
    """Positions numpy found, as an array of C ints, as a candidate holds them."""
    import numpy as np

    held = array("i")
    held.frombytes(np.ascontiguousarray(found, dtype=np.intc).tobytes())
    return held


Candidate: TypeAlias = "tuple[str, array[int], array[int]]"
"""A pattern, the runs that show it and the runs it is counted among, by index."""


def _seen(runs: Sequence[RunPatterns]) -> Iterator[Candidate]:
    """Each pattern but an order, the runs that show it, and all the runs, by index: the
    runs are read once, each adding its position to each of its patterns'."""
    everyone = array("i", range(len(runs)))
    showing: dict[str, array[int]] = {}
    for index, run in enumerate(runs):
        for pattern in run.patterns:
            if not pattern.startswith("order"):
                found = showing.get(pattern)
                if found is None:
                    found = showing[pattern] = array("i")
                found.append(index)
    for pattern in sorted(showing):
        yield pattern, showing[pattern], everyone


def _orders(runs: Sequence[RunPatterns]) -> Iterator[Candidate]:
    """`order:A<B`, the runs that used A first and the runs that used both (in order), by
    index in `runs`: one pair of the commonest kinds at a time, from each kind's first turn
    in every run (read once a kind), compared as arrays (`_first_before` of every run)."""
    import numpy as np

    kinds: Counter[str] = Counter()
    for run in runs:
        kinds.update(p for p in run.patterns if p.startswith("uses:"))
    common = [k for k, _ in kinds.most_common(MAX_KINDS_FOR_ORDER)]
    turns: dict[str, tuple[Any, Any]] = {}  # a kind's: whether each run used it, and when
    for kind in common:
        at = [run.patterns.get(kind) for run in runs]
        turns[kind] = (
            np.fromiter((turn is not None for turn in at), dtype=bool, count=len(at)),
            np.fromiter((turn or 0 for turn in at), dtype=np.int64, count=len(at)),
        )
    for i, first in enumerate(common):
        for second in common[i + 1 :]:
            (used_a, at_a), (used_b, at_b) = turns[first], turns[second]
            counted = used_a & used_b & (at_a != at_b)
            a_first = _positions(np.flatnonzero(counted & (at_a < at_b)))
            b_first = _positions(np.flatnonzero(counted & (at_a > at_b)))
            both = _positions(np.flatnonzero(counted))
            name_a, name_b = first[5:], second[5:]
            if len(a_first) >= len(b_first):
                yield f"order:{name_a}<{name_b}", a_first, both
            else:
                yield f"order:{name_b}<{name_a}", b_first, both


def _first_before(run: RunPatterns, first: str, second: str) -> bool | None:
    """Whether the run's first `first` (a `uses:` pattern) came before its first `second`;
    None when it lacks one of them or both came in one turn: it is not counted for their
    order."""
    at_first, at_second = run.patterns.get(first), run.patterns.get(second)
    if at_first is None or at_second is None or at_first == at_second:
        return None
    return at_first < at_second


def split(pattern: str, runs: Sequence[RunPatterns]) -> tuple[list[RunPatterns], list[RunPatterns]]:
    """The runs that show `pattern` and those it is compared with, as mining counts them:
    for `order:A<B`, among the runs whose order of A and B counts, those with A first and the
    others; else the runs with the pattern and those without."""
    if pattern.startswith("order:"):
        first, second = (f"uses:{name}" for name in pattern[6:].split("<", 1))
        order = [(run, _first_before(run, first, second)) for run in runs]
        return (
            [run for run, before in order if before is True],
            [run for run, before in order if before is False],
        )
    return [run for run in runs if pattern in run.patterns], [
        run for run in runs if pattern not in run.patterns
    ]


def contrasts(
    runs: Sequence[RunPatterns], report: MiningReport, fdr: float = FDR
) -> list[Contrast]:
    """The contrasts of every task type whose adjusted p-value is at most `fdr`, strongest
    first within a type."""
    by_type: dict[str | None, list[RunPatterns]] = defaultdict(list)
    for run in runs:
        by_type[run.task_type].append(run)
    tried: list[Contrast] = []
    for task_type, members in sorted(by_type.items(), key=lambda kv: kv[0] or ""):
        name = task_type or NO_TYPE
        failed = sum(not run.success for run in members)
        if failed < MIN_SUPPORT or len(members) - failed < MIN_SUPPORT:
            report.task_types[name] = (
                f"{len(members)} runs, {failed} failed: too few of one outcome to compare"
            )
            continue
        before = len(tried)
        tried += _tried(task_type, members)
        if len(tried) == before:
            report.task_types[name] = (
                f"{len(members)} runs: no pattern seen in and missing from {MIN_SUPPORT} runs "
                f"of {MIN_TASKS} tasks each"
            )
    report.patterns_tried = len(tried)
    for contrast, q_value in zip(
        tried, benjamini_hochberg([c.p_value for c in tried]), strict=True
    ):
        contrast.q_value = q_value
    kept: list[Contrast] = []
    for task_type in dict.fromkeys(c.task_type for c in tried):
        significant = sorted(
            (c for c in tried if c.task_type == task_type and c.q_value <= fdr),
            key=lambda c: (c.p_value, c.pattern),
        )
        chosen: list[Contrast] = []
        for contrast in significant:
            steps = {run.step for run in contrast.present}
            if any(_overlap(steps, {r.step for r in other.present}) >= 0.9 for other in chosen):
                continue  # says nearly what a stronger one says, of nearly the same runs
            chosen.append(contrast)
            if len(chosen) == MAX_PER_TYPE:
                break
        name = task_type or NO_TYPE
        if not chosen and name not in report.task_types:
            best = min((c for c in tried if c.task_type == task_type), key=lambda c: c.p_value)
            report.task_types[name] = (
                f"nothing significant: the strongest pattern ({best.pattern}) has p = "
                f"{best.p_value:.3g}, q = {best.q_value:.3g}"
            )
        kept += chosen
    report.contrasts = len(kept)
    return kept


def _tried(task_type: str | None, members: Sequence[RunPatterns]) -> Iterator[Contrast]:
    """The contrasts tried in a task type's runs: each pattern seen in and missing from
    enough runs of enough tasks, once for each way of splitting the runs."""
    import numpy as np

    failed = np.fromiter((not run.success for run in members), dtype=bool, count=len(members))
    task_ids = [run.task for run in members]
    shown = np.zeros(len(members), dtype=bool)
    seen_splits: set[bytes] = set()
    for pattern, present, population in itertools.chain(_seen(members), _orders(members)):
        at = np.frombuffer(present, dtype=np.intc)
        everyone = np.frombuffer(population, dtype=np.intc)
        shown[at] = True
        absent = everyone[~shown[everyone]]  # the population without the pattern, in order
        shown[at] = False
        if min(len(present), len(absent)) < MIN_SUPPORT:
            continue
        if not (_enough_tasks(task_ids, present) and _enough_tasks(task_ids, absent.tolist())):
            continue
        # The same runs split the same way: one pattern is enough.
        key = hashlib.blake2b(present.tobytes() + b"/" + absent.tobytes()).digest()
        if key in seen_splits:
            continue
        seen_splits.add(key)
        a, c = int(failed[at].sum()), int(failed[absent].sum())
        p_value = fisher_exact(a, len(present) - a, c, len(absent) - c)
        counts = (len(present), a, len(absent), c)
        yield Contrast(task_type, pattern, members, counts, p_value)


def _overlap(a: AbstractSet[Any], b: AbstractSet[Any]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0
