"""A finished version read back: what a new version (added runs, gate or monitoring decisions)
keeps of it, and the identity of its runs."""

from __future__ import annotations

import contextlib
import gc
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from wikitrace.corpus_schema import CorpusError, Layout, indexes, render
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.identity import fingerprint, given_attempt
from wikitrace.corpus_schema.layout import (
    COMPILATION_DIR,
    DATA_DIR,
    INSIGHT_DIR,
    MANIFEST,
    RAW_DIR,
    TOOLS_DIR,
    parse_insight,
    parse_step,
    with_catalog,
)
from wikitrace.corpus_schema.records import InsightHeader, RawHeader, is_judged, repo_json
from wikitrace.corpus_schema.spill import KeptRuns, RunRows, read_version_rows
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.corpus_schema.writing import ChangedFile, CorpusWriter, checked_key

from .store import Store


class InsightPages(Mapping[str, corpus_read.Page[InsightHeader]]):
    """A version's insight pages by id, each read when it is asked for (a version of a million
    runs has hundreds of thousands)."""

    def __init__(self, root: Path, ids: list[str]) -> None:
        self.root = root
        self.ids = ids
        self._known = set(ids)

    def __getitem__(self, ident: str) -> corpus_read.Page[InsightHeader]:
        if ident not in self._known:
            raise KeyError(ident)
        return corpus_read.read_page(self.root, f"{INSIGHT_DIR}/{ident}.md", InsightHeader)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class FrozenVersion:
    """The frozen version that runs are added to: what the new version keeps as it is."""

    name: str
    root: Path
    manifest: manifest_io.Manifest
    rows: list[indexes.RunRow]
    """Each run's index row, its task cut as a build's rows keep it (`task_text` has it all)."""
    insight_rows: list[indexes.InsightRow]
    insights: InsightPages
    """Every insight page, by id."""
    fingerprints: set[str]
    attempts: Counter[TaskKey]
    keys: array[int]
    """Each file's `stat_key` as found right, in the manifest's order (0 where unknown)."""

    checked: bool = True
    """Whether every file was found right when it was read back; else only those a version
    made from it never links were, and `link_kept` checks the rest as it links them."""
    kept_runs: KeptRuns | None = None
    """Where `rows` were read from, when from the rows the store keeps beside the version."""

    @classmethod
    def current(cls, store: Store, *, linked: bool = False) -> FrozenVersion:
        """The version the store's pointer names (the caller holds the store's lock); see
        `load` for `linked`."""
        name = store.current()
        seal, rows = store.sidecars(name)
        return cls.load(name, store.version_path(name), seal=seal, rows=rows, linked=linked)

    @classmethod
    def load(
        cls,
        name: str,
        root: Path,
        seal: Path | None = None,
        rows: Path | None = None,
        *,
        linked: bool = False,
    ) -> FrozenVersion:
        """Read a version back; refuse one whose files no longer match its manifest (a file its
        `seal` vouches for is not hashed again: see `manifest.read_seal`). Its rows are read
        from `rows` when they were kept there for this manifest (`spill.read_version_rows`),
        else from its pages.

        `linked`: the caller makes a version from it that links what it keeps (`link_kept`,
        which it calls before that version is placed). With a seal made for its manifest, only
        the files never linked are checked here; each linked file is checked through its link
        (the parent's own inode: its key is the seal's, or it is hashed), where a walk of the
        whole version and a look at every file would cost what it holds. Files the manifest
        does not list are then not looked for: the new version takes none of them, and
        `wikitrace verify` still finds them."""
        manifest = manifest_io.load(root)
        sealed = (
            manifest_io.read_seal(seal, root, len(manifest.files))
            if linked and seal is not None
            else None
        )
        if sealed is None:
            check = manifest_io.verify(root, seal, manifest)
            if not check.ok:
                # Only the manifest itself may be wrong (edited, or without a checksum).
                problems = check.missing + check.changed + check.extra or [MANIFEST]
                raise _changed(name, root, problems)
            keys = check.keys
        else:
            keys = sealed
            for (rel, file_hash), key in zip(manifest.files.items(), sealed, strict=True):
                if (
                    not rel.startswith(_PAGES)
                    and not _linked(rel)
                    and not _holds(root, rel, file_hash, key)
                ):
                    raise _changed(name, root, [rel])
        layout = Layout(root, manifest.step_id_width, manifest.insight_id_width)
        kept = None if rows is None else read_version_rows(rows, manifest_io.manifest_key(root))
        kept_runs: KeptRuns | None = None
        if kept is None or [len(kept[0]), len(kept[1])] != [
            manifest.counts.get("runs"),
            manifest.counts.get("insights"),
        ]:
            run_rows, insight_rows = _from_pages(root)
        else:
            run_rows, insight_rows, kept_runs = kept
        if [row.step for row in run_rows] != list(range(1, len(run_rows) + 1)):
            raise CorpusError(f"{root}: raw steps are not numbered 1..{len(run_rows)}")
        fingerprints = {
            fingerprint(
                row.task_id,
                row.outcome,
                manifest.files[layout.raw_turns_rel(row.step)],
                row.attempt,
            )
            for row in run_rows
        }
        return cls(
            name=name,
            root=root,
            manifest=manifest,
            rows=run_rows,
            insight_rows=insight_rows,
            insights=InsightPages(root, [layout.insight(row.number) for row in insight_rows]),
            fingerprints=fingerprints,
            attempts=Counter(row.task_key for row in run_rows),
            keys=keys,
            checked=sealed is None,
            kept_runs=kept_runs,
        )

    @classmethod
    @contextlib.contextmanager
    def held(cls, store: Store) -> Iterator[FrozenVersion]:
        """`current(store, linked=True)`, held for the block (an add: see `load`), its objects
        left out of the garbage collector's passes meanwhile. At 20,000 runs they are some
        half a million (the manifest's 110,000 entries, a row a run and an insight), kept to
        the end: each pass over the oldest generation walked them all again, 0.1 s of an add.
        They are made with collection paused, then frozen (`gc.freeze`: every object the
        process holds then), and unfrozen when the block ends."""
        paused = gc.isenabled()
        gc.disable()
        try:
            version = cls.current(store, linked=True)
        finally:
            if paused:
                gc.enable()
        gc.freeze()
        try:
            yield version
        finally:
            gc.unfreeze()

    def run_rows(self, folder: Path) -> RunRows:
        """`rows`, kept on disk in `folder` (`RunRows`) for a version made from this one to
        append its own to: copied as bytes from the rows the store keeps when they were
        read from there (8 MB at 20,000 runs: copied, not each row written again)."""
        copied = None if self.kept_runs is None else RunRows.copied(folder, self.kept_runs)
        return RunRows(folder, self.rows) if copied is None else copied

    def task_text(self, step: int) -> str:
        """Run `step`'s whole task, from its page."""
        rel = self.layout().raw_metadata_rel(step)
        return corpus_read.task_text(corpus_read.read_page(self.root, rel, RawHeader))

    def layout(self, root: Path | None = None) -> Layout:
        """Where this version's files are, at its own root or at `root` (a version or view
        made from it: ids keep this version's widths)."""
        return Layout(
            self.root if root is None else root,
            self.manifest.step_id_width,
            self.manifest.insight_id_width,
        )

    def kept_files(self, rewritten_also: Iterable[str] = ()) -> Iterator[tuple[str, str, int]]:
        """Files a new version takes as they are, each with its hash and its key as found
        (for `CorpusWriter.link`): all but the indexes, the catalog and its rankers, tools,
        manifest and the manifests it is written on, and `rewritten_also` (files the new
        version writes anew)."""
        rewritten = set(rewritten_also)
        for (rel, file_hash), key in zip(self.manifest.files.items(), self.keys, strict=True):
            # `_PAGES` first: asked of 110,000 files at 20,000 runs, it spares nearly every call.
            if rel not in rewritten and (rel.startswith(_PAGES) or _linked(rel)):
                yield rel, file_hash, key

    def check(self, rels: Iterable[str]) -> None:
        """Refuse the version, as `load` does, when one of its files `rels` (those its
        manifest lists; others are not looked for) no longer holds the bytes listed: for a
        file read before `link_kept` checks it through its link (one read back with
        `linked`)."""
        if self.checked:
            return
        wanted = set(rels)
        for (rel, file_hash), key in zip(self.manifest.files.items(), self.keys, strict=True):
            if rel in wanted and not _holds(self.root, rel, file_hash, key):
                raise _changed(self.name, self.root, [rel])

    def link_kept(self, writer: CorpusWriter, rewritten_also: Iterable[str] = ()) -> None:
        """Link `kept_files` into the version `writer` makes. Of a version read back with
        `linked` (its files not all checked then), each linked file is checked through its link
        and each of `rewritten_also` here: a version whose file changed is refused as `load`
        refuses it."""
        rewritten = set(rewritten_also)
        try:
            writer.link_all(self.root, self.kept_files(rewritten), check=not self.checked)
        except ChangedFile as error:
            raise _changed(self.name, self.root, [error.rel]) from None
        self.check(rewritten)


_PAGES = (f"{RAW_DIR}/step-", f"{COMPILATION_DIR}/step-", f"{INSIGHT_DIR}/insight-", f"{DATA_DIR}/")
"""Where nearly all of a version's files are, none of them an index, the catalog or a tool:
taken at once (asked of each of a large version's files, twice)."""


def _linked(rel: str) -> bool:
    """Whether a version made from another takes its file `rel` as it is (unless it writes it
    anew): all but the indexes, the catalog and its rankers, the tools and the manifests of
    the version's chain."""
    return rel.startswith(_PAGES) or not (
        with_catalog(rel)
        or Layout.is_index(rel)
        or rel.startswith(f"{TOOLS_DIR}/")
        or manifest_io.is_chained(rel)  # linked by finish_version when its manifest is chained
    )


def _holds(root: Path, rel: str, file_hash: str, sealed: int) -> bool:
    """Whether the version's file `rel` holds the bytes its manifest lists (hashed unless its
    key is the `sealed` one)."""
    return checked_key(os.path.join(root, rel), file_hash, sealed) is not None


def _changed(name: str, root: Path, problems: list[str]) -> CorpusError:
    return CorpusError(
        f"version {name} at {root} does not match its manifest ({len(problems)} "
        f"file{'' if len(problems) == 1 else 's'}, first {problems[0]}); run `wikitrace verify` "
        "on it"
    )


def _from_pages(root: Path) -> tuple[list[indexes.RunRow], list[indexes.InsightRow]]:
    """A version's rows, read from every page's header (a version kept without its rows)."""
    rows: list[indexes.RunRow] = []
    for page in corpus_read.runs(root):
        head = page.header
        rows.append(
            indexes.RunRow(
                step=parse_step(head.step),
                task_id=head.task_id,
                task_type=head.task_type,
                outcome=head.outcome,
                turns=head.turns,
                task=render.task_preview(corpus_read.task_text(page)),
                judged=is_judged(head.metadata),
                attempt=given_attempt(head.metadata),
                project=head.project,
                kind=head.kind,
                origin=head.origin,
                repo=repo_json(head.repo),
            )
        )
    rows.sort(key=lambda row: row.step)
    by_step = {row.step: row for row in rows}
    for compiled in corpus_read.compilation_summaries(root):
        row = by_step[parse_step(compiled.header.step)]
        row.compiled = True
        row.title = compiled.header.title
        row.unverified_quotes = compiled.header.unverified_quotes
        # The index lists a model's insights; a mined one is named in the header (`insights`
        # when the run is its source, and `cited_by`) but not counted as the run's own here.
        mined = set(compiled.header.cited_by)
        row.insights = [parse_insight(i) for i in compiled.header.insights if i not in mined]
    insight_rows = [
        indexes.insight_row(parse_insight(page.header.id), page.header, corpus_read.guideline(page))
        for page in corpus_read.insights(root)
    ]
    return rows, insight_rows
