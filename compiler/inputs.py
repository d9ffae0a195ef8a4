"""Read runs in the native format (JSON Lines, one run a line); errors name file, line, field."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from wikitrace.corpus_schema import InputError, RunRecord

EXTRA_FIELD_HINT = "fields the native format has no place for go under 'metadata'"


@dataclass
class SourceRun:
    """One valid line of input: where it came from, the JSON as given, and its typed record."""

    path: str
    line: int
    data: dict[str, Any]
    record: RunRecord

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}"


def _field_path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _validation_error(error: ValidationError, path: str, line: int) -> InputError:
    first = error.errors()[0]
    loc = tuple(first["loc"])
    hint = None
    if first["type"] == "extra_forbidden":
        hint = EXTRA_FIELD_HINT
    elif first["type"] == "missing":
        hint = "see 'Native input format' in README.md"
    if len(loc) >= 2 and loc[0] == "turns" and isinstance(loc[1], int):
        turn = f"turn {loc[1] + 1}"
        hint = f"{turn}; {hint}" if hint else turn
    message = first["msg"]
    if len(error.errors()) > 1:
        message += f" (and {len(error.errors()) - 1} more problems in this record)"
    return InputError(message, path=path, line=line, field=_field_path(loc), hint=hint)


def parse_line(raw: bytes, path: str, line: int) -> SourceRun:
    """One input line -> SourceRun, or an InputError naming file, line and field."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InputError(f"not valid JSON: {error}", path=path, line=line) from None
    if not isinstance(data, dict):
        raise InputError(
            f"expected a JSON object (one run a line), got {type(data).__name__}",
            path=path,
            line=line,
        )
    try:
        record = RunRecord.model_validate(data)
    except ValidationError as error:
        raise _validation_error(error, path, line) from None
    if not record.turns:
        raise InputError("a run needs at least one turn", path=path, line=line, field="turns")
    return SourceRun(path=path, line=line, data=data, record=record)


def read_runs(paths: list[Path]) -> Iterator[SourceRun | InputError]:
    """Every run of every file in order; a bad line yields its InputError and reading goes on.

    Streams: one line in memory at a time, whatever the file's size.
    """
    for path in paths:
        name = str(path)
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            raise InputError("no such file", path=name) from None
        except IsADirectoryError:
            raise InputError("is a folder; give the .jsonl files in it", path=name) from None
        except OSError as error:
            raise InputError(f"cannot read: {error.strerror}", path=name) from None
        with handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    yield parse_line(raw, name, number)
                except InputError as error:
                    yield error
