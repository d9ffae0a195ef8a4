"""A finished version read back: what a new version (added runs, gate or monitoring decisions)
keeps of it, and the identity of its runs."""

from __future__ import annotations

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
    INSIGHT_DIR,
    TOOLS_DIR,
    parse_insight,
    parse_step,
    with_catalog,
)
from wikitrace.corpus_schema.records import InsightHeader, RawHeader, is_judged, repo_json
from wikitrace.corpus_schema.spill import read_version_rows
from wikitrace.corpus_schema.tasks import TaskKey

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

    @classmethod
    def current(cls, store: Store) -> FrozenVersion:
        """The version the store's pointer names (the caller holds the store's lock)."""
        name = store.current()
        seal, rows = store.sidecars(name)
        return cls.load(name, store.version_path(name), seal=seal, rows=rows)

    @classmethod
    def load(
        cls, name: str, root: Path, seal: Path | None = None, rows: Path | None = None
    ) -> FrozenVersion:
        """Read a version back; refuse one whose files no longer match its manifest (a file its
        `seal` vouches for is not hashed again: see `manifest.read_seal`). Its rows are read
        from `rows` when they were kept there for this manifest (`spill.read_version_rows`),
        else from its pages."""
        manifest = manifest_io.load(root)
        check = manifest_io.verify(root, seal, manifest)
        if not check.ok:
            problems = check.missing + check.changed + check.extra
            raise CorpusError(
                f"version {name} at {root} does not match its manifest "
                f"({len(problems)} files, first {problems[0]}); run `wikitrace verify` on it"
            )
        layout = Layout(root, manifest.step_id_width, manifest.insight_id_width)
        kept = None if rows is None else read_version_rows(rows, manifest_io.manifest_key(root))
        if kept is None or [len(kept[0]), len(kept[1])] != [
            manifest.counts.get("runs"),
            manifest.counts.get("insights"),
        ]:
            kept = _from_pages(root)
        run_rows, insight_rows = kept
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
            keys=check.keys,
        )

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
        manifest and `rewritten_also` (files the new version writes anew)."""
        rewritten = set(rewritten_also)
        for (rel, file_hash), key in zip(self.manifest.files.items(), self.keys, strict=True):
            if (
                rel not in rewritten
                and not with_catalog(rel)
                and not Layout.is_index(rel)
                and not rel.startswith(f"{TOOLS_DIR}/")
            ):
                yield rel, file_hash, key


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
