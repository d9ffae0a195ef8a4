"""Writing a version's catalog (catalog.jsonl, see catalog.py) from its pages, taking what it
can from its parent version's catalog and from what the build just wrote."""

from __future__ import annotations

import itertools
import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, overload

import orjson

from . import read, render
from .catalog import (
    CATALOG_VERSION,
    INSIGHT_FIELDS,
    RUN_FIELDS,
    InsightEntry,
    PastRun,
    by_number,
)
from .catalog_index import IndexWriter
from .catalog_runs import (
    CatalogFile,
    CatalogRuns,
    ListedRuns,
    ParentCatalog,
    WrittenRun,
    run_pages,
    runs_read,
)
from .code_names import named_files
from .errors import CorpusError
from .layout import (
    CATALOG,
    CATALOG_INDEX,
    INSIGHT_DIR,
    parse_insight,
)
from .records import (
    READ_ONLY,
    InsightHeader,
    MinedFinding,
)
from .spill import READ_AHEAD, JsonLines


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
    runs = list(runs_read(root, held))
    entries = []
    for index, (entry, *_) in enumerate(shown):
        entries.append(replace(entry, **held.learnt(index)))
    return runs, entries, withheld


def catalog_of(
    root: Path,
    *,
    offline: bool,
    leaders_of: LeadersOf,
    parent: Path | None = None,
    parent_files: dict[str, str] | None = None,
    changed: set[str] | None = None,
    written: Iterable[WrittenRun] = (),
    written_insights: Iterable[tuple[int, ShownEntry | None]] = (),
    listed: ListedRuns | None = None,
) -> Iterator[CatalogFile]:
    """The catalog of the version at `root` (see read_catalog), a file at a time: its pages of
    runs, then catalog.jsonl (each file's bytes taken before the next file is asked for).
    Read from its pages, except that what a `parent` version's catalog says of a page this
    version keeps unchanged (in `parent_files`, the parent's manifest, and not among
    `changed`, the files this version wrote) is taken as it is, a full page of runs that are
    all kept being the parent's file; and so are the runs `written` (in step order) and
    `written_insights` (WrittenInsights) by the build making the version: a version made by
    adding runs reads none of its runs' pages, nor its new insights'. `listed`: its runs, as
    the build lists them (else its raw and compilation folders are listed, which a build whose
    workers may still be writing compilation pages must not leave to them). Memory grows with the
    insights and with what the version changes.
    `leaders_of` groups the near-duplicate insights (search/consolidate.py, `of_lessons`):
    each line names its group's first."""
    taken = ParentCatalog.of(parent, parent_files, changed)
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
        runs = CatalogRuns(root, held, taken, written, listed)
        index = IndexWriter(runs.page_runs, runs.steps)
        yield from run_pages(runs, index)
        head = {
            "catalog": CATALOG_VERSION,
            "offline": offline,
            "withheld": withheld,
            "runs": len(runs.steps),
            "page_runs": runs.page_runs,
            "run": RUN_FIELDS,
            "insight": ["leader", *INSIGHT_FIELDS],
        }
        yield (
            CATALOG,
            index.catalog(orjson.dumps(head) + b"\n", _insight_lines(held, lines, leaders_of)),
        )
        yield CATALOG_INDEX, index.dumps()


def _insight_lines(
    held: _Waiting, lines: JsonLines, leaders_of: LeadersOf
) -> Iterator[tuple[bytes, str | None, bool]]:
    """catalog.jsonl's line for each insight, with its source run's step and whether it is
    committed (what the catalog's index says of it)."""
    leaders = leaders_of(_Lessons(held, lines))
    for index, (line, leader) in enumerate(zip(lines, leaders, strict=True)):
        # What the runs said of it (its source's task; whether its claims are backed).
        line.update(held.learnt(index))
        text = orjson.dumps(["insight", leader, *(line[n] for n in INSIGHT_FIELDS)]) + b"\n"
        yield text, line["source_step"], line["status"] == "committed"


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


class _Lessons(Sequence["_HeldLesson"]):
    """The insights of a catalog being written, as grouping reads them: what is held of each
    (its task type, outcome, pattern), its title and guideline read from its line in `lines`
    only when asked (grouping reads the texts of the model's lessons alone), a few hundred
    lines at a time."""

    def __init__(self, held: _Waiting, lines: JsonLines) -> None:
        self._held = held
        self._lines = lines
        self._block: tuple[int, list[dict[str, Any]]] = (0, [])
        """The lines last read: the first's place, and the lines."""

    def __len__(self) -> int:
        return len(self._held)

    @overload
    def __getitem__(self, index: int) -> _HeldLesson: ...

    @overload
    def __getitem__(self, index: slice) -> list[_HeldLesson]: ...

    def __getitem__(self, index: int | slice) -> _HeldLesson | list[_HeldLesson]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return _HeldLesson(self, range(len(self))[index])

    def __iter__(self) -> Iterator[_HeldLesson]:
        return map(_HeldLesson, itertools.repeat(self), range(len(self)))

    def value(self, name: str, index: int) -> str | None:
        return self._held.value(name, index)

    def texts(self, index: int) -> tuple[str, str]:
        """The title and guideline of the insight at `index`, read with the lines after it."""
        first, lines = self._block
        if not first <= index < first + len(lines):
            first, lines = index, self._lines[index : index + READ_AHEAD]
            self._block = (first, lines)
        line = lines[index - first]
        return line["title"], line["guideline"]


class _HeldLesson:
    """An insight of a catalog being written, as grouping reads it (search/consolidate.py's
    `Lesson`): what is held of it, and its texts read from its line when asked."""

    __slots__ = ("_index", "_lessons")

    def __init__(self, lessons: _Lessons, index: int) -> None:
        self._lessons = lessons
        self._index = index

    @property
    def title(self) -> str:
        return self._lessons.texts(self._index)[0]

    @property
    def guideline(self) -> str:
        return self._lessons.texts(self._index)[1]

    @property
    def task_type(self) -> str | None:
        return self._lessons.value("task_type", self._index)

    @property
    def source_outcome(self) -> str:
        outcome = self._lessons.value("source_outcome", self._index)
        assert outcome is not None
        return outcome

    @property
    def pattern(self) -> str | None:
        return self._lessons.value("pattern", self._index)

    @property
    def goes_with(self) -> str | None:
        return self._lessons.value("goes_with", self._index)


LeadersOf = Callable[[Sequence[_HeldLesson]], list[int]]
"""Each insight of a catalog being written -> the index of its group's first (itself when it
leads one)."""

ShownEntry = tuple[InsightEntry, list[int], bool, bool]
"""An insight that may be shown, with the claims it names, whether it is a divergence, and
whether it still needs what its source run says (its task; whether its claims are backed)."""


def _shown_insights(root: Path, taken: ParentCatalog | None) -> tuple[list[ShownEntry], int]:
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
    taken: ParentCatalog | None,
    written: Iterable[tuple[int, ShownEntry | None]] = (),
) -> Iterator[ShownEntry | int]:
    """Each insight that may be shown, in order; 1 for each one withheld. `root` is resolved.
    The insights `written` (WrittenInsights, in number order) are taken as they are."""
    fresh = iter(written)
    next_fresh = next(fresh, None)
    parents = taken.insights() if taken is not None else None
    for rel in read.numbered(root, INSIGHT_DIR):
        if next_fresh is not None:
            stem = rel.rpartition("/")[2].removesuffix(".md")
            if next_fresh[0] == parse_insight(stem):
                shown = next_fresh[1]
                next_fresh = next(fresh, None)
                if shown is None:
                    yield 1
                else:
                    shown[0].id = stem  # its id as written (a guessed width may change)
                    yield shown
                continue
        if taken is not None and parents is not None and taken.kept(rel):
            # The parent's record, read from its line for this insight alone: taken as it is.
            entry = parents.get(by_number(rel))
            yield 1 if entry is None else (entry, [], False, False)  # None: withheld there
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

    def add(
        self, number: int, header: InsightHeader, guideline: str, line: str | None = None
    ) -> None:
        """Insight `number`, written with this header and guideline (`line`: its
        `render.page_line`, when a build's worker made it with the page)."""
        if number <= self._last:
            raise ValueError(f"internal error: insight {number} written after {self._last}")
        self._last = number
        shown = render.page_line(guideline) if line is None else line
        self.append((number, shown_entry(header, shown)))

    def _values(self, row: tuple[int, ShownEntry | None]) -> Any:
        return row  # orjson writes the entry, a dataclass, as asdict would

    def _row(self, values: Any) -> tuple[int, ShownEntry | None]:
        number, shown = values
        if shown is None:
            return number, None
        entry, claims, divergence, needs = shown
        return number, (InsightEntry(**entry), claims, divergence, needs)
