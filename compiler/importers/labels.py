"""Side-car labels: which run or task succeeded, kept outside the trajectory.

A labels file maps run ids or task ids to a success (true/false) or a numeric reward:
- JSON: `{"ID": true, "ID2": 0.5, "ID3": {"resolved": false}}`;
- JSON Lines or CSV rows with an id column (run_id, id, task_id, instance_id, sample_id) and
  a value column (success, resolved, reward, score, label, value);
- SWE-bench harness reports: per instance (`ID.report.json`), keyed by instance, or the summary
  with `resolved_ids` / `unresolved_ids`.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import read_input

from .base import Probe, jsonl_objects, load_json, probe
from .sniffers import swebench_report

LETTER_SCORES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
"""inspect_ai's own value_to_float for its letter grades."""

ID_COLUMNS = ("run_id", "id", "task_id", "instance_id", "sample_id")
VALUE_COLUMNS = ("success", "resolved", "reward", "score", "label", "value")
TRUE_WORDS = {"true", "yes", "pass", "passed", "resolved", "correct", "success"}
FALSE_WORDS = {"false", "no", "fail", "failed", "unresolved", "incorrect", "failure"}

Label = bool | float


def parse_value(value: Any) -> Label | None:
    """A label as logged -> True/False or a reward; None when it is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        word = value.strip()
        if word.lower() in TRUE_WORDS:
            return True
        if word.lower() in FALSE_WORDS:
            return False
        if word.upper() in LETTER_SCORES:
            return LETTER_SCORES[word.upper()]
        try:
            return float(word)
        except ValueError:
            return None
    if isinstance(value, dict):
        for key in VALUE_COLUMNS:
            if key in value:
                return parse_value(value[key])
    return None


@dataclass
class Labels:
    """Every label read, by id, with the file each came from."""

    values: dict[str, Label] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    matched: set[str] = field(default_factory=set)
    """The keys that name a run looked up (its run id, task id, or another name of it)."""

    def add(self, key: str, value: Label, source: str) -> None:
        if key not in self.values:  # the first file given wins
            self.values[key] = value
            self.sources[key] = source

    def lookup(self, *keys: str) -> tuple[Label, str] | None:
        """The label of the first of a run's keys that has one (and each key is noted as
        matched)."""
        found: tuple[Label, str] | None = None
        for key in keys:
            if key in self.values:
                self.matched.add(key)
                found = found or (self.values[key], self.sources[key])
        return found

    def unmatched(self) -> list[str]:
        """The keys that named no run, in the order read: a typo, ids of another kind, or
        runs the input does not hold."""
        return [key for key in self.values if key not in self.matched]

    def __len__(self) -> int:
        return len(self.values)


UNMATCHED_SHOWN = 5
"""How many of the label keys that named no run the message names."""


def unmatched_message(keys: list[str]) -> str | None:
    """The line that says how many label keys named no run, naming a few; None if none."""
    if not keys:
        return None
    shown = ", ".join(repr(key) for key in keys[:UNMATCHED_SHOWN])
    more = len(keys) - UNMATCHED_SHOWN
    return (
        f"{len(keys)} label key{'s' * (len(keys) != 1)} matched no run: {shown}"
        + (f" and {more} more" if more > 0 else "")
        + " (a label is keyed by a run id, a task id, or a session's file name)"
    )


def _row_label(row: dict[str, Any], path: Path, line: int | None) -> tuple[str, Label]:
    key = next((str(row[c]) for c in ID_COLUMNS if row.get(c) not in (None, "")), None)
    if key is None:
        raise InputError(
            f"no id column; expected one of {', '.join(ID_COLUMNS)}", path=path, line=line
        )
    column = next((c for c in VALUE_COLUMNS if c in row), None)
    if column is None:
        raise InputError(
            f"no label column; expected one of {', '.join(VALUE_COLUMNS)}", path=path, line=line
        )
    value = parse_value(row[column])
    if value is None:
        raise InputError(
            f"{row[column]!r} is not a label (true/false, a number, C/I)",
            path=path,
            line=line,
            field=column,
        )
    return key, value


def read_labels_file(path: Path, labels: Labels, found: Probe | None = None) -> None:
    found = found or probe(path)
    source = path.name  # what a run's metadata names: not how the path was spelled
    labels.files.append(str(path))
    if swebench_report(found):
        from .swe import report_labels

        for key, resolved in report_labels(path).items():
            labels.add(key, resolved, source)
        return
    if found.kind == "jsonl" and found.sample and any(c in found.sample[0] for c in ID_COLUMNS):
        for item in jsonl_objects(path, unit="label"):
            if isinstance(item, InputError):
                raise item
            line, row = item
            key, value = _row_label(row, path, line)
            labels.add(key, value, source)
        return
    if found.kind in ("json", "jsonl"):  # one {id: label} object, on one line or many
        data = load_json(path)
        if isinstance(data, list):
            for index, row in enumerate(data):
                if not isinstance(row, dict):
                    raise InputError("expected an object", path=path, at=f"[{index}]")
                try:
                    key, value = _row_label(row, path, None)
                except InputError as error:
                    error.at = f"[{index}]"
                    raise error from None
                labels.add(key, value, source)
            return
        if not isinstance(data, dict):
            raise InputError("expected a JSON object of id: label", path=path)
        for key, raw in data.items():
            parsed = parse_value(raw)
            if parsed is None:
                raise InputError(
                    f"{orjson.dumps(raw).decode()[:80]} is not a label (true/false, a number, "
                    "C/I, or an object with success/resolved/reward)",
                    path=path,
                    field=str(key),
                )
            labels.add(str(key), parsed, source)
        return
    if found.kind == "zip":
        raise InputError("a zip is not a labels file", path=path)
    text = read_input(path).decode("utf-8", "replace")
    with io.StringIO(text, newline="") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            key, value = _row_label(row, path, reader.line_num)
            labels.add(key, value, source)
