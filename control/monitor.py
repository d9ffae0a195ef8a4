"""`wikitrace monitor`: keep watching committed insights, and retire one that stops holding.

From the citation reports of later episodes (`wikitrace cite` reads the same files), each
committed insight's record is: the episodes that cited it, those where its precondition held
and its effect could be judged, and violations among them (precondition met, expected effect
absent). Unless a report says otherwise (its `checks`), citing an insight means its precondition
held (the agent chose to use it) and the effect is judged by the episode's success (the default
verifier). An insight is retired when at least `min_judged` episodes judged it and the exact
lower bound of its violation rate is above `max_violation_rate`: it fails more often than that,
with the stated confidence. Retirement makes a new version: the insight is marked retired (kept
on record, never shown again) with a decision page, and the report lines behind it copied in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.layout import decision_id
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.store import build_lock
from wikitrace.tools.cite import CitationReport, read_reports
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    count_decisions,
    derive_version,
    open_store,
)

from . import stats


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
        committed = [ident for ident, page in pages.items() if page.header.status == "committed"]
        records = {ident: InsightRecord(ident) for ident in committed}
        lines: dict[str, list[bytes]] = {ident: [] for ident in committed}
        for path, line, report in read_reports(reports):
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
                lines[ident].append(orjson.dumps(report.model_dump(mode="json")) + b"\n")
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
        result = MonitorReport(records=list(records.values()), monitored=current)
        retiring = [r for r in result.records if r.retire]
        if not retiring:
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
            change.record(
                decision, header, corpus_read.guideline(page), b"".join(lines[record.insight])
            )
        result.version = derive_version(store, base, change, deploy=deploy, event="monitored")
        return result
