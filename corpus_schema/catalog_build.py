"""Writing a version's catalog (catalog.jsonl, see catalog.py) from its pages, taking what it
can from its parent version's catalog and from what the build just wrote."""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import orjson

from . import read, render
from .catalog import (
    CATALOG_VERSION,
    INSIGHT_FIELDS,
    RUN_FIELDS,
    InsightEntry,
    PastRun,
    claim_texts,
    damaged,
    explanation,
    records_of,
)
from .code_names import named_files
from .errors import CorpusError
from .layout import CATALOG, COMPILATION_DIR, INSIGHT_DIR, RAW_DIR, parse_insight
from .records import (
    READ_ONLY,
    CompilationHeader,
    InsightHeader,
    MinedFinding,
    RawHeader,
    is_judged,
    repo_json,
)
from .spill import JsonLines


@dataclass(slots=True)
class WrittenRun:
    """A run whose pages the version being made has just written, as its catalog line would
    read them: taken as it is (see catalog_of), so a build does not read back what it wrote."""

    run: PastRun
    backing: list[bool] | None
    """Its compilation's read.claim_backing (what an insight drawn from it needs to know
    whether its claims are backed); None when it has no compilation."""


def _mined_line(finding: MinedFinding) -> str:
    """A mined lesson's numbers in one line, for the first message."""
    if finding.kind == "divergence":
        failed, total = finding.task_outcomes or [0, 0]
        return (
            f"where a successful and a failed run of this task first took different actions "
            f"({total - failed} of its {total} runs succeeded)"
        )
    runs = finding.with_pattern[1] + finding.without_pattern[1]
    judged = f" ({finding.judged_runs} judged by a model)" if finding.judged_runs else ""
    test = (
        f"compared within {finding.tasks_compared} tasks, q = "
        if finding.tasks_compared
        else "Fisher's exact test, q = "
    )
    return (
        f"counted over {runs} runs{judged}; {test}{finding.q_value:.2g} "
        f"after correction for {finding.patterns_tried} patterns tried"
    )


def from_pages(root: Path) -> tuple[list[PastRun], list[InsightEntry], int]:
    """Every run and every insight that may be shown, read from the pages (and how many
    insights are withheld: rejected, retired, or no longer holding)."""
    root = Path(os.path.realpath(root))  # once: every page is read from this version
    shown, withheld = _shown_insights(root, None)
    held = _Waiting()
    for item in shown:
        held.append(*item)
    runs = list(_runs(root, held, None))
    entries = []
    for index, (entry, *_) in enumerate(shown):
        entries.append(replace(entry, **held.learnt(index)))
    return runs, entries, withheld


T = TypeVar("T")


class _Parent:
    """What a version made from another can take from the parent's catalog: the lines of the
    runs and insights whose pages it keeps unchanged (the same hash in both manifests). The
    lines are read from the catalog one at a time, in the order the version's pages are
    listed (the parent's are in the same order), not held: a run's record is 3.2 KB, its
    task and claims included, in a catalog of 10,000 made-up runs."""

    def __init__(
        self,
        catalog: Path,
        files: Iterable[tuple[str, str]],
        parent_hashes: dict[str, str],
    ) -> None:
        self.catalog = catalog
        self.parent_hashes = parent_hashes
        self.changed = {rel for rel, file_hash in files if parent_hashes.get(rel) != file_hash}
        """The version's files the parent does not hold as they are: only what it adds or
        writes again, where a dict of every file would grow with the corpus."""

    def kept(self, rel: str) -> bool:
        """Whether the version's file `rel` is the parent's, unchanged."""
        return rel in self.parent_hashes and rel not in self.changed

    @classmethod
    def of(
        cls,
        parent: Path | None,
        parent_files: dict[str, str] | None,
        files: Iterable[tuple[str, str]] | None,
    ) -> _Parent | None:
        if parent is None or parent_files is None or files is None:
            return None
        if not (parent / CATALOG).is_file():
            return None
        return cls(parent / CATALOG, files, parent_files)

    def runs(self) -> _InOrder[PastRun]:
        """The parent's runs, by step."""
        return _InOrder(
            (_by_number(record.step), record)
            for record in self._records(insights=False)
            if isinstance(record, PastRun)
        )

    def insights(self) -> _InOrder[InsightEntry]:
        """The parent's insights that may be shown, by id."""
        return _InOrder(
            (_by_number(record[1].id), record[1])
            for record in self._records(insights=True)
            if not isinstance(record, PastRun)
        )

    def _records(self, *, insights: bool) -> Iterator[PastRun | tuple[int, InsightEntry]]:
        try:
            with self.catalog.open("rb") as handle:
                head = orjson.loads(next(handle))
                lines: Iterable[bytes] = handle
                if insights and head.get("catalog") == CATALOG_VERSION:
                    lines = (line for line in handle if not line.startswith(b'["run"'))
                yield from records_of(head, lines)
        except (OSError, StopIteration, IndexError, KeyError, TypeError, ValueError) as error:
            raise damaged(self.catalog, error) from None


class _InOrder(Generic[T]):
    """Records read in order, each asked for by its place in that order (a place asked for
    is never before one asked for earlier); what is passed over is let go."""

    def __init__(self, records: Iterator[tuple[tuple[int, int], T]]) -> None:
        self._records = records
        self._next = next(records, None)

    def get(self, place: tuple[int, int]) -> T | None:
        while self._next is not None and self._next[0] < place:
            self._next = next(self._records, None)
        if self._next is not None and self._next[0] == place:
            return self._next[1]
        return None


def catalog_of(
    root: Path,
    *,
    offline: bool,
    leaders_of: LeadersOf,
    parent: Path | None = None,
    parent_files: dict[str, str] | None = None,
    files: Iterable[tuple[str, str]] | None = None,
    written: Iterable[WrittenRun] = (),
    written_insights: Iterable[tuple[int, ShownEntry | None]] = (),
) -> Iterator[bytes]:
    """The catalog of the version at `root`, a line at a time (see read_catalog): read from
    its pages, except that what a `parent` version's catalog says of a page this version keeps
    unchanged (its hash in `files`, this version's (path, hash) pairs, is the one
    `parent_files`, the parent's manifest, lists) is taken as it is, and so are the runs
    `written` (in step order) and `written_insights` (WrittenInsights) by the build making
    the version: a version made by adding runs reads none of its runs' pages, nor its new
    insights'. Memory grows with the insights and with what the version changes.
    `leaders_of` groups the near-duplicate insights (search/consolidate.py, `of_lessons`):
    each line names its group's first."""
    taken = _Parent.of(parent, parent_files, files)
    root = Path(os.path.realpath(root))  # once: every page is read from this version
    # Each insight's line waits on disk; memory keeps what grouping and the runs need of it.
    with JsonLines(root.parent, "catalog") as lines:
        held = _Waiting()
        withheld = 0
        for item in _each_insight(root, taken, written_insights):
            if isinstance(item, int):
                withheld += item
                continue
            entry, claims, divergence, needs = item
            lines.append(entry)  # a dataclass, written as asdict would give it
            held.append(entry, claims, divergence, needs)
        yield orjson.dumps(
            {
                "catalog": CATALOG_VERSION,
                "offline": offline,
                "withheld": withheld,
                "run": RUN_FIELDS,
                "insight": ["leader", *INSIGHT_FIELDS],
            }
        )
        yield b"\n"
        for run in _runs(root, held, taken, written):
            yield orjson.dumps(["run", *(getattr(run, name) for name in RUN_FIELDS)]) + b"\n"
        leaders = leaders_of(_Lessons(held, lines))
        for index, (line, leader) in enumerate(zip(lines, leaders, strict=True)):
            # What the runs said of it (its source's task; whether its claims are backed).
            line.update(held.learnt(index))
            yield orjson.dumps(["insight", leader, *(line[n] for n in INSIGHT_FIELDS)]) + b"\n"


_NO_NAME = -1


class _Waiting:
    """What reading a catalog's insights keeps of them while their runs are read, a column
    each: what grouping reads but the texts (read from the lines: see _Lessons), and what each
    one's run tells it (its source's task id, a divergence's task, whether a model lesson's
    claims are backed: `learn`, `learnt`). Each value a number (its names, such as task types,
    steps and task ids, listed once): 9.4 MB traced for 97,259 insights of 30,000 runs, names
    included, where an object each took 36.5 MB. A divergence keeps its task's text."""

    _NAMED = (
        "task_type",
        "source_outcome",
        "pattern",
        "goes_with",
        "source_step",
        "source_task_id",
        "source_origin",
    )

    def __init__(self) -> None:
        self._number: dict[str, int] = {}
        self._names: list[str] = []
        self._columns = {name: array("i") for name in self._NAMED}
        self._claims = array("i")
        self._claim_ends = array("q")
        self._flags = bytearray()
        """Per insight: 1 a divergence, 2 needs its run, 4 verified."""
        self._only: dict[int, str] = {}
        """A divergence's task (shown for it alone), by the insight's position."""

    _DIVERGENCE, _NEEDS, _VERIFIED = 1, 2, 4

    def append(self, entry: InsightEntry, claims: list[int], divergence: bool, needs: bool) -> None:
        for name in self._NAMED:
            self._columns[name].append(self._name(getattr(entry, name)))
        self._claims.extend(claims)
        self._claim_ends.append(len(self._claims))
        self._flags.append(
            self._DIVERGENCE * divergence + self._NEEDS * needs + self._VERIFIED * entry.verified
        )
        if entry.only_task is not None:
            self._only[len(self._flags) - 1] = entry.only_task

    def _name(self, value: str | None) -> int:
        if value is None:
            return _NO_NAME
        number = self._number.get(value)
        if number is None:
            number = self._number[value] = len(self._names)
            self._names.append(value)
        return number

    def value(self, name: str, index: int) -> str | None:
        number = self._columns[name][index]
        return None if number == _NO_NAME else self._names[number]

    def __len__(self) -> int:
        return len(self._flags)

    def by_step(self) -> dict[str, list[int]]:
        drawn: dict[str, list[int]] = {}
        for index, flags in enumerate(self._flags):
            if flags & self._NEEDS:
                step = self.value("source_step", index)
                assert step is not None
                drawn.setdefault(step, []).append(index)
        return drawn

    def divergence(self, index: int) -> bool:
        return bool(self._flags[index] & self._DIVERGENCE)

    def learn(self, index: int, run: PastRun, backing: list[bool] | None) -> None:
        """What the insight at `index` learns from its source run, whose compilation's
        claims are backed as `backing` says (None: it has no compilation)."""
        self._columns["source_task_id"][index] = self._name(run.task_id)
        self._columns["source_origin"][index] = self._name(run.origin)
        if self.divergence(index):  # shown for its own task alone
            self._only[index] = run.task
        elif self.value("pattern", index) is None:
            start = self._claim_ends[index - 1] if index else 0
            claims = list(self._claims[start : self._claim_ends[index]])
            if backing is not None and read.backed_by(backing, claims):
                self._flags[index] |= self._VERIFIED
            else:
                self._flags[index] &= ~self._VERIFIED

    def learnt(self, index: int) -> dict[str, Any]:
        """What its run told the insight at `index`, as its line's fields."""
        return {
            "source_task_id": self.value("source_task_id", index),
            "source_origin": self.value("source_origin", index),
            "only_task": self._only.get(index),
            "verified": bool(self._flags[index] & self._VERIFIED),
        }


@dataclass(frozen=True, slots=True)
class LessonTexts:
    """An insight as near-duplicate grouping reads it (search/consolidate.py's `Lesson`): what
    its catalog line holds, or what `consolidate.with_mined` is given as separate lists."""

    title: str
    guideline: str
    task_type: str | None
    source_outcome: str
    pattern: str | None
    goes_with: str | None


class _Lessons(Sequence[LessonTexts]):
    """The insights of a catalog being written, as grouping reads them: what is held of each,
    with its title and guideline read from its line in `lines`."""

    def __init__(self, held: _Waiting, lines: JsonLines) -> None:
        self._held = held
        self._lines = lines

    def __len__(self) -> int:
        return len(self._held)

    @overload
    def __getitem__(self, index: int) -> LessonTexts: ...

    @overload
    def __getitem__(self, index: slice) -> list[LessonTexts]: ...

    def __getitem__(self, index: int | slice) -> LessonTexts | list[LessonTexts]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self._made(index, self._lines[index])

    def __iter__(self) -> Iterator[LessonTexts]:
        for index, line in enumerate(self._lines):
            yield self._made(index, line)

    def _made(self, index: int, line: dict[str, Any]) -> LessonTexts:
        value = self._held.value
        outcome = value("source_outcome", index)
        assert outcome is not None
        return LessonTexts(
            line["title"],
            line["guideline"],
            value("task_type", index),
            outcome,
            value("pattern", index),
            value("goes_with", index),
        )


LeadersOf = Callable[[Sequence[LessonTexts]], list[int]]
"""Each insight of a catalog being written -> the index of its group's first (itself when it
leads one)."""

ShownEntry = tuple[InsightEntry, list[int], bool, bool]
"""An insight that may be shown, with the claims it names, whether it is a divergence, and
whether it still needs what its source run says (its task; whether its claims are backed)."""


def _shown_insights(root: Path, taken: _Parent | None) -> tuple[list[ShownEntry], int]:
    """The insights that may be shown, and how many are withheld."""
    shown: list[ShownEntry] = []
    withheld = 0
    for item in _each_insight(root, taken):
        if isinstance(item, int):
            withheld += item
        else:
            shown.append(item)
    return shown, withheld


def _each_insight(
    root: Path,
    taken: _Parent | None,
    written: Iterable[tuple[int, ShownEntry | None]] = (),
) -> Iterator[ShownEntry | int]:
    """Each insight that may be shown, in order; 1 for each one withheld. `root` is resolved.
    The insights `written` (WrittenInsights, in number order) are taken as they are."""
    fresh = iter(written)
    next_fresh = next(fresh, None)
    parents = taken.insights() if taken is not None else None
    for rel in read.numbered(root, INSIGHT_DIR):
        if next_fresh is not None and next_fresh[0] == parse_insight(Path(rel).stem):
            shown = next_fresh[1]
            next_fresh = next(fresh, None)
            if shown is None:
                yield 1
            else:
                shown[0].id = Path(rel).stem  # its id as written (a guessed width may change)
                yield shown
            continue
        if taken is not None and parents is not None and taken.kept(rel):
            entry = parents.get(_by_number(rel))
            if entry is None:
                yield 1  # withheld in the parent, and unchanged
            else:
                yield replace(entry), [], False, False
            continue
        page = read.read_page(root, rel, InsightHeader, resolved=True)
        shown = shown_entry(page.header, read.guideline(page))
        yield 1 if shown is None else shown
    if next_fresh is not None:
        raise CorpusError(f"internal error: insight {next_fresh[0]} written, but not in its layer")


def shown_entry(header: InsightHeader, guideline: str) -> ShownEntry | None:
    """What the catalog takes of an insight page with this header and guideline (as
    read.guideline gives it back); None when it is withheld (rejected, retired, or mined and
    no longer holding)."""
    if header.status in ("rejected", "retired"):
        return None
    finding = header.mined
    if finding is not None and not finding.holds:
        return None  # a later version's runs no longer support it
    entry = InsightEntry(
        id=header.id,
        title=header.title,
        task_type=header.task_type,
        guideline=guideline,
        applicability=header.applicability,
        precondition=header.hypothesis.precondition
        if header.hypothesis
        and " ".join(header.hypothesis.precondition.split())
        != " ".join(header.applicability.split())
        else None,
        source_step=header.source_step,
        source_outcome=header.source_outcome,
        source_task_id="",
        source_judged=header.source_judged,
        status=header.status,
        verified=header.verified if finding is not None else False,
        mined=_mined_line(finding) if finding is not None else "",
        pattern=finding.pattern if finding is not None else None,
        goes_with=finding.goes_with if finding is not None else None,
        cited_steps=list(finding.runs) if finding is not None else [],
        only_task=None,
        read_only=header.support == READ_ONLY,
        quoted_files=named_files(e.quote for claim in header.evidence for e in claim.evidence),
        supersedes=list(header.supersedes),
    )
    divergence = finding is not None and finding.kind == "divergence"
    return entry, header.source_claims, divergence, True


class WrittenInsights(JsonLines):
    """The insights the version being made has written, in number order, as the catalog
    takes them (shown_entry: None for one withheld), kept on disk until it is written (see
    catalog_of)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, "written-insights")
        self._last = 0

    def add(self, number: int, header: InsightHeader, guideline: str) -> None:
        """Insight `number`, written with this header and guideline."""
        if number <= self._last:
            raise ValueError(f"internal error: insight {number} written after {self._last}")
        self._last = number
        self.append((number, shown_entry(header, render.page_line(guideline))))

    def _values(self, row: tuple[int, ShownEntry | None]) -> Any:
        return row  # orjson writes the entry, a dataclass, as asdict would

    def _row(self, values: Any) -> tuple[int, ShownEntry | None]:
        number, shown = values
        if shown is None:
            return number, None
        entry, claims, divergence, needs = shown
        return number, (InsightEntry(**entry), claims, divergence, needs)


def _by_number(name: str) -> tuple[int, int]:
    """Where a page (`compilation/step-N.md`) or an id (`step-N`) comes in its layer's order:
    by number, the longer spelling first (read.numbered's order)."""
    digits = name.rsplit("-", 1)[1].removesuffix(".md")
    return int(digits), -len(digits)


def _runs(
    root: Path,
    shown: _Waiting,
    taken: _Parent | None,
    written: Iterable[WrittenRun] = (),
) -> Iterator[PastRun]:
    """Every run with its compilation's title and claims, in step order; each insight drawn
    from it that needs to learns its task (and, for a model's lesson, whether its claims are
    backed). `root` is resolved. The runs `written` (in step order) are taken as they are."""
    drawn = shown.by_step()
    # Both layers list their pages by step: a run has a compilation when the next one is its.
    compilations = read.numbered(root, COMPILATION_DIR)
    next_compiled = next(compilations, None)
    fresh = iter(written)
    next_fresh = next(fresh, None)
    parents = taken.runs() if taken is not None else None
    for rel in read.numbered(root, RAW_DIR):
        step = rel.split("/")[1]
        compiled_rel = f"{COMPILATION_DIR}/{step}.md"
        while next_compiled is not None and _by_number(next_compiled) < _by_number(compiled_rel):
            next_compiled = next(compilations, None)  # a compilation of no run: verify says so
        has_compilation = next_compiled == compiled_rel
        needs = drawn.get(step, [])
        parent_run = parents.get(_by_number(step)) if parents is not None else None
        kept = (
            taken is not None
            and parent_run is not None
            and taken.kept(rel)
            and (
                taken.kept(compiled_rel)
                if has_compilation
                else compiled_rel not in taken.parent_hashes  # none in the parent either
            )
        )
        backing: list[bool] | None = None
        if next_fresh is not None and next_fresh.run.step == step:
            if (next_fresh.backing is not None) != has_compilation:
                raise CorpusError(f"internal error: {step}'s compilation is not as written")
            run, backing = next_fresh.run, next_fresh.backing
            next_fresh = next(fresh, None)
        elif kept and parent_run is not None:
            run = parent_run
            if has_compilation and not all(map(shown.divergence, needs)):
                compiled = read.read_page(root, compiled_rel, CompilationHeader, resolved=True)
                backing = read.claim_backing(compiled.header.claims)
        else:
            page = read.read_page(root, rel, RawHeader, resolved=True)
            header = None
            if has_compilation:
                header = read.read_page(root, compiled_rel, CompilationHeader, resolved=True).header
                backing = read.claim_backing(header.claims)
            run = PastRun(
                step=step,
                task_id=page.header.task_id,
                task_type=page.header.task_type,
                outcome=page.header.outcome,
                task=read.task_text(page),
                title=header.title if header is not None else None,
                judged=is_judged(page.header.metadata),
                explanation=""
                if header is None
                else explanation(header.title, claim_texts(header.claims)),
                project=page.header.project,
                kind=page.header.kind,
                origin=page.header.origin,
                repo=repo_json(page.header.repo),
            )
        for index in needs:
            shown.learn(index, run, backing)
        yield run
    if next_fresh is not None:
        raise CorpusError(f"internal error: {next_fresh.run.step} written, but not in {RAW_DIR}")
