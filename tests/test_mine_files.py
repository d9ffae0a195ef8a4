"""Coding patterns (compiler/mine_files.py, mine_patterns.file_patterns): what a run did to
files and when it ran tests, from editing tools' arguments and from shell commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.mine_files import FileWork, call_files, shell_files
from wikitrace.compiler.mine_patterns import actions_of, patterns
from wikitrace.corpus_schema import Turn

HERE = Path(__file__).parent / "data" / "importers"


def test_shell_commands_say_which_files_they_read_edit_and_write() -> None:
    heredoc = "cat <<'EOF' > reproduce.py\nimport x\nsed -i 's/a/b/' other.py\nEOF"
    assert shell_files(heredoc) == FileWork(writes=("reproduce.py",))  # the body is data
    assert shell_files("nl -ba astropy/units/core.py | sed -n '1,9p'") == FileWork(
        reads=("astropy/units/core.py",)
    )
    assert shell_files("sed -i '223s/if a:/if b:/' ./astropy/units/core.py") == FileWork(
        edits=("astropy/units/core.py",)
    )
    assert shell_files("echo x >> notes.md && grep -n y /testbed/a/b.py") == FileWork(
        reads=("a/b.py",), edits=("notes.md",)
    )
    for command in ("cd /repo && python -m pytest -q t.py", "go test ./...", "python3 test_x.py"):
        assert shell_files(command).test, command
    for command in ("go to drawer 1", "ls -la", "python3 reproduce.py", "git diff"):
        assert shell_files(command) == FileWork(), command


def test_editing_tools_say_which_files_they_touch() -> None:
    assert call_files("Read", {"file_path": "/workspace/a.py"}) == FileWork(reads=("a.py",))
    assert call_files("Edit", {"file_path": "a.py", "old_string": "x"}) == FileWork(edits=("a.py",))
    assert call_files("write_file", {"file_path": "n.py"}) == FileWork(writes=("n.py",))
    viewed = call_files("str_replace_editor", '{"command": "view", "path": "/testbed/s.py"}')
    assert viewed == FileWork(reads=("s.py",))
    patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n*** Add File: b.rs\n*** End Patch"
    assert call_files("apply_patch", {"input": patch}) == FileWork(
        edits=("src/a.rs",), writes=("b.rs",)
    )
    assert call_files("TodoWrite", {"todos": []}) == FileWork()


def _call(name: str, result: str = "ok", **arguments: Any) -> Turn:
    return Turn.model_validate(
        {
            "role": "assistant",
            "tool_calls": [{"name": name, "arguments": arguments, "result": result}],
        }
    )


def test_coding_patterns_of_a_session() -> None:
    turns = [
        _call("Read", file_path="/workspace/pkg/core.py"),
        _call("Edit", file_path="/workspace/pkg/core.py", old_string="a", new_string="b"),
        _call("Bash", command="python -m pytest -q"),
        _call("Edit", file_path="/workspace/pkg/other.py", old_string="c", new_string="d"),
        _call("Write", file_path="/workspace/scratch.py", content="print(1)"),
        _call("Edit", file_path="/workspace/scratch.py", old_string="1", new_string="2"),
    ]
    task = "Fix the parser in pkg/core.py so that negative numbers parse."
    found = patterns(actions_of(turns), task)
    # other.py: edited unread (turn 4), and the task names core.py only; the scratch file the
    # run wrote itself is neither. The test ran before the last edits: not after them.
    assert (found["edit_unread"], found["edit_outside_task"]) == (4, 4)
    assert "tests_after_last_edit" not in found
    tested = patterns(actions_of([*turns, _call("Bash", command="pytest -q")]), task)
    assert tested["tests_after_last_edit"] == 7
    # A task that names no file gives no scope to edit outside of.
    assert "edit_outside_task" not in patterns(actions_of(turns), "Make it faster.")
    # Read first, edited after: no edit unread.
    assert "edit_unread" not in patterns(actions_of(turns[:3]), task)


def test_a_failed_action_issued_again_later_is_a_rerun() -> None:
    turns = [
        Turn(role="agent", action="go to drawer 1", observation="Nothing happens."),
        Turn(role="agent", action="look", observation="You are in the middle of a room."),
        Turn(role="agent", action="go to drawer 1", observation="Nothing happens."),
    ]
    found = patterns(actions_of(turns))
    assert found["rerun_failed"] == 3 and "retry_after_error" not in found


def test_the_patterns_of_real_mini_swe_agent_runs() -> None:
    """Two SWE-bench runs: the resolved one tested its change after its last edit (turn 13,
    `python3 test_none_items.py`); the failed one edited dateparse.py, which it had read and
    which the issue names by its module path, and never ran a test after its edits."""
    plan = plan_inputs([HERE / "mini-swe-agent"])
    found = {}
    for item in plan.items():
        record = item.record  # type: ignore[union-attr]
        found[record.task_id] = patterns(actions_of(record.turns), record.task)
    resolved, failed = found["django__django-16255"], found["django__django-10999"]
    assert resolved["tests_after_last_edit"] == 13
    assert "tests_after_last_edit" not in failed
    for pattern in ("edit_unread", "edit_outside_task"):
        assert pattern not in resolved and pattern not in failed
