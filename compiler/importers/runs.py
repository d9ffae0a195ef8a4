"""Read runs in the native format (JSON Lines, one run a line), and turn what any importer found
into a typed run: labels applied, then validated; errors name file, line (or position), field."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from wikitrace.corpus_schema import InputError, RunRecord

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
