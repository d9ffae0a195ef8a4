"""The catalog (catalog.jsonl): what test-time readers need of every run and shown insight,
one line each, so that loading a corpus reads one file, not every page's header.

Its records (`PastRun`, `InsightEntry`) and reading it back (`read_catalog`, or each record when
first asked for: `LazyCatalog`); writing it, from a version's pages, is `catalog_build.py`.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import orjson

from .errors import CorpusError
from .layout import CATALOG, catalog_page_rel
from .tasks import TaskKey, task_key

if TYPE_CHECKING:  # read without pydantic's models: a hook's recall reads the catalog alone
    from .records import Claim, Outcome

CATALOG_VERSION = 3
"""3: the runs' lines in pages (`catalog/runs-NNNN.jsonl`), the head saying how many runs
and how many a full page holds; 2: every line in catalog.jsonl; 1: a JSON object a line.
All three are read."""
READ_ONLY_MARK = "READ CONTENT ONLY"
"""How every place that shows a lesson whose only support is content the agent read
(records.READ_ONLY) marks it: its page, the insight index, search hits (CLI and MCP), the
site, `audit` and the first message. Here, not in records.py, so that a search's hits are
printed without loading pydantic."""


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
    """Its compilation's title, claims and their quotes, for search (a catalog written before
    quotes were searched holds the title and claims alone)."""
    project: str | None = None
    """The code project it worked in (a coding agent's session), if known."""
    kind: str | None = None
    """The kind of work it did (a coding agent's session: corpus_schema/work.py), if known."""
    origin: str | None = None
    """Its task's source (RunRecord.origin), if known; None in a catalog made before."""
    repo: dict[str, Any] | None = None
    """The repository as it saw it (RunRecord.repo, as JSON: commit, branch, started, files),
    if known; None in a catalog made before."""

    @property
    def task_key(self) -> TaskKey:
        """Its task: its source and its id."""
        return task_key(self.origin, self.task_id)


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
    source_origin: str | None = None
    """Its source run's task's source (RunRecord.origin), if known."""
    quoted_files: list[str] = field(default_factory=list)
    """The files the quotes it rests on name (code_names.named_files), checked at recall
    against today's code with those its own text names; empty in a catalog made before."""
    supersedes: list[str] = field(default_factory=list)
    """The older lessons it replaces (InsightHeader.supersedes)."""

    @property
    def source_task(self) -> TaskKey:
        """Its source run's task: the runs of a task are left out together."""
        return task_key(self.source_origin, self.source_task_id)


RUN_FIELDS = [item.name for item in fields(PastRun)]
INSIGHT_FIELDS = [item.name for item in fields(InsightEntry)]
"""The order of the values of a catalog's lines."""


def explanation(title: str, texts: Iterable[str]) -> str:
    """What search reads of a run's compilation (PastRun.explanation): its title and the
    texts of its claims (`claim_texts`)."""
    return "\n".join([title, *texts])


def claim_texts(claims: Iterable[Claim]) -> list[str]:
    """Each claim's statement, then the quotes that back it, verified or not (its page shows
    both, and a reader searching for words they saw there should find it)."""
    return [
        text for claim in claims for text in (claim.statement, *(e.quote for e in claim.evidence))
    ]


def damaged(path: Path, error: Exception) -> CorpusError:
    """A file (or folder) test time reads that is not as its version wrote it."""
    return CorpusError(
        f"{path}: damaged ({type(error).__name__}: {error}); run `wikitrace verify` on the corpus"
    )


def versioned_json(path: Path, key: str, version: int) -> dict[str, Any] | None:
    """The JSON object in the file at `path` whose `key` says `version`; None when there is
    no file or it is of another version (what it holds is made anew); CorpusError when it is
    damaged."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise damaged(path, error) from None
    if not isinstance(data, dict) or data.get(key) != version:
        return None
    return data


def by_number(name: str) -> tuple[int, int]:
    """Where a page (`compilation/step-N.md`) or an id (`step-N`) comes in its layer's order:
    by number, the longer spelling first (read.numbered's order)."""
    digits = name.rsplit("-", 1)[1].removesuffix(".md")
    return int(digits), -len(digits)


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
            return _catalog_lines(catalog_lines(root))
    except (OSError, IndexError, KeyError, TypeError, ValueError, AttributeError) as error:
        raise damaged(path, error) from None


def catalog_lines(root: Path) -> list[bytes]:
    """The lines of the catalog of the corpus at `root` as version 2 holds them: its head, its
    runs', its insights'. A version 3 catalog's runs are read from their pages (`page_count`),
    between the head and the insights of catalog.jsonl. OSError, ValueError and their kin
    when they are not there or not what wikitrace writes."""
    lines = (root / CATALOG).read_bytes().splitlines()
    head = orjson.loads(lines[0])
    if head.get("catalog") != CATALOG_VERSION:
        return lines
    runs: list[bytes] = []
    for number in range(1, page_count(head) + 1):
        runs += (root / catalog_page_rel(number)).read_bytes().splitlines()
    if len(runs) != head["runs"]:
        raise ValueError(f"its pages hold {len(runs)} runs, its head says {head['runs']}")
    return [lines[0], *runs, *lines[1:]]


def page_size(path: Path) -> int | None:
    """How many runs a full page of the catalog at `path` (catalog.jsonl) holds; None for a
    catalog whose runs are not in pages (before version 3) or a head that does not say."""
    with path.open("rb") as lines:
        try:
            head = orjson.loads(next(lines))
        except (StopIteration, ValueError) as error:
            raise damaged(path, error) from None
    if not isinstance(head, dict):
        raise damaged(path, TypeError("its first line is not its head"))
    full = head.get("page_runs") if head.get("catalog") == CATALOG_VERSION else None
    return full if isinstance(full, int) and full > 0 else None


def page_count(head: dict[str, Any]) -> int:
    """How many pages hold the runs of a version 3 catalog with this head."""
    runs, full = head["runs"], head["page_runs"]
    if not isinstance(runs, int) or runs < 0 or not isinstance(full, int) or full < 1:
        raise ValueError(f"its head's run count {runs!r} or page size {full!r}")
    return -(-runs // full)


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
    for record in records_of(head, lines[1:]):
        if isinstance(record, PastRun):
            runs.append(record)
        else:
            leaders.append(record[0])
            insights.append(record[1])
    if any(not 0 <= leader <= index for index, leader in enumerate(leaders)):
        raise ValueError("a group's first insight is out of range")
    return runs, insights, bool(head["offline"]), int(head["withheld"]), leaders


def records_of(
    head: dict[str, Any], lines: Iterable[bytes]
) -> Iterator[PastRun | tuple[int, InsightEntry]]:
    """Each run, and each insight with its group's first, of the `lines` after a catalog's
    first, `head`; ValueError or its kin (IndexError, KeyError, TypeError) when a line is not
    what wikitrace writes."""
    return map(line_reader(head), lines)


def line_reader(head: dict[str, Any]) -> Callable[[bytes], PastRun | tuple[int, InsightEntry]]:
    """What makes the record of one of the lines after a catalog's first, `head` (a run, or
    an insight with its group's first), the head checked once here, not once a line: a lazy
    catalog makes its records one at a time. ValueError or its kin (IndexError, KeyError,
    TypeError) when the head, or a line, is not what wikitrace writes."""
    if head.get("catalog") == 1:
        return _version_1
    if head.get("catalog") not in (2, CATALOG_VERSION):
        raise ValueError(f"catalog version {head.get('catalog')!r}")
    # A catalog an earlier wikitrace wrote may hold fewer of a run's or an insight's values:
    # those it names are the first of ours, and the rest take their defaults.
    run_fields, insight_fields = head["run"], head["insight"][1:]
    if (
        run_fields != RUN_FIELDS[: len(run_fields)]
        or head["insight"][:1] != ["leader"]
        or insight_fields != INSIGHT_FIELDS[: len(insight_fields)]
    ):
        raise ValueError("its lines hold other values than this wikitrace reads")
    # By position: a third of the time of building each record from a JSON object. The
    # lengths counted once (with the kind), the line not unpacked into a list of its own.
    run_length, insight_length = len(run_fields) + 1, len(insight_fields) + 2
    loads = orjson.loads

    def record(line: bytes) -> PastRun | tuple[int, InsightEntry]:
        item = loads(line)
        kind = item[0]
        if kind == "run":
            if len(item) != run_length:
                raise ValueError(f"a run's line holds {len(item) - 1} values")
            return PastRun(*item[1:])
        if kind == "insight":
            if len(item) != insight_length:
                raise ValueError(f"an insight's line holds {len(item) - 1} values")
            return int(item[1]), InsightEntry(*item[2:])
        raise ValueError(f"a line of kind {kind!r}")

    return record


def _version_1(line: bytes) -> PastRun | tuple[int, InsightEntry]:
    """A line of a version 1 catalog: a JSON object a line."""
    item = orjson.loads(line)
    if "run" in item:
        return PastRun(**item["run"])
    return int(item["leader"]), InsightEntry(**item["insight"])


def records_in(path: Path) -> Iterator[PastRun | tuple[int, InsightEntry]]:
    """The records of the catalog at `path` (catalog.jsonl), read a line at a time: of a
    version 3 catalog, its pages of runs (beside it), then its insights (see `catalog_lines`)."""
    with path.open("rb") as lines:
        head = orjson.loads(next(lines))
        if head.get("catalog") == CATALOG_VERSION:
            for number in range(1, page_count(head) + 1):
                with (path.parent / catalog_page_rel(number)).open("rb") as page:
                    yield from records_of(head, page)
        yield from records_of(head, lines)


_STRING = rb'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
_TASK = re.compile(
    rb'\["run",(?:%s|null),(?:%s|null),(?:%s|null),(?:%s|null),(%s)' % ((_STRING,) * 5)
)
"""What a run's line begins with (as line_reader reads it): its kind, step, task id, task
type and outcome, then its task."""


def tasks_and_records(
    path: Path, tasks_of: Collection[int], unread: Collection[int] = ()
) -> Iterator[PastRun | tuple[int, InsightEntry] | str]:
    """What `records_in` gives, but that of the pages of runs numbered in `tasks_of` only
    each run's task is read (a str), not the rest of its line (a compilation's 5 KB text),
    and of those numbered in `unread` nothing: they are not opened."""
    with path.open("rb") as lines:
        head = orjson.loads(next(lines))
        reader = line_reader(head)
        if head.get("catalog") == CATALOG_VERSION:
            matched = _TASK if head["run"][4:5] == ["task"] else None  # its lines as ours
            for number in range(1, page_count(head) + 1):
                page = path.parent / catalog_page_rel(number)
                if number in unread:
                    continue
                if number not in tasks_of:
                    with page.open("rb") as held:
                        yield from map(reader, held)
                    continue
                data = page.read_bytes()
                start = 0
                while start < len(data):
                    end = data.find(b"\n", start) + 1 or len(data)
                    found = matched.match(data, start, end) if matched is not None else None
                    if found is None:  # read whole (and what is wrong with it said)
                        run = reader(data[start:end])
                        if not isinstance(run, PastRun):
                            raise damaged(page, ValueError("an insight's line among its runs"))
                        yield run.task
                    else:
                        yield orjson.loads(found.group(1))
                    start = end
        yield from map(reader, lines)


_Record = TypeVar("_Record")


class CatalogLines:
    """A catalog's records, each made from its line when first asked for (a line that is not
    what wikitrace writes is a CorpusError then): its runs, insights and their groups' leaders.
    A subclass says where the catalog's lines are (`_line`, by number in the file, the head 0)."""

    def __init__(self, path: Path, head: dict[str, Any], runs: int, insights: int) -> None:
        self.path = path
        self._reader = line_reader(head)
        self.offline = bool(head["offline"])
        self.withheld = int(head["withheld"])
        # Its lines (as catalog_lines gives them): the head, the runs', then the insights'.
        self._first = 1 + runs
        self.runs: Sequence[PastRun] = LazyRecords(runs, self._run)
        # An insight's line holds its group's first too: both kept when it is read, once.
        self._leaders: LazyRecords[int] = LazyRecords(insights, self._leader)
        self._insights: LazyRecords[InsightEntry] = LazyRecords(insights, self._insight)
        self.insights: Sequence[InsightEntry] = self._insights
        self.leaders: Sequence[int] = self._leaders
        fields: list[str] = head.get("insight") or []  # none in a catalog of version 1
        self._type_at = (
            fields.index("task_type") + 1
            if head.get("catalog") in (2, CATALOG_VERSION) and "task_type" in fields
            else None
        )
        """Where an insight's line holds its task type (after its kind), when it is known."""

    def _line(self, number: int) -> bytes:
        raise NotImplementedError

    def _record(self, line: int) -> PastRun | tuple[int, InsightEntry]:
        try:
            return self._reader(self._line(line))
        except (IndexError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise damaged(self.path, error) from None

    def _run(self, index: int) -> PastRun:
        record = self._record(1 + index)
        if not isinstance(record, PastRun):
            raise damaged(self.path, ValueError(f"line {index + 2} is not a run's"))
        return record

    def _insight(self, index: int) -> InsightEntry:
        leader, item = self._pair(index)
        self._leaders.keep(index, leader)
        return item

    def _leader(self, index: int) -> int:
        leader, item = self._pair(index)
        self._insights.keep(index, item)
        return leader

    def insights_of_types(self, types: Collection[str]) -> Iterator[tuple[int, InsightEntry]]:
        """Each insight of one of `types`, with its place, in order: a line not read yet is
        made into a record only when its task type is one of them (a first message for a task
        of one domain reads every line, and makes a sixth of them at 100,000)."""
        insights = self._insights
        if self._type_at is None:  # a catalog of version 1: each record made
            yield from ((i, item) for i, item in enumerate(insights) if item.task_type in types)
            return
        loads, at = orjson.loads, self._type_at
        for index in range(len(insights)):
            item = insights.made_or_none(index)
            if item is None:
                line = self._first + index
                try:
                    task_type = loads(self._line(line))[at]
                except (IndexError, KeyError, TypeError, ValueError) as error:
                    raise damaged(self.path, error) from None
                if task_type not in types:
                    continue
                item = insights[index]
            elif item.task_type not in types:
                continue
            yield index, item

    def _pair(self, index: int) -> tuple[int, InsightEntry]:
        line = self._first + index
        record = self._record(line)
        if isinstance(record, PastRun) or not 0 <= record[0] <= index:
            problem = "is a run's" if isinstance(record, PastRun) else "names a group out of range"
            raise damaged(self.path, ValueError(f"line {line + 1} {problem}"))
        return record


class LazyCatalog(CatalogLines):
    """A catalog read as its lines, each record made when first asked for: what a search reads
    of a large corpus (the records of its hits, where `read_catalog` makes every one). A line
    that is not what wikitrace writes is found when it is read (CorpusError)."""

    def __init__(self, path: Path, lines: list[bytes], head: dict[str, Any]) -> None:
        self._lines = lines
        first = bisect.bisect_left(
            lines, True, 1, len(lines), key=lambda line: not line.startswith(b'["run"')
        )
        super().__init__(path, head, first - 1, len(lines) - first)

    @classmethod
    def read(cls, root: Path) -> LazyCatalog | None:
        """The catalog of the corpus at `root`; None for one of version 1 (its lines name their
        kind in another way: read it whole)."""
        path = root / CATALOG
        try:
            lines = catalog_lines(root)
            head = orjson.loads(lines[0])
            if head.get("catalog") == 1:
                return None
            return cls(path, lines, head)  # another version: line_reader's ValueError
        except (OSError, IndexError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise damaged(path, error) from None

    def _line(self, number: int) -> bytes:
        return self._lines[number]


class LazyRecords(Sequence[_Record]):
    """`size` records, each made by `make(index)` when first asked for, then kept."""

    def __init__(self, size: int, make: Callable[[int], _Record]) -> None:
        self._made: list[_Record | None] = [None] * size
        self._make = make
        self._left = size
        """How many are not made yet."""

    def __len__(self) -> int:
        return len(self._made)

    @property
    def made(self) -> int:
        """How many records were made (their lines read) so far."""
        return sum(record is not None for record in self._made)

    @overload
    def __getitem__(self, index: int) -> _Record: ...

    @overload
    def __getitem__(self, index: slice) -> list[_Record]: ...

    def __getitem__(self, index: int | slice) -> _Record | list[_Record]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        made = self._made[index]  # the record made, asked for again and again: checked first
        if made is None:
            if index < 0:
                index += len(self._made)
            made = self._made[index] = self._make(index)
            self._left -= 1
        return made

    def made_or_none(self, index: int) -> _Record | None:
        """The record at `index` if it was made, else None (nothing is read)."""
        return self._made[index]

    def keep(self, index: int, record: _Record) -> None:
        """Keep `record`, made with another, as the one at `index` (not made again)."""
        if self._made[index] is None:
            self._made[index] = record
            self._left -= 1

    def __iter__(self) -> Iterator[_Record]:
        # A pass over them all (a first message's over every run): those not made yet are
        # made in one go, as read_catalog makes them (the collector paused), and the pass is
        # the list's own.
        if self._left:
            made, make = self._made, self._make
            with _collector_paused():
                for index, record in enumerate(made):
                    if record is None:
                        made[index] = make(index)
                        self._left -= 1
        return iter(self._made)  # type: ignore[arg-type]  # every one made
