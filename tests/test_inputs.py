"""Reading the native format: every bad record is named by file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wikitrace.corpus_schema import InputError

from helpers import make_run, read_runs, write_runs


def errors_of(path: Path) -> list[str]:
    return [str(item) for item in read_runs([path]) if isinstance(item, InputError)]


def test_good_runs_are_read_in_order_with_their_line(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "runs.jsonl", [make_run("a"), make_run("b", success=True)])
    items = list(read_runs([path]))
    assert [(item.line, item.record.task_id) for item in items] == [(1, "a"), (2, "b")]  # type: ignore[union-attr]


def test_integer_task_ids_become_text(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "runs.jsonl", [make_run(task_id=7)])  # type: ignore[arg-type]
    (item,) = read_runs([path])
    assert item.record.task_id == "7"  # type: ignore[union-attr]


def test_blank_lines_are_skipped_and_lines_still_counted(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text("\n" + json.dumps(make_run("a")) + "\n\n{oops\n")
    (error,) = errors_of(path)
    assert error.startswith(f"{path}:4: not valid JSON: ")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda run: run.pop("success"),
            "field 'success': Field required (see 'Native input format' in docs/formats.md)",
        ),
        (
            lambda run: run.update(success="maybe"),
            "field 'success': Input should be a valid boolean",
        ),
        (lambda run: run.update(turns=[]), "field 'turns': a run needs at least one turn"),
        (lambda run: run.update(task_id="  "), "field 'task_id': Value error, must not be empty"),
        (
            lambda run: run["turns"][2].update(role=5),
            "field 'turns[2].role': Input should be a valid string (turn 3)",
        ),
        (
            lambda run: run["turns"][0].update(screenshot="x.png"),
            "field 'turns[0].screenshot': Extra inputs are not permitted (turn 1; fields the "
            "native format has no place for go under 'metadata')",
        ),
        (
            lambda run: run.update(reward=1.0),
            "field 'reward': Extra inputs are not permitted (fields the native format has no "
            "place for go under 'metadata')",
        ),
    ],
)
def test_bad_fields_are_named(tmp_path: Path, change: object, expected: str) -> None:
    run = make_run("a")
    change(run)  # type: ignore[operator]
    path = write_runs(tmp_path / "runs.jsonl", [make_run("ok"), run])
    assert errors_of(path) == [f"{path}:2: {expected}"]


def test_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text("[1, 2]\n")
    assert errors_of(path) == [f"{path}:1: expected a JSON object (one run a line), got list"]


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        list(read_runs([tmp_path / "nope.jsonl"]))
    with pytest.raises(InputError, match="is a folder"):
        list(read_runs([tmp_path]))


def test_nothing_in_a_turn_is_lost(tmp_path: Path) -> None:
    turn = {
        "role": "assistant",
        "content": "x" * 100_000,
        "reasoning": "because",
        "action": "ls",
        "observation": "a\nb",
        "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"cmd": "ls"}, "result": [1, 2]}],
        "metadata": {"latency_ms": 12, "nested": {"k": [None, True]}},
    }
    path = write_runs(tmp_path / "runs.jsonl", [make_run("a", turns=[turn])])
    (item,) = read_runs([path])
    assert item.data["turns"] == [turn]  # type: ignore[union-attr]
