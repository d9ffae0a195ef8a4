"""A new version made from the current one by changing what it says about its insights.

The gate, monitoring and `wikitrace hypothesize` do not compile runs: they re-render some
insight pages (a status, a narrowed precondition, a hypothesis) and add decision records. Every
other file of the parent is kept as it is (hard links), and the indexes and manifest are
written afresh, so the new version is as frozen and verifiable as one made by `add`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError, gate_pages, index_insights, insight_pages
from wikitrace.corpus_schema.errors import CorpusError
from wikitrace.corpus_schema.history import Changes, Event, VersionInfo
from wikitrace.corpus_schema.layout import (
    GATE_DIR,
    INSIGHT_DIR,
    MANIFEST,
    parse_insight,
    with_catalog,
)
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.writing import CorpusWriter, freeze, remove_tree

from .finish import finish_version, staging, write_catalog
from .frozen import FrozenVersion
from .store import Store


@dataclass
class Derivation:
    """What the new version changes: insight pages to re-render, files to add, and why."""

    insights: dict[str, tuple[InsightHeader, str]] = field(default_factory=dict)
    """Insight id -> its new header and guideline."""
    files: dict[str, bytes] = field(default_factory=dict)
    """New files by path (decision records); none may exist in the parent."""
    reason: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    """Stored as the manifest's `build` entry."""
    prompts: dict[str, str] = field(default_factory=dict)
    """Templates used to make the change (name -> hash), recorded beside the parent's."""

    def record(
        self,
        decision: GateDecision,
        header: InsightHeader,
        guideline: str,
        evidence: bytes,
    ) -> None:
        """A gate or monitoring decision on an insight: its page takes the verdict (an
        undecided one leaves the status as it was) and links the record, written with the
        runs or reports behind it."""
        self.follow(decision, header, guideline)
        self.files[f"{GATE_DIR}/{decision.id}.md"] = gate_pages.gate_page(decision).encode()
        self.files[f"{GATE_DIR}/{decision.evidence}"] = evidence

    def supersede(
        self,
        decision: GateDecision,
        older: tuple[InsightHeader, str],
        newer: tuple[InsightHeader, str],
        evidence: bytes,
    ) -> None:
        """The older lesson (header, guideline) takes `decision` (retired), naming the newer
        one that replaces it (`superseded_by`); the newer's page names it (`supersedes`), so
        the first message shows the newer with a link back."""
        header, guideline = self.insights.get(newer[0].id, newer)
        if older[0].id not in header.supersedes:
            header = header.model_copy(update={"supersedes": [*header.supersedes, older[0].id]})
        self.insights[header.id] = (header, guideline)
        replaced = older[0].model_copy(update={"superseded_by": header.id})
        self.record(decision, replaced, older[1], evidence)

    def follow(self, decision: GateDecision, header: InsightHeader, guideline: str) -> None:
        """The insight's page takes the decision's verdict (an undecided one leaves the status
        as it was) and links its record: the insight decided, or a near-duplicate of it."""
        page = f"{GATE_DIR}/{decision.id}.md"
        status = header.status if decision.verdict == "undecided" else decision.verdict
        self.insights[header.id] = (
            header.model_copy(update={"status": status, "decisions": [*header.decisions, page]}),
            guideline,
        )


def derive_version(
    store: Store,
    base: FrozenVersion,
    change: Derivation,
    *,
    deploy: bool,
    event: Event = "gated",
) -> str:
    """Write the next version from `base` with `change`; the caller holds the store's lock."""
    name = store.next_name()
    with staging(store.staging(name)) as root, CorpusWriter(root, track_written=True) as writer:
        layout = base.layout(root)
        replaced = {
            rel
            for ident in change.insights
            for rel in (
                layout.insight_rel(parse_insight(ident)),
                layout.insight_data_rel(parse_insight(ident)),
            )
        }
        for rel in change.files:
            if rel in base.manifest.files:
                raise CorpusError(f"internal error: {rel} is already in {base.name}")
        base.link_kept(writer, replaced)
        rows = {row.number: row for row in base.insight_rows}
        for ident, (header, guideline) in sorted(change.insights.items()):
            number = parse_insight(ident)
            if number not in rows:
                raise CorpusError(f"internal error: no {ident} in {base.name}")
            rows[number].status = header.status
            writer.write_files(insight_pages.insight_files(header, guideline))
        for rel, data in sorted(change.files.items()):
            writer.write(rel, data)
        manifest = base.manifest
        finish_version(
            writer,
            layout,
            base.rows,
            [rows[n] for n in sorted(rows)],
            compiled_by=manifest.compiled_by,
            model=manifest.model,
            prompts={**manifest.prompts, **change.prompts},
            report=change.report,
            redactions=manifest.redactions,
            model_settings=manifest.model_settings,
            version=VersionInfo(
                name=name,
                parent=base.name,
                changes=Changes(
                    changed_insights=sorted(change.insights),
                    records=sorted(change.files),
                    reason=change.reason,
                ),
            ),
            parent=base,
            store=store,
        )
    store.place(
        store.staging(name),
        name,
        parent=base.name,
        deploy=deploy,
        event=event,
        reason=change.reason,
    )
    return name


def write_view(
    base: FrozenVersion,
    dest: Path,
    *,
    hidden: set[str],
    replaced: dict[str, tuple[InsightHeader, str]] | None = None,
) -> Path:
    """A probe memory: `base` as an agent would see it with some insights left out or changed.

    Not a version (its manifest is the parent's and does not match): a read-only folder of
    copies (never hard links: the agent it is handed to must not reach the version through it)
    to hand the runner as {memory}, removed once the probes are done.
    """
    replaced = replaced or {}
    remove_tree(dest)
    dest.mkdir(parents=True)
    layout = base.layout(dest)
    with CorpusWriter(dest) as writer:
        skipped = {
            rel
            for ident in hidden | set(replaced)
            for rel in (
                layout.insight_rel(parse_insight(ident)),
                layout.insight_data_rel(parse_insight(ident)),
            )
        }
        for rel, file_hash in base.manifest.files.items():
            if (
                rel not in skipped
                and not with_catalog(rel)
                and not (rel.startswith(f"{INSIGHT_DIR}/") and layout.is_index(rel))
            ):
                writer.copy(rel, base.root / rel, file_hash)
        writer.copy(MANIFEST, base.root / MANIFEST, "")
        rows = []
        for row in base.insight_rows:
            ident = layout.insight(row.number)
            if ident in hidden:
                continue
            if ident in replaced:
                header, guideline = replaced[ident]
                writer.write_files(insight_pages.insight_files(header, guideline))
                row = dataclasses.replace(row, status=header.status)
            rows.append(row)
        for rel, text in index_insights.insight_index(layout, rows, base.manifest.compiled_by):
            writer.write(rel, text)
        # What the agent is shown must be this view's insights, not the base's.
        write_catalog(
            writer, offline=base.manifest.compiled_by == "offline", parent=base, copy=True
        )
    freeze(dest)
    return dest


def count_decisions(base: FrozenVersion) -> int:
    """Gate and monitoring decisions a version holds: the next one is numbered after them."""
    return sum(
        1 for rel in base.manifest.files if rel.startswith(f"{GATE_DIR}/") and rel.endswith(".md")
    )


def resolve_insight(given: str, known: Iterable[str]) -> str:
    """The id of a known insight from what a user typed (`insight-0007`, `7`)."""
    try:
        number = parse_insight(given)
    except ValueError as error:
        raise InputError(str(error), field="INSIGHT") from None
    for ident in known:
        if parse_insight(ident) == number:
            return ident
    raise InputError(f"no insight {given} in the corpus", field="INSIGHT")
