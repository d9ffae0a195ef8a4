"""A finished version read back: what a new version (added runs, gate or monitoring decisions)
keeps of it, and the identity of its runs."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import CorpusError, Layout, render
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.layout import (
    TOOLS_DIR,
    parse_insight,
    parse_step,
    with_catalog,
)
from wikitrace.corpus_schema.records import InsightHeader, is_judged

from .store import Store


def fingerprint(task_id: str, outcome: str, turn_log_digest: str, metadata: dict[str, Any]) -> str:
    """A run's identity across versions: its task, outcome, the attempt number its log gives
    (two trials of a deterministic agent can log the very same turns), and its turns exactly
    as the corpus holds them."""
    given = metadata.get("attempt")
    attempt = str(given) if isinstance(given, int) and not isinstance(given, bool) else ""
    return f"{task_id}\0{outcome}\0{attempt}\0{turn_log_digest}"


@dataclass
class FrozenVersion:
    """The frozen version that runs are added to: what the new version keeps as it is."""

    name: str
    root: Path
    manifest: manifest_io.Manifest
    rows: list[render.RunRow]
    insight_rows: list[render.InsightRow]
    insights: dict[str, corpus_read.Page[InsightHeader]]
    """Every insight page, by id."""
    fingerprints: set[str]
    attempts: Counter[str]
    keys: array[int]
    """Each file's `stat_key` as found right, in the manifest's order (0 where unknown)."""

    @classmethod
    def current(cls, store: Store) -> FrozenVersion:
        """The version the store's pointer names (the caller holds the store's lock)."""
        name = store.current()
        return cls.load(name, store.version_path(name), seal=store.seal_path(name))

    @classmethod
    def load(cls, name: str, root: Path, seal: Path | None = None) -> FrozenVersion:
        """Read a version back; refuse one whose files no longer match its manifest (a file its
        `seal` vouches for is not hashed again: see `manifest.read_seal`)."""
        check = manifest_io.verify(root, seal)
        if not check.ok:
            problems = check.missing + check.changed + check.extra
            raise CorpusError(
                f"version {name} at {root} does not match its manifest "
                f"({len(problems)} files, first {problems[0]}); run `wikitrace verify` on it"
            )
        manifest = manifest_io.load(root)
        layout = Layout(root, manifest.step_id_width, manifest.insight_id_width)
        rows: dict[int, render.RunRow] = {}
        fingerprints: set[str] = set()
        attempts: Counter[str] = Counter()
        for page in corpus_read.runs(root):
            head = page.header
            step = parse_step(head.step)
            rows[step] = render.RunRow(
                step=step,
                task_id=head.task_id,
                task_type=head.task_type,
                outcome=head.outcome,
                turns=head.turns,
                task=corpus_read.task_text(page),
                judged=is_judged(head.metadata),
            )
            fingerprints.add(
                fingerprint(
                    head.task_id,
                    head.outcome,
                    manifest.files[layout.raw_turns_rel(step)],
                    head.metadata,
                )
            )
            attempts[head.task_id] += 1
        if sorted(rows) != list(range(1, len(rows) + 1)):
            raise CorpusError(f"{root}: raw steps are not numbered 1..{len(rows)}")
        for compiled in corpus_read.compilation_summaries(root):
            row = rows[parse_step(compiled.header.step)]
            row.compiled = True
            row.title = compiled.header.title
            row.unverified_quotes = compiled.header.unverified_quotes
            row.insights = [parse_insight(i) for i in compiled.header.insights]
        insights = {page.header.id: page for page in corpus_read.insights(root)}
        insight_rows = [
            render.insight_row(
                parse_insight(page.header.id), page.header, corpus_read.guideline(page)
            )
            for page in insights.values()
        ]
        return cls(
            name=name,
            root=root,
            manifest=manifest,
            rows=[rows[step] for step in sorted(rows)],
            insight_rows=insight_rows,
            insights=insights,
            fingerprints=fingerprints,
            attempts=attempts,
            keys=check.keys,
        )

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
