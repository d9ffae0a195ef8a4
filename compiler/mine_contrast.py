"""Contrasts across runs (compiler/mine.py): within a task type, the action patterns whose
presence separates failed from successful runs of the same task, by an exact test stratified
by task (`stratified_exact`), the p-values of every pattern tried adjusted together
(Benjamini-Hochberg).

Runs are compared within their task, never across tasks: a pattern that only marks harder
tasks (a tool that only hard tasks need) goes with failure across tasks without making any
run of a task fail more often, and is no lesson. A task counts when it has runs with and
without the pattern and runs of both outcomes; the others say nothing about the pattern."""

from __future__ import annotations

import functools
import hashlib
import itertools
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from wikitrace.corpus_schema.contrast_tests import ContrastTests, Tried, TypeTests

from .mine_exact import (
    KnownTests,
    Within,
    benjamini_hochberg,
    strata_key,
    stratified_exact,
)
from .mine_table import Columns, RunPatterns, columns_of, task_of

FDR = 0.05
"""The false discovery rate Benjamini-Hochberg holds across every pattern tried."""
MIN_SUPPORT = 5
"""A pattern must be seen in, and missing from, at least this many runs of the tasks compared."""
MIN_TASKS = 3
"""...and at least this many tasks must be compared (runs with and without the pattern, runs
of both outcomes): one task's repeated trials never make a lesson alone."""
MAX_PER_TYPE = 3
"""At most this many contrast lessons per task type, strongest first."""
MAX_KINDS_FOR_ORDER = 12
"""Order patterns (A before B) are tried among the most used kinds of action only."""
NO_TYPE = "(no task type)"


# --- statistics --------------------------------------------------------------------------------


def within_tasks(strata: Any, known: KnownTests | None = None) -> Within | None:
    """The stratified comparison over the tasks of `strata` (`Stratum`s, or their (tasks, 4)
    array) that can say something of the pattern; None when fewer than `MIN_TASKS` can, or
    their runs with (or without) it are fewer than `MIN_SUPPORT`. A test of the same tasks'
    counts in `known` gives its p-values (not computed again)."""
    import numpy as np

    counts = np.asarray(strata, dtype=np.int64).reshape(-1, 4)
    n, m, t = counts[:, 0], counts[:, 1], counts[:, 2]
    compared = counts[(t > 0) & (t < n) & (m > 0) & (m < n)]
    shown = int(compared[:, 2].sum())
    runs = int(compared[:, 0].sum())
    if len(compared) < MIN_TASKS or min(shown, runs - shown) < MIN_SUPPORT:
        return None
    failed_with = int(compared[:, 3].sum())
    failed = int(compared[:, 1].sum())
    key = strata_key(compared)
    taken = known.get(key) if known is not None else None
    p_value, smallest = taken if taken is not None else stratified_exact(compared.tolist())
    return Within(
        tasks=len(compared),
        with_pattern=(failed_with, shown),
        without_pattern=(failed - failed_with, runs - shown),
        p_value=p_value,
        smallest_p=smallest,
        strata_key=key,
        counts=compared,
        taken=taken is not None,
    )


# --- contrasts ------------------------------------------------------------------------------


@dataclass
class Contrast:
    """A pattern tried in the runs of a task type: compared within tasks (`within`), and over
    all the type's runs (`counts`, for the record). The runs themselves (`present`,
    `absent`) are split out again only for the contrasts kept: a build tries dozens of
    patterns over every run of a type."""

    task_type: str | None
    pattern: str
    runs: Sequence[RunPatterns]
    """The task type's runs."""
    counts: tuple[int, int, int, int]
    """Runs with the pattern, how many of them failed; runs without it, how many failed (every
    run of the type, across tasks)."""
    within: Within
    """The comparison within tasks that the test and the lesson rest on."""
    q_value: float = 1.0

    @property
    def p_value(self) -> float:
        return self.within.p_value

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
        """The pattern goes with failure within tasks (rather than with success)."""
        return self.within.harmful


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
    return len({task_of(run) for run in chosen})


def _positions(found: Any) -> array[int]:
    """Positions numpy found, as an array of C ints, as a candidate holds them."""
    import numpy as np

    held = array("i")
    held.frombytes(np.ascontiguousarray(found, dtype=np.intc).tobytes())
    return held


Candidate: TypeAlias = "tuple[str, array[int], array[int]]"
"""A pattern, the runs that show it and the runs it is counted among, by index."""


def _seen(columns: Columns) -> Iterator[Candidate]:
    """Each pattern but an order (by name), the runs that show it, and all the runs, by
    index: the entries grouped by pattern, each group's runs in order."""
    import numpy as np

    runs = len(columns.failed)
    everyone = array("i", range(runs))
    is_order = np.fromiter(
        (name.startswith("order") for name in columns.names), dtype=bool, count=len(columns.names)
    )
    counted = ~is_order[columns.entry_names]
    names = columns.entry_names[counted]
    order = np.argsort(names, kind="stable")  # a run's entries stay in run order
    grouped_names, grouped_runs = names[order], columns.entry_runs[counted][order]
    bounds = np.flatnonzero(np.diff(grouped_names)) + 1
    starts = np.concatenate(([0], bounds))
    stops = np.concatenate((bounds, [len(grouped_names)]))
    groups = {
        columns.names[int(grouped_names[start])]: (start, stop)
        for start, stop in zip(starts, stops, strict=True)
        if stop > start
    }
    for pattern in sorted(groups):
        start, stop = groups[pattern]
        yield pattern, _positions(grouped_runs[start:stop]), everyone


def _orders(columns: Columns) -> Iterator[Candidate]:
    """`order:A<B`, the runs that used A first and the runs that used both (in order), by
    index: one pair of the commonest kinds at a time (ties: the first met first), from each
    kind's first turn in every run, compared as arrays (`_first_before` of every run)."""
    import numpy as np

    runs = len(columns.failed)
    is_kind = np.fromiter(
        (name.startswith("uses:") for name in columns.names), dtype=bool, count=len(columns.names)
    )
    kind_numbers = columns.entry_names[is_kind[columns.entry_names]]
    seen, first_at, counts = np.unique(kind_numbers, return_index=True, return_counts=True)
    ranked = sorted(range(len(seen)), key=lambda i: (-int(counts[i]), int(first_at[i])))
    common = [int(seen[i]) for i in ranked[:MAX_KINDS_FOR_ORDER]]
    turns: dict[int, tuple[Any, Any]] = {}  # a kind's: whether each run used it, and when
    for kind in common:
        held = columns.entry_names == kind
        used = np.zeros(runs, dtype=bool)
        at = np.zeros(runs, dtype=np.int64)
        used[columns.entry_runs[held]] = True
        at[columns.entry_runs[held]] = columns.entry_turns[held]
        turns[kind] = (used, at)
    for i, first in enumerate(common):
        for second in common[i + 1 :]:
            (used_a, at_a), (used_b, at_b) = turns[first], turns[second]
            counted = used_a & used_b & (at_a != at_b)
            a_first = _positions(np.flatnonzero(counted & (at_a < at_b)))
            b_first = _positions(np.flatnonzero(counted & (at_a > at_b)))
            both = _positions(np.flatnonzero(counted))
            name_a, name_b = columns.names[first][5:], columns.names[second][5:]
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


def _untried(columns: Columns) -> str | None:
    """Why a task type's runs cannot be mined at all, or None."""
    import numpy as np

    runs = len(columns.failed)
    failed = int(columns.failed.sum())
    if failed < MIN_SUPPORT or runs - failed < MIN_SUPPORT:
        return f"{runs} runs, {failed} failed: too few of one outcome to compare"
    tasks = int(columns.task_codes.max()) + 1
    failures = np.bincount(columns.task_codes, weights=columns.failed, minlength=tasks)
    per_task = np.bincount(columns.task_codes, minlength=tasks)
    mixed = int(((failures > 0) & (failures < per_task)).sum())
    if mixed < MIN_TASKS:
        return (
            f"{runs} runs, {failed} failed, but {mixed} of their "
            f"{tasks} tasks have both outcomes: runs are compared within a task, "
            f"and a pattern needs {MIN_TASKS} such tasks"
        )
    return None


def contrasts(
    runs: Sequence[RunPatterns], report: MiningReport, fdr: float = FDR
) -> list[Contrast]:
    """The contrasts of every task type whose adjusted p-value is at most `fdr`, strongest
    first within a type."""
    by_type: dict[str | None, list[RunPatterns]] = defaultdict(list)
    for run in runs:
        by_type[run.task_type].append(run)
    counts = {task_type: len(members) for task_type, members in by_type.items()}
    return contrasts_of_types(counts, by_type.__getitem__, report, fdr=fdr)[0]


def mining_thresholds(fdr: float = FDR) -> dict[str, float]:
    """The thresholds that decide which patterns a task type's runs are tried for: tests
    kept under others are not taken (`contrasts_of_types`)."""
    return {
        "fdr": fdr,
        "min_support": MIN_SUPPORT,
        "min_tasks": MIN_TASKS,
        "max_kinds_for_order": MAX_KINDS_FOR_ORDER,
    }


def contrasts_of_types(
    counts: Mapping[str | None, int],
    members_of: Callable[[str | None], Sequence[RunPatterns]],
    report: MiningReport,
    *,
    kept: ContrastTests | None = None,
    touched: AbstractSet[str | None] = frozenset(),
    fdr: float = FDR,
) -> tuple[list[Contrast], ContrastTests]:
    """`contrasts` of the runs of each task type in `counts` (how many runs each has;
    `members_of` gives them), and what was tested of each type. A type not `touched`, whose
    tests `kept` made of as many runs under the same thresholds, is not recounted: its
    p-values are adjusted with the others' as they are, and its runs are read only when one
    of its patterns is then significant (its lessons are made from them). The result is the
    same as counting every type anew."""
    settings = mining_thresholds(fdr)
    reusable = kept.types if kept is not None and kept.settings == settings else {}
    tested: dict[str | None, TypeTests] = {}
    made: dict[str | None, list[Contrast]] = {}
    for task_type in sorted(counts, key=lambda key: key or ""):
        old = reusable.get(task_type)
        if old is not None and task_type not in touched and old.runs == counts[task_type]:
            tested[task_type] = old
        else:
            tested[task_type], made[task_type] = _type_tests(
                task_type, members_of(task_type), fdr, _known(old)
            )
    q_values = iter(
        benjamini_hochberg([tried.p_value for tests in tested.values() for tried in tests.tried])
    )
    report.patterns_tried = sum(len(tests.tried) for tests in tested.values())
    kept_contrasts: list[Contrast] = []
    for task_type, tests in tested.items():
        name = task_type or NO_TYPE
        if tests.note is not None:
            report.task_types[name] = tests.note
        if not tests.tried:
            continue
        adjusted = [next(q_values) for _ in tests.tried]
        if task_type not in made and min(adjusted) <= fdr:
            made[task_type] = _type_tests(task_type, members_of(task_type), fdr)[1]
            if [(c.pattern, c.p_value) for c in made[task_type]] != [
                (t.pattern, t.p_value) for t in tests.tried
            ]:
                raise ValueError(
                    f"internal error: the kept tests of task type {name} are not what its runs "
                    "give; run `wikitrace verify` on the corpus"
                )
        if task_type not in made:  # kept, and nothing significant
            best_at = min(range(len(tests.tried)), key=lambda i: tests.tried[i].p_value)
            best = tests.tried[best_at]
            report.task_types[name] = _nothing_significant(
                best.pattern, best.p_value, adjusted[best_at], best.tasks
            )
            continue
        for contrast, q_value in zip(made[task_type], adjusted, strict=True):
            contrast.q_value = q_value
        chosen = _chosen(made[task_type], fdr)
        _check_taken(name, chosen)
        if not chosen:
            best_contrast = min(made[task_type], key=lambda c: c.p_value)
            report.task_types[name] = _nothing_significant(
                best_contrast.pattern,
                best_contrast.p_value,
                best_contrast.q_value,
                best_contrast.within.tasks,
            )
        kept_contrasts += chosen
    report.contrasts = len(kept_contrasts)
    return kept_contrasts, ContrastTests(settings=settings, types=tested)


def _known(kept: TypeTests | None) -> KnownTests | None:
    """The p-values of a parent's tests of a task type, by their tasks' counts."""
    if kept is None:
        return None
    return {tried.strata: (tried.p_value, tried.smallest_p) for tried in kept.tried}


def _check_taken(name: str, chosen: Sequence[Contrast]) -> None:
    """A contrast kept whose p-values were taken from the parent's tests: computed again, as a
    lesson rests on them (a few a version)."""
    for contrast in chosen:
        within = contrast.within
        if within.taken and stratified_exact(within.compared) != (
            within.p_value,
            within.smallest_p,
        ):
            raise ValueError(
                f"internal error: the kept test of {contrast.pattern} in task type {name} is "
                "not what its runs give; run `wikitrace verify` on the corpus"
            )


def _type_tests(
    task_type: str | None,
    members: Sequence[RunPatterns],
    fdr: float,
    known: KnownTests | None = None,
) -> tuple[TypeTests, list[Contrast]]:
    """The patterns tried in a task type's runs, as kept (`TypeTests`) and as contrasts (the
    p-values of a test whose tasks' counts are in `known` taken from it)."""
    columns = columns_of(members)
    why = _untried(columns)
    if why is not None:
        return TypeTests(runs=len(members), tried=(), note=why), []
    found = list(_tried(task_type, members, fdr, known, columns))
    note = None
    if not found:
        note = (
            f"{len(members)} runs: no pattern seen in and missing from {MIN_SUPPORT} runs "
            f"of {MIN_TASKS} tasks with both outcomes that could reach q <= {fdr:g}"
        )
    tried = tuple(
        Tried(c.pattern, c.p_value, c.within.tasks, c.within.smallest_p, c.within.strata_key)
        for c in found
    )
    return TypeTests(runs=len(members), tried=tried, note=note), found


def _chosen(tried: Sequence[Contrast], fdr: float) -> list[Contrast]:
    """A task type's significant contrasts, strongest first, but for one that says nearly
    what a stronger one says of nearly the same runs; at most `MAX_PER_TYPE`."""
    significant = sorted(
        (c for c in tried if c.q_value <= fdr), key=lambda c: (c.p_value, c.pattern)
    )
    chosen: list[Contrast] = []
    for contrast in significant:
        steps = {run.step for run in contrast.present}
        if any(_overlap(steps, {r.step for r in other.present}) >= 0.9 for other in chosen):
            continue
        chosen.append(contrast)
        if len(chosen) == MAX_PER_TYPE:
            break
    return chosen


def _nothing_significant(pattern: str, p_value: float, q_value: float, tasks: int) -> str:
    """What the report says of a task type whose patterns were tried, none significant."""
    return (
        f"nothing significant: the strongest pattern ({pattern}) has p = "
        f"{p_value:.3g}, q = {q_value:.3g} within {tasks} tasks"
    )


@dataclass
class _Population:
    """The runs a candidate pattern is counted among (`Candidate`), counted by task once for
    every candidate counted among the same runs (every pattern but the orders)."""

    held: array[int]
    """The runs, by index (the candidate's own array)."""
    digest: bytes
    """A digest of `held`: with the runs that show a pattern, it tells its split of the runs
    from every other candidate's."""
    runs: Any
    """How many of them each task has (by task code)."""
    failures: Any
    """...and how many of those failed."""
    failed: int
    """How many of them failed."""


def _population(task_codes: Any, failed: Any, held: array[int], size: int) -> _Population:
    import numpy as np

    at = np.frombuffer(held, dtype=np.intc)
    codes = task_codes[at]
    failing = failed[at]
    return _Population(
        held=held,
        digest=hashlib.blake2b(held.tobytes()).digest(),
        runs=np.bincount(codes, minlength=size),
        failures=np.bincount(codes[failing], minlength=size),
        failed=int(failing.sum()),
    )


def strata(task_codes: Any, failed: Any, present: Any, population: _Population) -> Any:
    """Each task's `Stratum` among the runs of `population` whose tasks `within_tasks`
    compares (runs with and without the pattern, and of both outcomes), those at `present`
    (a numpy array of positions) showing the pattern: an int64 array of shape (tasks, 4), by
    task code."""
    import numpy as np

    size = len(population.runs)
    codes = task_codes[present]
    shown = np.bincount(codes, minlength=size)
    shown_failed = np.bincount(codes[failed[present]], minlength=size)
    runs, failures = population.runs, population.failures
    kept = (shown > 0) & (shown < runs) & (failures > 0) & (failures < runs)
    return np.stack((runs[kept], failures[kept], shown[kept], shown_failed[kept]), axis=1).astype(
        np.int64
    )


def _tried(
    task_type: str | None,
    members: Sequence[RunPatterns],
    fdr: float = FDR,
    known: KnownTests | None = None,
    columns: Columns | None = None,
) -> Iterator[Contrast]:
    """The contrasts tried in a task type's runs: each pattern seen in and missing from
    enough runs of enough tasks compared, that could reach `fdr`, once for each way of
    splitting the runs (`within_tasks`, given `known`). `columns`: the members', if made."""
    import numpy as np

    if columns is None:
        columns = columns_of(members)
    failed, task_codes = columns.failed, columns.task_codes
    size = int(task_codes.max()) + 1 if len(task_codes) else 0
    counted: _Population | None = None
    seen_splits: set[bytes] = set()
    for pattern, present, population in itertools.chain(_seen(columns), _orders(columns)):
        absent = len(population) - len(present)  # the pattern's runs are of its population
        if min(len(present), absent) < MIN_SUPPORT:
            continue
        if counted is None or counted.held is not population:
            counted = _population(task_codes, failed, population, size)
        # The same runs split the same way: one pattern is enough.
        key = hashlib.blake2b(present.tobytes() + b"/" + counted.digest).digest()
        if key in seen_splits:
            continue
        seen_splits.add(key)
        at = np.frombuffer(present, dtype=np.intc)
        within = within_tasks(strata(task_codes, failed, at, counted), known)
        if within is None or within.smallest_p > fdr:
            continue
        a = int(failed[at].sum())
        counts = (len(present), a, absent, counted.failed - a)
        yield Contrast(task_type, pattern, members, counts, within)


def _overlap(a: AbstractSet[Any], b: AbstractSet[Any]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0
