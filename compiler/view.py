"""What the compiler shows the model of a run, within a token budget, for runs of any length.

Each turn is shown as `turn STEP N` prints it, less what only repeats or only the provider
needs: per-turn and per-call metadata (kept in the raw layer), the task copied again into a
turn, and an action already written out in the turn's content. A sub-agent's turn starts with a
line naming it (`[sub-agent Explore]`): its "user" turn is the main agent's request, not the
user's, and its report is not the main agent's; a compaction summary starts with
`[compaction summary]`. Then, in order, until the prompt fits:

1. every turn whole;
2. every field longer than a cap cut in its middle (marked), the cap as large as fits and at
   least FOCUS_CAP (below that, the turns that matter are worth more than every turn's start);
   a failed turn (compiler/signals.py) and the one before it keep FAILED_CAP_FACTOR times as
   much;
3. the run's skeleton: every turn as one line (role, the start of the agent's text, of its
   action and of what came back; each call that failed marked, with the line that says what
   failed), and, as far as the budget goes, turns in full:
   a. the turns that matter, long fields cut to the largest of SKELETON_CAPS (FOCUS_CAP, then
      600) at which they all fit, else as many as fit at FOCUS_CAP, in this order: the first,
      compaction summaries, each failed turn (compiler/signals.py) and the one before it (the
      latest first), and the last LAST_TURNS;
   b. the same turns whole, in the same order, then the other turns whole, back from the last;
      a turn longer than 1/TURN_SHARE of the budget is shown with its long fields cut in the
      middle (marked), as long as they fit;
4. when not even every turn as one line fits: the turns that matter, and the one-line turns
   around them, the middle of the rest left out in ranges that say how many turns and which
   actions they held.

No cut drops the passages that say what failed in a turn (compiler/failure_quotes.py: the
exception, the failing test, the linter's finding, the command): they are kept whole between
the head and tail of the field they are in. A quote may cite only what was shown: the quote
checker reads these texts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from wikitrace.corpus_schema import RunRecord, Turn
from wikitrace.corpus_schema.drilldown import as_text, format_turn
from wikitrace.corpus_schema.turns import ACTING_ROLES, ONE_LINE_MARK, preview, summarize

from .evidence import turn_fields
from .signals import Failure, failed_calls, failures

MIN_FIELD_CAP = 200
"""The least a field of a turn in focus keeps when ranges of the run are left out (step 4)."""
FOCUS_CAP = 1200
"""What a field of a turn that matters keeps before the budget goes to showing it whole."""
SKELETON_CAPS = (FOCUS_CAP, 600)
"""The caps tried for the turns that matter in the skeleton (step 3a); when not all fit at
the smallest, as many as fit at the largest, the others one line each."""
FAILED_CAP_FACTOR = 4
"""When long fields are cut (step 2), a failed turn and the one before it keep this many times
as much."""
FULLER_CAPS = (4800, 2400)
"""Caps tried for a turn too long to show whole, before FOCUS_CAP."""
TURN_SHARE = 4
"""No turn is shown whole if it takes more than 1/TURN_SHARE of the budget."""
LAST_TURNS = 8
MIN_SKELETON_LINES = 20
"""One-line turns kept at each end of a run's middle before turns in focus lose detail."""
MAX_ERROR_TURNS = 12
"""Failed turns kept in focus when not even every turn as one line fits."""
REPEATED_TASK = "[the TASK above, repeated here]"
SUMMARY_MARK = "[compaction summary]"


@dataclass
class Entry:
    """One item of the prompt's turn list: a turn, or a range of turns left out."""

    text: str
    number: int | None = None
    gap: str | None = None
    """`a-b` for a range of turns left out."""
    marked: bool = False
    """The text starts with a mark of ours, not the log's (see turn_mark)."""


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


@dataclass
class Budget:
    """What fit_view asks of the prompt it fills."""

    tokens: int
    """The most tokens the prompt may have."""
    fits: Callable[[list[Entry], str], bool]
    """Whether the prompt with these entries (in this mode) is within `tokens`."""
    used: Callable[[list[Entry], str], int]
    """The tokens of the prompt with these entries: a count, so asked only a few times."""
    count: Callable[[str], int]
    """The tokens of a text."""


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


def turn_mark(turn: Turn) -> str:
    """What the prompt says a turn is, beyond its role: `[sub-agent NAME]` for a sub-agent's
    (`metadata.subagent`: its type, else its id), SUMMARY_MARK for a compaction summary, ""
    for any other."""
    subagent = turn.metadata.get("subagent")
    if not subagent:
        return SUMMARY_MARK if is_compaction_summary(turn) else ""
    name = subagent if isinstance(subagent, str) else None
    if isinstance(subagent, dict):
        name = next(
            (
                str(subagent[key])
                for key in ("type", "agent_type", "name", "id")
                if isinstance(subagent.get(key), str | int) and str(subagent[key]).strip()
            ),
            None,
        )
    name = " ".join((name or "").split())[:40]  # the log's text: one short line
    return f"[sub-agent {name}]" if name else "[sub-agent]"


def is_compaction_summary(turn: Turn) -> bool:
    """A summary of the conversation so far that the client wrote in place of it (Claude
    Code's `isCompactSummary`)."""
    return turn.metadata.get("isCompactSummary") is True


def skeleton_line(
    fields: dict[str, Any], mark: str = "", failed: dict[int, str] | None = None
) -> str:
    """The turn as one line: role, the start of the agent's text beside its action ("|"), and
    what came back ("=>"); each call that failed marked, with what shows it (`failed`:
    signals.failed_calls)."""
    role, action, came_back = summarize(fields, failed)
    said = preview(as_text(fields.get("content") or ""))
    acting = role.lower() in ACTING_ROLES
    if acting and said and (fields.get("action") or fields.get("tool_calls")):
        action = f"{said} | {action or '-'}"
    line = f"{ONE_LINE_MARK}{mark + ' ' if mark else ''}{role or '-'}: {action or '-'}"
    return line + (f" => {came_back}" if came_back else "")


def focus_turns(
    record: RunRecord, failed: Sequence[int], max_errors: int | None = None
) -> list[int]:
    """The turns that matter (0-based), in the order they are worth showing: the first;
    compaction summaries (what the client kept of the turns before); each failed turn
    (`failed`, 1-based) and the one before it, the latest first (at most `max_errors` of
    them); the last LAST_TURNS, back from the last."""
    count = len(record.turns)
    latest = sorted(failed, reverse=True)[:max_errors]
    order = [0]
    order += [i for i, turn in enumerate(record.turns) if is_compaction_summary(turn)]
    for number in latest:
        order += [number - 1, number - 2]
    order += range(count - 1, max(-1, count - 1 - LAST_TURNS), -1)
    return list(dict.fromkeys(i for i in order if 0 <= i < count))


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


class _Turns:
    """The texts a turn can be shown as: whole, cut at a cap, or one line. What only a run too
    long to show whole needs (its failures, one lines, passages a cut keeps) is worked out
    when first asked for: most runs are shown whole."""

    def __init__(self, record: RunRecord) -> None:
        self.turns = record.turns
        self.fields = [view_fields(turn, record.task) for turn in record.turns]
        self.marks = [turn_mark(turn) for turn in record.turns]
        self._texts: dict[tuple[int, int | None], str] = {}

    @cached_property
    def _failed_calls(self) -> list[dict[int, str]]:
        return failed_calls(self.turns)

    @cached_property
    def lines(self) -> list[str]:
        """Each turn as one line."""
        return [
            skeleton_line(f, m, x)
            for f, m, x in zip(self.fields, self.marks, self._failed_calls, strict=True)
        ]

    @cached_property
    def failed(self) -> dict[int, Failure]:
        """The failed turns (1-based), each with why."""
        return failures(self.turns)

    @cached_property
    def keep(self) -> list[list[str]]:
        """Per turn, the passages that say what failed in it: no cut drops them."""
        failed = self.failed
        return [
            list(dict.fromkeys([*x.values(), *(failed[n].quotes if n in failed else ())]))
            for n, x in enumerate(self._failed_calls, start=1)
        ]

    def full(self, index: int, cap: int | None = None) -> str:
        """Turn `index` whole (cap None) or with fields longer than `cap` cut in the middle,
        the passages that say what failed in it kept whole."""
        key = (index, cap)
        if key not in self._texts:
            mark = self.marks[index]
            keep = () if cap is None else self.keep[index]  # a whole turn cuts nothing
            text = format_turn(self.fields[index], cap, keep)
            self._texts[key] = f"{mark}\n{text}" if mark else text
        return self._texts[key]

    def entry(self, index: int, text: str) -> Entry:
        """Turn `index` shown as `text` (one of its texts)."""
        return Entry(text, number=index + 1, marked=bool(self.marks[index]))

    def forms(self, index: int, caps: Sequence[int]) -> list[str]:
        """Its texts from the fullest: whole, then cut at each of `caps` that cuts something."""
        texts = [self.full(index)]
        for cap in caps:
            text = self.full(index, cap)
            if len(text) < len(texts[-1]):
                texts.append(text)
        return texts


def _size(text: str) -> int:
    return len(text.encode())


def _fill(turns: _Turns, focus: list[int], budget: Budget) -> list[Entry] | None:
    """The skeleton with as many turns in full as the budget holds (step 3), or None when not
    even every turn as one line fits."""
    count = len(turns.lines)
    base = [turns.entry(i, line) for i, line in enumerate(turns.lines)]
    if not budget.fits(base, "skeleton"):
        return None
    base_used = budget.used(base, "skeleton")
    share = budget.tokens // TURN_SHARE
    in_focus = set(focus)
    later = [i for i in range(count - 1, -1, -1) if i not in in_focus]

    def plan(bytes_per_token: float) -> list[tuple[int, str]]:
        """Upgrades in the order made, each (turn, its new text), costed at this ratio."""
        left = (budget.tokens - base_used) * bytes_per_token
        room = share * bytes_per_token
        shown = {i: turns.lines[i] for i in range(count)}
        steps: list[tuple[int, str]] = []

        def upgrade(index: int, candidates: list[str]) -> None:
            """Show the turn as the first of `candidates` (fullest first) that fits."""
            nonlocal left
            for text in candidates:
                if text == shown[index]:
                    return  # shown this fully already
                cost = _size(text) - _size(shown[index])
                if cost <= left and _size(text) <= room:
                    shown[index] = text
                    steps.append((index, text))
                    left -= cost
                    return

        # a: every turn that matters, long fields cut to the largest of SKELETON_CAPS at
        # which all fit; else as many as fit, in order, at the largest (the others stay one
        # line, which names what failed in them). A cut keeps what failed whole.
        for cap in (*SKELETON_CAPS, None):
            if cap is None:
                for index in focus:
                    upgrade(index, [turns.full(index, SKELETON_CAPS[0])])
                break
            cost = sum(max(0, _size(turns.full(i, cap)) - _size(shown[i])) for i in focus)
            if cost <= left:
                for index in focus:
                    upgrade(index, [turns.full(index, cap)])
                break
        for index in focus + later:  # b: whole, or as full as fits
            if left <= 0:
                break
            upgrade(index, turns.forms(index, (*FULLER_CAPS, FOCUS_CAP)))
        return steps

    def entries(steps: Sequence[tuple[int, str]]) -> list[Entry]:
        chosen = list(base)
        for index, text in steps:
            chosen[index] = turns.entry(index, text)
        return chosen

    # Plan by bytes at the ratio of bytes to tokens of the text to be shown, then check the
    # prompt's real count: once to correct the ratio, and drop the last upgrades if over.
    sample = "\n".join(turns.full(i) for i in (focus + later)[:50])[: budget.tokens * 4]
    ratio = max(1.0, _size(sample) / max(1, budget.count(sample)))
    steps = plan(ratio * 0.98)
    used = budget.used(entries(steps), "skeleton")
    if steps and used > base_used and not 0.95 * budget.tokens <= used <= budget.tokens:
        added = sum(_size(text) - _size(turns.lines[i]) for i, text in steps)
        ratio = max(1.0, added / (used - base_used))
        steps = plan(ratio * 0.98)
        used = budget.used(entries(steps), "skeleton")
    if used > budget.tokens:
        low, high = 0, len(steps) - 1  # steps[:low] fits (base does), steps[: high + 1] not
        while low < high:
            middle = (low + high + 1) // 2
            if budget.fits(entries(steps[:middle]), "skeleton"):
                low = middle
            else:
                high = middle - 1
        steps = steps[:low]
    return entries(steps)


def _elided(turns: _Turns, focus_order: list[int], budget: Budget) -> list[Entry] | None:
    """Step 4: the turns in `focus_order` at a cap, `keep` one-line turns on each side of the
    middle, the rest left out in ranges."""
    count = len(turns.lines)

    def skeleton(cap: int, keep: int, focus_set: set[int]) -> list[Entry]:
        entries: list[Entry] = []
        others = [i for i in range(count) if i not in focus_set]
        hidden = set(others[keep : max(keep, len(others) - keep)])
        start = None
        for i in range(count):
            if i in hidden:
                start = i if start is None else start
                continue
            if start is not None:
                entries.append(_gap(start, i - 1, turns.fields))
                start = None
            if i in focus_set:
                entries.append(turns.entry(i, turns.full(i, cap)))
            else:
                entries.append(turns.entry(i, turns.lines[i]))
        if start is not None:
            entries.append(_gap(start, count - 1, turns.fields))
        return entries

    focus_set = set(focus_order)
    ends = {0, count - 1}
    while True:
        fallback: list[Entry] | None = None
        for cap in (*SKELETON_CAPS, MIN_FIELD_CAP):
            low, high, keep_best = 0, count, None
            while low <= high:
                middle = (low + high) // 2
                if budget.fits(skeleton(cap, middle, focus_set), "elided"):
                    keep_best, low = middle, middle + 1
                else:
                    high = middle - 1
            if keep_best is None:
                continue
            entries = skeleton(cap, keep_best, focus_set)
            # Fuller turns in focus are worth more than more one-line turns, down to this.
            if keep_best >= MIN_SKELETON_LINES:
                return entries
            fallback = fallback or entries
        if fallback is not None:
            return fallback
        if focus_set <= ends:
            return None
        # Even the turns in focus do not fit: the first and last turns, and the first half of
        # the others in order (the latest failures come first).
        rest = [i for i in focus_order if i not in ends]
        focus_order = [i for i in focus_order if i in ends] + rest[: len(rest) // 2]
        focus_set = set(focus_order)


def fit_view(record: RunRecord, budget: Budget, max_field: int) -> View:
    """The fullest view of `record` whose prompt is within `budget`."""
    turns = _Turns(record)
    count = len(turns.fields)
    whole = [turns.entry(i, turns.full(i)) for i in range(count)]
    if budget.fits(whole, "whole"):
        return View(whole, [e.text for e in whole], "whole", count)

    failed = list(turns.failed)
    around = {i for n in failed for i in (n - 1, n - 2) if i >= 0}

    def cut(cap: int) -> list[Entry]:
        return [
            turns.entry(i, turns.full(i, cap * FAILED_CAP_FACTOR if i in around else cap))
            for i in range(count)
        ]

    # 2: cut long fields; the largest cap that fits, if it keeps FOCUS_CAP.
    low, high, best = FOCUS_CAP, max_field - 1, None
    while low <= high:
        middle = (low + high) // 2
        if budget.fits(cut(middle), "cut"):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    if best is not None:
        entries = cut(best)
        kept = sum(a.text == b.text for a, b in zip(entries, whole, strict=True))
        return View(entries, [e.text for e in entries], "cut", kept, cap=best)
    # 3 and 4: the skeleton filled; else its middle left out as far as needed.
    mode = "skeleton"
    chosen = _fill(turns, focus_turns(record, failed), budget)
    if chosen is None:
        mode = "elided"
        chosen = _elided(turns, focus_turns(record, failed, MAX_ERROR_TURNS), budget)
    if chosen is None:
        raise ValueError("not even the run's first and last turns fit the prompt budget")
    shown = ["" for _ in range(count)]
    whole_turns = 0
    for entry in chosen:
        if entry.number is not None and entry.gap is None:
            shown[entry.number - 1] = entry.text
            whole_turns += entry.text == whole[entry.number - 1].text
    return View(chosen, shown, mode, whole_turns)
