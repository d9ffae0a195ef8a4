"""The text of a turn as the compiler shows it, and checking that a quote is really in it."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from wikitrace.corpus_schema import Turn
from wikitrace.tools.drilldown import as_text, format_turn

_WHITESPACE = re.compile(r"\s+")
# What a model changes when it copies text: typographic quotes and dashes, odd spaces.
_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2033": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u2026": "...",
        "\u00a0": " ",
        "\u2007": " ",
        "\u202f": " ",
        "\u200b": None,
        "\u200c": None,
        "\u200d": None,
        "\u2060": None,
        "\ufeff": None,
    }
)
MIN_QUOTE_CHARS = 12
"""A quote shorter than this (spaces aside) proves nothing: "the" is in every turn."""


def normalise(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _loose(text: str) -> str:
    """Typography normalised and every space dropped: `"a":0` and `"a": 0` are the same."""
    return _WHITESPACE.sub("", text.translate(_TYPOGRAPHY))


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


@dataclass(frozen=True)
class Check:
    """What checking one quote found."""

    verified: bool
    turn: int
    """The turn it was found in: the cited one, or the one it was moved to."""
    note: str | None = None


class QuoteChecker:
    """Checks quotes against the text of the turns as the prompt showed them.

    `shown` is each turn's text in the prompt (None for a turn shown whole, when its raw text
    is used); a quote may cite only what the model saw. A quote is verified when it is in the
    cited turn verbatim, with whitespace collapsed, or with typography and spacing normalised.
    One that is in another turn instead is moved there, and says so.
    """

    def __init__(self, turns: list[Turn], shown: list[str | None] | None = None) -> None:
        self._turns = turns
        self._shown = shown or [None] * len(turns)
        self._texts: dict[int, str] = {}
        self._normalised: dict[int, str] = {}
        self._loose: dict[int, str] = {}

    def text(self, turn: int) -> str:
        """Turn `turn` (1-based) as the model saw it."""
        if turn not in self._texts:
            shown = self._shown[turn - 1]
            self._texts[turn] = shown if shown is not None else render_turn(self._turns[turn - 1])
        return self._texts[turn]

    def _level(self, turn: int, quote: str) -> str | None:
        """How the quote is in the turn: verbatim, spacing, loose; None when it is not."""
        text = self.text(turn)
        if quote in text:
            return "verbatim"
        if turn not in self._normalised:
            self._normalised[turn] = normalise(text)
        if normalise(quote) in self._normalised[turn]:
            return "spacing"
        if turn not in self._loose:
            self._loose[turn] = _loose(text)
        if _loose(quote) in self._loose[turn]:
            return "loose"
        return None

    def check(self, turn: int, quote: str) -> Check:
        if len(_loose(quote)) < MIN_QUOTE_CHARS:
            return Check(False, turn, "too short to prove anything")
        if 1 <= turn <= len(self._turns):
            level = self._level(turn, quote)
            if level is not None:
                note = "typography and spacing normalised" if level == "loose" else None
                return Check(True, turn, note)
        # Cited under the wrong turn? The nearest turn that holds it.
        others = sorted(range(1, len(self._turns) + 1), key=lambda n: (abs(n - turn), n))
        for other in others:
            if other != turn and self._level(other, quote) is not None:
                return Check(True, other, f"cited as turn {turn}; found in turn {other}")
        return Check(False, turn, "not found in the turn")

    def found(self, turn: int, quote: str) -> bool:
        """True when the quote is in turn `turn` (for quotes cut mechanically from the log,
        which may be short: `ls`)."""
        return (
            1 <= turn <= len(self._turns)
            and bool(quote.strip())
            and (self._level(turn, quote) is not None)
        )

    def closest(self, turn: int, quote: str, width: int = 240) -> str:
        """The passage of turn `turn` most like `quote`, for the model to copy from."""
        if not 1 <= turn <= len(self._turns):
            return ""
        text = self.text(turn)
        if len(text) <= width:
            return text
        matcher = difflib.SequenceMatcher(None, text, quote, autojunk=False)
        match = matcher.find_longest_match(0, len(text), 0, len(quote))
        centre = match.a + match.size // 2 if match.size else 0
        start = max(0, min(centre - width // 2, len(text) - width))
        return text[start : start + width]
