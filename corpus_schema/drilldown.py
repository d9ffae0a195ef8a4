#!/usr/bin/env python3
"""Drill down from a lesson to the raw run behind it: `actions STEP`, `turn STEP N[-M]`.

Standalone: the Python standard library only, so a corpus mounted read-only in any sandbox
carries its own tools: CORPUS/tools/actions and CORPUS/tools/turn are this file, copied as is
(versions/finish.py). It is part of the format for that reason, and the one home of how a turn
reads as labelled lines (`format_turn`), which the compiler's prompts show too.
It reads the step's small index, and for `turn` only the bytes of the turns asked for.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing costs more to import than this whole tool: mypy only
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

CORPUS_ENV = "WIKITRACE_CORPUS"
READ_LOG_ENV = "WIKITRACE_READ_LOG"
"""A file the harness names, outside the corpus: each read is appended to it, one JSON line."""
EPISODE_ENV = "WIKITRACE_EPISODE"
"""The harness's id for the episode, written into each line of the read log."""
LAYOUT_FILE = os.path.join("tools", "layout.json")
ID_WIDTHS = (4, 9)
"""The digits a step id may have: corpus_schema.layout's MIN_ID_WIDTH and MAX_ID_WIDTH (this
file is standalone). A layout naming more is damaged: ids would be padded to any length."""
LAYOUT_NAMES = ("raw_dir", "index_file", "turns_file")
USAGE = {
    "actions": "usage: actions STEP [--corpus DIR]\n"
    "  One line per turn of a run: turn number, role, the action taken (every tool call of\n"
    "  the turn; each that failed marked [failed]), and the start of what came back (after\n"
    "  =>; for a failed call, the line that says what failed). STEP is step-0042 or 42.",
    "turn": "usage: turn STEP N[-M] [--lines A-B] [--grep WORDS] [--corpus DIR]\n"
    "  The full turn(s) N (to M) of a run, as logged: reasoning, action, observation.\n"
    "  STEP is step-0042 or 42; turns are numbered from 1. A long turn: --lines 40-80 shows\n"
    "  those lines of it (numbered), --grep WORDS the lines holding WORDS (any case) with\n"
    "  2 lines around each, numbered, to read on with --lines.",
}
COMMON = "  The corpus is --corpus DIR, else $WIKITRACE_CORPUS, else the corpus this tool sits in."


# --- a turn as text (what `turn` prints; the compiler's prompts show the same) ---------------

CUT_MARKER = (
    "[... wikitrace cut {count} characters here to fit the prompt; the raw turn has them all ...]"
)


def cut_middle(text: str, cap: int | None = None, keep: Sequence[str] = ()) -> str:
    """Keep the head and tail of a long text with a visible marker for what was left out, and
    each passage of `keep` found in it whole (the lines that say what failed: a cut never
    drops them)."""
    if cap is None or len(text) <= cap:
        return text
    half = max(cap // 2, 1)
    spans = [(0, half)]
    for passage in keep:
        start = text.find(passage) if passage else -1
        if start >= 0:
            spans.append((start, start + len(passage)))
    spans.append((len(text) - half, len(text)))
    spans.sort()
    pieces: list[str] = []
    end = 0
    for start, stop in spans:
        if start > end:
            pieces.append("\n" + CUT_MARKER.format(count=start - end) + "\n")
        if stop > end:
            pieces.append(text[max(start, end) : stop])
            end = stop
    return "".join(pieces)


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def format_turn(turn: dict[str, Any], cap: int | None = None, keep: Sequence[str] = ()) -> str:
    """A turn (a dict in the native format) as labelled lines; a cap cuts long fields' middles,
    keeping each passage of `keep` whole (cut_middle)."""
    lines: list[str] = []
    if turn.get("role"):
        lines.append("role: " + str(turn["role"]))
    for name in ("reasoning", "content", "action"):
        value = turn.get(name)
        if value:
            lines.append(name + ": " + cut_middle(as_text(value), cap, keep))
    for call in turn.get("tool_calls") or []:
        ident = " [" + str(call["id"]) + "]" if call.get("id") else ""
        arguments = call.get("arguments")
        shown = "" if arguments is None else cut_middle(as_text(arguments), cap, keep)
        lines.append("tool call" + ident + " " + str(call.get("name")) + ": " + shown)
        if call.get("result") is not None:
            result = cut_middle(as_text(call["result"]), cap, keep)
            lines.append("tool result" + ident + ": " + result)
        if call.get("metadata"):
            lines.append("tool call metadata: " + cut_middle(as_text(call["metadata"]), cap))
    if turn.get("observation"):
        lines.append("observation: " + cut_middle(as_text(turn["observation"]), cap, keep))
    if turn.get("metadata"):
        lines.append("metadata: " + cut_middle(as_text(turn["metadata"]), cap))
    return "\n".join(lines)


class DrillError(Exception):
    """A one-line error for the user; `code` is the exit status (2 usage, 1 not found)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --- finding things in a corpus ----------------------------------------------------------


def find_root(explicit: str | None = None, here: str | None = None) -> str:
    """The corpus root: --corpus, then $WIKITRACE_CORPUS, then the folder above this tool's
    (or its `corpus` folder: the tool as a script of an exported skill, copied)."""
    if explicit:
        candidates = [explicit]
    elif os.environ.get(CORPUS_ENV):
        candidates = [os.environ[CORPUS_ENV]]
    else:
        above = os.path.dirname(os.path.dirname(here or os.path.realpath(__file__)))
        candidates = [above, os.path.join(above, "corpus")]
    found = [c for c in candidates if os.path.isfile(os.path.join(c, LAYOUT_FILE))]
    root = os.path.realpath(found[0] if found else candidates[0])
    if not found:
        raise DrillError(
            "no wikitrace corpus at " + candidates[0] + " (no " + LAYOUT_FILE + "); "
            "pass --corpus DIR or set " + CORPUS_ENV,
        )
    return root


def load_layout(root: str) -> dict[str, Any]:
    path = _inside(root, os.path.join(root, LAYOUT_FILE))
    try:
        with open(path, encoding="utf-8") as handle:
            layout: dict[str, Any] = json.load(handle)
        width = layout["step_id_width"]
        if type(width) is not int or not ID_WIDTHS[0] <= width <= ID_WIDTHS[1]:
            raise ValueError(
                "step_id_width is not a whole number from "
                + str(ID_WIDTHS[0])
                + " to "
                + str(ID_WIDTHS[1])
            )
        for key in LAYOUT_NAMES:
            name = layout[key]
            if not isinstance(name, str) or not 0 < len(name) <= 255 or "\0" in name:
                raise ValueError(key + " is not a file name")
    except KeyError as error:
        raise DrillError(
            LAYOUT_FILE + " is damaged (no " + str(error) + "); run `wikitrace verify` on the "
            "corpus"
        ) from None
    except (ValueError, TypeError) as error:
        reason = str(error) if isinstance(error, ValueError) and len(str(error)) < 80 else ""
        raise DrillError(
            LAYOUT_FILE + " is damaged (" + (reason or type(error).__name__) + "); run "
            "`wikitrace verify` on the corpus"
        ) from None
    return layout


def parse_step(text: str, width: int) -> str:
    """`step-0042`, `step-42` or `42` -> `step-0042`; anything else is a usage error."""
    digits = text[5:] if text.startswith("step-") else text
    if not digits.isdigit() or not digits.isascii() or len(digits) > 9:
        raise DrillError("not a step: " + repr(text) + " (expected step-0042 or 42)", code=2)
    return "step-" + str(int(digits)).zfill(width)


def parse_range(text: str) -> tuple[int, int]:
    """`N` or `N-M` (1-based, N <= M) -> (N, M)."""
    first, dash, last = text.partition("-")
    last = last if dash else first
    for part in (first, last):
        if not part.isdigit() or not part.isascii() or len(part) > 9:
            raise DrillError(
                "not a turn number or range: " + repr(text) + " (expected N or N-M)", 2
            )
    start, end = int(first), int(last)
    if start < 1 or end < start:
        raise DrillError("bad turn range " + repr(text) + ": turns start at 1 and N <= M", code=2)
    return start, end


def _inside(root: str, path: str) -> str:
    real = os.path.realpath(path)
    if not real.startswith(root + os.sep):
        raise DrillError("refusing to read outside the corpus: " + path)
    return real


def step_files(root: str, step_text: str) -> tuple[str, str, str]:
    layout = load_layout(root)
    step = parse_step(step_text, int(layout["step_id_width"]))
    folder = os.path.join(root, layout["raw_dir"], step)
    index = os.path.join(folder, layout["index_file"])
    if not os.path.isfile(index):
        raise DrillError(step + " is not in this corpus (see " + layout["raw_dir"] + "/_index.md)")
    return step, _inside(root, index), _inside(root, os.path.join(folder, layout["turns_file"]))


def read_index(path: str, summaries: bool = False) -> dict[str, Any]:
    """The step's index: its first line (turns, offsets), and with summaries, every line.

    A damaged index is a one-line error, never a traceback: the manifest's hashes say more.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            index: dict[str, Any] = json.loads(handle.readline())
            turns, offsets = index["turns"], index["offsets"]
            if (
                not isinstance(turns, int)
                or not isinstance(offsets, list)
                or len(offsets) != turns + 1
                or not all(isinstance(o, int) for o in offsets)
                or offsets != sorted(offsets)
            ):
                raise ValueError("turns and offsets disagree")
            if summaries:
                # One parse for all lines: a JSON line holds no raw newline, so they join.
                rest = handle.read().rstrip("\n").replace("\n", ",")
                found = json.loads("[" + rest + "]")
                if len(found) != turns or not all(
                    isinstance(s, list) and len(s) == 3 and all(isinstance(p, str) for p in s)
                    for s in found
                ):
                    raise ValueError("summaries do not match the turns")
                index["summaries"] = found
    except (ValueError, KeyError, TypeError) as error:
        raise DrillError(
            "the index " + path + " is damaged (" + type(error).__name__ + "); run "
            "`wikitrace verify` on the corpus"
        ) from None
    return index


# --- the two commands --------------------------------------------------------------------


def actions_text(root: str, step_text: str) -> str:
    step, index_path, _ = step_files(root, step_text)
    index = read_index(index_path, summaries=True)
    width = len(str(index["turns"]))
    # The role column fits the run's longest role (sub:assistant), at least 9 wide.
    roles = max([9, *(len(role) for role, _, _ in index["summaries"])])
    lines = [step + ": " + str(index["turns"]) + " turns; `turn " + step + " N` shows one whole"]
    for number, (role, action, came_back) in enumerate(index["summaries"], start=1):
        line = str(number).rjust(width) + "  " + role.ljust(roles) + "  " + (action or "-")
        if came_back:
            line += "  => " + came_back
        lines.append(line)
    return "\n".join(lines)


GREP_CONTEXT = 2
"""Lines shown before and after each line `turn --grep` finds."""


def window(text: str, lines: str | None = None, grep: str | None = None) -> str:
    """The lines of one turn's text that `--lines A-B` or `--grep WORDS` ask for, each with its
    number (the text whole when neither is given)."""
    if lines is None and grep is None:
        return text
    all_lines = text.split("\n")
    total = len(all_lines)
    if lines is not None:
        start, end = parse_range(lines)
        chosen = list(range(start, min(end, total) + 1))
    else:
        assert grep is not None
        needle = grep.lower()
        hits = [n for n, line in enumerate(all_lines, start=1) if needle in line.lower()]
        near = {
            k
            for n in hits
            for k in range(n - GREP_CONTEXT, n + GREP_CONTEXT + 1)
            if 1 <= k <= total
        }
        chosen = sorted(near)
        if not hits:
            return "(no line holds " + repr(grep) + "; " + str(total) + " lines)"
    width = len(str(total))
    shown = []
    previous = 0
    for number in chosen:
        if previous and number > previous + 1:
            shown.append("...")
        shown.append(str(number).rjust(width) + "| " + all_lines[number - 1])
        previous = number
    if not shown:
        return "(the turn has " + str(total) + " lines)"
    return "\n".join(shown)


def turns_text(
    root: str,
    step_text: str,
    range_text: str,
    lines: str | None = None,
    grep: str | None = None,
) -> str:
    step, index_path, turns_path = step_files(root, step_text)
    start, end = parse_range(range_text)
    index = read_index(index_path)
    total = index["turns"]
    if end > total:
        raise DrillError(step + " has " + str(total) + " turns; there is no turn " + str(end))
    offsets = index["offsets"]
    with open(turns_path, "rb") as handle:
        handle.seek(offsets[start - 1])
        chunk = handle.read(offsets[end] - offsets[start - 1])
    blocks = []
    records = chunk.splitlines()
    for number, line in enumerate(records, start=start):
        header = "=== " + step + " turn " + str(number) + " of " + str(total) + " ==="
        try:
            turn = json.loads(line)
            if not isinstance(turn, dict):
                raise TypeError("not an object")
            text = format_turn(turn)
        except (ValueError, TypeError, AttributeError) as error:
            raise DrillError(
                step + " turn " + str(number) + " is damaged (" + type(error).__name__ + "); "
                "run `wikitrace verify` on the corpus"
            ) from None
        if lines is not None or grep is not None:
            header += " (" + str(text.count("\n") + 1) + " lines)"
        blocks.append(header + "\n" + window(text, lines, grep))
    if len(records) != end - start + 1:
        raise DrillError(step + ": the turns file does not match its index; run `wikitrace verify`")
    return "\n\n".join(blocks)


def run(command: str, argv: list[str], here: str | None = None) -> str:
    """Parse `argv` for `command` (actions or turn) and return the text to print."""
    positional: list[str] = []
    corpus: str | None = None
    options: dict[str, str] = {}
    takes = ("--corpus", "--lines", "--grep") if command == "turn" else ("--corpus",)
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            raise DrillError(USAGE[command] + "\n" + COMMON, code=0)
        name, _, given = arg.partition("=")
        if name in takes:
            if not given:
                if not args:
                    raise DrillError(name + " needs a value\n" + USAGE[command], code=2)
                given = args.pop(0)
            options[name] = given
        elif arg.startswith("-") and arg != "-":
            raise DrillError("unknown option " + repr(arg) + "\n" + USAGE[command], code=2)
        else:
            positional.append(arg)
    wanted = 1 if command == "actions" else 2
    if len(positional) != wanted:
        raise DrillError(USAGE[command], code=2)
    if "--lines" in options and "--grep" in options:
        raise DrillError("give --lines or --grep, not both\n" + USAGE[command], code=2)
    root = find_root(options.get("--corpus", corpus), here)
    if command == "actions":
        text = actions_text(root, positional[0])
    else:
        text = turns_text(
            root, positional[0], positional[1], options.get("--lines"), options.get("--grep")
        )
    log_read(root, command, positional, text)
    return text


def log_read(root: str, command: str, positional: list[str], text: str) -> None:
    """Append the read to $WIKITRACE_READ_LOG, when the harness names one: never inside the
    corpus, and never at the cost of the read itself (a log that cannot be written is said
    on stderr)."""
    path = os.environ.get(READ_LOG_ENV)
    if not path:
        return
    target = os.path.realpath(path)
    if target == root or target.startswith(root.rstrip(os.sep) + os.sep):
        sys.stderr.write(command + ": " + READ_LOG_ENV + " is inside the corpus; not logged\n")
        return
    import time

    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "episode": os.environ.get(EPISODE_ENV),
        "tool": command,
        "step": positional[0],
        "turns": positional[1] if len(positional) > 1 else None,
        "bytes": len(text.encode("utf-8")),
    }
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        # One write of one line with O_APPEND: lines of concurrent tools do not interleave.
        handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(handle, line)
        finally:
            os.close(handle)
    except OSError as error:
        sys.stderr.write(
            command + ": cannot write the read log " + path + ": " + str(error.strerror) + "\n"
        )


def main() -> int:
    name = os.path.basename(sys.argv[0])
    command = name if name in USAGE else None
    argv = sys.argv[1:]
    if command is None:  # run as drilldown.py: the command is the first argument
        if not argv or argv[0] not in USAGE:
            sys.stderr.write("usage: drilldown.py {actions|turn} ...\n")
            return 2
        command, argv = argv[0], argv[1:]
    try:
        sys.stdout.write(run(command, argv) + "\n")
    except DrillError as error:
        stream = sys.stdout if error.code == 0 else sys.stderr
        stream.write(("" if error.code == 0 else command + ": ") + str(error) + "\n")
        return error.code
    except BrokenPipeError:  # `actions 3 | head` is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as error:
        sys.stderr.write(
            command + ": cannot read " + str(error.filename) + ": " + str(error.strerror) + "\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
