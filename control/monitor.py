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
(the default verifier). An insight is retired when at least `min_judged` episodes judged it
and the exact lower bound of its violation rate is above `max_violation_rate`: it fails more
often than that, with the stated confidence. Retirement makes a new version: the insight is
marked retired (kept on record, never shown again) with a decision page, and every report line
behind it (this call's and earlier ones') copied in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.layout import decision_id
from wikitrace.corpus_schema.ledger import GateDecision, MonitorState, Tally, load_model
from wikitrace.corpus_schema.store import build_lock
from wikitrace.tools.cite import CitationReport, read_reports
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    count_decisions,
    derive_version,
    open_store,
    write_json,
)

from . import stats

WATCHED_STATUSES = ("committed", "ungated")
"""What an agent is shown, so what monitoring watches."""


@dataclass
class MonitorOptions:
    min_judged: int = 5
    """Fewest judged episodes before an insight can be retired."""
    max_violation_rate: float = 0.3
    """Retire when the violation rate is confidently above this."""
    confidence: float = 0.9


@dataclass
class InsightRecord:
    """One committed insight's track record in the reports."""

    insight: str
    cited: int = 0
    judged: int = 0
    violations: int = 0
    rate: float = 0.0
    rate_lower: float = 0.0
    retire: bool = False
    episodes: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "insight": self.insight,
            "cited": self.cited,
            "judged": self.judged,
            "violations": self.violations,
            "rate": self.rate,
            "rate_lower": self.rate_lower,
            "retire": self.retire,
        }


@dataclass
class MonitorReport:
    records: list[InsightRecord] = field(default_factory=list)
    version: str | None = None
    """The version that retires insights; None when none is retired."""
    monitored: str | None = None
    new_reports: int = 0
    """Reports this call counted for the first time (the others were counted before)."""


def judge(ident: str, report: CitationReport) -> tuple[bool, bool | None]:
    """(precondition met, effect observed) of one cited insight in one episode."""
    check = report.checks.get(ident)
    met = check.precondition_met if check and check.precondition_met is not None else True
    effect = check.effect_observed if check and check.effect_observed is not None else None
    return met, effect if effect is not None else report.success


def monitor_corpus(
    pointer: Path, reports: list[Path], options: MonitorOptions, *, deploy: bool = True
) -> MonitorReport:
    with build_lock(pointer):
        store = open_store(pointer)
        base = FrozenVersion.current(store)
        current, pages = base.name, base.insights
        state: MonitorState = load_model(
            store.monitor_state_path, MonitorState, default=MonitorState()
        )
        watched = [ident for ident, page in pages.items() if page.header.status in WATCHED_STATUSES]
        records = {ident: InsightRecord(ident) for ident in watched}
        for ident, kept in records.items():
            tally = state.tallies.get(ident)
            if tally is not None:
                kept.cited, kept.judged, kept.violations = (
                    tally.cited,
                    tally.judged,
                    tally.violations,
                )
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
                met, effect = judge(ident, report)
                violation = met and effect is False
                if met and effect is not None:
                    record.judged += 1
                    record.violations += violation
                record.episodes.append(
                    {
                        "report": f"{path}:{line}",
                        "episode": report.episode,
                        "task_id": report.task_id,
                        "precondition_met": met,
                        "effect_observed": effect,
                        "violation": violation,
                    }
                )
        for record in records.values():
            if record.judged:
                record.rate = round(record.violations / record.judged, 6)
                record.rate_lower = round(
                    stats.lower(record.violations, record.judged, options.confidence), 6
                )
            record.retire = (
                record.judged >= options.min_judged
                and record.rate_lower > options.max_violation_rate
            )
        for ident, record in records.items():
            state.tallies[ident] = Tally(
                cited=record.cited, judged=record.judged, violations=record.violations
            )
        result = MonitorReport(
            records=list(records.values()), monitored=current, new_reports=new_reports
        )
        retiring = [r for r in result.records if r.retire]
        if not retiring:
            write_json(store.monitor_state_path, state.model_dump(mode="json"))
            return result
        first = count_decisions(base) + 1
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
                    f"least {record.rate_lower:.3f}, above {options.max_violation_rate:g})."
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
            # Every report behind it, this call's and earlier ones'.
            behind = [
                text.encode() + b"\n"
                for text in state.reports.values()
                if record.insight in orjson.loads(text)["used"]["insights"]
            ]
            change.record(decision, header, corpus_read.guideline(page), b"".join(behind))
        result.version = derive_version(store, base, change, deploy=deploy, event="monitored")
        write_json(store.monitor_state_path, state.model_dump(mode="json"))
        return result
