"""`wikitrace monitor`: keep watching the insights agents are shown, and retire one that stops
holding.

From the citation reports of later episodes (`wikitrace cite` reads the same files), each
shown insight's record (committed or ungated: an untested lesson is watched too) is: the
episodes that cited it, those where its precondition held and its effect could be judged, and
violations among them (precondition met, expected effect absent). The record runs across calls
(monitor-state.json in the store): each call adds the reports it has not counted before (one
that names its `episode`, by its content wherever it is given; one that does not, by its file
and line), so giving a report file again, or every report since the start, counts each episode
once. Unless a report says otherwise (its `checks`), citing an insight means its
precondition held (the agent chose to use it) and the effect is judged by the episode's success
(the default verifier), allowing for how often the agent fails that task anyway (`BaseRates`:
the task's own control episodes, run without memory, or else the corpus's runs of it, when
there are at least 5; or else a rate pooled over tasks at its upper confidence bound: every
control episode given, or the corpus's runs of the lesson's task type; a failure on a task
that fails half the time says less against the lesson than one on a task always solved). An
episode with no base rate at all (its report names no task, or nothing is known of its task or
the lesson's task type) is not judged: its failure cannot tell the lesson's harm from the
task's difficulty, so it is counted as cited, reported as not judged (`not_judged`, with
how to feed control episodes) and never counts against the lesson. An insight
is retired when an anytime-valid test (control.sequential.Watch) shows its violation rate above
`max_violation_rate`: checked after every report, a lesson violated no more often than that
is retired with chance at most `alpha`. Retirement makes a new version: the insight is
marked retired (kept on record, never shown again) with a decision page, and every report line
behind it (this call's and earlier ones') copied in. A call killed once that version was made is
finished by running it again, which never retires the same insight a second time.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from wikitrace.compiler.supersede import lessons
from wikitrace.corpus_schema import InputError, manifest
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.layout import decision_id, parse_insight
from wikitrace.corpus_schema.ledger import GateDecision, MonitorState, Tally, load_model
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.setting_fields import default
from wikitrace.corpus_schema.tasks import TaskKey, task_key
from wikitrace.search.contradict import Flag, candidates
from wikitrace.tools.cite import CitationReport, read_reports
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    count_decisions,
    derive_version,
    open_store,
    write_json,
)
from wikitrace.versions.store import Store, left_unrecorded, record_left

from . import stats
from .sequential import Watch

log = logging.getLogger(__name__)

WATCHED_STATUSES = ("committed", "ungated")
"""What an agent is shown, so what monitoring watches."""


@dataclass
class MonitorOptions:
    controls: list[Path] = field(default_factory=list)
    """Reports of control episodes, run without memory (their `used` may be empty): how often
    each task fails anyway. Read anew by every call."""
    min_judged: int = default("min-judged")
    """Fewest judged episodes before an insight can be retired."""
    max_violation_rate: float = default("max-violation-rate")
    """Retire when the violation rate is shown to be above this."""
    confidence: float = default("confidence")
    """1 - alpha: a lesson violated no more often than the limit is retired with chance at
    most alpha, however often it is checked."""


@dataclass
class InsightRecord:
    """One committed insight's track record in the reports."""

    insight: str
    cited: int = 0
    judged: int = 0
    violations: int = 0
    rate: float = 0.0
    rate_lower: float = 0.0
    evidence: float = 1.0
    """The anytime test's e-value that the violation rate is above the limit."""
    retire: bool = False
    episodes: list[dict[str, Any]] = field(default_factory=list)
    bases: dict[str, int] = field(default_factory=dict)
    """This call's judged episodes by where their base failure rate came from (`Base.source`)."""
    not_judged: dict[str, int] = field(default_factory=dict)
    """This call's episodes that used it with an outcome but were not judged, by why
    (NO_BASE)."""
    replaced_by: str | None = None
    """For a lesson retired: the committed lesson of its scope added later that replaces it
    (`replacement`), which the first message shows instead; None when there is none."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "insight": self.insight,
            "cited": self.cited,
            "judged": self.judged,
            "violations": self.violations,
            "rate": self.rate,
            "rate_lower": self.rate_lower,
            "evidence": self.evidence,
            "retire": self.retire,
            "bases": dict(self.bases),
            "not_judged": dict(self.not_judged),
            **({"replaced_by": self.replaced_by} if self.retire else {}),
        }


@dataclass
class MonitorReport:
    records: list[InsightRecord] = field(default_factory=list)
    version: str | None = None
    """The version that retires insights (or that an interrupted call made, and this one
    finished); None when none is retired."""
    monitored: str | None = None
    new_reports: int = 0
    """Reports this call counted for the first time (the others were counted before)."""

    @property
    def not_judged(self) -> int:
        """This call's episodes, over every insight, left unjudged for want of a base rate."""
        return sum(record.not_judged.get(NO_BASE, 0) for record in self.records)

    def summary(self) -> dict[str, Any]:
        """What the records leave unjudged, why and what to do about it (for `--json`)."""
        return {"episodes": self.not_judged, "why": NO_BASE, "how_to_judge": FEED_CONTROLS}


def judge(ident: str, report: CitationReport) -> tuple[bool, bool | None, bool]:
    """(precondition met, effect observed, judged by the report's own check) of one cited
    insight in one episode."""
    check = report.checks.get(ident)
    met = check.precondition_met if check and check.precondition_met is not None else True
    effect = check.effect_observed if check and check.effect_observed is not None else None
    if effect is not None:
        return met, effect, True
    return met, report.success, False


BASE_CAP = 0.95
"""A base failure rate is used up to this: a task that always fails still leaves the lesson a
little to answer for."""


@dataclass(frozen=True)
class Base:
    """How often an episode's task fails without the lesson, and where that came from."""

    failure: float
    source: str
    """checked (the report's own check: no allowance), controls (the task's own control
    episodes), task (the corpus's runs of the task), all controls (every control episode,
    upper bound), task type (the corpus's runs of the lesson's task type, upper bound), none
    (nothing known: the episode is not judged, `judged` is False)."""

    @property
    def judged(self) -> bool:
        """Whether the episode's outcome can be held against the lesson: not without a base
        rate, where a failure may be the task's as well as the lesson's."""
        return self.source != "none"


NO_BASE = "no base rate"
"""Why an episode that used a lesson is not judged: nothing says how often its task fails
without the lesson (no control episodes of it, no corpus run of it or of the lesson's task
type, or its report names no task)."""

FEED_CONTROLS = (
    "give control episodes (the same agent run without memory, a report line each with its "
    "task_id and success) with --controls FILE, or a check of the lesson's own effect in each "
    "report (checks: effect_observed); see docs/measuring.md"
)


Counts = tuple[int, int]
"""(failures, episodes)."""

K = TypeVar("K")


def tally_failures(pairs: Sequence[tuple[K, bool]]) -> dict[K, Counts]:
    """(key, failed) pairs -> each key's (failures, episodes)."""
    found: dict[K, list[int]] = {}
    for key, failed in pairs:
        counts = found.setdefault(key, [0, 0])
        counts[0] += failed
        counts[1] += 1
    return {key: (counts[0], counts[1]) for key, counts in found.items()}


def _own(tallies: dict[str, dict[TaskKey, Counts]], task: TaskKey) -> Counts:
    """A task's own counts: those of its source, and of runs or episodes that name no source
    (recorded before sources were), for that id; a task that names no source takes its id's
    counts in every source."""
    failed = runs = 0
    for key, (lost, count) in tallies.get(task.id, {}).items():
        if task.origin is None or key.origin is None or key.origin == task.origin:
            failed, runs = failed + lost, runs + count
    return failed, runs


def _by_id(tallies: dict[TaskKey, Counts]) -> dict[str, dict[TaskKey, Counts]]:
    found: dict[str, dict[TaskKey, Counts]] = {}
    for key, counts in tallies.items():
        found.setdefault(key.id, {})[key] = counts
    return found


MIN_OWN_RUNS = 5
"""Fewest episodes of a task itself (its controls, or the corpus's runs of it) before its own
rate is used: one or two runs say 0 or 1, and a harmless lesson on a hard task that once
succeeded would be retired (benchmarks/monitor_bench.py)."""


@dataclass
class BaseRates:
    """How often a task fails without the lesson, to allow for in monitoring.

    A task with at least MIN_OWN_RUNS control episodes (or else corpus runs) of its own gets
    its rate as counted. Any other task (a new task, the normal case after deployment) takes a
    rate pooled over many tasks: every control episode given, or else the corpus's runs of the
    lesson's task type. That is one estimate used for every such episode, so its error would
    not average out: its upper confidence bound (at `confidence`) is taken, as allowing for a
    little too much failure makes retiring a harmless lesson rarer, not likelier."""

    tasks: dict[TaskKey, Counts] = field(default_factory=dict)
    """The corpus's runs, by task (its source and id: corpus_schema/tasks.py)."""
    types: dict[str | None, Counts] = field(default_factory=dict)
    controls: dict[TaskKey, Counts] = field(default_factory=dict)
    """Control episodes, by task."""
    confidence: float = default("confidence")

    def __post_init__(self) -> None:
        self._tasks, self._controls = _by_id(self.tasks), _by_id(self.controls)

    @classmethod
    def of(
        cls, base: FrozenVersion, controls: list[CitationReport], confidence: float
    ) -> BaseRates:
        runs = [(row.task_key, row.outcome == "failure") for row in base.rows]
        types = [(row.task_type, row.outcome == "failure") for row in base.rows]
        episodes = [
            (task_key(r.origin, r.task_id), not r.success)
            for r in controls
            if r.task_id is not None and r.success is not None  # read_controls asks for both
        ]
        return cls(
            tally_failures(runs), tally_failures(types), tally_failures(episodes), confidence
        )

    def failure(self, task: TaskKey | None, task_type: str | None) -> Base:
        """`task`: the episode's task (None: its report names none). Source "none" when
        nothing is known: the episode is then not judged (`Base.judged`)."""
        if task is None:
            return Base(0.0, "none")
        for tallies, source in ((self._controls, "controls"), (self._tasks, "task")):
            failed, runs = _own(tallies, task)
            if runs >= MIN_OWN_RUNS:
                return Base(min(failed / runs, BASE_CAP), source)
        pooled: list[tuple[Counts | None, str]] = []
        if self.controls:
            every = self.controls.values()
            pooled.append(((sum(t[0] for t in every), sum(t[1] for t in every)), "all controls"))
        if task_type is not None:
            pooled.append((self.types.get(task_type), "task type"))
        for tally, source in pooled:
            if tally is not None and tally[1]:
                return Base(min(_upper(*tally, self.confidence), BASE_CAP), source)
        return Base(0.0, "none")


@functools.lru_cache(maxsize=1024)
def _upper(failed: int, runs: int, confidence: float) -> float:
    """The pooled rate's bound, computed once for the many episodes it serves."""
    return stats.upper(failed, runs, confidence)


def report_task(report: CitationReport) -> TaskKey | None:
    """The task a report names: its source and id (None: it names no task)."""
    return None if report.task_id is None else task_key(report.origin, report.task_id)


def read_controls(paths: list[Path]) -> list[CitationReport]:
    """Control episodes' reports: each must name its task and its outcome."""
    found = []
    for path, line, report in read_reports(paths):
        if report.task_id is None or report.success is None:
            raise InputError(
                "a control episode needs its task_id and its success",
                path=path,
                line=line,
                hint="write the episode's task and outcome into its report",
            )
        found.append(report)
    return found


def _finish_interrupted(store: Store, *, deploy: bool) -> FrozenVersion | None:
    """A monitoring call killed once its version was made, before the history said so (and
    before its record of the reports was written): that version is placed as it would have
    been (`left_unrecorded`, as `add` does), and this call counts on from it, so its insights
    are not retired a second time in another version. None when there is none."""
    name = left_unrecorded(store, decided_by="monitor")
    if name is None:
        return None
    root = store.version_path(name)
    found = manifest.load(root)
    reason = found.version.changes.reason if found.version else "monitoring"
    record_left(
        store,
        name,
        deploy=deploy,
        reason=f"{reason} (an interrupted monitoring call, finished)",
        event="monitored",
    )
    log.warning("%s was made by a monitoring call that was interrupted: finished it", name)
    seal, rows = store.sidecars(name)
    return FrozenVersion.load(name, root, seal=seal, rows=rows)


def monitor_corpus(
    pointer: Path, reports: list[Path], options: MonitorOptions, *, deploy: bool = True
) -> MonitorReport:
    with build_lock(pointer):
        store = open_store(pointer)
        finished = _finish_interrupted(store, deploy=deploy)
        base = finished or FrozenVersion.current(store)
        current, pages = base.name, base.insights
        state: MonitorState = load_model(
            store.monitor_state_path, MonitorState, default=MonitorState()
        )
        watched = [ident for ident, page in pages.items() if page.header.status in WATCHED_STATUSES]
        records, watches = _resume(watched, state, options)
        rates = BaseRates.of(base, read_controls(options.controls), options.confidence)
        types = {ident: pages[ident].header.task_type for ident in watched}
        new_reports = _count_reports(reports, state, records, watches, rates, types)
        _conclude(records, watches, state, options)
        result = MonitorReport(
            records=list(records.values()),
            version=finished.name if finished else None,
            monitored=current,
            new_reports=new_reports,
        )
        retiring = [r for r in result.records if r.retire]
        if not retiring:
            write_json(store.monitor_state_path, state.model_dump(mode="json"))
            return result
        change = _retirements(base, state, result, retiring, options)
        result.version = derive_version(store, base, change, deploy=deploy, event="monitored")
        write_json(store.monitor_state_path, state.model_dump(mode="json"))
        return result


def _resume(
    watched: list[str], state: MonitorState, options: MonitorOptions
) -> tuple[dict[str, InsightRecord], dict[str, Watch]]:
    """Each watched insight's record and anytime test, going on from the tallies of earlier
    calls."""
    records = {ident: InsightRecord(ident) for ident in watched}
    watches = {
        ident: Watch(options.max_violation_rate, 1.0 - options.confidence) for ident in watched
    }
    for ident, kept in records.items():
        tally = state.tallies.get(ident)
        if tally is not None:
            kept.cited, kept.judged, kept.violations = (
                tally.cited,
                tally.judged,
                tally.violations,
            )
            watches[ident].test.log_wealth = tally.log_evidence
    return records, watches


def _count_reports(
    reports: list[Path],
    state: MonitorState,
    records: dict[str, InsightRecord],
    watches: dict[str, Watch],
    rates: BaseRates,
    types: dict[str, str | None],
) -> int:
    """Count the reports not counted before into the records and tests of the insights they
    cite (each kept in the state by its key); how many were new."""
    new_reports = 0
    for path, line, report in read_reports(reports):
        text = orjson.dumps(report.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
        # A report names its episode, or else it is known by where it is: two episodes may
        # report the very same thing.
        where = b"" if report.episode else f"{Path(path).resolve()}:{line}\n".encode()
        key = hashlib.sha256(where + text).hexdigest()
        if key in state.reports:
            continue  # counted by an earlier call (or earlier in this one)
        state.reports[key] = text.decode()
        new_reports += 1
        for ident in dict.fromkeys(report.used.insights):
            record = records.get(ident)
            if record is None:
                continue
            record.cited += 1
            met, effect, checked = judge(ident, report)
            violation = met and effect is False
            base = (
                Base(0.0, "checked")
                if checked
                else rates.failure(report_task(report), types.get(ident))
            )
            if met and effect is not None and not base.judged:
                # Its failure could be the task's as well as the lesson's: held against
                # neither, and said so.
                violation = False
                record.not_judged[NO_BASE] = record.not_judged.get(NO_BASE, 0) + 1
            elif met and effect is not None:
                record.judged += 1
                record.violations += violation
                record.bases[base.source] = record.bases.get(base.source, 0) + 1
                watches[ident].observe(violation, base.failure)
            record.episodes.append(
                {
                    "report": f"{path}:{line}",
                    "episode": report.episode,
                    "task_id": report.task_id,
                    "origin": report.origin,
                    "precondition_met": met,
                    "effect_observed": effect,
                    "violation": violation,
                    "base": base.source,
                }
            )
    return new_reports


def _conclude(
    records: dict[str, InsightRecord],
    watches: dict[str, Watch],
    state: MonitorState,
    options: MonitorOptions,
) -> None:
    """Each record's rates, evidence and whether to retire it; its tally kept in the state."""
    for record in records.values():
        if record.judged:
            record.rate = round(record.violations / record.judged, 6)
            record.rate_lower = round(
                stats.lower(record.violations, record.judged, options.confidence), 6
            )
        record.evidence = round(watches[record.insight].evidence, 6)
        record.retire = record.judged >= options.min_judged and watches[record.insight].retire()
    for ident, record in records.items():
        state.tallies[ident] = Tally(
            cited=record.cited,
            judged=record.judged,
            violations=record.violations,
            log_evidence=watches[ident].test.log_wealth,
        )


def _retirements(
    base: FrozenVersion,
    state: MonitorState,
    result: MonitorReport,
    retiring: list[InsightRecord],
    options: MonitorOptions,
) -> Derivation:
    """The new version's change: a decision page per insight retired, with every report line
    behind it."""
    current, pages = base.name, base.insights
    first = count_decisions(base) + 1
    replacements = {
        record.insight: replacement(base, record.insight, leaving={r.insight for r in retiring})
        for record in retiring
    }
    for record in retiring:
        found = replacements[record.insight]
        record.replaced_by = found.newer if found else None
    change = Derivation(
        reason="monitoring: " + ", ".join(f"{r.insight} retired" for r in retiring),
        report={"monitor": [r.as_dict() for r in result.records], "monitored": current},
    )
    for number, record in enumerate(retiring, start=first):
        ident = decision_id("monitor", number)
        page = pages[record.insight]
        header = page.header
        decision = GateDecision(
            id=ident,
            insight=record.insight,
            kind="monitor",
            tested_on=current,
            time=now(),
            verdict="retired",
            reason=(
                f"Retired: {record.violations} of {record.judged} episodes that used it with "
                f"its precondition met did not show its effect (rate {record.rate:.3f}, at "
                f"least {record.rate_lower:.3f}); allowing for how often the agent fails "
                "those tasks anyway, the evidence that its violation rate is above "
                f"{options.max_violation_rate:g} is {record.evidence:.3g}, past "
                f"{1 / (1 - options.confidence):.3g} (anytime-valid)."
            ),
            confidence=options.confidence,
            thresholds={
                "max_violation_rate": options.max_violation_rate,
                "min_judged": float(options.min_judged),
            },
            precondition=header.precondition,
            evidence=f"{ident}.reports.jsonl",
            monitoring={**record.as_dict(), "episodes": record.episodes},
        )
        found = replacements[record.insight]
        if found is None:
            decision.reason += " No committed lesson of its scope added later replaces it."
        else:
            decision.reason += (
                f" Replaced by {found.newer}, a committed lesson of its scope added later "
                f"(it {found.relation} it: {found.why})."
            )
        # Every report behind it, this call's and earlier ones'.
        behind = b"".join(
            text.encode() + b"\n"
            for text in state.reports.values()
            if record.insight in orjson.loads(text)["used"]["insights"]
        )
        older = (header, corpus_read.guideline(page))
        if found is None:
            change.record(decision, *older, behind)
        else:
            newer = pages[found.newer]
            change.supersede(decision, older, (newer.header, corpus_read.guideline(newer)), behind)
    return change


def replacement(base: FrozenVersion, ident: str, *, leaving: set[str]) -> Flag | None:
    """The lesson that replaces `ident`, which monitoring retires: a committed one of the same
    scope (task type, project, kind of work) added after it that contradicts or narrows it
    (as the filter of search/contradict.py finds: sharing words is not enough), the closest
    first; None when there is none (or `ident` is a mined lesson). `leaving`: lessons retired
    with it, which replace nothing."""
    retired = lessons(base, WATCHED_STATUSES).get(ident)
    if retired is None:
        return None
    later = [
        lesson
        for lesson in lessons(base, ("committed",)).values()
        if parse_insight(lesson.id) > parse_insight(ident) and lesson.id not in leaving
    ]
    # Each later lesson as the newer of a pair with the retired one; sharing words is not
    # enough: it must contradict or narrow it.
    found = [flag for lesson in later for flag in candidates([lesson], [retired]) if flag.likely]
    return min(found, key=lambda flag: -flag.overlap, default=None)
