"""Result rows (JSON Lines or CSV): one trial of one method on one task of one suite."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.errors import first_problem
from wikitrace.corpus_schema.input_files import read_input
from wikitrace.corpus_schema.setting_fields import default

SUCCESS_THRESHOLD: float = default("success-threshold")
"""A row with a score and no success succeeds at or above this (eval's --success-threshold)."""


class ResultRow(BaseModel):
    """One trial: `success`, or a `score` judged against --success-threshold."""

    model_config = ConfigDict(extra="forbid")

    suite: str = Field(min_length=1)
    method: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    trial: int
    success: bool | None = None
    score: float | None = None
    trajectory: str | None = None
    """The episode's log (any format `wikitrace build` reads), relative to the results file:
    what `wikitrace lift attribute` reads. In a log of many runs, `#` and the run's place in it
    follow: `logs/x.eval#samples/3_epoch_1.json`."""
    used: dict[str, list[str]] | None = None
    """The agent's citation report (`used`): the memory entries it said shaped its actions."""
    tokens: int | None = Field(default=None, ge=0)
    """The agent's model tokens in the episode (`wikitrace lift` reports the mean per method);
    the harness's own calls (a citation report it asks for) are in `harness_tokens`."""
    harness_tokens: int | None = Field(default=None, ge=0)
    """The harness's own model tokens in the episode (the citation-report call), left out of
    `tokens` so that memory is not charged for them."""
    seconds: float | None = Field(default=None, ge=0)
    """The episode's wall time in seconds."""
    drilldowns: int | None = Field(default=None, ge=0)
    """How many times the agent read the memory past its first message (0: it stayed)."""

    def succeeded(self, threshold: float = SUCCESS_THRESHOLD) -> bool:
        """`success`, or else whether `score` reaches `threshold`."""
        if self.success is not None:
            return self.success
        return self.score is not None and self.score >= threshold

    @field_validator("task_id", "suite", "method", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


@dataclass
class Row:
    """A row with where it came from, for messages."""

    where: str
    row: ResultRow


_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _csv_value(key: str, value: str) -> Any:
    value = value.strip()
    if value == "":
        return None
    if key == "success":
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        return value  # rejected by validation, with the row named
    if key in ("trial", "tokens", "harness_tokens", "drilldowns"):
        return int(value) if value.lstrip("-").isdigit() else value
    if key == "used":  # the citation report's JSON in one cell
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value  # rejected by validation, with the row named
    if key in ("score", "seconds"):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        text = read_input(path).decode("utf-8")
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}", path=path) from None
    except UnicodeDecodeError as error:
        raise InputError(f"cannot read: {error}", path=path) from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        for record in reader:
            yield reader.line_num, {k: _csv_value(k, v or "") for k, v in record.items() if k}
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise InputError(f"not valid JSON: {error}", path=path, line=number) from None


def read_rows(paths: list[Path]) -> list[Row]:
    """Every row of every file, typed; a bad row is an InputError naming file, line, field."""
    rows = []
    for path in paths:
        for number, record in _records(path):
            if not isinstance(record, dict):
                raise InputError("expected an object (one row a line)", path=path, line=number)
            try:
                row = ResultRow.model_validate(record)
            except ValidationError as error:
                where, message = first_problem(error)
                raise InputError(message, path=path, line=number, field=where) from None
            if row.success is None and row.score is None:
                raise InputError(
                    "needs 'success' (true or false) or 'score' (a number)",
                    path=path,
                    line=number,
                )
            rows.append(Row(where=f"{path}:{number}", row=row))
    return rows
