"""`wikitrace retire`: a person retires a lesson, or marks it superseded by a newer one.

Retiring makes a new version, as monitoring's retirement does (control/monitor.py): the lesson
is marked retired (kept on record, never shown again) with a decision page, gate/retire-NNNN.md,
and the line behind it. With `by`, the newer lesson's page names it (`supersedes`), the old
one's names the newer (`superseded_by`), and the first message shows the newer one with a link
back.
"""

from __future__ import annotations

import logging
from pathlib import Path

import orjson

from wikitrace.corpus_schema import InputError, manifest
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.layout import decision_id
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    count_decisions,
    derive_version,
    open_store,
)
from wikitrace.versions.derive import resolve_insight
from wikitrace.versions.store import Store, left_unrecorded, record_left

log = logging.getLogger(__name__)

_WITHHELD = ("rejected", "retired")


def retire_insight(
    pointer: Path, insight: str, reason: str, *, by: str | None = None, deploy: bool = True
) -> str:
    """Retire `insight` (superseded by the insight `by`, when given) for `reason`, in a new
    version of the corpus at `pointer`; that version's name. An InputError when either is
    unknown, the insight is already withheld, or the newer one is not shown."""
    if not reason.strip():
        raise InputError("say why the lesson is retired", field="--reason")
    with build_lock(pointer):
        store = open_store(pointer)
        finished = _finish_interrupted(store, deploy=deploy)
        base = FrozenVersion.current(store)
        pages = base.insights
        old = resolve_insight(insight, pages)
        if finished is not None and finished[1] == old:
            return finished[0]  # the same retirement, killed before the history said so
        old_page = pages[old]
        if old_page.header.status in _WITHHELD:
            raise InputError(
                f"{old} is already {old_page.header.status}: it is not shown to agents",
                field="INSIGHT",
            )
        change = Derivation(
            reason=f"retired by hand: {old}" + (f" (superseded by {by})" if by else "")
        )
        old_header = old_page.header
        replacing: tuple[InsightHeader, str] | None = None
        if by is not None:
            newer = resolve_insight(by, pages)
            newer_page = pages[newer]
            if newer == old:
                raise InputError(f"{old} cannot supersede itself", field="--by")
            if newer_page.header.status in _WITHHELD:
                raise InputError(
                    f"{newer} is {newer_page.header.status}: a lesson that replaces another "
                    "must be one agents are shown",
                    field="--by",
                )
            replacing = (newer_page.header, corpus_read.guideline(newer_page))
            old_header = old_header.model_copy(update={"superseded_by": newer})
            change.reason = f"retired by hand: {old} superseded by {newer}"
        ident = decision_id("retire", count_decisions(base) + 1)
        decision = GateDecision(
            id=ident,
            insight=old,
            kind="retire",
            tested_on=base.name,
            time=now(),
            verdict="retired",
            reason=(
                f"Retired by hand: {reason.strip()}"
                + (
                    f" Superseded by {old_header.superseded_by}."
                    if old_header.superseded_by
                    else ""
                )
            ),
            confidence=1.0,
            thresholds={},
            precondition=old_header.precondition,
            evidence=f"{ident}.jsonl",
        )
        behind = {"insight": old, "superseded_by": old_header.superseded_by, "reason": reason}
        evidence = orjson.dumps(behind, option=orjson.OPT_SORT_KEYS) + b"\n"
        older = (old_header, corpus_read.guideline(old_page))
        if replacing is None:
            change.record(decision, *older, evidence)
        else:
            change.supersede(decision, older, replacing, evidence)
        change.report = {"retire": ident, "insight": old, "retired_on": base.name}
        return derive_version(store, base, change, deploy=deploy, event="retired")


def _finish_interrupted(store: Store, *, deploy: bool) -> tuple[str, str] | None:
    """A retirement killed once its version was made, before the history said so: that
    version placed as it would have been (as monitoring does), with the insight it retired;
    None when there is none."""
    name = left_unrecorded(store, decided_by="retire")
    if name is None:
        return None
    made = manifest.load(store.version_path(name))
    reason = made.version.changes.reason if made.version else "retired by hand"
    record_left(
        store, name, deploy=deploy, reason=f"{reason} (interrupted, finished)", event="retired"
    )
    log.warning("%s was made by a retirement that was interrupted: finished it", name)
    return name, str(made.build.get("insight", ""))
