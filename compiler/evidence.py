"""The text of a turn as the compiler shows it, and checking that a quote is really in it."""

from __future__ import annotations

import re
from typing import Any

import orjson

from wikitrace.corpus_schema import Turn

_WHITESPACE = re.compile(r"\s+")
CUT_MARKER = (
    "[... wikitrace cut {count} characters here to fit the prompt; the raw turn has them all ...]"
)


def normalise(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def cut_middle(text: str, cap: int | None) -> str:
    """Keep the head and tail of a long text with a visible marker for what was left out."""
    if cap is None or len(text) <= cap:
        return text
    keep = max(cap // 2, 1)
    cut = len(text) - 2 * keep
    return f"{text[:keep]}\n{CUT_MARKER.format(count=cut)}\n{text[-keep:]}"


def render_turn(turn: Turn, cap: int | None = None) -> str:
    """The turn's fields as labelled lines; with a cap, long fields lose their middle."""
    lines: list[str] = []
    if turn.role:
        lines.append(f"role: {turn.role}")
    for name in ("reasoning", "content", "action"):
        value = getattr(turn, name)
        if value:
            lines.append(f"{name}: {cut_middle(value, cap)}")
    for call in turn.tool_calls or []:
        ident = f" [{call.id}]" if call.id else ""
        arguments = "" if call.arguments is None else cut_middle(_as_text(call.arguments), cap)
        lines.append(f"tool call{ident} {call.name}: {arguments}")
        if call.result is not None:
            lines.append(f"tool result{ident}: {cut_middle(_as_text(call.result), cap)}")
        if call.metadata:
            lines.append(f"tool call metadata: {cut_middle(_as_text(call.metadata), cap)}")
    if turn.observation:
        lines.append(f"observation: {cut_middle(turn.observation, cap)}")
    if turn.metadata:
        lines.append(f"metadata: {cut_middle(_as_text(turn.metadata), cap)}")
    return "\n".join(lines)


def longest_field(turn: Turn) -> int:
    """Length of the longest text field render_turn would cut."""
    lengths = [len(getattr(turn, name) or "") for name in ("reasoning", "content", "action")]
    lengths.append(len(turn.observation or ""))
    lengths.append(len(_as_text(turn.metadata)) if turn.metadata else 0)
    for call in turn.tool_calls or []:
        lengths.append(len(_as_text(call.arguments)) if call.arguments is not None else 0)
        lengths.append(len(_as_text(call.result)) if call.result is not None else 0)
        lengths.append(len(_as_text(call.metadata)) if call.metadata else 0)
    return max(lengths)


class QuoteChecker:
    """Checks quotes against the full (never cut) text of the turns of one run."""

    def __init__(self, turns: list[Turn]) -> None:
        self._turns = turns
        # Rendered, then normalised, only when a quote cites the turn and needs it.
        self._texts: dict[int, str] = {}
        self._normalised: dict[int, str] = {}

    def found(self, turn: int, quote: str) -> bool:
        """True when the whitespace-normalised quote is a substring of raw turn `turn` (1-based)."""
        if not 1 <= turn <= len(self._turns):
            return False
        if turn not in self._texts:
            self._texts[turn] = render_turn(self._turns[turn - 1])
        # A verbatim substring stays a substring once both sides are normalised: skip that work.
        if quote.strip() and quote in self._texts[turn]:
            return True
        needle = normalise(quote)
        if not needle:
            return False
        if turn not in self._normalised:
            self._normalised[turn] = normalise(self._texts[turn])
        return needle in self._normalised[turn]
