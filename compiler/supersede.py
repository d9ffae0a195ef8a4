"""Newer lessons that contradict or narrow older ones of the same scope, found when they are
added: judged by the corpus's model, and the older retired as superseded; with no model,
flagged for a person to review, never retired.

After `add` makes a version, each lesson it adds (a model's; mined lessons and divergences
are counted anew by every add and are left to mining) is compared with the lessons agents are
shown (committed or ungated) of the same scope: the same task type, project and kind of work
(search/contradict.py's filter, which also decides which pairs are worth a call). With a model,
each such pair is one call (prompts/supersede.j2): a pair the judge says contradicts or
narrows makes the older retired, superseded by the newer, in a version of its own (event
`superseded`, a decision gate/supersede-NNNN.md with the filter's and the judge's words), and
the first message shows the newer alone, with "Supersedes: insight-NNNN". Offline, the pairs
the filter finds likely are only reported (`Review.flagged`): `wikitrace retire OLD --by NEW`
acts on one, and the gate, once it commits the newer, retires the older (control/gate.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from wikitrace import prompts
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.layout import decision_id, parse_insight
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.read import guideline
from wikitrace.search.contradict import Flag, Lesson, candidates
from wikitrace.transport.llm import LLMCallError
from wikitrace.versions import Derivation, FrozenVersion, count_decisions, derive_version
from wikitrace.versions.store import Store, left_unrecorded, record_left

from .ask import Asker
from .compile import CompileError

log = logging.getLogger(__name__)

SHOWN = ("committed", "ungated")
"""The lessons agents are shown: the ones a newer lesson may supersede."""


class Judged(BaseModel):
    """The JSON object prompts/supersede.j2 asks for."""

    model_config = ConfigDict(extra="forbid")

    relation: Literal["contradicts", "narrows", "neither"]
    """How the newer lesson stands to the older."""
    reason: str = Field(min_length=1)
    """Which advice of each, and why."""


@dataclass(frozen=True)
class Superseding:
    """An older lesson a newer one replaces, and the evidence."""

    flag: Flag
    relation: str
    """contradicts or narrows: the judge's word, or the filter's when no judge was asked."""
    reason: str
    judge: dict[str, Any] | None = None
    """The judge's model, answer and template hash; None when the filter alone decided."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "older": self.flag.older,
            "newer": self.flag.newer,
            "relation": self.relation,
            "reason": self.reason,
            "filter": self.flag.as_dict(),
            **({"judge": self.judge} if self.judge else {}),
        }


@dataclass
class Review:
    """What comparing a version's new lessons with the older ones found and did."""

    superseded: list[Superseding] = field(default_factory=list)
    """Older lessons retired as superseded (each by one newer lesson)."""
    flagged: list[Flag] = field(default_factory=list)
    """Likely pairs no judge decided (offline, or its answer could not be used): reported
    for a person to review."""
    asked: int = 0
    """Judge calls made."""
    declined: int = 0
    """Calls whose answer could not be used (the pair is left as it is)."""
    version: str | None = None
    """The version that retires the superseded lessons; None when none is."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "superseded": [item.as_dict() for item in self.superseded],
            "flagged": [flag.as_dict() for flag in self.flagged],
            "asked": self.asked,
            "declined": self.declined,
            "version": self.version,
        }


def lessons(version: FrozenVersion, statuses: Iterable[str] = SHOWN) -> dict[str, Lesson]:
    """A version's lessons drawn by a model (not mined) whose status is one of `statuses`, by
    id, with their scope: the task type, and their source run's project and kind of work."""
    wanted = set(statuses)
    layout = version.layout()
    found = {}
    for row in version.insight_rows:
        if row.pattern is not None or row.status not in wanted:
            continue
        run = version.rows[row.source_step - 1]
        ident = layout.insight(row.number)
        found[ident] = Lesson(
            ident,
            row.title,
            row.guideline,
            task_type=row.task_type,
            project=run.project,
            kind=run.kind,
        )
    return found


class PairJudge:
    """Asks the model about a pair of lessons (one call each, answers kept per pair)."""

    def __init__(self, asker: Asker) -> None:
        self.asker = asker
        self.asked = 0
        self.declined = 0
        self.unanswered: list[Flag] = []
        """The pairs whose answer could not be used."""

    def __call__(self, version: FrozenVersion, flag: Flag) -> Superseding | None:
        """The superseding the judge finds in `flag`'s pair, or None (neither, or no usable
        answer: the pair is left as it is)."""
        shown = {}
        for role, ident in (("older", flag.older), ("newer", flag.newer)):
            page = version.insights[ident]
            shown[role] = {
                "id": ident,
                "title": page.header.title,
                "guideline": guideline(page),
                "applicability": page.header.applicability,
            }
        self.asked += 1
        try:
            answer = self.asker.ask(prompts.SUPERSEDE, Judged, data=shown, **shown)
        except (CompileError, LLMCallError, ValueError) as error:
            if isinstance(error, LLMCallError) and error.fatal:
                raise
            self.declined += 1
            self.unanswered.append(flag)
            log.warning("%s against %s: no usable answer (%s)", flag.newer, flag.older, error)
            return None
        if answer.relation == "neither":
            return None
        judge = {
            "model": self.asker.llm.model,
            "relation": answer.relation,
            "reason": answer.reason,
            "template": self.asker.used.get(prompts.SUPERSEDE),
        }
        return Superseding(flag, answer.relation, answer.reason, judge)


def review_new_lessons(
    version: FrozenVersion,
    newer: Sequence[str],
    judge: PairJudge | None,
    *,
    leave: Iterable[str] = (),
    filter_decides: bool = False,
) -> Review:
    """Compare the lessons `newer` of `version` with the shown ones added before them, of the
    same scope (but those in `leave`), see the module's docstring; nothing is written. With no
    `judge`, the likely pairs are flagged, or, with `filter_decides` (the gate, which has just
    committed the newer), superseded."""
    shown = lessons(version)
    new = [shown[ident] for ident in newer if ident in shown]
    left = {*newer, *leave}
    older = [lesson for ident, lesson in shown.items() if ident not in left]
    review = Review()
    taken: set[str] = set()  # an older lesson is superseded by one newer lesson
    for flag in candidates(new, older):
        if flag.older in taken or parse_insight(flag.older) > parse_insight(flag.newer):
            continue  # superseded already, or added after the newer
        found: Superseding | None = None
        if judge is not None:
            found = judge(version, flag)
        elif flag.likely and filter_decides:
            found = Superseding(flag, flag.relation, f"the filter found {flag.why}")
        elif flag.likely:
            review.flagged.append(flag)
        if found is not None:
            review.superseded.append(found)
            taken.add(flag.older)
    if judge is not None:
        review.asked, review.declined = judge.asked, judge.declined
        # A likely pair the judge gave no usable answer on is left to a person, as offline.
        review.flagged += [flag for flag in judge.unanswered if flag.likely]
    return review


def supersede_after_add(
    store: Store, name: str, judge: PairJudge | None, *, deploy: bool, offline: bool = False
) -> Review:
    """Review the lessons version `name` added (the caller holds the store's lock), and retire
    the older ones the judge finds superseded in a new version (Review.version). `offline`:
    the corpus was compiled offline, so it holds no lesson a model drew (nothing is read)."""
    if offline and judge is None:
        return Review()  # no lesson a model drew: mined ones are left to mining
    version = FrozenVersion.load(name, store.version_path(name), *store.sidecars(name))
    info = version.manifest.version
    added = info.changes.insights if info else []
    review = review_new_lessons(version, added, judge)
    if review.superseded:
        change = superseding_change(version, review.superseded)
        review.version = derive_version(store, version, change, deploy=deploy, event="superseded")
    for item in review.superseded:
        log.info("%s %s %s: retired as superseded", item.flag.newer, item.relation, item.flag.older)
    for flag in review.flagged:
        log.info("%s may %s %s (not judged)", flag.newer, flag.relation, flag.older)
    return review


def superseding_change(
    version: FrozenVersion,
    found: Sequence[Superseding],
) -> Derivation:
    """The change in which each older lesson of `found` is retired, superseded by its newer
    one, with a decision (gate/supersede-NNNN.md) holding the evidence."""
    change = Derivation(
        reason="superseded: "
        + ", ".join(f"{item.flag.older} by {item.flag.newer}" for item in found),
        report={"supersede": [item.as_dict() for item in found], "tested_on": version.name},
    )
    for item in found:
        if item.judge and item.judge.get("template"):
            change.prompts[prompts.SUPERSEDE] = str(item.judge["template"])
    number = count_decisions(version) + 1
    for item in found:
        ident = decision_id("supersede", number)
        number += 1
        old_page, new_page = version.insights[item.flag.older], version.insights[item.flag.newer]
        newer = change.insights.get(item.flag.newer, (new_page.header, guideline(new_page)))
        by = f"the judge ({item.judge['model']})" if item.judge else "the mechanical filter"
        decision = GateDecision(
            id=ident,
            insight=item.flag.older,
            kind="supersede",
            tested_on=version.name,
            time=now(),
            verdict="retired",
            reason=(
                f"Superseded by {item.flag.newer}, which {item.relation} it (said by {by}: "
                f"{item.reason}). The filter found {item.flag.why}."
            ),
            confidence=1.0,
            thresholds={},
            precondition=old_page.header.precondition,
            evidence=f"{ident}.jsonl",
        )
        evidence = orjson.dumps(item.as_dict(), option=orjson.OPT_SORT_KEYS) + b"\n"
        change.supersede(decision, (old_page.header, guideline(old_page)), newer, evidence)
    return change


def finish_interrupted(store: Store, *, deploy: bool) -> str | None:
    """A version that retires superseded lessons, made by an add killed before the history
    said so: placed as it would have been (as the gate's and monitoring's are); its name, or
    None when there is none."""
    name = left_unrecorded(store, decided_by="supersede")
    if name is None:
        return None
    record_left(
        store, name, deploy=deploy, reason="superseded (interrupted, finished)", event="superseded"
    )
    log.warning(
        "%s was made by an add that was interrupted as it superseded lessons: finished it", name
    )
    return name
