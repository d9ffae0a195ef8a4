"""What a run did, as mining sees it: its actions (tool calls and `action` lines, each
with its kind, signature and a quote) and the action patterns they show (compiler/mine.py)."""

from __future__ import annotations

import re
import sys
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from wikitrace.corpus_schema import Turn
from wikitrace.corpus_schema.drilldown import as_text

from .mine_files import NO_FILES, FileWork, call_files, shell_files
from .signals import failures

QUOTE_LIMIT = 240

_SHELL_TOOLS = frozenset(
    {
        *("bash", "shell", "sh", "execute_bash", "run_shell_command", "exec_command"),
        *("terminal", "run_command", "local_shell", "container.exec", "execute_command"),
    }
)
_COMMAND_KEYS = ("command", "cmd", "code", "script", "commands")
_CALL_FORM = re.compile(r"([A-Za-z_][\w.-]{0,60})\s*[\[(]")
_WORD = re.compile(r"[A-Za-z_][\w.+-]{0,60}")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_SHELL_SPLIT = re.compile(r"&&|\|\||;|\||\n")
_UNSAFE = re.compile(r"[^\w.+-]")
"""Kept out of a kind: it names patterns (`order:A<B`) and shows in pages."""
_PREFIXES = frozenset({"sudo", "timeout", "time", "env", "nohup", "exec", "command"})
_SKIPPED_SEGMENTS = frozenset({"cd", "export", "source", ".", "set", "pushd", "popd"})


# --- actions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One thing a run did: a tool call or an `action` line."""

    turn: int
    kind: str | None
    """What kind of action (a tool's name, a command's program, `search` for `Search[x]`)."""
    signature: str
    """The action whole, spacing collapsed: two equal signatures are the same action."""
    quote: str
    """A verbatim passage of the turn that shows the action (checked before it is cited)."""
    failed: bool
    """What came back says the turn failed (compiler/signals.py: the log's `is_error`, an exit
    code, a failed test run, ...)."""
    files: FileWork = field(default_factory=lambda: NO_FILES)
    """The files it read, edited in place or wrote, and whether it ran tests (coding work)."""


def _program(command: str) -> str | None:
    """The program a shell command runs: `cd x && python -m pytest -q` -> pytest."""
    for segment in _SHELL_SPLIT.split(command):
        words = segment.split()
        while words and (words[0] in _PREFIXES or _ENV_ASSIGNMENT.match(words[0])):
            words = words[1:]
            if words and words[0].lstrip("-").isdigit():  # timeout 30 cmd
                words = words[1:]
        if not words or words[0] in _SKIPPED_SEGMENTS:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program.startswith(("python", "uv")) and len(words) > 2 and words[1] == "-m":
            program = words[2]
        match = _WORD.match(program)
        return match.group().lower().rstrip(":") if match else None
    return None


def _text_kind(text: str) -> str | None:
    """`Search[x]` -> search; `go to drawer 1` -> go; `think: ...` -> think; `ls -la` -> ls."""
    line = text.strip().split("\n", 1)[0]
    call = _CALL_FORM.match(line)
    if call:
        return call.group(1).lower()
    return _program(line)


def _command(given: Any) -> str | None:
    arguments = given
    if isinstance(given, str):
        try:
            arguments = orjson.loads(given)
        except orjson.JSONDecodeError:
            return given
    if isinstance(arguments, dict):
        for key in _COMMAND_KEYS:
            value = arguments.get(key)
            if isinstance(value, list):  # ["bash", "-lc", "pytest -q"]
                value = next((v for v in reversed(value) if isinstance(v, str)), None)
            if isinstance(value, str):
                return value
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:QUOTE_LIMIT]
    return ""


def actions_of(turns: Sequence[Turn]) -> list[Action]:
    """Every action of a run, in order."""
    found: list[Action] = []
    failed_turns = failures(turns)
    for number, turn in enumerate(turns, start=1):
        found += turn_actions(number, turn, number in failed_turns)
    return found


def turn_actions(number: int, turn: Turn, failed: bool) -> list[Action]:
    """The actions of turn `number` of a run (`failed`: whether the turn failed, by
    signals.failures, which reads the whole run), in order."""
    calls = turn.tool_calls or []
    if not turn.action and not calls:
        return []
    found: list[Action] = []
    if turn.action and turn.action.strip():
        found.append(
            Action(
                number,
                _text_kind(turn.action),
                " ".join(turn.action.split()),
                _first_line(turn.action),
                failed,
                shell_files(turn.action),
            )
        )
    for call in calls:
        arguments = "" if call.arguments is None else as_text(call.arguments)
        kind: str | None = call.name
        command = None
        if call.name.lower() in _SHELL_TOOLS:
            command = _command(call.arguments)
            kind = (_program(command) if command else None) or call.name
        errored = call.metadata.get("is_error") is True or failed
        found.append(
            Action(
                number,
                _UNSAFE.sub("_", kind)[:60] if kind else None,
                f"{call.name} {' '.join(arguments.split())}",
                f"{call.name}: {arguments}"[:QUOTE_LIMIT].strip(),
                errored,
                shell_files(command) if command else call_files(call.name, call.arguments),
            )
        )
    return found


def action_places(actions: Sequence[Action]) -> array[int]:
    """Where each action is: its turn times 2, plus 1 when it failed. A turn's actions are
    made again from that turn alone (`turn_actions`), its `failed` being whether every one of
    them failed: a text action fails with its turn, and a call with its turn or by its own
    `is_error`."""
    return array("i", [action.turn << 1 | action.failed for action in actions])


# --- patterns of one run ---------------------------------------------------------------------

REPEAT = "repeat"
RETRY = "retry_after_error"
RERUN = "rerun_failed"
STUCK = "stuck"
ERRORS = "errors"
EDIT_UNREAD = "edit_unread"
EDIT_OUTSIDE = "edit_outside_task"
TESTED = "tests_after_last_edit"
STUCK_AT = 3
ERRORS_AT = 3


def patterns(actions: Sequence[Action], task: str = "") -> dict[str, int]:
    """Pattern -> the turn that shows it first. `uses:K` for each kind of action; `repeat` (the
    same action twice in a row), `retry_after_error` (repeated right after it failed),
    `rerun_failed` (issued again unchanged, later, after it had failed), `stuck` (one action
    issued 3 times or more), `errors` (3 or more failed actions before the last); and, where
    the log shows files and commands (coding work, `mine_files`): `edit_unread` (a file
    edited in place that the run had neither read nor written before), `edit_outside_task`
    (a file edited in place that the task does not name, when it names files), and
    `tests_after_last_edit` (tests run after the run's last edit)."""
    found: dict[str, int] = {}
    seen: Counter[str] = Counter()
    failed_before: set[str] = set()
    errors = 0
    previous: Action | None = None
    for index, action in enumerate(actions):
        if action.kind:
            # Interned: a build holds every run's patterns, and runs share most of them.
            found.setdefault(sys.intern(f"uses:{action.kind}"), action.turn)
        if previous is not None and action.signature == previous.signature:
            found.setdefault(REPEAT, action.turn)
            if previous.failed:
                found.setdefault(RETRY, action.turn)
        if action.signature in failed_before:
            found.setdefault(RERUN, action.turn)
        if action.failed:
            failed_before.add(action.signature)
        seen[action.signature] += 1
        if seen[action.signature] == STUCK_AT:
            found.setdefault(STUCK, action.turn)
        # The last action's result is left out: it often is the verdict ("Answer is INCORRECT").
        if action.failed and index < len(actions) - 1:
            errors += 1
            if errors == ERRORS_AT:
                found.setdefault(ERRORS, action.turn)
        previous = action
    found.update(file_patterns(actions, task))
    return found


def file_patterns(actions: Sequence[Action], task: str) -> dict[str, int]:
    """The coding patterns of `patterns`: what a run did to files and when it ran tests."""
    found: dict[str, int] = {}
    known: set[str] = set()
    written: set[str] = set()  # by the run itself: its own scratch files are in its scope
    names_files = bool(_FILE_NAME.search(task))
    last_edit: int | None = None
    for action in actions:
        work = action.files
        known.update(work.reads)
        if any(path not in known for path in work.edits):
            found.setdefault(EDIT_UNREAD, action.turn)
        outside = (p for p in work.edits if p not in written and not _named(p, task))
        if names_files and any(outside):
            found.setdefault(EDIT_OUTSIDE, action.turn)
        if work.edits or work.writes:
            last_edit = action.turn
            found.pop(TESTED, None)  # a test before this edit did not test it
        known.update(work.edits, work.writes)
        written.update(work.writes)
        if work.test and last_edit is not None and action.turn >= last_edit:
            found.setdefault(TESTED, action.turn)
    return found


def _named(path: str, task: str) -> bool:
    """Whether the task names the file at `path`: its name, or its module as a path or dotted
    (`utils/dateparse`, `utils.dateparse`)."""
    name = path.rsplit("/", 1)[-1]
    tail = "/".join(path.rsplit(".", 1)[0].split("/")[-2:])
    return name in task or tail in task or tail.replace("/", ".") in task


_FILE_NAME = re.compile(
    r"[\w.-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|java|rb|php|c|cc|cpp|h|hpp|cs|kt|swift|scala|ex|exs"
    r"|sh|toml|cfg|ini|yaml|yml|json)\b"
)
"""A file name in a task's text: a task that names none gives no scope to edit outside of."""


def describe(pattern: str) -> str:
    """A pattern in words, to follow "runs that"."""
    if pattern.startswith("uses:"):
        return f'called "{pattern[5:]}"'
    if pattern.startswith("order:"):
        first, second = pattern[6:].split("<", 1)
        return f'called "{first}" before "{second}"'
    return {
        REPEAT: "issued the same action twice in a row",
        RETRY: "repeated an action unchanged right after it failed",
        RERUN: "issued a failed action again unchanged later on",
        STUCK: f"issued one action {STUCK_AT} times or more",
        ERRORS: f"had {ERRORS_AT} or more actions fail (the last action aside)",
        EDIT_UNREAD: "edited a file they had not read",
        EDIT_OUTSIDE: "edited a file the task does not name",
        TESTED: "ran tests after their last edit",
    }[pattern]
