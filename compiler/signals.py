"""When a turn of a run went wrong: the one rule the prompt's view, the offline compilation and
mining read.

A turn failed when, in this order:

1. the log marks it: a tool call (or the turn) with `is_error: true`, or a non-zero exit code in
   a structured result (`exit_code`, `exitCode`, `returncode` in the call's metadata, in Claude
   Code's `tool_use_result`, or in the result itself as Codex writes it);
2. what came back says so in a tool's own words: a Python traceback, a test runner's summary
   that counts failures (pytest, unittest, cargo, go, jest, mocha, ExUnit) or its `FAILED` lines,
   git or a commit hook refusing (`fatal: ...`, a rejected push, a failed pre-commit check), a
   non-zero `<returncode>` or `Exit code N`, or a tool's reply that starts with an error
   (`Error: ...`); these are read at the start of a line, so a file shown with line numbers
   (`12→FAILED = "failed"`) or a count of none (`0 failed`) is no failure;
3. only in a log that marks nothing itself (no tool call with its result, no `is_error`, no exit
   code: free-text observations such as ALFWorld's), an error word anywhere in what came back
   (`error`, `failed`, `cannot`, `nothing happens`, ...).

What came back is the turn's observation, its calls' results, and its content when the turn is
a tool's; what the agent wrote (its text, commands, the files it wrote) is never read.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from wikitrace.corpus_schema import ToolCall, Turn
from wikitrace.corpus_schema.drilldown import as_text
from wikitrace.corpus_schema.turns import TURN_FAILED

from .failure_quotes import QUOTE_LIMIT, best_quotes

_EXIT_KEYS = ("exit_code", "exitCode", "exitCodeV2", "returncode", "return_code")
_OBSERVATION_ROLES = {"tool", "function", "ipython", "environment", "observation", "env"}

# Each alternative is read at the start of a line (spaces aside), so text quoted inside a file
# listing, a grep hit or a sentence is not read as a tool's verdict. Every repeat is bounded:
# the text is a log's, and an unbounded `.*` between two parts is quadratic on a long line.
_TOOL_SAYS_FAILED_SOURCE = (
    r"^[ \t]{0,16}(?:"
    r"(?P<traceback>Traceback \(most recent call last\):)"
    r"|(?P<tests>"
    r"=+ [^\n]{0,120}?\b[1-9]\d* (?:failed|errors?)\b"  # pytest: "=== 1 failed in 0.1s ==="
    r"|[1-9]\d* failed(?:, \d+ \w+)* in [\d.]+m?s\b"  # pytest -q: "1 failed, 2 passed in 0.12s"
    r"|(?:FAILED|ERROR) \S{1,300}::\S"  # pytest: "FAILED tests/test_a.py::test_b - assert ..."
    r"|FAILED \((?:failures|errors)=[1-9]"  # unittest
    r"|test result: FAILED\b"  # cargo test
    r"|Tests?:[ \t]{1,16}[1-9]\d* failed"  # jest, vitest
    r"|\d+ \w+(?:, \d+ \w+)*, [1-9]\d* failures?\b"  # ExUnit: "31 tests, 1 failure"
    r"|--- FAIL: |FAIL\t"  # go test
    r"|[1-9]\d* failing[ \t]*$"  # mocha
    r")"
    r"|(?P<refused>"
    r"fatal: "  # git
    r"|error: failed to push some refs"
    r"|! \[(?:remote )?rejected\]"  # a push refused, by the remote or its hook
    r"|husky - [^\n]{0,120}?\bexited with code [1-9]"
    r"|- exit code: [1-9]"  # the pre-commit framework, under a hook that "Failed"
    r"|[^\n.]{1,120}\.{4,100}Failed[ \t]*$"
    r"|(?i:pre-commit\b[^\n]{0,120}?\b(?:failed|rejected)\b)"
    r")"
    r"|(?P<exit>(?i:exit code|process exited with code):? -?[1-9]\d*[ \t]*$)"
    r"|(?P<error>"
    r"error\[E\d+\]|error: could not compile"  # rustc, cargo
    r"|make(?:\[\d+\])?: \*\*\* [^\n]{0,200}?Error [1-9]"
    r"|npm ERR! "
    r"|[A-Z]\w{0,60}(?:Error|Exception): "  # "ValueError: ...", "TypeError: ..."
    r"|[^\n]{0,200}?: command not found[ \t]*$"
    r")"
    r")"
)
_TOOL_SAYS_FAILED = re.compile(_TOOL_SAYS_FAILED_SOURCE, re.MULTILINE)
_ANYWHERE_IN_LINE = (
    r"|[^\n.]{1,120}\.{4,100}Failed[ \t]*$",
    r"|[^\n]{0,200}?: command not found[ \t]*$",
)
"""The two alternatives that may start with any character: each tried at a line's start reads
up to 200 characters of it, so they are left out (`_TOOL_SAYS_FAILED_IN_SHORT`) on a line
that holds neither `....` nor `: command not found`, the text each needs."""
_TOOL_SAYS_FAILED_IN_SHORT = re.compile(
    _TOOL_SAYS_FAILED_SOURCE.replace(_ANYWHERE_IN_LINE[0], "").replace(_ANYWHERE_IN_LINE[1], ""),
    re.MULTILINE,
)
_WORTH_READING = (
    "fail",
    "fatal",
    "rejected",
    "exit code",
    "exited with code",
    "error",
    "exception",
    "traceback",
    "err!",
    "not found",
)
"""A word every alternative above holds, in lower case: only the lines that hold one are read."""
_RETURNCODE = re.compile(r"<returncode>\s*-?[1-9]")
# A tool's reply that opens with its verdict ("Error: payment amount does not add up").
_STARTS_WITH_ERROR = re.compile(
    r"\A[\s<\[*]*(?:error|exception|fatal|failed|failure)\b", re.IGNORECASE
)
_MARK = '"is_error":true'
"""The mark as the turn's metadata renders it: the quote of a failed call that returned nothing."""
_ONLY_EXIT_CODE = re.compile(r"(?i)(?:error: )?exit code:? -?\d+")
_TOOL_SAYS = {
    "traceback": "a Python traceback came back",
    "tests": "tests failed",
    "refused": "git or a commit hook refused",
    "exit": "a command exited with an error code",
    "error": "a tool reported an error",
}

_ERROR_WORDS = (
    r"\b(error|exception|traceback|failed|failure|not found|invalid|denied|forbidden|"
    r"cannot|can't|unable to|no such file|command not found|timed out|timeout|"
    r"nothing happens)\b|<returncode>\s*[1-9]"
)
_ERROR_SIGNAL = re.compile("(?i)" + _ERROR_WORDS)
_ERROR_SIGNAL_LOWER = re.compile(_ERROR_WORDS)


def _tool_says_failed(text: str) -> re.Match[str] | None:
    """The first line of `text` where a tool says it failed (step 2). Only lines that hold a
    word of _WORTH_READING are matched (this runs on every result of every run): the lines
    are found by `str.find`, a word at a time, the pattern tried at each of their starts in
    order, without the two alternatives that read a whole line where it lacks their text."""
    lower = text.lower() if text.isascii() else text.casefold()
    if len(lower) != len(text):  # casefold changed lengths: positions would not match
        return _TOOL_SAYS_FAILED.search(text)
    starts: set[int] = set()
    for word in _WORTH_READING:
        at = lower.find(word)
        while at != -1:
            starts.add(text.rfind("\n", 0, at) + 1)
            end = text.find("\n", at)
            at = -1 if end == -1 else lower.find(word, end)  # the next line that holds it
    for line in sorted(starts):
        end = text.find("\n", line)
        whole = text[line:] if end == -1 else text[line:end]
        pattern = (
            _TOOL_SAYS_FAILED
            if "...." in whole or ": command not found" in whole
            else _TOOL_SAYS_FAILED_IN_SHORT
        )
        match = pattern.match(text, line)
        if match is not None:
            return match
    return None


def error_signal(text: str) -> re.Match[str] | None:
    """The first error word of `text` (step 3 of the rule, case ignored). ASCII text is searched
    in lower case, at the same positions: about twice as fast as ignoring case (every
    observation of every run is searched, by the offline compiler and by mining)."""
    if text.isascii():
        return _ERROR_SIGNAL_LOWER.search(text.lower())
    return _ERROR_SIGNAL.search(text)


@dataclass(frozen=True)
class Failure:
    """Why a turn counts as failed, and the passages of the turn that show it."""

    why: str
    """What the log shows, in a few words ("the log marks a tool call failed")."""
    quotes: tuple[str, ...]
    """Passages of the turn as `turn STEP N` renders it (whitespace aside), the telling one
    first: what failed (compiler/failure_quotes.py), then the command when the turn shows it."""
    marked: bool
    """True when the log's structure says so (steps 1 and 2), False for an error word (3)."""

    @property
    def quote(self) -> str:
        """The passage that says most of what failed."""
        return self.quotes[0]


def _exit_code(value: Any) -> tuple[str, int] | None:
    """A non-zero exit code a mapping records (or its `metadata`, as Codex nests it), or a
    JSON object logged as text (parsed only when it names an exit code)."""
    if isinstance(value, str):
        if not (value.startswith("{") and _has_exit_key(value)):
            return None
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    for key in _EXIT_KEYS:
        code = value.get(key)
        if isinstance(code, int) and not isinstance(code, bool):
            return (key, code) if code != 0 else None
    nested = value.get("metadata")
    return _exit_code(nested) if isinstance(nested, dict) else None


def _has_exit_key(value: Any) -> bool:
    """Whether `value` (a mapping, or JSON text) names an exit code, at its top or in its
    `metadata`."""
    if isinstance(value, str) and value.startswith("{"):
        return any(f'"{key}"' in value for key in _EXIT_KEYS)
    if not isinstance(value, dict):
        return False
    nested = value.get("metadata")
    return any(key in value for key in _EXIT_KEYS) or (
        isinstance(nested, dict) and any(key in nested for key in _EXIT_KEYS)
    )


def marks_failures(turns: Sequence[Turn]) -> bool:
    """Whether the log records how its tool calls ended, so that error words in what came back
    are not read as failures: some tool call has its result (a tool's reply of its own, whose
    start and exit code say how it went), or some call or turn carries `is_error`, a status or
    an exit code, or an observation prints its `<returncode>` (mini-swe-agent)."""
    for turn in turns:
        if "is_error" in turn.metadata or _has_exit_key(turn.metadata):
            return True
        for call in turn.tool_calls or []:
            meta = call.metadata
            if call.result is not None or "is_error" in meta or "status" in meta:
                return True
            if _has_exit_key(meta) or _has_exit_key(meta.get("tool_use_result")):
                return True
        if turn.observation and "<returncode>" in turn.observation:
            return True
    return False


def _texts(value: Any) -> Iterator[tuple[str, bool]]:
    """The texts in a logged value, each with whether it sits inside JSON (a result logged as
    a list or mapping is rendered as JSON, its strings escaped)."""
    if isinstance(value, str):
        yield value, False
        return
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item, True
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _came_back(turn: Turn) -> Iterator[tuple[str, bool]]:
    """What came back in the turn: its observation, its calls' results, a tool turn's content."""
    if turn.observation:
        yield turn.observation, False
    for call in turn.tool_calls or []:
        if call.result is not None:
            yield from _texts(call.result)
    if turn.content and (turn.role or "").lower() in _OBSERVATION_ROLES:
        yield turn.content, False


def excerpt(text: str, start: int, end: int, in_json: bool = False) -> str:
    """The line holding text[start:end], cut to QUOTE_LIMIT characters around it, as the turn
    renders it."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    if line_end - line_start > QUOTE_LIMIT:
        line_start = max(line_start, start - QUOTE_LIMIT // 2)
        line_end = min(line_end, line_start + QUOTE_LIMIT)
    line = text[line_start:line_end].strip()
    return json.dumps(line, ensure_ascii=False)[1:-1] if in_json else line


_COMMAND_KEYS = ("command", "cmd", "script")
_SEARCHES = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep"})
_SEGMENT = re.compile(r"&&|\|\||[;|\n]")
_CODE = re.compile(r"(?i)(?:<returncode>\s*|exit code:? |exited with code )(-?\d+)")


def _command(call: ToolCall | None, turn: Turn) -> tuple[str, str] | None:
    """The command a call (or, with none, the turn's text action) ran, and its passage as the
    turn renders it: `"command":"..."` inside the call's arguments, or the action's first line."""
    if call is not None:
        arguments = call.arguments
        if isinstance(arguments, str) and arguments.startswith("{"):
            try:  # arguments logged as JSON text: quoted from it as it is
                parsed = json.loads(arguments)
            except ValueError:
                parsed = None
            found = _command(call.model_copy(update={"arguments": parsed}), turn)
            if isinstance(parsed, dict) and found is not None and found[1] in arguments:
                return found
        if isinstance(arguments, dict):
            for key in _COMMAND_KEYS:
                value = arguments.get(key)
                if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                    value = " ".join(value) if value[:2] != ["bash", "-lc"] else value[-1]
                    shown = f'"{key}":' + as_text(arguments[key])
                    return value, shown[:QUOTE_LIMIT]
                if isinstance(value, str) and value.strip():
                    shown = f'"{key}":' + json.dumps(value, ensure_ascii=False)
                    return value, shown[:QUOTE_LIMIT]
        elif isinstance(arguments, str) and arguments.strip():
            return arguments, arguments.strip().split("\n", 1)[0][:QUOTE_LIMIT]
        return None
    if turn.action and turn.action.strip():
        return turn.action, turn.action.strip().split("\n", 1)[0][:QUOTE_LIMIT]
    return None


def _found_nothing(command: str | None, code: int | None, output: str) -> bool:
    """A search that found nothing: grep (rg, ag, ...) as the command's last step, exit code 1,
    and no line that says more (`grep: a.txt: No such file` exits 2)."""
    if code != 1 or not command:
        return False
    last = [part for part in _SEGMENT.split(command) if part.strip()]
    words = last[-1].split() if last else []
    while words and "=" in words[0]:  # LC_ALL=C grep ...
        words.pop(0)
    verb = words[1] if words[:1] == ["git"] and len(words) > 1 else (words[0] if words else "")
    if verb.rsplit("/", 1)[-1] not in _SEARCHES:
        return False
    return not any(
        line.strip() and not _ONLY_MARKS.fullmatch(line.strip()) for line in output.splitlines()
    )


_ONLY_MARKS = re.compile(
    r"(?i)</?returncode>\s*-?\d*\s*(?:</returncode>)?|</?output>|(?:error: )?exit code:? -?\d+"
)


def _quotes(value: Any, command: tuple[str, str] | None, fallback: str) -> tuple[str, ...]:
    """What failed, quoted from a call's result or a turn's text (the text whose lines say
    most: compiler/failure_quotes.py), then the command that ran when it failed by its code."""
    quotes = best_quotes(list(_texts(value))) if value is not None else []
    if isinstance(value, str) and value.startswith(("{", "[")):
        try:  # JSON logged as text (Codex): quoted from its values, where found as they are
            inner = best_quotes(list(_texts(json.loads(value))))
        except ValueError:
            inner = []
        if inner and all(quote in value for quote in inner):
            quotes = inner
    if command is not None:
        quotes.append(command[1])
    return tuple(dict.fromkeys(quotes)) or (fallback,)


def _printed(value: Any) -> str:
    """The text a call's result holds, its JSON (logged as text or not) read for its strings."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            return value
        value = parsed
    return "\n".join(text for text, _ in _texts(value)) if value is not None else ""


def _code_in(text: str) -> int | None:
    found = _CODE.search(text)
    return int(found.group(1)) if found else None


def turn_failure(turn: Turn, *, keywords: bool) -> Failure | None:
    """Why `turn` failed by the rule above, or None. `keywords`: whether error words count
    (step 3): `not marks_failures(the run's turns)`."""
    calls = turn.tool_calls or []
    for call in calls:
        if call.metadata.get("is_error") is True:
            text = _printed(call.result)
            command = _command(call, turn)
            if _found_nothing(command and command[0], _code_in(text[:200]), text):
                continue
            ran = command if _ONLY_EXIT_CODE.match(text.strip()) else None
            return Failure(
                "the log marks a tool call failed", _quotes(call.result, ran, _MARK), True
            )
    if turn.metadata.get("is_error") is True:
        quotes = _quotes(turn.content or turn.observation or "", None, _MARK)
        return Failure("the log marks the turn failed", quotes, True)
    for call in calls:
        for source in (call.metadata, call.metadata.get("tool_use_result"), call.result):
            found = _exit_code(source)
            if found is not None:
                key, code = found
                command = _command(call, turn)
                if _found_nothing(command and command[0], code, _printed(call.result)):
                    break
                why = f"a command exited with code {code}"
                return Failure(why, _quotes(call.result, command, f'"{key}":{code}'), True)
    texts = list(_came_back(turn))
    for text, in_json in texts:
        match = _tool_says_failed(text) or _RETURNCODE.search(text)
        if match is not None:
            why = _TOOL_SAYS[match.lastgroup or "exit"]
            command = _command(calls[0] if len(calls) == 1 else None, turn)
            said = _code_in(text[match.start() : match.start() + 60])
            if why == _TOOL_SAYS["exit"] and _found_nothing(command and command[0], said, text):
                continue
            if why == _TOOL_SAYS["exit"] and said is not None:
                why = f"a command exited with code {said}"
            found_quotes = best_quotes([(text, in_json)])
            found_quotes += [command[1]] if command else []
            return Failure(why, tuple(dict.fromkeys(found_quotes)), True)
        if not in_json and _STARTS_WITH_ERROR.match(text):
            return Failure("the reply is an error", _quotes(text, None, text[:QUOTE_LIMIT]), True)
    if keywords:
        for text, in_json in texts:
            match = error_signal(text)
            if match is not None:
                return Failure(
                    "what came back has an error word",
                    (excerpt(text, match.start(), match.end(), in_json),),
                    False,
                )
    return None


_RECENT_RUNS = 128
"""Runs whose failures are kept (`failures`): a build reads a run's four times (its raw
layer's index, mining, the prompt's view or the offline compilation), and a model build
reads up to --concurrency runs ahead of the prompts it renders (64 by default)."""
_RECENT_TURNS = 16_384
"""At most this many turns kept with them: the runs it keeps alive are a bounded memory."""
_recent: OrderedDict[int, tuple[Sequence[Turn], dict[int, Failure], bool]] = OrderedDict()
"""id(turns) -> (those turns, their failures, whether error words counted), the latest last;
the turns are kept so that an id is never taken for another run's once the first is gone."""
_recent_turns = 0
_recent_lock = threading.Lock()


def failures(turns: Sequence[Turn]) -> dict[int, Failure]:
    """The failed turns of a run (1-based number -> why), by `turn_failure`; found once for
    each of the last _RECENT_RUNS runs (the same list of turns) it was asked about."""
    return dict(_failures(turns)[0])


def _failures(turns: Sequence[Turn]) -> tuple[dict[int, Failure], bool]:
    """`failures` as kept (not to be changed), and whether error words counted in them
    (`not marks_failures(turns)`)."""
    with _recent_lock:
        known = _recent.get(id(turns))
        if known is not None and known[0] is turns:
            _recent.move_to_end(id(turns))
            return known[1], known[2]
    keywords = not marks_failures(turns)
    found = {}
    for number, turn in enumerate(turns, start=1):
        failure = turn_failure(turn, keywords=keywords)
        if failure is not None:
            found[number] = failure
    with _recent_lock:
        global _recent_turns
        if id(turns) in _recent:  # found by two threads at once
            _recent_turns -= len(_recent.pop(id(turns))[0])
        _recent[id(turns)] = (turns, found, keywords)
        _recent_turns += len(turns)
        while len(_recent) > _RECENT_RUNS or (_recent_turns > _RECENT_TURNS and len(_recent) > 1):
            _recent_turns -= len(_recent.popitem(last=False)[1][0])
    return found, keywords


def failed_calls(turns: Sequence[Turn]) -> list[dict[int, str]]:
    """Per turn, what failed in it, as its one line shows it (corpus_schema.turns.summarize):
    each call that failed by `turn_failure`'s rule, by its index, with the passage that shows
    it; TURN_FAILED when the turn failed but none of its calls alone did. Empty for a turn that
    did not fail."""
    failed, keywords = _failures(turns)
    found: list[dict[int, str]] = []
    for number, turn in enumerate(turns, start=1):
        failure = failed.get(number)
        marks: dict[int, str] = {}
        calls = turn.tool_calls or []
        if failure is not None and len(calls) == 1:
            marks[0] = failure.quote
        elif failure is not None and calls:
            for index, call in enumerate(calls):
                alone = turn.model_copy(
                    update={"tool_calls": [call], "observation": None, "metadata": {}}
                )
                one = turn_failure(alone, keywords=keywords)
                if one is not None:
                    marks[index] = one.quote
        if failure is not None and not marks:
            marks[TURN_FAILED] = failure.quote
        found.append(marks)
    return found
