"""The runs of a catalog being written (catalog_build.py), a page at a time: each run's line
taken from what the build just wrote, from the parent version's catalog for the runs whose
pages it keeps (its full pages of runs linked as they are), or read from the run's pages."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import orjson

from . import read
from .catalog import (
    CATALOG_VERSION,
    RUN_FIELDS,
    InsightEntry,
    PastRun,
    by_number,
    claim_texts,
    damaged,
    explanation,
    page_count,
    records_of,
)
from .catalog_index import INDEX_VERSION, IndexWriter
from .errors import CorpusError
from .layout import (
    CATALOG,
    CATALOG_INDEX,
    CATALOG_PAGE_RUNS,
    COMPILATION_DIR,
    RAW_DIR,
    RAW_METADATA_NAME,
    catalog_page_rel,
)
from .records import CompilationHeader, RawHeader, is_judged, repo_json


class Learners(Protocol):
    """The insights of a catalog being written, as its runs teach them (catalog_build.py's
    `_Waiting`): which need which run, and what each learns from it."""

    def by_step(self) -> dict[str, list[int]]: ...

    def divergence(self, index: int) -> bool: ...

    def learn(self, index: int, run: PastRun, backing: list[bool] | None) -> None: ...


@dataclass(slots=True)
class WrittenRun:
    """A run whose pages the version being made has just written, as its catalog line would
    read them: taken as it is (see catalog_of), so a build does not read back what it wrote."""

    run: PastRun
    backing: list[bool] | None
    """Its compilation's read.claim_backing (what an insight drawn from it needs to know
    whether its claims are backed); None when it has no compilation."""


@dataclass(frozen=True)
class ListedRuns:
    """A version's runs as the build that wrote them lists them (its rows, in step order),
    so that its catalog is made without listing its layers' folders (20,000 names each at
    20,000 runs)."""

    steps: list[str]
    """Each run's step (its folder in the raw layer), in step order."""
    compiled: set[str]
    """The steps of the runs that have a compilation page."""


CatalogFile = tuple[str, Iterable[bytes] | None]
"""A file of a catalog being written: its path, and its bytes, or None for the parent's file
of that path, which the version keeps as it is (a full page of runs it keeps)."""

T = TypeVar("T")


class ParentCatalog:
    """What a version made from another can take from the parent's catalog: the lines of the
    runs and insights whose pages it keeps unchanged, and its full pages of runs (version 3)
    whose runs it all keeps. The lines are read one at a time, in the order the version's
    pages are listed (the parent's are in the same order), not held: a run's record is 3.2 KB,
    its task and claims included, in a catalog of 10,000 made-up runs; of a paged catalog,
    only the page of the run asked for is read."""

    def __init__(self, root: Path, changed: set[str], parent_hashes: dict[str, str]) -> None:
        self.root = root
        self.catalog = root / CATALOG
        self.parent_hashes = parent_hashes
        self.changed = changed
        """The version's files the parent does not hold as they are: only what it adds or
        writes again, where a dict of every file would grow with the corpus."""
        with self.catalog.open("rb") as handle:
            try:
                self.head = orjson.loads(next(handle))
                self.paged = self.head.get("catalog") == CATALOG_VERSION
            except (StopIteration, KeyError, TypeError, ValueError) as error:
                raise damaged(self.catalog, error) from None
        self.parts = self._index_parts() if self.paged else []
        """Its index's part for each page of its runs; none when the pages' sizes are not
        this wikitrace's or the index is not what it writes (its pages are then not linked)."""
        self._firsts = [by_number(part["first"]) for part in self.parts]
        self._sequential: InOrder[PastRun] | None = None
        self._page: tuple[int, dict[str, PastRun]] | None = None

    def kept(self, rel: str) -> bool:
        """Whether the version's file `rel` is the parent's, unchanged."""
        return rel in self.parent_hashes and rel not in self.changed

    @classmethod
    def of(
        cls,
        parent: Path | None,
        parent_files: dict[str, str] | None,
        changed: set[str] | None,
    ) -> ParentCatalog | None:
        if parent is None or parent_files is None or changed is None:
            return None
        if not (parent / CATALOG).is_file():
            return None
        return cls(parent, changed, parent_files)

    def _index_parts(self) -> list[dict[str, Any]]:
        path = self.root / CATALOG_INDEX
        try:
            index = orjson.loads(path.read_bytes())
            if (
                index.get("catalog_index") != INDEX_VERSION
                or index.get("page_runs") != CATALOG_PAGE_RUNS
                or self.head.get("page_runs") != CATALOG_PAGE_RUNS
                or len(index["pages"]) != page_count(self.head)
            ):
                return []
            parts: list[dict[str, Any]] = index["pages"]
            for part in parts:
                if not (isinstance(part["first"], str) and isinstance(part["last"], str)):
                    return []
            return parts
        except (OSError, KeyError, TypeError, ValueError, AttributeError):
            return []

    def full_page(self, number: int, steps: list[str]) -> dict[str, Any] | None:
        """The index's part for the parent's page `number`, when that page is full and holds
        the runs `steps` (its first and last: both versions' runs are in step order, and the
        version's are the parent's kept); else None."""
        if number > len(self.parts):
            return None
        part = self.parts[number - 1]
        full = len(part["offsets"]) - 1 == CATALOG_PAGE_RUNS == len(steps)
        return part if full and part["first"] == steps[0] and part["last"] == steps[-1] else None

    def run(self, step: str) -> PastRun | None:
        """The parent's run `step` (asked for in step order), or None."""
        if not self.paged:
            if self._sequential is None:
                self._sequential = InOrder(
                    (by_number(record.step), record)
                    for record in self._records(insights=False)
                    if isinstance(record, PastRun)
                )
            return self._sequential.get(by_number(step))
        number = (
            bisect.bisect_right(self._firsts, by_number(step))
            if self.parts
            else (by_number(step)[0] - 1) // CATALOG_PAGE_RUNS + 1
        )
        if self._page is None or self._page[0] != number:
            self._page = (number, self.page_runs(number))
        return self._page[1].get(step)

    def page_runs(self, number: int) -> dict[str, PastRun]:
        """The runs of the parent's page `number`, by step (none past its last page)."""
        if not self.paged or not 0 < number <= page_count(self.head):
            return {}
        path = self.root / catalog_page_rel(number)
        try:
            with path.open("rb") as page:
                return {
                    record.step: record
                    for record in records_of(self.head, page)
                    if isinstance(record, PastRun)
                }
        except (OSError, IndexError, KeyError, TypeError, ValueError) as error:
            raise damaged(path, error) from None

    def runs_at(self, number: int, places: list[int]) -> list[PastRun | None]:
        """The runs at `places` (in order) of the parent's page `number`, each read from its
        own line where its index's part says it is (a full page of runs, see `full_page`);
        None for a line that is not a run's."""
        path = self.root / catalog_page_rel(number)
        offsets = self.parts[number - 1]["offsets"]
        found: list[PastRun | None] = []
        try:
            with path.open("rb") as page:
                for place in places:
                    page.seek(offsets[place])
                    line = page.read(offsets[place + 1] - offsets[place])
                    record = next(records_of(self.head, [line]))
                    found.append(record if isinstance(record, PastRun) else None)
        except (OSError, IndexError, KeyError, TypeError, ValueError) as error:
            raise damaged(path, error) from None
        return found

    def insights(self) -> InOrder[InsightEntry]:
        """The parent's insights that may be shown, by id."""
        return InOrder(
            (by_number(record[1].id), record[1])
            for record in self._records(insights=True)
            if not isinstance(record, PastRun)
        )

    def _records(self, *, insights: bool) -> Iterator[PastRun | tuple[int, InsightEntry]]:
        try:
            with self.catalog.open("rb") as handle:
                head = orjson.loads(next(handle))
                lines: Iterable[bytes] = handle
                if insights and head.get("catalog") in (2, CATALOG_VERSION):
                    lines = (line for line in handle if not line.startswith(b'["run"'))
                yield from records_of(head, lines)
        except (OSError, StopIteration, IndexError, KeyError, TypeError, ValueError) as error:
            raise damaged(self.catalog, error) from None


class InOrder(Generic[T]):
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


def runs_read(root: Path, shown: Learners) -> Iterator[PastRun]:
    """Every run with its compilation's title and claims, read from its pages in step order;
    each insight drawn from it that needs to learns its task (see `CatalogRuns.run`)."""
    runs = CatalogRuns(root, shown, None, ())
    for step in runs.steps:
        yield runs.run(step)


def run_pages(runs: CatalogRuns, index: IndexWriter) -> Iterator[CatalogFile]:
    """Each page of the catalog's runs: its path, and its lines, or None for a full page of
    the parent whose runs the version all keeps (those of its runs an insight needs are read
    from it); each told to the catalog's `index`."""
    for start in range(0, len(runs.steps), runs.page_runs):
        number = start // runs.page_runs + 1
        steps = runs.steps[start : start + runs.page_runs]
        part = runs.kept_page(number, steps)
        if part is not None:
            runs.learn_from_page(number, steps)
            index.kept(part)
            yield catalog_page_rel(number), None
            continue
        page_runs = list(map(runs.run, steps))
        lines = [
            orjson.dumps(["run", *(getattr(run, n) for n in RUN_FIELDS)]) + b"\n"
            for run in page_runs
        ]
        index.page(lines, page_runs)
        yield catalog_page_rel(number), lines
    runs.done()


class CatalogRuns:
    """A version's runs as the catalog takes them, asked for in step order: `root` is
    resolved; the runs `written` (in step order) are taken as they are, and those of the
    parent (`taken`) whose pages the version keeps from its catalog."""

    def __init__(
        self,
        root: Path,
        shown: Learners,
        taken: ParentCatalog | None,
        written: Iterable[WrittenRun],
        listed: ListedRuns | None = None,
    ) -> None:
        self.root = root
        self.shown = shown
        self.taken = taken
        self.drawn = shown.by_step()
        self.page_runs = CATALOG_PAGE_RUNS
        """Runs in a full page of the catalog."""
        self.steps: list[str]
        self.compiled: set[str]
        if listed is not None:
            self.steps, self.compiled = listed.steps, listed.compiled
        else:
            self.steps = [rel.split("/")[1] for rel in read.numbered(root, RAW_DIR)]
            # Both layers list their pages by step: a compilation of no run is left out
            # (verify says so).
            self.compiled = {
                rel.split("/")[1].removesuffix(".md")
                for rel in read.numbered(root, COMPILATION_DIR)
            }
        self._fresh = iter(written)
        self._next_fresh = next(self._fresh, None)

    def _kept(self, step: str) -> bool:
        """Whether run `step`'s pages are the parent's, unchanged (and so its line)."""
        taken = self.taken
        if taken is None:
            return False
        compiled_rel = f"{COMPILATION_DIR}/{step}.md"
        return taken.kept(f"{RAW_DIR}/{step}/{RAW_METADATA_NAME}") and (
            taken.kept(compiled_rel)
            if step in self.compiled
            else compiled_rel not in taken.parent_hashes  # none in the parent either
        )

    def kept_page(self, number: int, steps: list[str]) -> dict[str, Any] | None:
        """When page `number` (of `steps`) is the parent's full page, all its runs kept: the
        parent's index's part for it; else None."""
        fresh = self._next_fresh
        if self.taken is None or (
            fresh is not None and by_number(fresh.run.step) <= by_number(steps[-1])
        ):
            return None
        part = self.taken.full_page(number, steps)
        return part if part is not None and all(map(self._kept, steps)) else None

    def learn_from_page(self, number: int, steps: list[str]) -> None:
        """What the insights drawn from the runs of the parent's page `number` need of them."""
        places = [place for place, step in enumerate(steps) if step in self.drawn]
        if not places:
            return
        assert self.taken is not None
        # Their lines alone: a few runs of a page of 2,048.
        for place, run in zip(places, self.taken.runs_at(number, places), strict=True):
            step = steps[place]
            if run is None or run.step != step:
                raise damaged(self.taken.root / catalog_page_rel(number), KeyError(step))
            self._learn(step, run, self._backing(step, self.drawn[step]))

    def _backing(self, step: str, needs: list[int]) -> list[bool] | None:
        """The claim backing of kept run `step`'s compilation, when an insight needing it
        is no divergence (which learns its task alone)."""
        if step not in self.compiled or all(map(self.shown.divergence, needs)):
            return None
        rel = f"{COMPILATION_DIR}/{step}.md"
        compiled = read.read_page(self.root, rel, CompilationHeader, resolved=True)
        return read.claim_backing(compiled.header.claims)

    def _learn(self, step: str, run: PastRun, backing: list[bool] | None) -> None:
        for index in self.drawn.get(step, []):
            self.shown.learn(index, run, backing)

    def run(self, step: str) -> PastRun:
        """Run `step` (asked for in order), each insight drawn from it taught what it needs."""
        has_compilation = step in self.compiled
        fresh = self._next_fresh
        parent_run = self.taken.run(step) if self.taken is not None else None
        backing: list[bool] | None = None
        if fresh is not None and fresh.run.step == step:
            if (fresh.backing is not None) != has_compilation:
                raise CorpusError(f"internal error: {step}'s compilation is not as written")
            run, backing = fresh.run, fresh.backing
            self._next_fresh = next(self._fresh, None)
        elif parent_run is not None and self._kept(step):
            run = parent_run
            backing = self._backing(step, self.drawn.get(step, []))
        else:
            run, backing = self._read(step, has_compilation)
        self._learn(step, run, backing)
        return run

    def _read(self, step: str, has_compilation: bool) -> tuple[PastRun, list[bool] | None]:
        """Run `step` from its pages, and its compilation's claim backing."""
        root = self.root
        page = read.read_page(
            root, f"{RAW_DIR}/{step}/{RAW_METADATA_NAME}", RawHeader, resolved=True
        )
        header = None
        backing = None
        if has_compilation:
            compiled_rel = f"{COMPILATION_DIR}/{step}.md"
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
        return run, backing

    def done(self) -> None:
        """Every run was asked for: a run written but not in the layer is an error."""
        if self._next_fresh is not None:
            raise CorpusError(
                f"internal error: {self._next_fresh.run.step} written, but not in {RAW_DIR}"
            )
