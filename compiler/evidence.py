"""The text of a turn as the compiler shows it, and checking that a quote is really in it."""

from __future__ import annotations

import re
from typing import Any

from wikitrace.corpus_schema import Turn
from wikitrace.tools.drilldown import as_text, format_turn

_WHITESPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def turn_fields(turn: Turn) -> dict[str, Any]:
    """The fields the turn has, as `format_turn` (and so `turn STEP N`) reads them."""
    return turn.model_dump(mode="json", exclude_defaults=True)


def render_turn(turn: Turn, cap: int | None = None) -> str:
    """The turn as `turn STEP N` shows it, so a quoted passage can be found again there."""
    return format_turn(turn_fields(turn), cap)


def longest_field(turn: Turn) -> int:
    """Length of the longest text field render_turn would cut."""
    lengths = [len(getattr(turn, name) or "") for name in ("reasoning", "content", "action")]
    lengths.append(len(turn.observation or ""))
    lengths.append(len(as_text(turn.metadata)) if turn.metadata else 0)
    for call in turn.tool_calls or []:
        lengths.append(len(as_text(call.arguments)) if call.arguments is not None else 0)
        lengths.append(len(as_text(call.result)) if call.result is not None else 0)
        lengths.append(len(as_text(call.metadata)) if call.metadata else 0)
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
