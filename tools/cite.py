"""Citation reports: which memory entries shaped an episode, checked and added up."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wikitrace.corpus_schema import CorpusError, InputError
from wikitrace.corpus_schema.errors import first_problem
from wikitrace.corpus_schema.layout import COMPILATION_DIR, INSIGHT_DIR, RAW_DIR

from .first_message import CHARS_PER_TOKEN


class Used(BaseModel):
    """The ids an agent reports, in the form the first message shows them."""

    model_config = ConfigDict(extra="forbid")

    raw: list[str] = Field(default_factory=list)
    """Raw runs whose turns shaped an action: `step-0003`."""
    compilations: list[str] = Field(default_factory=list)
    """Compilations: `step-0003` (the step the compilation explains)."""
    insights: list[str] = Field(default_factory=list)
    """Insights: `insight-0007`."""


class InsightCheck(BaseModel):
    """What an episode showed of one insight it used, when the agent or harness can tell."""

    model_config = ConfigDict(extra="forbid")

    precondition_met: bool | None = Field(default=None, strict=True)
    """Did the insight's precondition hold? Unsaid: yes, since the agent chose to use it."""
    effect_observed: bool | None = Field(default=None, strict=True)
    """Was its expected effect seen (its verifier)? Unsaid: the episode's success."""


class CitationReport(BaseModel):
    """One episode's report: the agent writes `used`; a harness may add the rest."""

    model_config = ConfigDict(extra="forbid")

    used: Used
    episode: str | None = None
    """The harness's id for the episode."""
    task_id: str | None = None
    origin: str | None = None
    """The source of its task (`tau-bench/airline`; corpus_schema/tasks.py): two sources'
    tasks of one id are two tasks. Unsaid (as in reports written before it was read): the task
    of that id in whichever source has it."""
    success: bool | None = Field(default=None, strict=True)
    """The episode's outcome, when the harness knows it."""
    checks: dict[str, InsightCheck] = Field(default_factory=dict)
    """Insight id -> what the episode showed of it (see `wikitrace monitor`)."""


@dataclass
class Usage:
    """How often one entry was cited, and with what outcomes."""

    id: str
    episodes: int = 0
    successes: int = 0
    failures: int = 0
    unknown: int = 0


@dataclass
class Episode:
    """One episode's way through the memory: did it go below the insight layer?"""

    episode: str | None
    task_id: str | None
    success: bool | None
    descended: bool
    """It cited a compilation or a raw run, or its read log shows a drill-down tool."""
    reads: int = 0
    """Drill-down tool calls in the read log (`actions`, `turn`)."""
    bytes: int = 0
    """What those calls printed, in bytes."""

    @property
    def tokens_estimate(self) -> int:
        return self.bytes // CHARS_PER_TOKEN


@dataclass
class Outcomes:
    episodes: int = 0
    successes: int = 0
    failures: int = 0
    unknown: int = 0

    def add(self, success: bool | None) -> None:
        self.episodes += 1
        if success is None:
            self.unknown += 1
        elif success:
            self.successes += 1
        else:
            self.failures += 1


@dataclass
class CitationSummary:
    episodes: int = 0
    insights: dict[str, Usage] = field(default_factory=dict)
    compilations: dict[str, Usage] = field(default_factory=dict)
    raw: dict[str, Usage] = field(default_factory=dict)
    stay: Outcomes = field(default_factory=Outcomes)
    """Episodes that kept to the insight layer."""
    descent: Outcomes = field(default_factory=Outcomes)
    """Episodes that went below it (the method's Stay vs Descent)."""
    per_episode: list[Episode] = field(default_factory=list)
    unmatched_reads: int = 0
    """Read-log lines whose episode no report names."""

    def as_dict(self) -> dict[str, Any]:
        def rows(table: dict[str, Usage]) -> list[dict[str, Any]]:
            return [vars(usage) for _, usage in sorted(table.items())]

        return {
            "episodes": self.episodes,
            "insights": rows(self.insights),
            "compilations": rows(self.compilations),
            "raw": rows(self.raw),
            "stay": vars(self.stay),
            "descent": vars(self.descent),
            "per_episode": [
                {**vars(e), "tokens_estimate": e.tokens_estimate} for e in self.per_episode
            ],
            "unmatched_reads": self.unmatched_reads,
        }


KINDS = ("raw", "compilations", "insights")
"""The kinds of entry a report cites, in the order `known_ids` returns them."""


def known_ids(root: Path) -> tuple[set[str], set[str], set[str]]:
    raw = {p.name for p in (root / RAW_DIR).glob("step-*") if p.is_dir()}
    compilations = {p.stem for p in (root / COMPILATION_DIR).glob("step-*.md")}
    insights = {p.stem for p in (root / INSIGHT_DIR).glob("insight-*.md")}
    return raw, compilations, insights


def read_reports(paths: Iterable[Path]) -> list[tuple[str, int, CitationReport]]:
    """Reports from JSON files (one object) or JSON Lines files (one per line)."""
    reports: list[tuple[str, int, CitationReport]] = []
    for path in paths:
        try:
            text = path.read_bytes()
        except OSError as error:
            raise InputError(f"cannot read: {error.strerror}", path=path) from None
        try:
            whole = orjson.loads(text)
            items = [(1, whole)]
        except orjson.JSONDecodeError:
            items = []
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        items.append((number, orjson.loads(line)))
                    except orjson.JSONDecodeError as error:
                        raise InputError(f"not JSON: {error}", path=path, line=number) from None
        reports.extend(
            (str(path), number, parse_report(item, path, number)) for number, item in items
        )
    return reports


REPORT_SHAPE = 'expected {"used": {"raw": [...], "compilations": [...], "insights": [...]}}'


def parse_report(
    item: Any, path: str | Path | None = None, line: int | None = None
) -> CitationReport:
    """One report, validated; an InputError names the field that is wrong."""
    try:
        return CitationReport.model_validate(item)
    except ValidationError as error:
        where, message = first_problem(error)
        raise InputError(message, path=path, line=line, field=where, hint=REPORT_SHAPE) from None


def check_ids(
    report: CitationReport,
    known: tuple[set[str], set[str], set[str]],
    path: str | Path | None = None,
    line: int | None = None,
) -> None:
    """Refuse a report that cites an id the corpus does not hold."""
    for kind, ids in zip(KINDS, known, strict=True):
        for ident in getattr(report.used, kind):
            if ident not in ids:
                raise InputError(
                    f"{ident!r} is not in the corpus",
                    path=path,
                    line=line,
                    field=f"used.{kind}",
                    hint="ids look like " + ("insight-0007" if kind == "insights" else "step-0003"),
                )


def keep_known(
    report: CitationReport, known: tuple[set[str], set[str], set[str]]
) -> tuple[CitationReport, list[str]]:
    """The report with only the ids the corpus holds, and a line naming each one it does not
    (`used.insights: 'insight-0099' is not in the corpus`): a harness keeps the valid entries
    of an agent's report instead of discarding it whole for one unknown id."""
    kept: dict[str, list[str]] = {}
    bad: list[str] = []
    for kind, ids in zip(KINDS, known, strict=True):
        kept[kind] = []
        for ident in getattr(report.used, kind):
            if ident in ids:
                kept[kind].append(ident)
            else:
                bad.append(f"used.{kind}: {ident!r} is not in the corpus")
    return report.model_copy(update={"used": Used(**kept)}), bad


def check_report(root: Path, item: Any) -> CitationReport:
    """A report given as a JSON value, checked against the corpus at `root`."""
    report = parse_report(item)
    check_ids(report, known_ids(root))
    return report


@dataclass
class Reads:
    count: int = 0
    bytes: int = 0


def read_logs(paths: Iterable[Path]) -> dict[str | None, Reads]:
    """The drill-down tools' read logs ($WIKITRACE_READ_LOG), by episode."""
    found: dict[str | None, Reads] = {}
    for path in paths:
        try:
            text = path.read_bytes()
        except OSError as error:
            raise InputError(f"cannot read: {error.strerror}", path=path) from None
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = orjson.loads(line)
                episode = item.get("episode")
                size = int(item.get("bytes") or 0)
            except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
                raise InputError(
                    "not a read-log line",
                    path=path,
                    line=number,
                    hint='the drill-down tools write {"episode": ..., "tool": ..., "bytes": ...}',
                ) from None
            reads = found.setdefault(None if episode is None else str(episode), Reads())
            reads.count += 1
            reads.bytes += size
    return found


def summarize(
    root: Path, paths: Iterable[Path], read_log_paths: Iterable[Path] = ()
) -> CitationSummary:
    """Check every id against the corpus (an unknown one is an error), count usage, and tell
    the episodes that went below the insight layer from those that stayed."""
    if not root.is_dir():
        raise CorpusError.no_folder(root)
    known = known_ids(root)
    logs = read_logs(read_log_paths)
    summary = CitationSummary()
    for path, line, report in read_reports(paths):
        check_ids(report, known, path, line)
        summary.episodes += 1
        for kind in KINDS:
            table = getattr(summary, kind)
            for ident in dict.fromkeys(getattr(report.used, kind)):
                usage = table.setdefault(ident, Usage(id=ident))
                usage.episodes += 1
                if report.success is None:
                    usage.unknown += 1
                elif report.success:
                    usage.successes += 1
                else:
                    usage.failures += 1
        reads = logs.pop(report.episode, None) if report.episode is not None else None
        episode = Episode(
            episode=report.episode,
            task_id=report.task_id,
            success=report.success,
            descended=bool(report.used.compilations or report.used.raw or reads),
            reads=reads.count if reads else 0,
            bytes=reads.bytes if reads else 0,
        )
        summary.per_episode.append(episode)
        (summary.descent if episode.descended else summary.stay).add(report.success)
    summary.unmatched_reads = sum(reads.count for reads in logs.values())
    return summary
