"""How a logged turn reads as one line: its summary (`summarize`: role, action, what came
back) and the way back from a quote of that line to the turn's text (`raw_pieces`); its
labelled lines (`format_turn`, what `turn STEP N` prints and a compile prompt shows) are in
drilldown.py, the file every corpus carries as its drill-down tools. Kept together, so that a
quote in a compilation is found in the turn it came from.

Standard library only, and no `typing` at run time (the drill-down tools start fast).
"""

from __future__ import annotations

import re

from .drilldown import as_text

TYPE_CHECKING = False  # typing costs more to import than the drill-down tools: mypy only
if TYPE_CHECKING:
    from typing import Any

PREVIEW = 80
ACTING_ROLES = ("assistant", "agent", "ai", "model")


def preview(text: str) -> str:
    """`text` on one line (white space folded), cut to `PREVIEW` characters with a `…`."""
    return _part(text, PREVIEW)


HOOK_CONTEXT = re.compile(r"\s*<hook_context>.*?</hook_context>\s*", re.DOTALL)
"""What Gemini CLI (0.61) writes into the user's message for each hook's additionalContext:
a session start's before what the user typed, a prompt's after it."""


def hook_contexts(text: str) -> tuple[str, list[str]]:
    """A user's message split into what the user typed and what hooks added to it (each
    block as written); the message as it is when no hook added anything."""
    added = [found.group().strip() for found in HOOK_CONTEXT.finditer(text)]
    return (HOOK_CONTEXT.sub("\n\n", text).strip(), added) if added else (text, [])


FAILED_MARK = " [failed]"
"""What follows a call (or a turn's action) that failed, on the turn's one line."""
TURN_FAILED = -1
"""The key of `summarize`'s `failed` for a turn that failed but none of whose calls did (a text
action, an observation)."""
ONE_LINE_MARK = "[one line] "
"""How the compiler starts a turn it shows as one line (compiler/view.py's skeleton)."""
_ONE_LINE_PARTS = (" => ", " | ", "; ")
"""What joins a one-line turn's parts: what came back, the agent's text beside its action,
one tool call and the next."""
_CALL = re.compile(r"([A-Za-z_][\w.:-]*)\((.*)", re.DOTALL)
_MARKED = re.compile(r"^(?:\[[^\]]*\] )*(?:[\w:-]+: )?")
"""What starts a one-line turn before its action: marks (`[sub-agent X]`) and the role."""


def raw_pieces(quote: str) -> list[str] | None:
    """The pieces of a quote copied from a turn's one-line form (`summarize`; the compiler's
    `[one line] role: Tool({args}) => result`) as `format_turn`, and so `turn STEP N`, spells
    them: each tool call `Tool: {args}`, the preview's `…` and the joins between parts
    dropped; found in this order in the raw turn, they span the quoted passage. None when the
    quote holds no call in the one-line form (it is then looked for as it is)."""
    text = quote.strip()
    one_line = text.startswith(ONE_LINE_MARK)
    if one_line:
        text = _MARKED.sub("", text[len(ONE_LINE_MARK) :], count=1)
    action, arrow, came_back = text.partition(" => ")
    action = action.replace(FAILED_MARK, "")
    parts = [action]
    for join in _ONE_LINE_PARTS[1:]:
        parts = [piece for part in parts for piece in part.split(join)]
    pieces: list[str] = []
    calls = 0
    starts: list[int] = []  # where each call's pieces start
    in_call = False  # a call's arguments may hold a join (`ls | head`): it ends at its ")"
    for part in parts:
        found = None if in_call else _CALL.fullmatch(part.strip())
        if found:
            calls += 1
            starts.append(len(pieces))
            in_call = True
            part = f"{found.group(1)}: {found.group(2)}"
        part = part.strip()
        if in_call and part.endswith(("…", ")")):
            part, in_call = part[:-1], False
        part = part.strip("…").strip()
        if part and part != "-":
            pieces.append(part)
    failed = FAILED_MARK.strip() + " "
    results = [r.strip().removeprefix(failed).strip("…").strip() for r in came_back.split("; ")]
    results = [result for result in results if result] if arrow else []
    if calls > 1 and len(results) == calls:  # each call's result follows it in the raw turn
        ends = [*starts[1:], len(pieces)]
        pieces = pieces[: starts[0]] + [
            piece
            for start, end, result in zip(starts, ends, results, strict=True)
            for piece in [*pieces[start:end], result]
        ]
    else:
        pieces += results
    return pieces if (calls or one_line) and pieces else None


_MIN_PART = 24
"""The fewest characters one call keeps on a line that names several."""


def _part(text: str, width: int) -> str:
    """`text` on one line, cut to `width` characters with a `…`. A long text is folded from a
    stretch of its start: folded, a text's start is the start of the text folded, so once
    that is longer than `width` the rest cannot change the line (every turn's observation
    is shown so, and some are megabytes). A short stretch is tried first (enough for text of
    single spaces), then a longer one."""
    for stretch in (width + width // 2 + 16, 4 * width + 64):
        if len(text) <= stretch:
            break
        flat = " ".join(text[:stretch].split())
        if len(flat) > width:
            return flat[: max(width - 1, 0)] + "…"
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def summarize(turn: dict[str, Any], failed: dict[int, str] | None = None) -> list[str]:
    """(role, action, what came back) of a turn, each cut to one short line. Every tool call
    is named, each with the start of its arguments and, after `=>`, of its result (a line of
    several calls is shared out among them). `failed` maps the index of each call that failed
    (TURN_FAILED: the turn, when no call did) to what shows it (the passage the offline
    compilation quotes): the call is marked FAILED_MARK, and that passage is shown in place of
    the start of its result (marked too when the turn has several calls)."""
    failed = failed or {}
    role = str(turn.get("role") or "")
    acting = role.lower() in ACTING_ROLES
    action = turn.get("action") or ""
    calls = turn.get("tool_calls") or []
    came_back = ""
    if not action and calls and (len(calls) > 1 or failed):
        width = max(_MIN_PART, PREVIEW // len(calls))
        named, results = [], []
        for index, call in enumerate(calls):
            name = _part(str(call.get("name")), 40)
            arguments = _part(as_text(call.get("arguments") or ""), max(width - len(name), 8))
            named.append(name + "(" + arguments + ")" + (FAILED_MARK if index in failed else ""))
            mark = FAILED_MARK.strip() + " " if len(calls) > 1 else ""
            if index in failed:
                results.append(mark + _part(failed[index], max(width, PREVIEW // 2)))
            elif call.get("result") is not None:
                results.append(_part(as_text(call["result"]), width))
        action, came_back = "; ".join(named), "; ".join(results)
    else:
        if not action and calls:
            action = "; ".join(
                str(c.get("name")) + "(" + as_text(c.get("arguments") or "") + ")" for c in calls
            )
        if not action and acting and turn.get("content"):
            action = as_text(turn["content"])
        action = preview(as_text(action))
        came_back = as_text(turn.get("observation") or "")
        if not came_back and calls:
            came_back = "; ".join(
                as_text(c["result"]) for c in calls if c.get("result") is not None
            )
        if not came_back and not acting and turn.get("content"):
            came_back = as_text(turn["content"])
        came_back = preview(came_back)
    if TURN_FAILED in failed and not any(index in failed for index in range(len(calls))):
        action = (action or "-") + FAILED_MARK
        came_back = _part(failed[TURN_FAILED], PREVIEW)
    metadata = turn.get("metadata")
    if isinstance(metadata, dict) and metadata.get("subagent"):
        role = "sub:" + role  # a sub-agent's turn, inside the run that spawned it
    return [role, action, came_back]
