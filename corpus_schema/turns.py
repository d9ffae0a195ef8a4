"""How a logged turn reads as text: its labelled lines (`format_turn`, what `turn STEP N`
prints and a compile prompt shows), its one-line summary (`summarize`: role, action, what came
back) and the way back from a quote of that line to the turn's text (`raw_pieces`). One home,
so that a quote in a compilation is found in the turn it came from.

Standard library only, and no `typing` at run time: the drill-down tools a corpus carries are
tools/drilldown.py with this module written into it (versions/finish.py, `drilldown_script`),
run in sandboxes where wikitrace is not installed.
"""

from __future__ import annotations

import json
import re

TYPE_CHECKING = False  # typing costs more to import than the drill-down tools: mypy only
if TYPE_CHECKING:
    from typing import Any

PREVIEW = 80
ACTING_ROLES = ("assistant", "agent", "ai", "model")

CUT_MARKER = (
    "[... wikitrace cut {count} characters here to fit the prompt; the raw turn has them all ...]"
)


def cut_middle(text: str, cap: int | None = None) -> str:
    """Keep the head and tail of a long text with a visible marker for what was left out."""
    if cap is None or len(text) <= cap:
        return text
    keep = max(cap // 2, 1)
    cut = len(text) - 2 * keep
    return text[:keep] + "\n" + CUT_MARKER.format(count=cut) + "\n" + text[-keep:]


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def format_turn(turn: dict[str, Any], cap: int | None = None) -> str:
    """A turn (a dict in the native format) as labelled lines; a cap cuts long fields' middles."""
    lines: list[str] = []
    if turn.get("role"):
        lines.append("role: " + str(turn["role"]))
    for name in ("reasoning", "content", "action"):
        value = turn.get(name)
        if value:
            lines.append(name + ": " + cut_middle(as_text(value), cap))
    for call in turn.get("tool_calls") or []:
        ident = " [" + str(call["id"]) + "]" if call.get("id") else ""
        arguments = call.get("arguments")
        shown = "" if arguments is None else cut_middle(as_text(arguments), cap)
        lines.append("tool call" + ident + " " + str(call.get("name")) + ": " + shown)
        if call.get("result") is not None:
            lines.append("tool result" + ident + ": " + cut_middle(as_text(call["result"]), cap))
        if call.get("metadata"):
            lines.append("tool call metadata: " + cut_middle(as_text(call["metadata"]), cap))
    if turn.get("observation"):
        lines.append("observation: " + cut_middle(as_text(turn["observation"]), cap))
    if turn.get("metadata"):
        lines.append("metadata: " + cut_middle(as_text(turn["metadata"]), cap))
    return "\n".join(lines)


def preview(text: str) -> str:
    """`text` on one line (white space folded), cut to `PREVIEW` characters with a `…`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW else flat[: PREVIEW - 1] + "…"


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
    parts = [action]
    for join in _ONE_LINE_PARTS[1:]:
        parts = [piece for part in parts for piece in part.split(join)]
    pieces: list[str] = []
    calls = 0
    in_call = False  # a call's arguments may hold a join (`ls | head`): it ends at its ")"
    for part in parts:
        found = None if in_call else _CALL.fullmatch(part.strip())
        if found:
            calls += 1
            in_call = True
            part = f"{found.group(1)}: {found.group(2)}"
        part = part.strip()
        if in_call and part.endswith(("…", ")")):
            part, in_call = part[:-1], False
        part = part.strip("…").strip()
        if part and part != "-":
            pieces.append(part)
    if arrow and came_back.strip("…").strip():
        pieces.append(came_back.strip("…").strip())
    return pieces if (calls or one_line) and pieces else None


def summarize(turn: dict[str, Any]) -> list[str]:
    """(role, action, what came back) of a turn, each cut to one short line."""
    role = str(turn.get("role") or "")
    acting = role.lower() in ACTING_ROLES
    action = turn.get("action") or ""
    calls = turn.get("tool_calls") or []
    if not action and calls:
        action = "; ".join(
            str(c.get("name")) + "(" + as_text(c.get("arguments") or "") + ")" for c in calls
        )
    if not action and acting and turn.get("content"):
        action = as_text(turn["content"])
    came_back = turn.get("observation") or ""
    if not came_back and calls:
        came_back = "; ".join(as_text(c["result"]) for c in calls if c.get("result") is not None)
    if not came_back and not acting and turn.get("content"):
        came_back = as_text(turn["content"])
    metadata = turn.get("metadata")
    if isinstance(metadata, dict) and metadata.get("subagent"):
        role = "sub:" + role  # a sub-agent's turn, inside the run that spawned it
    return [role, preview(as_text(action)), preview(as_text(came_back))]
