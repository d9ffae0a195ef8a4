"""The agent's first message: insights by task type, similar past runs, how to drill down.

memory = Memory.load(Path("corpus"))
message = memory.first_message("Book a flight ...", exclude_task="12")
print(message.text)
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import os
import re
import sys
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, overload

import orjson

from wikitrace.corpus_schema import CorpusError, InputError, read, render
from wikitrace.corpus_schema.layout import (
    CATALOG,
    COMPILATION_DIR,
    INSIGHT_DIR,
    RAW_DIR,
    RAW_METADATA_NAME,
    SEARCH_DIR,
    parse_insight,
)
from wikitrace.corpus_schema.records import (
    READ_ONLY,
    CompilationHeader,
    InsightHeader,
    MinedFinding,
    Outcome,
    RawHeader,
    is_judged,
)
from wikitrace.corpus_schema.render import inline, shortened
from wikitrace.corpus_schema.spill import JsonLines
from wikitrace.corpus_schema.store import spill_file
from wikitrace.corpus_schema.work import infer_kind, kind_named

from . import consolidate

DEFAULT_MOUNT = "/work/corpus"
TEMPLATE = "first-message.j2"
CATALOG_VERSION = 2
CHARS_PER_TOKEN = 4
"""A budget in tokens is checked as characters / 4: close for English text, and no tokenizer
(or model name) is needed to render a message."""


@dataclass(slots=True)  # a catalog holds one for every run
class PastRun:
    step: str
    task_id: str
    task_type: str | None
    outcome: Outcome
    task: str
    title: str | None = None
    """The title of its compilation, if it has one."""
    judged: bool = False
    """The outcome is a model's verdict on the log, not a verifier's."""
    explanation: str = ""
    """Its compilation's title and claims, for search."""
    project: str | None = None
    """The code project it worked in (a coding agent's session), if known."""
    kind: str | None = None
    """The kind of work it did (a coding agent's session: corpus_schema/work.py), if known."""


@dataclass(slots=True)  # and one for every insight
class InsightEntry:
    id: str
    title: str
    task_type: str | None
    guideline: str
    applicability: str
    source_step: str
    source_outcome: Outcome
    source_task_id: str
    source_judged: bool = False
    status: str = "ungated"
    """committed (passed the admission gate) or ungated (never tested); rejected and retired
    insights are never loaded."""
    verified: bool = True
    """False when no quote of the claims it rests on was found in its source run."""
    support: str = ""
    """For a lesson drawn again from other runs: how many runs back it, and the others' ids."""
    mined: str = ""
    """For a mined lesson (compiler/mine.py): its numbers in one line; empty for a model's."""
    pattern: str | None = None
    """For a mined lesson: the pattern it counts (`diverge` for a divergence)."""
    goes_with: str | None = None
    """For a mined lesson: the outcome the pattern goes with."""
    cited_steps: list[str] = field(default_factory=list)
    """For a mined lesson: every run it quotes (its source run first)."""
    only_task: str | None = None
    """For a divergence: the task text it is about; it is shown for that task only."""
    precondition: str | None = None
    """Its hypothesis's precondition, when it has one that says more than `applicability`:
    what the gate tested, shown to the agent too."""
    read_only: bool = False
    """Its only support is content the agent read (records.READ_ONLY): shown marked."""


_RUN_FIELDS = [item.name for item in fields(PastRun)]
_INSIGHT_FIELDS = [item.name for item in fields(InsightEntry)]
"""The order of the values of a catalog's lines."""

SearchKind = Literal["insights", "compilations", "tasks"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("insights", "compilations", "tasks")


@dataclass
class Hit:
    """One search result: what it is, where its page is, and a line to recognise it by."""

    kind: SearchKind
    id: str
    path: str
    """The page, relative to the corpus root."""
    title: str
    task_id: str
    task_type: str | None
    outcome: Outcome
    """The outcome of the run it is (a task or compilation) or was drawn from (an insight)."""

    def line(self) -> str:
        """The hit in one line, as `search` shows it: kind, id, task, outcome, title, page."""
        task = f"task {self.task_id}" + (f", {self.task_type}" if self.task_type else "")
        title = " ".join(self.title.split())
        return f"{self.kind.rstrip('s')} {self.id} ({task}, {self.outcome}): {title}  [{self.path}]"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


QUERY_LIMIT = 2_000
"""The longest query `search` takes, in characters."""


@dataclass
class FirstMessage:
    text: str
    insights: list[str]
    """Ids of the insights the message lists."""
    similar: list[str]
    """Steps of the past runs it lists as similar."""
    truncated: bool
    """True when some insights were left out to fit the budget."""
    alike: dict[str, list[str]] = field(default_factory=dict)
    """A listed insight -> the near-duplicates it stands for (drawn from other runs)."""
    total_insights: int = 0
    tokens_estimate: int = 0
    excluded_tasks: list[str] = field(default_factory=list)
    task_type: str | None = None
    """The task type the message keeps to: given, or inferred from the most similar runs."""
    task_type_inferred: bool = False
    type_unsure: dict[str, int] | None = None
    """When the memory holds several task types and none was given or could be inferred: the
    types of the most similar past runs, counted (the message then lists every type's)."""
    project: str | None = None
    """The project whose lessons and runs come first, when given."""
    kind: str | None = None
    """The task's kind of work (corpus_schema/work.py), given or inferred: the project's
    lessons come first, then this kind's from other projects, and no other kind's."""
    kind_inferred: bool = False
    kind_unsure: dict[str, int] | None = None
    """When the runs have kinds of work and the task's could not be inferred: its cue words
    counted by kind (empty: none); every kind's lessons are then listed."""
    other_kinds: int = 0
    """Lessons (groups of near-duplicates) of other kinds of work from other projects, left
    out."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass(slots=True)
class WrittenRun:
    """A run whose pages the version being made has just written, as its catalog line would
    read them: taken as it is (see catalog_of), so a build does not read back what it wrote."""

    run: PastRun
    backing: list[bool] | None
    """Its compilation's read.claim_backing (what an insight drawn from it needs to know
    whether its claims are backed); None when it has no compilation."""


def explanation(title: str, statements: Iterable[str]) -> str:
    """What search reads of a run's compilation (PastRun.explanation): its title and claims."""
    return "\n".join([title, *statements])


TASK_PREVIEW = 300
CONFLICT_OVERLAP = 0.5
"""Two lessons apply to the same situations when the words of their applicability overlap this
much (Jaccard, as tools/consolidate.py counts words)."""
ALIKE_SHOWN = 5


def _support(group: list[InsightEntry]) -> str:
    """`seen in 13 runs: 9 failed, 4 succeeded; also insight-0007, ...` for a lesson drawn
    from several runs; empty for one drawn once."""
    if len(group) < 2:
        return ""
    runs = {item.source_step: item.source_outcome for item in group}
    failed = sum(outcome == "failure" for outcome in runs.values())
    others = [item.id for item in group[1:]]
    listed = ", ".join(others[:ALIKE_SHOWN]) + (
        f" and {len(others) - ALIKE_SHOWN} more" if len(others) > ALIKE_SHOWN else ""
    )
    return (
        f"seen in {len(runs)} run{'s' * (len(runs) != 1)}: {failed} failed, "
        f"{len(runs) - failed} succeeded; the same lesson: {listed}"
    )


ReportAt = Literal["first", "end"]
"""Where the citation report is asked for: in the first message (ours), or after the episode
(the method as published)."""
Access = Literal["shell", "mcp"]
"""How the agent reads the corpus: a shell where it is mounted (cat, grep, tools/turn), or the
tools of `wikitrace mcp` (read_page, search, turn, ...)."""


def report_request(*, insights_only: bool = False, prompts_dir: Path | None = None) -> str:
    """What to send the agent when the episode ends, to get its citation report."""
    from wikitrace import prompts

    template = prompts.environment(prompts_dir).get_template("report-request.j2")
    return template.render(report_at="end", insights_only=insights_only)


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
    return (
        f"counted over {runs} runs{judged}; Fisher's exact test, q = {finding.q_value:.2g} "
        f"after correction for {finding.patterns_tried} patterns tried"
    )


def without_boilerplate(texts: Callable[[], Iterable[str]], share: float = 0.3) -> Iterator[str]:
    """Each text less the lines that many of the texts hold (a benchmark's generic
    instructions), so that similarity is judged on what sets a task apart. `texts()` is read
    twice: once to count, by their hashes, the distinct texts each line of more than 20
    characters is in, then to leave out those in at least `share` of them (and of two)."""
    distinct: set[int] = set()
    counts: Counter[int] = Counter()
    for text in texts():
        if (key := hash(text)) in distinct:
            continue
        distinct.add(key)
        counts.update({hash(line) for line in map(str.strip, text.splitlines()) if len(line) > 20})
    limit = max(2, int(len(distinct) * share))
    common = {line for line, n in counts.items() if n >= limit}
    del distinct, counts
    if not common:
        yield from texts()
        return
    for text in texts():
        kept = [line for line in text.splitlines() if hash(line.strip()) not in common]
        yield "\n".join(kept) or text


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
                yield from _records(head, lines)
        except (OSError, StopIteration, IndexError, KeyError, TypeError, ValueError) as error:
            raise _damaged(self.catalog, error) from None


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
    insights'. Memory grows with the insights and with what the version changes."""
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
                "run": _RUN_FIELDS,
                "insight": ["leader", *_INSIGHT_FIELDS],
            }
        )
        yield b"\n"
        for run in _runs(root, held, taken, written):
            yield orjson.dumps(["run", *(getattr(run, name) for name in _RUN_FIELDS)]) + b"\n"
        leaders = consolidate.of_lessons(_Lessons(held, lines))
        for index, (line, leader) in enumerate(zip(lines, leaders, strict=True)):
            # What the runs said of it (its source's task; whether its claims are backed).
            line.update(held.learnt(index))
            yield orjson.dumps(["insight", leader, *(line[n] for n in _INSIGHT_FIELDS)]) + b"\n"


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
            "only_task": self._only.get(index),
            "verified": bool(self._flags[index] & self._VERIFIED),
        }


@dataclass(frozen=True, slots=True)
class _Lesson:
    """An insight as grouping reads it (consolidate.Lesson): its texts from its line."""

    title: str
    guideline: str
    task_type: str | None
    source_outcome: str
    pattern: str | None
    goes_with: str | None


class _Lessons(Sequence[_Lesson]):
    """The insights of a catalog being written, as grouping reads them: what is held of each,
    with its title and guideline read from its line in `lines`."""

    def __init__(self, held: _Waiting, lines: JsonLines) -> None:
        self._held = held
        self._lines = lines

    def __len__(self) -> int:
        return len(self._held)

    @overload
    def __getitem__(self, index: int) -> _Lesson: ...

    @overload
    def __getitem__(self, index: slice) -> list[_Lesson]: ...

    def __getitem__(self, index: int | slice) -> _Lesson | list[_Lesson]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self._made(index, self._lines[index])

    def __iter__(self) -> Iterator[_Lesson]:
        for index, line in enumerate(self._lines):
            yield self._made(index, line)

    def _made(self, index: int, line: dict[str, Any]) -> _Lesson:
        value = self._held.value
        outcome = value("source_outcome", index)
        assert outcome is not None
        return _Lesson(
            line["title"],
            line["guideline"],
            value("task_type", index),
            outcome,
            value("pattern", index),
            value("goes_with", index),
        )


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
                else explanation(header.title, (claim.statement for claim in header.claims)),
                project=page.header.project,
                kind=page.header.kind,
            )
        for index in needs:
            shown.learn(index, run, backing)
        yield run
    if next_fresh is not None:
        raise CorpusError(f"internal error: {next_fresh.run.step} written, but not in {RAW_DIR}")


def _damaged(path: Path, error: Exception) -> CorpusError:
    """A file (or folder) test time reads that is not as its version wrote it."""
    return CorpusError(
        f"{path}: damaged ({type(error).__name__}: {error}); run `wikitrace verify` on the corpus"
    )


def read_catalog(root: Path) -> tuple[list[PastRun], list[InsightEntry], bool, int, list[int]]:
    """catalog.jsonl: line 1 says whether the memory was compiled offline, how many insights
    are withheld, and the names of the values each later line holds; then a line a run
    (["run", PastRun's values]) and a line a shown insight (["insight", the index of its
    group's first, InsightEntry's values]). Written with what the pages say when the version
    was made, so loading reads one file, not every page's header. (Version 1, which earlier
    builds wrote, has a JSON object a line: {"run": {...}}, {"insight": {...}, "leader": N};
    it is read too.)"""
    path = root / CATALOG
    try:
        with _collector_paused():
            return _catalog_lines(path.read_bytes().splitlines())
    except (OSError, IndexError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise _damaged(path, error) from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a catalog's records are made, and the records left
    out of its later passes: it would walk the growing lists again and again while they are
    made (a third of the load at 136,000 lines), then every record again at each full pass
    while the message is rendered (half its time at 102,000 insights), and the records hold no
    cycles to collect. `gc.freeze` moves every object alive now out of the collector's sight;
    reference counting still frees them when they are dropped."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def _catalog_lines(
    lines: list[bytes],
) -> tuple[list[PastRun], list[InsightEntry], bool, int, list[int]]:
    """The records of a catalog's lines (see read_catalog); ValueError and its kin when a line
    is not what wikitrace writes."""
    head = orjson.loads(lines[0])
    runs: list[PastRun] = []
    insights: list[InsightEntry] = []
    leaders: list[int] = []
    for record in _records(head, lines[1:]):
        if isinstance(record, PastRun):
            runs.append(record)
        else:
            leaders.append(record[0])
            insights.append(record[1])
    if any(not 0 <= leader <= index for index, leader in enumerate(leaders)):
        raise ValueError("a group's first insight is out of range")
    return runs, insights, bool(head["offline"]), int(head["withheld"]), leaders


def _records(
    head: dict[str, Any], lines: Iterable[bytes]
) -> Iterator[PastRun | tuple[int, InsightEntry]]:
    """Each run, and each insight with its group's first, of the `lines` after a catalog's
    first, `head`; ValueError when a line is not what wikitrace writes."""
    if head.get("catalog") == 1:
        for line in lines:
            item = orjson.loads(line)
            if "run" in item:
                yield PastRun(**item["run"])
            else:
                yield int(item["leader"]), InsightEntry(**item["insight"])
        return
    if head.get("catalog") != CATALOG_VERSION:
        raise ValueError(f"catalog version {head.get('catalog')!r}")
    # A catalog an earlier wikitrace wrote may hold fewer of a run's or an insight's values:
    # those it names are the first of ours, and the rest take their defaults.
    run_fields, insight_fields = head["run"], head["insight"][1:]
    if (
        run_fields != _RUN_FIELDS[: len(run_fields)]
        or head["insight"][:1] != ["leader"]
        or insight_fields != _INSIGHT_FIELDS[: len(insight_fields)]
    ):
        raise ValueError("its lines hold other values than this wikitrace reads")
    # By position: a third of the time of building each record from a JSON object.
    for line in lines:
        kind, *values = orjson.loads(line)
        if kind == "run":
            if len(values) != len(run_fields):
                raise ValueError(f"a run's line holds {len(values)} values")
            yield PastRun(*values)
        elif kind == "insight":
            if len(values) != len(insight_fields) + 1:
                raise ValueError(f"an insight's line holds {len(values)} values")
            yield int(values[0]), InsightEntry(*values[1:])
        else:
            raise ValueError(f"a line of kind {kind!r}")


_OPTIONAL = ("scipy", "numba", "jax")
"""What bm25s imports when it is installed, to build or rank another way than wikitrace does."""


@functools.cache
def _bm25s() -> Any:
    """bm25s, imported as if scipy, numba and jax were not installed (they are hidden while it
    is imported, and put back after).

    bm25s imports each of them when it can: scipy to build an index (which wikitrace builds
    itself, as bm25s's numpy backend does), numba to compile its scoring, and jax, whose
    import sets up XLA and which then picks the top texts (its own way of ordering ties). An
    environment that has them would start seconds slower, and could rank a corpus
    differently. Hidden, the import costs the same everywhere, tests included (they install
    scipy); and `Ranker` asks for numpy's backends by name, in case bm25s was imported
    before. Another thread importing one of these during those few lines would get an
    ImportError."""
    hidden = {
        name: module
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] in _OPTIONAL
    }
    for name in [*_OPTIONAL, *hidden]:
        sys.modules[name] = None  # type: ignore[assignment]  # None: importing it fails
    try:
        import bm25s
    finally:
        for name in [*_OPTIONAL, *hidden]:
            sys.modules.pop(name, None)
        sys.modules.update(hidden)
    return bm25s


_COMPOUND = re.compile(r"\b\w*(?:_\w|[a-z][A-Z])\w*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def with_parts(text: str) -> str:
    """`text` with each snake_case or camelCase word followed by its parts, so that plain
    words find a tool's name ("transfer to human" finds transfer_to_human_agents) and the
    name still finds itself."""
    if "_" not in text and not any(c.isupper() for c in text):
        return text
    return _COMPOUND.sub(
        lambda m: m.group(0) + " " + _CAMEL.sub(" ", m.group(0)).replace("_", " "), text
    )


@functools.cache
def _stemmer() -> Any:
    """Snowball's English stemmer (PyStemmer): refunded, refunds and refund are one word."""
    import Stemmer

    return Stemmer.Stemmer("english")


STEMMED = "stems"
"""What a saved ranker's texts.json says under "words" when it indexed the words' stems; one
saved without it (an earlier build's) indexed the words as written, and is asked in them."""


def _tokenize(texts: Sequence[str], *, stem: bool = True) -> Any:
    """bm25s's words of each text (split as with_parts does, less English stop words), each
    word its stem unless `stem` is False. Stems are numbered in the order they are first met,
    as bm25s numbers words (its own stemming numbers them in a set's order, which changes from
    one process to the next, and with it a saved index's bytes)."""
    tokens = _bm25s().tokenize(
        [with_parts(text) for text in texts], stopwords="en", show_progress=False
    )
    if not stem or not tokens.vocab:
        return tokens
    numbered: dict[str, int] = {}
    # bm25s numbers its words in the order of its vocab's keys.
    stem_of = [
        numbered.setdefault(word, len(numbered))
        for word in _stemmer().stemWords(list(tokens.vocab))
    ]
    return type(tokens)(ids=[[stem_of[i] for i in text] for text in tokens.ids], vocab=numbered)


SearchName = Literal["tasks", "insights", "compilations"]
SAVED_SEARCHES: tuple[SearchName, ...] = ("tasks", "insights")
"""The rankers a version saves: those its first message needs. The compilations' (for
`search`) is built when first asked for: at 200,000 runs it would take a build 150 MB more."""
_SEARCH_COUNT = "texts.json"
SCORE_COLUMNS = 1 << 20
"""(text, word) pairs of a saved ranker's scores held at once while it is made (8 bytes
each): a range of words' columns (`_scores`)."""


def search_texts(
    name: SearchName,
    runs: Callable[[], Iterable[PastRun]],
    insights: Callable[[], Iterable[InsightEntry]],
) -> Iterator[str]:
    """What each ranker ranks, a text at a time: the runs' tasks less the lines most tasks
    share (the runs are read twice), the insights' title, guideline and applicability, or the
    compilations' titles and claims."""
    if name == "tasks":
        return without_boilerplate(lambda: (run.task for run in runs()))
    if name == "insights":
        return (f"{i.title} {i.guideline} {i.applicability}" for i in insights())
    return (run.explanation for run in runs())


class Ranker:
    """BM25 over a list of texts (bm25s); ranks the indices of the texts for a query."""

    def __init__(
        self, size: int, index: Any, source: Path | None = None, stemmed: bool = True
    ) -> None:
        self.size = size
        self._index = index
        """bm25s's index, or None when no text holds a word to index (they rank in order)."""
        self._source = source
        """The folder it was loaded from, if it was."""
        self.stemmed = stemmed
        """It indexed the words' stems (an index saved by an earlier build: the words)."""

    @classmethod
    def of(
        cls,
        texts: Iterable[str],
        chunk: int = 1024,
        block: int = 1 << 16,
        folder: Path | None = None,
        columns: int | None = None,
    ) -> Ranker:
        """A ranker over `texts`, read once. They are tokenized `chunk` at a time and each
        text's distinct words kept as an id and a count (8 bytes a word of a text) in files in
        `folder` (a temporary folder when None), not as a list a text: the same words,
        numbered the same, as tokenizing them all at once. Its scores are computed about
        `block` (text, word) pairs at a time (`_scores`). With `columns` (and a `folder`),
        the scores go to files in `folder`, as `save` writes them, about `columns` pairs at a
        time, and are mapped from there: a ranker made to be saved is never held whole."""
        tokens = _Tokens(folder)
        try:
            texts = iter(texts)
            while part := list(itertools.islice(texts, chunk)):
                tokens.extend(_tokenize(part))
            if not tokens.vocab:  # no text holds a word to index: they rank in order
                return cls(len(tokens.ids), None)
            index = _index_class()(block, folder if columns else None, columns)
            index.index(tokens, show_progress=False)
            return cls(len(tokens.ids), index)
        finally:
            tokens.ids.close()

    def save(self, folder: Path) -> None:
        """Into an empty `folder`: how many texts it ranks, and bm25s's files of its index."""
        folder.mkdir(parents=True)
        if self._index is not None:
            self._index.save(folder, show_progress=False)
        saved: dict[str, int | bool | str] = {
            "texts": self.size,
            "indexed": self._index is not None,
        }
        if self.stemmed:
            saved["words"] = STEMMED
        (folder / _SEARCH_COUNT).write_bytes(orjson.dumps(saved))

    @classmethod
    def load(cls, folder: Path, size: int) -> Ranker:
        """A ranker `save` wrote, its arrays mapped from the files (nothing is read until a
        query needs it); CorpusError when it is damaged or does not rank `size` texts."""
        bm25s = _bm25s()
        try:
            saved = orjson.loads((folder / _SEARCH_COUNT).read_bytes())
            if saved["texts"] != size:
                raise ValueError(f"it ranks {saved['texts']} texts, the catalog has {size}")
            index = (
                bm25s.BM25.load(folder, mmap=True, show_progress=False)
                if saved["indexed"]
                else None
            )
        except (OSError, KeyError, TypeError, ValueError) as error:
            raise _damaged(folder, error) from None
        return cls(size, index, folder, stemmed=saved.get("words") == STEMMED)

    def rank(self, query: str, allowed: Iterable[int], *, matched_only: bool = False) -> list[int]:
        """Indices in `allowed`, most similar first; then, unless `matched_only`, those that
        share no word with the query, in their order."""
        allowed = set(allowed)
        if not allowed or not self.size:
            return []
        ranked: list[int] = []
        query_tokens = _tokenize([query], stem=self.stemmed)
        if self._index is not None and query_tokens.vocab:
            try:
                documents, scores = self._index.retrieve(
                    query_tokens, k=self.size, show_progress=False, backend_selection="numpy"
                )
            except (IndexError, ValueError) as error:
                if self._source is None:
                    raise
                # Files that load but do not fit together (a word's entries past the texts).
                raise _damaged(self._source, error) from None
            ranked = [int(d) for d, s in zip(documents[0], scores[0], strict=True) if s > 0]
        if matched_only:
            return [i for i in ranked if i in allowed]
        # Runs with no word in common with the task come last, in corpus order.
        scored = set(ranked)
        rest = [i for i in range(self.size) if i not in scored]
        return [i for i in ranked + rest if i in allowed]


class _TokenIds:
    """Each text's distinct word ids and how often it uses each, a (text, word) pair at a
    time, in two unnamed files in `folder` (a temporary folder when None): 8 bytes a pair on
    disk, not in memory, where `_scores` reads them back a block at a time. Each text's end
    (in pairs) and length (in words) stay in memory."""

    def __init__(self, folder: Path | None = None) -> None:
        self._words = spill_file(folder, "ranker-words")
        self._counts = spill_file(folder, "ranker-counts")
        self.pairs = 0
        self.ends = array("q")
        self.lengths = array("q")

    def append(self, text: list[int]) -> None:
        counted = Counter(text)
        self._words.write(array("i", counted).tobytes())
        self._counts.write(array("i", counted.values()).tobytes())
        self.pairs += len(counted)
        self.ends.append(self.pairs)
        self.lengths.append(len(text))

    def blocks(self, size: int) -> Iterator[tuple[int, Any, Any]]:
        """(position of the first pair, word ids, counts) of up to `size` pairs at a time, in
        text order, as numpy arrays."""
        import numpy as np

        for handle in (self._words, self._counts):
            handle.flush()
            handle.seek(0)
        for first in range(0, self.pairs, size):
            count = min(size, self.pairs - first)
            words = np.frombuffer(self._words.read(4 * count), dtype=np.int32)
            counts = np.frombuffer(self._counts.read(4 * count), dtype=np.int32)
            yield first, words, counts

    def close(self) -> None:
        self._words.close()
        self._counts.close()

    def __len__(self) -> int:
        return len(self.ends)


@functools.cache
def _index_class() -> Any:
    """bm25s.BM25 whose index is built by `_scores` (bm25s imported when first needed)."""
    base: Any = _bm25s().BM25

    class Streamed(base):  # type: ignore[misc]
        def __init__(self, block: int, folder: Path | None, columns: int | None) -> None:
            super().__init__()
            self.block = block
            self.folder = folder
            """Where the scores' two long arrays are written, when not held (`columns`)."""
            self.columns = columns
            self.files: dict[str, str] = {}
            """The files of those arrays not saved yet, by the name `save` gives them."""
            self.scores: dict[str, Any] = {}
            """The score matrix (`index` sets it)."""

        def build_index_from_ids(
            self, unique_token_ids: list[int], corpus_token_ids: Any, **_: Any
        ) -> dict[str, Any]:
            # bm25s's documented hook for building the index another way.
            self.nonoccurrence_array = None  # lucene, its default, has none
            return _scores(self, len(unique_token_ids), corpus_token_ids)

        def save(self, save_dir: Any, **kwargs: Any) -> None:
            """bm25s's save, but for the arrays already in files, which are moved in."""
            if not self.files:
                return super().save(save_dir, **kwargs)  # type: ignore[no-any-return]
            held = self.scores
            # bm25s writes them empty (np.save would read the whole map through), then ours
            # take their place.
            self.scores = {**held, "data": held["data"][:0], "indices": held["indices"][:0]}
            try:
                super().save(save_dir, **kwargs)
            finally:
                self.scores = held
            for name, path in self.files.items():
                os.replace(path, Path(save_dir) / name)
            self.files = {}

    return Streamed


_SCORE_FILES = {"data": "data.csc.index.npy", "indices": "indices.csc.index.npy"}
"""The names bm25s's save gives the score matrix's two arrays a (text, word) pair long."""


def _scores(index: Any, vocabulary: int, ids: _TokenIds) -> dict[str, Any]:
    """bm25s's score matrix (compressed sparse columns: a word's texts and scores together)
    of the texts in `ids`, as bm25s's own `build_index_from_ids` makes it with its numpy
    backend, to the byte (a property test checks it), in a fraction of its memory: bm25s
    holds five or six arrays the length of all the (text, word) pairs at once, about 50 bytes
    a pair; this fills the two results from the pairs on disk, about `index.block` pairs at
    a time: each pair goes to the next free place of its word's column, so a column holds its
    texts in order. It holds the two results (8 bytes a pair), or, given `index.columns`,
    about that many pairs of them at once: a range of words' columns is filled, written to
    the end of its file in `index.folder`, and let go; the pairs are read once a range."""
    import numpy as np

    scoring = _bm25s().scoring

    if index.method in index.methods_requiring_nonoccurrence:
        raise ValueError(f"BM25 variant {index.method} is not built here")
    ends = np.frombuffer(ids.ends, dtype=np.int64)
    lengths = np.frombuffer(ids.lengths, dtype=np.int64)  # each text's words
    average = lengths.mean()
    frequencies = np.zeros(vocabulary, dtype=np.int64)  # a word's texts
    for _, words, _ in ids.blocks(index.block):
        frequencies += np.bincount(words, minlength=vocabulary)
    idf = scoring._build_idf_array(
        dict(enumerate(frequencies.tolist())),
        len(ends),
        scoring._select_idf_scorer(index.idf_method),
        dtype=index.dtype,
    )
    tfc = scoring._select_tfc_scorer(index.method)
    indptr = np.zeros(vocabulary + 1, dtype=np.int64)
    np.cumsum(frequencies, out=indptr[1:])
    del frequencies
    pairs = int(indptr[-1])

    def fill(low: int, high: int, data: Any, indices: Any) -> None:
        """The columns of words `low` to `high` into `data` and `indices` (theirs alone)."""
        start = int(indptr[low])
        free = indptr[low:high] - start
        """The next place of each word's column."""
        for first, words, counts in ids.blocks(index.block):
            positions = None
            if high - low < vocabulary:  # only this range's words
                positions = np.flatnonzero((words >= low) & (words < high))
                words, counts = words[positions], counts[positions]
                if not len(words):
                    continue
            order = np.argsort(words, kind="stable")  # by word, then text
            texts = np.searchsorted(
                ends, first + (order if positions is None else positions[order]), side="right"
            )
            by_word = words[order] - low
            starts = np.flatnonzero(np.concatenate(([True], by_word[1:] != by_word[:-1])))
            runs = np.diff(np.append(starts, len(by_word)))
            places = free[by_word] + (np.arange(len(by_word)) - np.repeat(starts, runs))
            free[by_word[starts]] += runs
            data[places] = idf[by_word + low] * tfc(
                tf_array=counts[order].astype(index.dtype),
                l_d=lengths[texts],
                l_avg=average,
                k1=index.k1,
                b=index.b,
                delta=index.delta,
            )
            indices[places] = texts

    if index.folder is None or not pairs:
        data = np.empty(pairs, dtype=index.dtype)
        indices = np.empty(pairs, dtype=index.int_dtype)
        fill(0, vocabulary, data, indices)
        return {"data": data, "indices": indices, "indptr": indptr, "num_docs": len(ends)}
    dtypes = {"data": np.dtype(index.dtype), "indices": np.dtype(index.int_dtype)}
    with contextlib.ExitStack() as stack:
        files = {
            name: stack.enter_context(
                tempfile.NamedTemporaryFile(dir=index.folder, prefix=".scores-", delete=False)
            )
            for name in _SCORE_FILES
        }
        index.files = {_SCORE_FILES[name]: handle.name for name, handle in files.items()}
        for name, handle in files.items():  # the header np.save writes for the whole array
            descr = np.lib.format.dtype_to_descr(dtypes[name])
            header = {"descr": descr, "fortran_order": False, "shape": (pairs,)}
            np.lib.format.write_array_header_1_0(handle, header)
        for low, high in _column_ranges(indptr, index.columns):
            size = int(indptr[high] - indptr[low])
            part = {name: np.empty(size, dtype=dtype) for name, dtype in dtypes.items()}
            fill(low, high, part["data"], part["indices"])
            for name, handle in files.items():
                handle.write(part[name].data)  # its buffer, not a copy
            del part
    maps = {name: np.load(handle.name, mmap_mode="r") for name, handle in files.items()}
    return {**maps, "indptr": indptr, "num_docs": len(ends)}


def _column_ranges(indptr: Any, columns: int) -> Iterator[tuple[int, int]]:
    """Ranges of words (low, high) whose columns hold about `columns` pairs in all, at least
    one word each."""
    import numpy as np

    low, words = 0, len(indptr) - 1
    while low < words:
        high = int(np.searchsorted(indptr, indptr[low] + columns, side="right")) - 1
        high = min(max(high, low + 1), words)
        yield low, high
        low = high


class _Tokens:
    """Texts tokenized a part at a time, as bm25s indexes them: `ids` (on disk, in `folder`)
    and `vocab`."""

    def __init__(self, folder: Path | None = None) -> None:
        self.ids = _TokenIds(folder)
        self.vocab: dict[str, int] = {}

    def extend(self, part: Any) -> None:
        """Add a part bm25s tokenized: its words numbered on from the parts before, in the
        order it numbered them (the order it met them in)."""
        local = sorted(part.vocab.items(), key=lambda item: item[1])
        ids = [self.vocab.setdefault(word, len(self.vocab)) for word, _ in local]
        for text in part.ids:
            self.ids.append([ids[i] for i in text])


def search_files(root: Path) -> Iterator[tuple[str, Iterator[bytes]]]:
    """The saved rankers of the version at `root`, made from its catalog as written: each
    file's path in the version and its bytes. One ranker is held at a time, each made from the
    texts read back from the catalog; bm25s writes its files into a scratch folder in `root`,
    gone when the last is read."""
    catalog = root / CATALOG

    def runs() -> Iterator[PastRun]:
        return (item for item in _catalog_records(catalog) if isinstance(item, PastRun))

    def insights() -> Iterator[InsightEntry]:
        return (item[1] for item in _catalog_records(catalog) if not isinstance(item, PastRun))

    with tempfile.TemporaryDirectory(dir=root, prefix=".search-") as scratch:
        for name in SAVED_SEARCHES:
            folder = Path(scratch) / name
            texts = search_texts(name, runs, insights)
            Ranker.of(texts, folder=Path(scratch), columns=SCORE_COLUMNS).save(folder)
            for path in sorted(folder.iterdir()):
                yield f"{SEARCH_DIR}/{name}/{path.name}", _file_chunks(path)


def _catalog_records(path: Path) -> Iterator[PastRun | tuple[int, InsightEntry]]:
    """The records of a catalog, read a line at a time."""
    with path.open("rb") as lines:
        yield from _records(orjson.loads(next(lines)), lines)


def _file_chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk


class Memory:
    """A corpus loaded once, to render first messages for many tasks."""

    def __init__(
        self,
        root: Path,
        runs: list[PastRun],
        insights: list[InsightEntry],
        offline: bool,
        withheld: int = 0,
        grouping: consolidate.Grouping = consolidate.group,
        leaders: list[int] | None = None,
        from_catalog: bool = False,
    ):
        self.root = root
        self.runs = runs
        self.insights = insights
        self.offline = offline
        self.withheld = withheld
        """Insights on record that the gate rejected or monitoring retired: never shown."""
        # Near-duplicate lessons (tools/consolidate.py): the message lists one of each group.
        self._leader = (
            leaders if leaders is not None else consolidate.of_lessons(insights, grouping)
        )
        self._lexical = grouping is consolidate.group
        """Whether lessons are grouped by their words (the default), which one project's
        runs' lessons are also grouped by (`_groups`)."""
        self._task_of = {run.step: run.task_id for run in runs}
        self._by_step: dict[str, PastRun] | None = None
        """Run step -> its run, made when a message is scoped by project or kind."""
        self._from_catalog = from_catalog

    @functools.cached_property
    def _groups(self) -> list[int]:
        """Each insight's group's first: the near-duplicates (`_leader`), with the groups of
        one project's runs whose titles say the same joined (consolidate.within_projects)."""
        if not self._lexical or not any(run.project for run in self.runs):
            return self._leader
        by_step = {run.step: run.project for run in self.runs}
        return consolidate.within_projects(
            self._leader,
            [item.title for item in self.insights],
            [item.source_step for item in self.insights],
            by_step.get,
        )

    # The rankers are loaded, or built, when first needed: a message that fits its budget
    # needs none.
    @functools.cached_property
    def _run_ranker(self) -> Ranker:
        """BM25 over the runs' tasks, less the lines most tasks share."""
        return self._ranker("tasks")

    @functools.cached_property
    def _insight_ranker(self) -> Ranker:
        """BM25 over the insights (a budget, a search)."""
        return self._ranker("insights")

    @functools.cached_property
    def _compilation_ranker(self) -> Ranker:
        """BM25 over the compilations' titles and claims (a search)."""
        return self._ranker("compilations")

    def _ranker(self, name: SearchName) -> Ranker:
        """The ranker saved with the catalog the memory was read from, or one built now (a
        corpus made before rankers were saved, or a memory made from its pages)."""
        saved = self.root / SEARCH_DIR / name
        if self._from_catalog and saved.is_dir():
            return Ranker.load(saved, len(self.insights if name == "insights" else self.runs))
        return Ranker.of(search_texts(name, lambda: self.runs, lambda: self.insights))

    @classmethod
    def load(cls, root: Path, grouping: consolidate.Grouping = consolidate.group) -> Memory:
        """The corpus at `root`; `grouping` says which lessons are near-duplicates (lexical
        by default, see tools/consolidate.py). Read from its catalog (one file, written when
        the version was made), or from its pages when it has none (made before catalogs)."""
        if (root / CATALOG).is_file():
            runs, insights, offline, withheld, leaders = read_catalog(root)
            # The catalog's groups are the lexical ones; any other grouping is made anew.
            kept = leaders if grouping is consolidate.group else None
            return cls(root, runs, insights, offline, withheld, grouping, kept, from_catalog=True)
        from wikitrace.corpus_schema import manifest

        offline = manifest.load(root).compiled_by == "offline"
        runs, insights, withheld = from_pages(root)
        return cls(root, runs, insights, offline, withheld, grouping)

    def first_message(
        self,
        task: str,
        *,
        task_type: str | None = None,
        exclude_tasks: Sequence[str] = (),
        similar: int = 3,
        max_tokens: int | None = None,
        mount: str = DEFAULT_MOUNT,
        prompts_dir: Path | None = None,
        infer_type: bool = True,
        insights_only: bool = False,
        report_at: ReportAt = "first",
        flag_conflicts: bool = False,
        project: str | None = None,
        access: Access = "shell",
        kind: str | None = None,
    ) -> FirstMessage:
        """Render the first message for `task`; nothing from `exclude_tasks` is shown.

        Without `task_type`, the type is inferred from the most similar past runs (when they
        agree), and the message keeps to it; an unknown `task_type` is an InputError.
        `insights_only` renders the method's Insights Only control: the same insights, no
        mount, no similar runs, no drill-down instructions. `report_at="end"` leaves the
        citation report out, for the harness to ask after the episode (`report_request`).
        `flag_conflicts` names the listed pairs whose applicability overlaps and whose source
        runs ended differently: a drill-down trigger the agent need not notice by itself.
        `project` (a coding task's repository or folder, as `project_of` names it) lists that
        project's lessons and runs first, then the same type's from elsewhere; without a type,
        its runs' type is the task's. `access="mcp"` names the MCP server's tools where the
        message would name shell commands and paths under `mount`.

        When the runs kept have kinds of work (coding sessions: corpus_schema/work.py), the
        task's `kind` (given, or inferred from its words) scopes the lessons and runs: the
        project's own first, then the same kind's from other projects, and no other; when its
        kind cannot be inferred, the message says so and lists every kind's, the project's
        first. A `kind` that is none of the kinds, or given to a corpus whose runs have none,
        is an InputError.
        """
        from wikitrace import prompts

        excluded = set(exclude_tasks)
        known_types = sorted({run.task_type for run in self.runs if run.task_type})
        if task_type is not None and task_type not in known_types:
            raise InputError(
                f"no task type {task_type!r} in this corpus; it has: "
                + (", ".join(known_types) or "none (its runs have no task type)"),
                field="--task-type",
            )
        inferred = False
        unsure: dict[str, int] | None = None
        if task_type is None and project is not None and len(known_types) > 1:
            own = {r.task_type for r in self.runs if r.project == project and r.task_type}
            if len(own) == 1:
                task_type, inferred = own.pop(), True
        if task_type is None and kind is not None and len(known_types) > 1:
            # A kind of work is a coding session's: the task is of the type such runs have.
            with_kinds = {r.task_type for r in self.runs if r.kind and r.task_type}
            if len(with_kinds) == 1:
                task_type = with_kinds.pop()
        if task_type is None and infer_type and len(known_types) > 1:
            task_type, votes = self._infer_type(task, excluded)
            inferred = task_type is not None
            unsure = None if inferred else votes
        run_ok = [
            i
            for i, run in enumerate(self.runs)
            if run.task_id not in excluded and (task_type is None or run.task_type == task_type)
        ]
        kind, kind_inferred, kind_unsure = self._task_kind(task, kind, run_ok)

        def tier(run: PastRun | None) -> int:
            """0: the project's own; 1: the same kind of work elsewhere; 2: any other."""
            if run is not None and project is not None and run.project == project:
                return 0
            return 1 if run is not None and kind is not None and run.kind == kind else 2

        # A mined contrast counts every run of its task type: with one of them left out, it
        # would still rest on that task's outcomes, so it is left out too.
        excluded_types = {run.task_type for run in self.runs if run.task_id in excluded}
        visible = [
            i
            for i, item in enumerate(self.insights)
            if item.source_task_id not in excluded
            and (task_type is None or item.task_type == task_type)
            and self._mined_applies(item, task, excluded, excluded_types)
        ]
        other_kinds = 0
        if kind is not None:  # the project's and the same kind's; no other kind's
            kept = [i for i in visible if tier(self._run_of(i)) < 2]
            other_kinds = len({self._groups[i] for i in visible}) - len(
                {self._groups[i] for i in kept}
            )
            visible = kept
            run_ok = [i for i in run_ok if tier(self.runs[i]) < 2]
        # The project's own first, then the same kind's, each tier in order.
        visible.sort(key=lambda i: tier(self._run_of(i)))
        # One entry per group of near-duplicates: its first visible member, with the others.
        members: dict[int, list[int]] = {}
        for i in visible:
            members.setdefault(self._groups[i], []).append(i)
        alike_of = {group[0]: group for group in members.values()}
        insight_ok = sorted(alike_of)
        # One run per task: three attempts of one task say less than three tasks.
        similar_runs: list[PastRun] = []
        seen_tasks: set[str] = set()
        ranked_runs = self._run_ranker.rank(task, run_ok)
        # The project's own runs first, then the same kind's, each tier by similarity.
        ranked_runs.sort(key=lambda i: tier(self.runs[i]))
        for i in ranked_runs:
            if len(similar_runs) == similar:
                break
            if self.runs[i].task_id not in seen_tasks:
                seen_tasks.add(self.runs[i].task_id)
                similar_runs.append(self.runs[i])
        if insights_only:  # the control shows no run and mounts nothing
            similar_runs = []
        env = prompts.environment(prompts_dir)
        template = env.get_template(TEMPLATE)

        def conflicts(chosen: list[int]) -> list[dict[str, str]]:
            found = []
            listed = sorted(chosen)
            for a_pos, a in enumerate(listed):
                for b in listed[a_pos + 1 :]:
                    first, second = self.insights[a], self.insights[b]
                    if first.source_outcome == second.source_outcome:
                        continue
                    overlap = consolidate.overlap(first.applicability, second.applicability)
                    if overlap >= CONFLICT_OVERLAP:
                        success, failure = (
                            (first, second)
                            if first.source_outcome == "success"
                            else (second, first)
                        )
                        found.append({"success": success.id, "failure": failure.id})
            return found

        gated = any(item.status == "committed" for item in self.insights)

        def render_template(chosen: list[int]) -> str:
            # Text from logs and models goes in so that it cannot restructure the message.
            groups: dict[tuple[int, str], list[InsightEntry]] = {}
            for i in sorted(chosen):
                item = self.insights[i]
                shown = replace(
                    item,
                    title=inline(item.title),
                    guideline=inline(item.guideline),
                    applicability=inline(item.applicability),
                    precondition=inline(item.precondition) if item.precondition else None,
                    mined=inline(item.mined),
                    support=_support([self.insights[m] for m in alike_of[i]]),
                )
                heading = inline(item.task_type or "any task")
                rank = tier(self._run_of(i))
                if rank == 1:
                    heading += f": {kind}"
                if project is not None:
                    heading += f" in {inline(project)}" if rank == 0 else ", other projects"
                groups.setdefault((rank, heading), []).append(shown)
            return template.render(
                task=task.strip(),
                kept_type=inline(task_type) if task_type and len(known_types) > 1 else None,
                type_inferred=inferred,
                type_unsure=(
                    None
                    if unsure is None
                    else ", ".join(f"{count} {inline(name)}" for name, count in unsure.items())
                ),
                project=inline(project) if project is not None else None,
                kind=kind,
                kind_inferred=kind_inferred,
                kind_unsure=(
                    None
                    if kind_unsure is None
                    else ", ".join(f"{count} {name}" for name, count in kind_unsure.items())
                ),
                other_kinds=other_kinds,
                corpus=mount.rstrip("/"),
                mcp=access == "mcp",
                offline=self.offline,
                insights_only=insights_only,
                report_at=report_at,
                conflicts=conflicts(chosen) if flag_conflicts and not insights_only else [],
                any_insights=bool(self.insights) or self.withheld > 0,
                any_mined=any(self.insights[i].pattern is not None for i in chosen),
                withheld=self.withheld,
                gated=gated,
                insight_groups=[(heading, items) for (_, heading), items in sorted(groups.items())],
                truncated=len(chosen) < len(insight_ok),
                shown=len(chosen),
                total=len(insight_ok),
                similar=[
                    {
                        **asdict(run),
                        "task": inline(shortened(run.task, TASK_PREVIEW)),
                        "task_id": inline(run.task_id),
                        "title": inline(run.title) if run.title else None,
                    }
                    for run in similar_runs
                ],
            )

        def render(chosen: list[int]) -> str:
            # The template keeps its blocks readable; the message needs no run of blank lines.
            return _BLANK_LINES.sub("\n\n", render_template(chosen))

        chosen = list(insight_ok)
        # Their texts alone: a message that cannot hold them all is not rendered whole.
        least = sum(
            len(self.insights[i].title) + len(self.insights[i].guideline) for i in insight_ok
        )
        budget = None if max_tokens is None else max_tokens * CHARS_PER_TOKEN
        text = "" if budget is not None and least > budget else render(chosen)
        if budget is not None and (not text or len(text) > budget):
            # Keep the most relevant insights that fit: the longest run of them, in order of
            # relevance, whose message fits. A message only grows with each insight added, so
            # the count is found by doubling it while it fits, then halving the gap: renders
            # that grow with log(insights shown), none of more than twice those shown.
            ranked = self._insight_ranker.rank(task, insight_ok)
            # The project's own lessons are kept first, then the same kind's.
            ranked.sort(key=lambda i: tier(self._run_of(i)))

            def fits(count: int) -> str | None:
                candidate = render(ranked[:count])
                return candidate if len(candidate) <= budget else None

            low, text = 0, render([])
            high = 1
            while high <= len(ranked) and (candidate := fits(high)) is not None:
                low, text = high, candidate
                high *= 2
            high = min(high - 1, len(ranked))
            while low < high:
                middle = (low + high + 1) // 2
                candidate = fits(middle)
                if candidate is None:
                    high = middle - 1
                else:
                    low, text = middle, candidate
            chosen = ranked[:low]
        return FirstMessage(
            text=text,
            insights=[self.insights[i].id for i in sorted(chosen)],
            alike={
                self.insights[i].id: [self.insights[m].id for m in alike_of[i][1:]]
                for i in sorted(chosen)
                if len(alike_of[i]) > 1
            },
            similar=[run.step for run in similar_runs],
            truncated=len(chosen) < len(insight_ok),
            total_insights=len(insight_ok),
            tokens_estimate=len(text) // CHARS_PER_TOKEN,
            excluded_tasks=sorted(excluded),
            task_type=task_type,
            task_type_inferred=inferred,
            type_unsure=unsure,
            project=project,
            kind=kind,
            kind_inferred=kind_inferred,
            kind_unsure=kind_unsure,
            other_kinds=other_kinds,
        )

    def _run_of(self, insight: int) -> PastRun | None:
        """The run an insight was drawn from."""
        if self._by_step is None:
            self._by_step = {run.step: run for run in self.runs}
        return self._by_step.get(self.insights[insight].source_step)

    def _task_kind(
        self, task: str, kind: str | None, run_ok: list[int]
    ) -> tuple[str | None, bool, dict[str, int] | None]:
        """The task's kind of work (given or inferred from its words), whether it was inferred,
        and, when it could not be, the cue words counted by kind; (None, False, None) when
        the runs kept have no kinds (not coding sessions, or converted before kinds were) or
        are of several task types (a task whose type is unsure is not scoped by kind)."""
        one_type = len({self.runs[i].task_type for i in run_ok}) == 1
        has_kinds = one_type and any(self.runs[i].kind for i in run_ok)
        if kind is not None:
            try:
                kind = kind_named(kind)
            except ValueError as error:
                raise InputError(str(error), field="--kind") from None
            if not has_kinds:
                raise InputError(
                    "no run of this corpus that the task may be shown has a kind of work (they "
                    "are not coding sessions, or were converted before kinds were inferred): "
                    "leave --kind out, or convert the sessions again",
                    field="--kind",
                )
            return kind, False, None
        if not has_kinds:
            return None, False, None
        guess = infer_kind(task)
        return guess.kind, guess.kind is not None, None if guess.kind else guess.votes

    def search(
        self,
        query: str,
        kinds: Sequence[SearchKind] = SEARCH_KINDS,
        *,
        limit: int = 10,
        exclude_tasks: Sequence[str] = (),
    ) -> list[Hit]:
        """BM25 over insights (title, guideline, applicability), compilations (title and
        claims) and past tasks: up to `limit` hits of each kind asked for, best first, only
        those sharing a word with the query; nothing drawn from `exclude_tasks`. Words are
        matched by their stems, and a snake_case, camelCase or dotted name by its parts too."""
        if len(query) > QUERY_LIMIT:
            raise InputError(
                f"the query is {len(query)} characters; at most {QUERY_LIMIT}", field="query"
            )
        excluded = set(exclude_tasks)
        hits: list[Hit] = []
        if "insights" in kinds:
            allowed = [
                i
                for i, item in enumerate(self.insights)
                if item.source_task_id not in excluded
                and not any(self._task_of.get(step) in excluded for step in item.cited_steps)
            ]
            for i in self._insight_ranker.rank(query, allowed, matched_only=True)[:limit]:
                item = self.insights[i]
                hits.append(
                    Hit(
                        "insights",
                        item.id,
                        f"{INSIGHT_DIR}/{item.id}.md",
                        item.title,
                        item.source_task_id,
                        item.task_type,
                        item.source_outcome,
                    )
                )
        allowed = [i for i, run in enumerate(self.runs) if run.task_id not in excluded]
        if "compilations" in kinds:
            compiled = [i for i in allowed if self.runs[i].explanation]
            for i in self._compilation_ranker.rank(query, compiled, matched_only=True)[:limit]:
                run = self.runs[i]
                hits.append(
                    Hit(
                        "compilations",
                        run.step,
                        f"{COMPILATION_DIR}/{run.step}.md",
                        run.title or "",
                        run.task_id,
                        run.task_type,
                        run.outcome,
                    )
                )
        if "tasks" in kinds:
            for i in self._run_ranker.rank(query, allowed, matched_only=True)[:limit]:
                run = self.runs[i]
                hits.append(
                    Hit(
                        "tasks",
                        run.step,
                        f"{RAW_DIR}/{run.step}/{RAW_METADATA_NAME}",
                        shortened(run.task, TASK_PREVIEW),
                        run.task_id,
                        run.task_type,
                        run.outcome,
                    )
                )
        return hits

    def _mined_applies(
        self, item: InsightEntry, task: str, excluded: set[str], excluded_types: set[str | None]
    ) -> bool:
        """Whether a mined lesson may be shown for `task` (a model's lesson: always)."""
        if item.pattern is None:
            return True
        if any(self._task_of.get(step) in excluded for step in item.cited_steps):
            return False
        if item.only_task is not None:  # a divergence: about one task, shown for it alone
            return " ".join(item.only_task.split()) == " ".join(task.split())
        return item.task_type not in excluded_types

    def _infer_type(
        self, task: str, excluded: set[str], nearest: int = 5
    ) -> tuple[str | None, dict[str, int]]:
        """The task type more than half of the nearest past runs have (one run per task, only
        runs that share a word with the task); and their types, counted (an untyped run as
        "untyped"). One run alone decides when it is the only one that shares a word: a
        coding task that matches one coding session and no airline task is a coding task."""
        allowed = [i for i, run in enumerate(self.runs) if run.task_id not in excluded]
        types: list[str | None] = []  # an untyped run (a session) is a vote against any type
        seen: set[str] = set()
        for i in self._run_ranker.rank(task, allowed, matched_only=True):
            run = self.runs[i]
            if run.task_id in seen:
                continue
            seen.add(run.task_id)
            types.append(run.task_type or None)
            if len(seen) == nearest:
                break
        counted = Counter(t or "untyped" for t in types)
        votes = dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))
        typed = [t for t in types if t is not None]
        if not typed:
            return None, votes
        best = max(set(typed), key=typed.count)
        agree = types.count(best)
        return (best if agree * 2 > len(types) else None), votes
