"""`wikitrace convert`: any supported log in, the native JSON Lines format out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.identity import digest, fingerprint, given_attempt, turn_log

from . import InputPlan
from .runs import FormatCounts, SeenRuns, SourceRun, Unlabelled, refuse_bad_records, tally


@dataclass
class ConvertReport:
    """What a conversion read and wrote, per format."""

    written: int = 0
    formats: FormatCounts = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unlabelled: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[dict[str, str]] = field(default_factory=list)
    """Files read and found to hold no run: path and why."""
    duplicates: int = 0
    """Runs the input holds twice (a file given twice), written once (as a build does)."""
    unmatched_labels: list[str] = field(default_factory=list)
    """Label keys that named no run read."""


def convert(
    plan: InputPlan,
    out: BinaryIO,
    *,
    on_error: Literal["stop", "skip"] = "stop",
    keep_unlabelled: bool = False,
) -> ConvertReport:
    """Write each run of `plan` to `out` as a native JSON line; unlabelled runs only when kept
    (with `success: null`, to fill in by hand). The input is checked first, so with
    on_error="stop" a bad record raises before anything is written."""
    # Read everything once first, so a bad record stops it before a line is written.
    if on_error == "stop":
        refuse_bad_records([item for item in plan.items() if isinstance(item, InputError)])
    report = ConvertReport()
    seen = SeenRuns()
    for item in plan.items():
        if isinstance(item, InputError):
            report.skipped.append(item.as_dict())
            continue
        if seen.again(_fingerprint(item)):
            report.duplicates += 1
            continue
        if isinstance(item, Unlabelled):
            report.unlabelled.append(item.as_dict())
            tally(report.formats, item.format, "unlabelled")
            if not keep_unlabelled:
                continue
        else:
            tally(report.formats, item.format, "runs")
            tally(report.formats, item.format, "successes" if item.record.success else "failures")
        out.write(orjson.dumps(item.data) + b"\n")
        report.written += 1
    report.left_out = plan.left_out_list()
    report.unmatched_labels = plan.labels.unmatched()
    return report


def _fingerprint(item: SourceRun | Unlabelled) -> str:
    """The run's identity as a build takes it (raw.py), over the run as written."""
    log_bytes, _ = turn_log(item.data.get("turns") or [])
    if isinstance(item, SourceRun):
        record = item.record
        return fingerprint(
            record.task_id, record.outcome, digest(log_bytes), given_attempt(record.metadata)
        )
    metadata = item.data.get("metadata")
    attempt = given_attempt(metadata if isinstance(metadata, dict) else {})
    return fingerprint(item.task_id, "unlabelled", digest(log_bytes), attempt)
