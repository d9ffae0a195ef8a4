"""Read runs in the native format (JSON Lines, one run a line), and turn what any importer found
into a typed run: labels applied, then validated; errors name file, line (or position), field.
And `wikitrace convert`'s core: any supported log in, the native JSON Lines format out
(`convert`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal, Protocol

import orjson
from pydantic import ValidationError

from wikitrace.corpus_schema import InputError, RunRecord
from wikitrace.corpus_schema.identity import digest, fingerprint, given_attempt, turn_log

from .labels import Labels

EXTRA_FIELD_HINT = "fields the native format has no place for go under 'metadata'"
MAX_DEPTH = 100
"""How deeply a run's JSON may nest. Real logs stay far below; orjson writes at most 254
levels, so a deeper record could be read but never written back."""


_INT_RANGE = (-(2**63), 2**64 - 1)
"""Integers orjson writes; a larger one (a 128-bit trace id) is kept as its decimal text."""


def check_json(data: Any, path: str, *, line: int | None = None, at: str | None = None) -> None:
    """Refuse a record nested deeper than MAX_DEPTH, naming where it goes too deep; turn
    integers too large to write back into their decimal text, in place."""
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    low, high = _INT_RANGE
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(
                f"nested more than {MAX_DEPTH} levels deep",
                path=path,
                line=line,
                at=at,
                field=where[:120] + ("..." if len(where) > 120 else ""),
                hint="no trajectory nests this deep; the record is damaged or hostile",
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, (dict, list)):
                name = f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]"
                stack.append((item, depth + 1, name.lstrip(".")))
            elif type(item) is int and not low <= item <= high:
                value[key] = str(item)


@dataclass
class SourceRun:
    """One valid run: where it came from, the JSON as given, and its typed record."""

    path: str
    line: int | None
    data: dict[str, Any]
    record: RunRecord
    at: str | None = None
    """Where in the file, when it has no line: a JSON path, a zip member."""
    format: str = "native"

    @property
    def source(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
        if self.at is not None:
            where += f":{self.at}"
        return where


@dataclass
class Unlabelled:
    """A run the log does not say succeeded or failed, and no label file does: not built."""

    path: str
    line: int | None
    at: str | None
    task_id: str
    run_id: str
    format: str
    reason: str
    data: dict[str, Any]
    """The run in the native shape, `success` null: what `convert --unlabelled keep` writes."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "at": self.at,
            "task_id": self.task_id,
            "run_id": self.run_id,
            "format": self.format,
            "reason": self.reason,
        }


def _field_path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _validation_error(
    error: ValidationError, path: str, line: int | None, at: str | None = None
) -> InputError:
    first = error.errors()[0]
    loc = tuple(first["loc"])
    hint = None
    if first["type"] == "extra_forbidden":
        hint = EXTRA_FIELD_HINT
    elif first["type"] == "missing":
        hint = "see 'Native input format' in docs/formats.md"
    if len(loc) >= 2 and loc[0] == "turns" and isinstance(loc[1], int):
        turn = f"turn {loc[1] + 1}"
        hint = f"{turn}; {hint}" if hint else turn
    message = first["msg"]
    if len(error.errors()) > 1:
        message += f" (and {len(error.errors()) - 1} more problems in this record)"
    return InputError(message, path=path, line=line, at=at, field=_field_path(loc), hint=hint)


def refuse_bad_records(errors: list[InputError], conclusion: str | None = None) -> None:
    """Raise the first bad record's error, saying how many more there are and what follows:
    by default (--on-error stop) that nothing was written."""
    if not errors:
        return
    first = errors[0]
    rest = len(errors) - 1
    more = f"; {rest} more bad record{'s' if rest > 1 else ''}" if rest else ""
    conclusion = conclusion or "nothing was written{more}; fix the input, or use --on-error skip"
    raise InputError(
        first.message,
        path=first.path,
        line=first.line,
        at=first.at,
        field=first.field,
        hint=(first.hint + "; " if first.hint else "") + conclusion.format(more=more),
    )


FormatCounts = dict[str, dict[str, int]]
"""Per input format: runs, successes, failures and unlabelled runs."""


def tally(counts: FormatCounts, fmt: str, key: str) -> None:
    """Count one run of format `fmt` under `key` (runs, successes, failures or unlabelled)."""
    row = counts.setdefault(fmt, {"runs": 0, "successes": 0, "failures": 0, "unlabelled": 0})
    row[key] += 1


class SeenRuns:
    """The runs one reading of the input has met, each known by a 16-byte digest of its
    identity (`corpus_schema.identity.fingerprint`, 100-odd characters): a run the input holds
    twice (the same file given twice, a log copied into two folders) is written once, by a
    build and by `convert` alike."""

    def __init__(self) -> None:
        self._digests: set[bytes] = set()

    def again(self, fingerprint: str) -> bool:
        """Whether a run of this fingerprint was met before (it is met now)."""
        short = hashlib.blake2b(fingerprint.encode(), digest_size=16).digest()
        if short in self._digests:
            return True
        self._digests.add(short)
        return False


def validate(
    data: dict[str, Any], path: str, *, line: int | None, at: str | None, format: str
) -> SourceRun:
    """A run in the native shape -> SourceRun, or the InputError of its first problem."""
    try:
        record = RunRecord.model_validate(data)
    except ValidationError as error:
        raise _validation_error(error, path, line, at) from None
    if not record.turns:
        raise InputError(
            "a run needs at least one turn", path=path, line=line, at=at, field="turns"
        )
    return SourceRun(path=path, line=line, at=at, data=data, record=record, format=format)


class Plan(Protocol):
    """What `convert` reads of an input plan (`InputPlan`, whose package imports this module)."""

    labels: Labels

    def items(self) -> Iterator[SourceRun | Unlabelled | InputError]: ...

    def left_out_list(self) -> list[dict[str, str]]: ...


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
    plan: Plan,
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
