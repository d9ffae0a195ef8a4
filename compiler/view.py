"""What the compiler shows the model of a run, within a token budget, for runs of any length.

Each turn is shown as `turn STEP N` prints it, less what only repeats or only the provider
needs: per-turn and per-call metadata (kept in the raw layer), the task copied again into a
turn, and an action already written out in the turn's content. Then, in order, until the
prompt fits:

1. every turn whole;
2. every field longer than a cap cut in its middle (marked), the cap as large as fits;
3. the run's skeleton: turns that matter in full (the first, every turn with an error signal,
   the last ones), each other turn as one line (role, action, what came back);
4. the same, with the middle of the skeleton left out in ranges that say how many turns and
   which actions they held.

A quote may cite only what was shown: the quote checker reads these texts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wikitrace.corpus_schema import RunRecord, Turn
from wikitrace.tools.drilldown import format_turn, summarize

from .evidence import turn_fields
from .offline import has_error_signal

MIN_FIELD_CAP = 200
FOCUS_CAP = 1200
"""The most a field of a turn in focus keeps once the run is shown as a skeleton."""
LAST_TURNS = 8
MIN_SKELETON_LINES = 20
"""One-line turns kept at each end of a run's middle before turns in focus lose detail."""
MAX_ERROR_TURNS = 12
REPEATED_TASK = "[the TASK above, repeated here]"


@dataclass
class Entry:
    """One item of the prompt's turn list: a turn, or a range of turns left out."""

    text: str
    number: int | None = None
    gap: str | None = None
    """`a-b` for a range of turns left out."""


@dataclass
class View:
    entries: list[Entry]
    shown: list[str]
    """Each turn's text as shown ("" for one left out): what quotes are checked against."""
    mode: str
    """whole, cut, skeleton or elided."""
    whole_turns: int
    """Turns shown in full."""
    cap: int | None = None
    notes: list[str] = field(default_factory=list)


def view_fields(turn: Turn, task: str) -> dict[str, Any]:
    """The turn's fields less provider metadata and repeats."""
    fields = turn_fields(turn)
    fields.pop("metadata", None)
    for call in fields.get("tool_calls") or []:
        call.pop("metadata", None)
    content = fields.get("content")
    if isinstance(content, str):
        if len(task) >= 200 and task in content:
            fields["content"] = content.replace(task, REPEATED_TASK)
        action = fields.get("action")
        if isinstance(action, str) and action.strip() and action.strip() in content:
            fields.pop("action")  # the command is already written out in the content
    return fields


def skeleton_line(fields: dict[str, Any]) -> str:
    role, action, came_back = summarize(fields)
    line = f"[one line] {role or '-'}: {action or '-'}"
    return line + (f" => {came_back}" if came_back else "")


def focus_turns(record: RunRecord) -> list[int]:
    """The turns a skeleton keeps in full (0-based): the first, the last ones, and those
    with an error signal (the latest first when there are many)."""
    count = len(record.turns)
    errors = [i for i, turn in enumerate(record.turns) if has_error_signal(turn)]
    chosen = {0, *range(max(0, count - LAST_TURNS), count), *errors[-MAX_ERROR_TURNS:]}
    return sorted(chosen)


def _gap(first: int, last: int, fields: Sequence[dict[str, Any]]) -> Entry:
    actions: Counter[str] = Counter()
    for item in fields[first : last + 1]:
        _, action, _ = summarize(item)
        actions[(action or "-").split(" ", 1)[0][:30]] += 1
    common = ", ".join(f"{name} x{n}" for name, n in actions.most_common(6))
    span = f"{first + 1}-{last + 1}"
    return Entry(
        text=f"[{last - first + 1} turns not shown here; their first words: {common}]",
        gap=span,
    )


def fit_view(record: RunRecord, fits: Callable[[list[Entry], str], bool], max_field: int) -> View:
    """The fullest view of `record` for which `fits(entries, mode)` holds (a prompt in
    budget)."""
    fields = [view_fields(turn, record.task) for turn in record.turns]
    count = len(fields)

    def turns(cap: int | None) -> list[Entry]:
        return [Entry(format_turn(item, cap), number=i + 1) for i, item in enumerate(fields)]

    whole = turns(None)
    if fits(whole, "whole"):
        return View(whole, [e.text for e in whole], "whole", count)
    # 2: cut long fields; the largest cap that fits.
    low, high, best = MIN_FIELD_CAP, max(max_field - 1, MIN_FIELD_CAP), None
    while low <= high:
        middle = (low + high) // 2
        if fits(turns(middle), "cut"):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    if best is not None:
        entries = turns(best)
        kept = sum(a.text == b.text for a, b in zip(entries, whole, strict=True))
        return View(entries, [e.text for e in entries], "cut", kept, cap=best)
    # 3 and 4: the skeleton, its middle left out as far as needed.
    focus = focus_turns(record)
    lines = [skeleton_line(item) for item in fields]

    def skeleton(cap: int, keep: int | None, focus_set: set[int]) -> list[Entry]:
        """Focus turns at `cap`, `keep` skeleton lines on each side (None: all of them)."""
        entries: list[Entry] = []
        others = [i for i in range(count) if i not in focus_set]
        hidden = set() if keep is None else set(others[keep : max(keep, len(others) - keep)])
        start = None
        for i in range(count):
            if i in hidden:
                start = i if start is None else start
                continue
            if start is not None:
                entries.append(_gap(start, i - 1, fields))
                start = None
            if i in focus_set:
                entries.append(Entry(format_turn(fields[i], cap), number=i + 1))
            else:
                entries.append(Entry(lines[i], number=i + 1))
        if start is not None:
            entries.append(_gap(start, count - 1, fields))
        return entries

    focus_set = set(focus)
    chosen: list[Entry] | None = None
    mode = "skeleton"
    for cap in (FOCUS_CAP, 600, MIN_FIELD_CAP):
        if fits(entries := skeleton(cap, None, focus_set), "skeleton"):
            chosen = entries
            break
    while chosen is None:
        mode = "elided"
        fallback: list[Entry] | None = None
        for cap in (FOCUS_CAP, 600, MIN_FIELD_CAP):
            low, high, keep_best = 0, count, None
            while low <= high:
                middle = (low + high) // 2
                if fits(skeleton(cap, middle, focus_set), "elided"):
                    keep_best, low = middle, middle + 1
                else:
                    high = middle - 1
            if keep_best is None:
                continue
            entries = skeleton(cap, keep_best, focus_set)
            # Fuller turns in focus are worth more than more one-line turns, down to this.
            if keep_best >= MIN_SKELETON_LINES:
                chosen = entries
                break
            fallback = fallback or entries
        chosen = chosen or fallback
        if chosen is None and len(focus_set) > 2:  # even the turns in focus do not fit
            ordered = sorted(focus_set)
            focus_set = {0, *ordered[len(ordered) // 2 :]}
        elif chosen is None:
            break
    if chosen is None:
        raise ValueError("not even the run's first and last turns fit the prompt budget")
    shown = ["" for _ in range(count)]
    whole_turns = 0
    for entry in chosen:
        if entry.number is not None and entry.gap is None:
            shown[entry.number - 1] = entry.text
            whole_turns += entry.text == whole[entry.number - 1].text
    return View(chosen, shown, mode, whole_turns)
