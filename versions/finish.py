"""Finishing a version: staging it in its store, then the files every version ends with (tools,
indexes, manifest), then freezing it."""

from __future__ import annotations

import bisect
import contextlib
import functools
import importlib.util
import itertools
import operator
import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

from wikitrace.corpus_schema import Layout, index_insights, indexes, raw_pages
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.corpus_schema.catalog_build import ShownEntry, catalog_of
from wikitrace.corpus_schema.catalog_runs import ListedRuns, WrittenRun
from wikitrace.corpus_schema.history import VersionInfo, now
from wikitrace.corpus_schema.layout import (
    INDEX_PARTS,
    MANIFEST,
    MANIFESTS_DIR,
    TOOL_NAMES,
    TOOLS_LAYOUT,
    is_catalog_page,
    is_ranker_file,
)
from wikitrace.corpus_schema.records import CompiledBy
from wikitrace.corpus_schema.spill import write_version_rows
from wikitrace.corpus_schema.writing import (
    CorpusWriter,
    Linked,
    atomic_write,
    freeze,
    remove_tree,
)
from wikitrace.search import consolidate
from wikitrace.search.saved import FarmMap, search_files

from .frozen import FrozenVersion
from .store import Store


@contextlib.contextmanager
def staging(path: Path) -> Iterator[Path]:
    """A fresh staging folder for a version (a killed build's leftovers are cleared first):
    frozen when the block ends, removed when it raises or is interrupted."""
    remove_tree(path)
    path.mkdir(parents=True)
    try:
        yield path
        freeze(path)
    except BaseException:
        remove_tree(path)
        raise


Made = TypeVar("Made")


def in_staging(
    path: Path, make: Callable[[Path], Made], keep: Callable[[Made], Finished | None]
) -> Made:
    """What `make` returns, having made it in a fresh staging folder (see `staging`): the
    folder is frozen when `keep` finds a version's last stage in the result, else removed.
    Its files are written by a CorpusWriter (read-only as written, or linked from a frozen
    version) and finish_version's manifest: freezing makes its folders read-only, those the
    manifest's files are in (`Finished.folders`), with no walk of the folder."""
    remove_tree(path)
    path.mkdir(parents=True)
    try:
        made = make(path)
        finished = keep(made)
        if finished is not None:
            freeze(path, files_read_only=True, folders=finished.folders)
        else:
            remove_tree(path)
    except BaseException:
        remove_tree(path)
        raise
    return made


def write_catalog(
    writer: CorpusWriter,
    *,
    offline: bool,
    parent: FrozenVersion | None,
    written: Iterable[WrittenRun] = (),
    written_insights: Iterable[tuple[int, ShownEntry | None]] = (),
    farm_map: FarmMap = map,
    copy: bool = False,
    same_lines: set[str] | None = None,
    meanwhile: Callable[[], None] | None = None,
    listed: ListedRuns | None = None,
) -> None:
    """The version's catalog and its index, from its pages as written (what the `parent`
    version's catalog says of the pages it keeps unchanged is taken from there, its full
    pages of runs linked, or copied with `copy`, and the runs and insights just `written` as
    they were written), and the rankers saved with it (their texts counted through
    `farm_map`: search.saved.count_pages). `same_lines`: the parent's pages the version wrote
    anew whose runs the catalog says the same of (compilation pages that only name more mined
    lessons: a run's line holds its title and claims, not the lessons citing it).
    `meanwhile`: this process's work to do once the rankers' first pages are handed to
    `farm_map` (a build's workers count them while it is done). `listed`: the version's runs
    as its rows list them (else its folders are listed)."""
    changed = writer.written
    if parent is not None and changed is None:  # a writer that did not keep them: its list
        files = parent.manifest.files
        changed = {rel for rel, file_hash in writer.files() if files.get(rel) != file_hash}
    if changed is not None and same_lines:
        changed = changed - same_lines
    pages = _ParentFiles(parent, is_catalog_page) if parent is not None else None
    linked: set[str] = set()
    for rel, chunks in catalog_of(
        writer.root,
        offline=offline,
        leaders_of=consolidate.of_lessons,
        parent=parent.root if parent else None,
        parent_files=parent.manifest.files if parent else None,
        changed=changed,
        written=written,
        written_insights=written_insights,
        listed=listed,
    ):
        if chunks is not None:
            writer.write(rel, chunks)
            continue
        assert pages is not None
        pages.take(writer, rel, copy=copy)
        linked.add(rel)
    # Made from the catalog just written: test time loads the rankers instead of building them.
    _write_rankers(writer, parent, farm_map, copy=copy, linked=linked, meanwhile=meanwhile)


def _write_rankers(
    writer: CorpusWriter,
    parent: FrozenVersion | None,
    farm_map: FarmMap,
    *,
    copy: bool,
    linked: set[str],
    meanwhile: Callable[[], None] | None = None,
) -> None:
    """The version's rankers (search.saved.search_files): the pages it takes of the
    `parent`'s linked (copied with `copy`), the rest written. `linked`: the catalog's pages
    taken as they are from the parent, whose runs' texts the rankers need not read again.
    `meanwhile`: done once the first file is taken, the next pages in the workers' hands."""
    files = _ParentFiles(parent, is_ranker_file) if parent is not None else None
    parent_root = parent.root if parent else None
    for rel, chunks in search_files(writer.root, parent_root, farm_map, linked):
        if chunks is not None:
            writer.write(rel, chunks)
        else:
            assert files is not None  # only a parent's pages are taken
            files.take(writer, rel, copy=copy)
        if meanwhile is not None:
            meanwhile()
            meanwhile = None
    if meanwhile is not None:
        meanwhile()


class _WithAlike(Sequence[indexes.InsightRow]):
    """Index rows with the insight each is a near-duplicate of (`alike`: -1 for none), read
    when asked."""

    def __init__(self, rows: Sequence[indexes.InsightRow], alike: array[int]) -> None:
        self._rows = rows
        self._alike = alike

    def __len__(self) -> int:
        return len(self._rows)

    def _with(self, index: int, row: indexes.InsightRow) -> indexes.InsightRow:
        row.alike = None if self._alike[index] < 0 else self._alike[index]
        return row

    @overload
    def __getitem__(self, index: int) -> indexes.InsightRow: ...

    @overload
    def __getitem__(self, index: slice) -> list[indexes.InsightRow]: ...

    def __getitem__(self, index: int | slice) -> indexes.InsightRow | list[indexes.InsightRow]:
        if isinstance(index, slice):
            positions = range(*index.indices(len(self)))
            return [self._with(i, row) for i, row in zip(positions, self._rows[index], strict=True)]
        return self._with(range(len(self))[index], self._rows[index])

    def __iter__(self) -> Iterator[indexes.InsightRow]:
        for index, row in enumerate(self._rows):
            yield self._with(index, row)


@functools.cache
def drilldown_script() -> bytes:
    """The drill-down tools as a corpus carries them (tools/actions, tools/turn):
    corpus_schema/drilldown.py as it is (standard library only), so that they run in a
    sandbox without wikitrace. Read, not imported: nothing here runs it."""
    spec = importlib.util.find_spec("wikitrace.corpus_schema.drilldown")
    if spec is None or spec.origin is None:
        raise AssertionError("wikitrace.corpus_schema.drilldown is not installed")
    return Path(spec.origin).read_bytes()


@dataclass(frozen=True)
class Finished:
    """What the last stage of a version wrote: the counts its manifest keeps, how many files
    the manifest lists, and the folders they are in."""

    counts: dict[str, int]
    files: int
    folders: set[str]
    """Each folder (a path from the version's root) that holds a file the manifest lists, or
    a folder that does: what freezing the version makes read-only."""


def finish_version(
    writer: CorpusWriter,
    layout: Layout,
    rows: Sequence[indexes.RunRow],
    insight_rows: Sequence[indexes.InsightRow],
    *,
    compiled_by: CompiledBy,
    model: str,
    prompts: dict[str, str],
    model_settings: dict[str, Any] | None = None,
    report: dict[str, Any],
    redactions: dict[str, int],
    version: VersionInfo,
    parent: FrozenVersion | None = None,
    store: Store | None = None,
    written: Iterable[WrittenRun] = (),
    written_insights: Iterable[tuple[int, ShownEntry | None]] = (),
    kept_rows: int = 0,
    farm_map: FarmMap = map,
    copy: bool = False,
    same_lines: set[str] | None = None,
    pending: Callable[[], None] | None = None,
    done: Callable[[], None] | None = None,
) -> Finished:
    """What every version ends with: tools, the catalog (what it can of it taken from the
    `parent` version's, for the pages it keeps, and the runs and insights just `written`), the
    four indexes (written while the rankers' first pages are counted) and the manifest
    (last); then, for a version of a `store`, what the store keeps beside it: its seal
    (`manifest.read_seal`) and its rows (`spill.read_version_rows`).
    `kept_rows`: how many of the first `rows` are the parent's as it wrote them (an add keeps
    them all), whose index parts it may link rather than write. `farm_map`: `map`, or what
    does its work in a build's worker processes (compiler/workers.py), for the rankers. With
    `copy` (a view handed to others), what is taken of the parent's catalog is copied, never
    linked. `same_lines`: the parent's pages written anew whose runs' catalog lines are as
    they were (see `write_catalog`). `pending`: waits for the pages a build's workers still
    write (the catalog reads none) and lists them; `done`: lets the workers go, `farm_map`
    having nothing more to do; both called before the manifest."""
    _write_tools(writer, layout)
    runs = _Runs.of(rows)
    # Last of the pages: what test-time readers load instead of every page's header; the
    # indexes are written while a build's workers count the rankers' first pages.
    write_catalog(
        writer,
        offline=compiled_by == "offline",
        parent=parent,
        written=written,
        written_insights=written_insights,
        farm_map=farm_map,
        copy=copy,
        same_lines=same_lines,
        meanwhile=lambda: _write_indexes(
            writer, layout, rows, runs, insight_rows, compiled_by, parent, kept_rows, copy=copy
        ),
        listed=runs.listed(layout),
    )
    for then in (then for then in (pending, done) if then is not None):
        then()
    counts = _write_root_index(writer, layout, runs, insight_rows, model, compiled_by)
    manifest = manifest_io.Manifest(
        builder={"name": "wikitrace", "version": manifest_io.builder_version()},
        created=now(),
        model=model,
        model_settings=model_settings or {},
        compiled_by=compiled_by,
        prompts=dict(sorted(prompts.items())),
        step_id_width=layout.step_width,
        insight_id_width=layout.insight_width,
        counts=counts,
        build=report,
        redactions=redactions,
        version=version,
        files={},
    )
    on = _chain_on(writer, parent) if parent is not None and not copy else None
    keys, folders = _write_manifest(writer, manifest, on)
    if store is not None:
        seal, rows_file = store.sidecars(version.name)
        manifest_io.write_seal(seal, writer.root, keys)
        write_version_rows(rows_file, manifest_io.manifest_key(writer.root), rows, insight_rows)
    return Finished(counts, len(keys), folders)


def _write_tools(writer: CorpusWriter, layout: Layout) -> None:
    """The drill-down tools, and the layout they read."""
    tool_source = drilldown_script()
    for name in TOOL_NAMES:
        writer.write(layout.tool_rel(name), tool_source, executable=True)
    writer.write(TOOLS_LAYOUT, raw_pages.tools_layout(layout))


@dataclass(frozen=True)
class _Runs:
    """What the indexes count of a version's runs, read in one pass over their rows (on disk
    in a large version)."""

    count: int
    successes: int
    compiled: array[int]
    """The positions of the compiled runs' rows."""
    failed_steps: list[int]
    """The steps of the runs whose compilation failed."""

    steps: array[int]
    """Each run's step, in order."""

    @classmethod
    def of(cls, rows: Sequence[indexes.RunRow]) -> _Runs:
        successes = 0
        compiled = array("q")
        failed: list[int] = []
        steps = array("q")
        for position, row in enumerate(rows):
            successes += row.outcome == "success"
            steps.append(row.step)
            if row.compiled:
                compiled.append(position)
            else:
                failed.append(row.step)
        return cls(len(rows), successes, compiled, failed, steps)

    def listed(self, layout: Layout) -> ListedRuns:
        """The runs as the catalog lists them: each one's step id, and those compiled."""
        steps = list(map(layout.step, self.steps))
        return ListedRuns(steps, {steps[position] for position in self.compiled})


def _write_indexes(
    writer: CorpusWriter,
    layout: Layout,
    rows: Sequence[indexes.RunRow],
    runs: _Runs,
    insight_rows: Sequence[indexes.InsightRow],
    compiled_by: CompiledBy,
    parent: FrozenVersion | None,
    kept_rows: int,
    *,
    copy: bool = False,
) -> None:
    """The index of each layer (in parts past a page's rows); a part of the raw and the
    compilations' index whose rows are all among the first `kept_rows` runs, as the `parent`
    version wrote them, is linked from it where it holds that part, and so is a part of the
    insights' index that begins with the same line (the same rows shown: see
    index_insights.insight_index). With `copy` (a view handed to others), copied, never linked."""
    # Near-duplicates: the index says of which (the rows may be on disk: they are read as
    # they are needed, and the number of each group's first kept).
    leaders = consolidate.of_lessons(insight_rows)
    numbers = array("q", (row.number for row in insight_rows))
    alike = array("q", (-1 if lead == i else numbers[lead] for i, lead in enumerate(leaders)))
    del leaders, numbers
    parts = _ParentFiles(parent, _is_index_part) if parent is not None else None
    reuse = parts.holds if parts is not None else None
    kept_reuse = reuse if kept_rows else None
    for pages in (
        indexes.raw_index(layout, rows, compiled_by, unchanged=kept_rows, reuse=kept_reuse),
        indexes.compilation_index(
            layout,
            rows,
            compiled_by,
            unchanged=kept_rows,
            reuse=kept_reuse,
            compiled=runs.compiled,
        ),
        index_insights.insight_index(
            layout, _WithAlike(insight_rows, alike), compiled_by, reuse=reuse
        ),
    ):
        for rel, text in pages:
            if text is not None:
                writer.write(rel, text)
                continue
            assert parts is not None
            parts.take(writer, rel, copy=copy)


class _ParentFiles:
    """A parent version's files of a kind (`kind`: whether a path is one): each one's hash
    and key as found, by path. Looked up one at a time: the manifest lists its files by path,
    so a file's key (at the same place in the seal) is found by bisection, not by a pass over
    every file of a large version."""

    def __init__(self, parent: FrozenVersion, kind: Callable[[str], bool]) -> None:
        self._files = parent.manifest.files
        self._keys = parent.keys
        self._names: list[str] | None = None
        self._kind = kind
        self.root = parent.root

    def __contains__(self, rel: object) -> bool:
        return isinstance(rel, str) and self._kind(rel) and rel in self._files

    def __getitem__(self, rel: str) -> tuple[str, int]:
        if rel not in self:
            raise KeyError(rel)
        if self._names is None:
            self._names = list(self._files)
        names = self._names
        place = bisect.bisect_left(names, rel)
        if place == len(names) or names[place] != rel:
            place = names.index(rel)  # a manifest not in path order: found all the same
        return self._files[rel], self._keys[place]

    def take(self, writer: CorpusWriter, rel: str, *, copy: bool) -> None:
        """The parent's file `rel` taken into the version as it is: linked, or copied (a view
        handed to others)."""
        file_hash, key = self[rel]
        if copy:
            writer.copy(rel, self.root / rel, file_hash)
        else:
            writer.link(rel, self.root / rel, file_hash, key)

    def under(self, folder: str) -> list[str]:
        """The parent's files of this kind in `folder`, in path order: found by bisection
        (by a pass over every file in a manifest not in path order)."""
        if self._names is None:
            self._names = list(self._files)
        names = self._names
        if all(map(operator.lt, names, itertools.islice(names, 1, None))):
            start = bisect.bisect_left(names, f"{folder}/")
            names = names[start : bisect.bisect_left(names, f"{folder}0", start)]  # "0" > "/"
        return sorted(rel for rel in names if rel.startswith(f"{folder}/") and self._kind(rel))

    def holds(self, rel: str, first_line: str) -> bool:
        """Whether the parent holds the file at `rel` and it begins with `first_line`."""
        if rel not in self:
            return False
        with open(self.root / rel, "rb") as page:
            return page.readline() == f"{first_line}\n".encode()


def _is_index_part(rel: str) -> bool:
    return f"/{INDEX_PARTS}/" in rel and Layout.is_index(rel)


def _write_root_index(
    writer: CorpusWriter,
    layout: Layout,
    runs: _Runs,
    insight_rows: Sequence[indexes.InsightRow],
    model: str,
    compiled_by: CompiledBy,
) -> dict[str, int]:
    """The corpus's own index; returns the counts the manifest keeps."""
    writer.write(
        layout.index_rel(),
        indexes.root_index(
            layout,
            indexes.CorpusSummary(
                model=model,
                compiled_by=compiled_by,
                runs=runs.count,
                successes=runs.successes,
                compilations=len(runs.compiled),
                insights=len(insight_rows),
                failed_steps=runs.failed_steps,
                divergences=sum(row.pattern == indexes.DIVERGENCE for row in insight_rows),
            ),
        ),
    )
    return {
        "runs": runs.count,
        "successes": runs.successes,
        "failures": runs.count - runs.successes,
        "compilations": len(runs.compiled),
        "insights": len(insight_rows),
    }


def _chain_on(writer: CorpusWriter, parent: FrozenVersion) -> FrozenVersion | None:
    """Link `parent`'s manifest into the version `writer` makes, and the manifests it is
    written on (`manifest.Manifest.parent_manifest`), so that the version's manifest may list
    only what changed since `parent`'s and the version still holds all it needs to be checked
    (no link leaves it). None, with nothing linked, when the manifest must list every file:
    the parent's chain is `CHAIN_LIMIT` long, or its manifest cannot be vouched for (written
    before checksums, or changed)."""
    chained = _ParentFiles(parent, manifest_io.is_chained)
    held = chained.under(MANIFESTS_DIR)
    if len(held) + 1 > manifest_io.CHAIN_LIMIT:
        return None
    own = manifest_io.chain_hash(parent.root)
    if own is None:
        return None
    for rel in held:
        writer.link(rel, parent.root / rel, *chained[rel])
    writer.link(manifest_io.chain_rel(parent.name), parent.root / MANIFEST, *own)
    return parent


def _write_manifest(
    writer: CorpusWriter, manifest: manifest_io.Manifest, on: FrozenVersion | None = None
) -> tuple[array[int], set[str]]:
    """The manifest (last): every file written listed in it, or with `on` (see `_chain_on`)
    what changed since that version's manifest; returns each file's key, in the order of
    every file, for the seal, and the folders the files are in (see `Finished`). The files
    `writer` linked from `on` as its manifest lists them (`_linked_from`) are taken whole:
    their keys as a slice, their folders as a set, and none of them is a change."""
    keys = array("q")  # 8 bytes a file: 32 MB for the four million files of a million runs
    folders: set[str] = set()
    kept = _linked_from(writer, on)

    def listed() -> Iterator[tuple[str, str]]:
        last = ""
        at = 0  # the linked files before `at` have their keys in `keys`
        for rel, file_hash, key in writer.entries(linked=kept is None):
            if kept is not None:
                place = bisect.bisect_left(kept.rels, rel, at)
                keys.extend(kept.keys[at:place])
                at = place
            keys.append(key)
            folder = rel.rpartition("/")[0]
            if folder != last:  # a folder's files come one after another
                last = folder
                _with_parents(folders, folder)
            yield rel, file_hash
        if kept is not None:
            keys.extend(kept.keys[at:])

    files: Iterable[tuple[str, str | None]] = listed()
    if on is not None:
        manifest = manifest.model_copy(update={"parent_manifest": manifest_io.chain_rel(on.name)})
        listed_before = on.manifest.files
        if kept is not None:
            taken = set(kept.rels)
            listed_before = {rel: h for rel, h in listed_before.items() if rel not in taken}
        files = manifest_io.changes(listed_before, listed())
    atomic_write(writer.root / MANIFEST, manifest_io.dump_chunks(manifest, files))
    (writer.root / MANIFEST).chmod(0o444)  # read-only, as the writer's files are
    for folder in kept.folders if kept is not None else ():
        _with_parents(folders, folder)
    return keys, folders


def _linked_from(writer: CorpusWriter, on: FrozenVersion | None) -> Linked | None:
    """What `writer` linked in path order (`CorpusWriter.linked`) when it is files of `on`,
    each with the hash `on`'s manifest lists for it: files the version's manifest, written on
    `on`'s, has no line for."""
    kept = writer.linked
    if on is None or kept is None or kept.source != os.fspath(on.root):
        return None
    return kept if list(map(on.manifest.files.get, kept.rels)) == kept.hashes else None


def _with_parents(folders: set[str], folder: str) -> None:
    """Add `folder` (a path from the version's root) and the folders it is in to `folders`."""
    while folder and folder not in folders:
        folders.add(folder)
        folder = folder.rpartition("/")[0]
