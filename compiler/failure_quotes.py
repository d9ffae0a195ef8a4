"""Which lines of what a failed turn got back say what failed: the passages an offline
compilation quotes, and what a cut prompt keeps whole (compiler/signals.py decides *whether* a
turn failed; this module only picks the lines that show it).

A line is worth quoting, best first, when it is:

1. the exception a Python traceback ends with (`ValueError: ...`), the last one when several
   are chained;
2. a failing test named by its runner (pytest's `FAILED a.py::test_b - ...` and `E   assert`
   lines, unittest's `FAIL: test_x (...)`, go's `--- FAIL:`, jest's `●`, ExUnit's `1) test`,
   a Rust panic), or an exception named on its own line (`KeyError: 'a'`, Elixir's
   `** (FunctionClauseError) ...`);
3. a linter's or compiler's finding: a location (`lib/a.ex:57:13: ...`, `a.ts(3,5): error`),
   Credo's `┃ [F] ...`, `error[E0308]: ...`, `error: ...`; then the code an ExUnit test failed
   on (`code:`, `left:`, `right:`);
4. a line with an error word (`not found`, `denied`, `fatal`, `cannot`, ...) that is not a
   mere count (`Total errors: 2`);
5. else the last line of the output that is not a mark (`<returncode>1</returncode>`,
   `Exit code 1`, `</output>`).

The frames under a `stacktrace:` line say where, not what, and are never quoted. A location
line whose message is a bare code (Dialyzer's `a.ex:57:13:pattern_match`) is quoted
with the line after it. Every quote is a passage of the text as the turn renders it (escaped as
in JSON when the text sits inside a JSON value), so it is found again in the turn.
"""

from __future__ import annotations

import json
import re

QUOTE_LIMIT = 240
"""The longest quote of a failure (the line that shows it)."""
MAX_QUOTES = 2
"""Passages quoted of one failed turn: the telling line, and the next best one that names a
failure of its own (SECOND_SCORE)."""
SECOND_SCORE = 70
"""What a second line must score to be quoted too: a test, an exception or a finding (a line
with a mere error word may be a line of code the tool echoed)."""

_HEADER = re.compile(r"^[ \t]*Traceback \(most recent call last\):[ \t]*$", re.MULTILINE)
_FRAME = re.compile(
    r"[ \t]|File \"|During handling|The above exception|\^|~|\.\.\.|$|\+ Exception Group"
)
_RAISED = re.compile(r"(?:[A-Za-z_]\w{0,80}\.){0,10}[A-Za-z_]\w{0,80}(?::|[ \t]*$)")
"""How the line naming the exception a traceback ends with starts (`KeyError: 'a'`,
`django.core.exceptions.ImproperlyConfigured: ...`, `KeyboardInterrupt`)."""
_TEST = re.compile(
    r"^[ \t]{0,16}(?:"
    r"(?:FAILED|ERROR) \S{1,300}::\S"  # pytest
    r"|(?:FAIL|ERROR): \w+ \("  # unittest
    r"|--- FAIL: |FAIL\t"  # go
    r"|●[ \t]+\S"  # jest
    r"|\d{1,4}\) test\b"  # ExUnit
    r"|thread '[^'\n]{0,200}' panicked at"  # Rust
    r"|E {2,}\S"  # pytest's assertion lines
    r")"
)
_EXCEPTION = re.compile(
    r"^[ \t]{0,16}(?:(?:[A-Za-z_][\w]{0,60}\.){0,8}[A-Z]\w{0,60}"
    r"(?:Error|Exception|Exit|Interrupt|Failure|NotFound|DoesNotExist)\b(?::|$)"
    r"|\*\* \([\w.]{1,120}\) )"  # Elixir: "** (FunctionClauseError) no function clause ..."
)
_FAILED_CODE = re.compile(r"^[ \t]{0,16}(?:code|left|right): \S")
"""ExUnit's lines under a failing test: the code that failed, the two sides compared."""
_STACK = re.compile(r"^[ \t]*(?:stacktrace:|Stacktrace:|Backtrace:)[ \t]*$")
_FINDING = re.compile(
    r"^[ \t]{0,16}(?:"
    r"┃ \[\w\] "  # Credo
    r"|error(?:\[[A-Z]?\d+\])?: "  # rustc, gcc, git
    r"|[^\s:()]{1,200}\.[A-Za-z]\w{0,5}(?::\d+){1,2}:?(?:[ \t]|\w)"  # a.py:3: a.ex:57:13:x
    r"|[^\s:()]{1,200}\(\d+,\d+\): "  # tsc
    r"|\d+:\d+[ \t]+(?:error|warning)[ \t]"  # eslint
    r")"
)
_BARE_LOCATION = re.compile(r"[ \t]*\S+(?::\d+){1,2}:?\w{0,40}[ \t]*")
_ERROR_WORD = re.compile(
    r"(?i)\b(?:error|errors|fatal|fail|failed|failure|exception|denied|not found|no such|"
    r"cannot|can't|could not|unable|invalid|refused|rejected|missing|undefined|unknown|"
    r"unexpected|timed out|aborted|conflict|not permitted|permission|expected)\b"
)
_COUNT_ONLY = re.compile(
    r"(?i)^[\W\d_]*(?:(?:total|found|errors?|failures?|skipped|warnings?|"
    r"unnecessary|skips|passed|failed|tests?|in|and|of|seconds?)[\W\d_]*)+$"
)
_MARK_LINE = re.compile(
    r"(?i)^[ \t]*(?:</?returncode>\s*-?\d*\s*(?:</returncode>)?|</?output>|</?tool_use_error>|"
    r"(?:error: )?exit code:? -?\d+|process exited with code -?\d+|\.\.\.|-+|=+|_+)[ \t]*$"
)
_EXIT_LINE = re.compile(r"(?i)[ \t]*(?:error: )?exit code:? -?\d+[ \t]*")
_TAG = re.compile(r"^[ \t]*<(?:output|tool_use_error)>")
_CLOSING = re.compile(r"</(?:output|tool_use_error)>[ \t]*$")


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line of `text`."""
    spans = []
    start = 0
    for match in re.finditer(r"\n", text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return spans


def _traceback_ends(text: str, lines: list[tuple[int, int]]) -> list[int]:
    """The line numbers of the exceptions the tracebacks of `text` end with."""
    starts = {start: number for number, (start, _) in enumerate(lines)}
    found = []
    for header in _HEADER.finditer(text):
        number = starts.get(header.start())
        if number is None:
            continue
        first = raised = None  # a line of the program's own output may sit among the frames
        for after in range(number + 1, min(len(lines), number + 400)):
            start, end = lines[after]
            line = text[start:end]
            if _HEADER.match(line):
                break
            if not _FRAME.match(line) and line.strip():
                first = after if first is None else first
                if _RAISED.match(line):
                    raised = after
                    break
        end_line = raised if raised is not None else first
        if end_line is not None:
            found.append(end_line)
    return found


def _score(line: str) -> int:
    """How well a line says what failed (0: not at all)."""
    if _TEST.match(line):
        return 90
    if _EXCEPTION.match(line):
        return 80
    if _FINDING.match(line):
        return 70
    if _FAILED_CODE.match(line):
        return 60
    if _MARK_LINE.match(line) or not line.strip():
        return 0
    if _ERROR_WORD.search(line) and not _COUNT_ONLY.match(line):
        return 50
    return 0


def _span(text: str, lines: list[tuple[int, int]], number: int) -> tuple[int, int]:
    """The passage quoted for line `number`: the line, with the next one when it is a bare
    location (`a.ex:57:13:pattern_match`, whose message follows)."""
    start, end = lines[number]
    line = text[start:end]
    if _BARE_LOCATION.fullmatch(line):
        for after in range(number + 1, min(len(lines), number + 3)):
            if text[lines[after][0] : lines[after][1]].strip():
                return start, lines[after][1]
    tag = _TAG.match(line)
    close = _CLOSING.search(line)
    return (start + tag.end() if tag else start), (start + close.start() if close else end)


def _cut(text: str, start: int, end: int, in_json: bool) -> str:
    """text[start:end], stripped, at most QUOTE_LIMIT characters (from its start, or around its
    first error word when that lies further), as the turn renders it: so it is found verbatim
    in the turn's field, and a cut one keeps it whole (compiler/view.py)."""
    passage = text[start:end].strip()
    if len(passage) > QUOTE_LIMIT:
        word = _ERROR_WORD.search(passage)  # a long line: quoted around what it says
        at = 0 if word is None or word.end() <= QUOTE_LIMIT else word.start() - QUOTE_LIMIT // 2
        passage = passage[at : at + QUOTE_LIMIT].strip()
    return json.dumps(passage, ensure_ascii=False)[1:-1] if in_json else passage


def _pick(text: str) -> tuple[int, list[tuple[int, int]]]:
    """The score of the best line of `text` (0 when only the last line that is not a mark is
    left, -1 when not even that) and the spans to quote, best first."""
    lines = _lines(text)
    scored: dict[int, int] = {number: 100 for number in _traceback_ends(text, lines)}
    stack = -1  # the indent of the stack trace being read: its frames say where, not what
    for number, (start, end) in enumerate(lines):
        line = text[start:end]
        indent = len(line) - len(line.lstrip())
        if stack >= 0 and line.strip() and indent > stack:
            continue
        stack = indent if _STACK.match(line) else -1
        if number not in scored and end > start:
            score = _score(text[start:end])
            if score:
                scored[number] = score
    # The best first; among equals the first, but the last traceback (chained: the one raised).
    order = sorted(scored, key=lambda n: (-scored[n], -n if scored[n] == 100 else n))
    chosen: list[tuple[int, int]] = []
    for number in order:
        span = _span(text, lines, number)
        if any(span[0] < end and start < span[1] for start, end in chosen):
            continue
        if chosen and scored[number] < SECOND_SCORE:
            break
        chosen.append(span)
        if len(chosen) == MAX_QUOTES:
            break
    if chosen:
        return scored[order[0]], chosen
    for number in range(len(lines) - 1, -1, -1):  # nothing tells: the last line not a mark
        line = text[lines[number][0] : lines[number][1]]
        if line.strip() and not _MARK_LINE.match(line):
            start, end = _span(text, lines, number)
            before = text[lines[number - 1][0] : lines[number - 1][1]] if number else ""
            if _EXIT_LINE.fullmatch(before):  # `Exit code 2` just above: quoted with it
                start = lines[number - 1][0]
            return 0, [(start, end)]
    return -1, []


def failure_quotes(text: str, in_json: bool = False) -> list[str]:
    """The passages of `text` (what a failed call or turn got back) that say what failed, best
    first, at most MAX_QUOTES: see the module's docstring. Empty when nothing but marks is
    there."""
    _, spans = _pick(text)
    quotes = [_cut(text, start, end, in_json) for start, end in spans]
    return [quote for quote in dict.fromkeys(quotes) if quote]


def best_quotes(texts: list[tuple[str, bool]]) -> list[str]:
    """failure_quotes of the text among `texts` (each with whether it sits inside JSON) whose
    best line says most; the first on a tie."""
    best: tuple[int, str, bool] | None = None
    for text, in_json in texts:
        score, _ = _pick(text)
        if score >= 0 and (best is None or score > best[0]):
            best = (score, text, in_json)
    return failure_quotes(best[1], best[2]) if best is not None else []
