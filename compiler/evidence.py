"""The text of a turn as the compiler shows it, and checking that a quote is really in it."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from wikitrace.corpus_schema import Turn
from wikitrace.corpus_schema.drilldown import as_text, format_turn
from wikitrace.corpus_schema.records import QuoteSource
from wikitrace.corpus_schema.turns import ACTING_ROLES

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


# --- where a quote comes from: the agent's doing, or content it read ---------------------------

SUPPLIED_ROLES = ("user", "human", "system", "developer")
"""Roles whose text the agent was given (a request, instructions, a document pasted in)."""

Span = tuple[QuoteSource | None, str]
"""A piece of a turn's text as `render_turn` shows it, and where it comes from (None: a label
such as `tool result: `, which is wikitrace's)."""


def turn_spans(turns: list[Turn], index: int) -> list[Span]:
    """Turn `index` (0-based) as `render_turn` shows it whole, in pieces that say where each
    comes from. The rule is the log's structure (who wrote the text), never the tool's name:

    - action: what the agent itself wrote or did: the text of a turn of an acting role
      (assistant, agent, ai, model: its content, reasoning, action), the name and arguments of
      a tool call it made, and a sub-agent's request (the "user" turn of a sub-agent is the
      main agent's).
    - read: everything else, which someone other than the agent may have written: the result
      of every tool call and the observation of every action, whatever the tool or command
      (`cat`, `sed`, `python -c`, `git log`, `pytest`, an MCP tool, a sub-agent's answer: a
      word list of reading tools missed most of them), the text of a tool, environment, user,
      system or developer turn, and metadata. Text whose origin the log does not say counts
      as read.

    "result" (what came back from an act that does not read) is no longer given: any tool's
    output can carry a planted instruction. Corpora written before keep it as written.
    """
    turn = turns[index]
    fields = turn_fields(turn)
    role = (turn.role or "").lower()
    subagent_request = bool(turn.metadata.get("subagent")) and role == "user"
    agent = role in ACTING_ROLES or subagent_request
    own: QuoteSource = "action" if agent else "read"
    # Calls in a user's turn are the user's (tau2's simulated user has tools); in a tool's
    # turn of its own (a trace's tool span), they are the agent's.
    supplied = (role in SUPPLIED_ROLES or not role) and not subagent_request
    calls_by: QuoteSource = "read" if supplied else "action"
    spans: list[Span] = []

    def line(label: str, source: QuoteSource | None, text: str) -> None:
        spans.extend([(None, "\n" if spans else ""), (None, label), (source, text)])

    if fields.get("role"):
        line("role: ", None, str(fields["role"]))
    for name in ("reasoning", "content", "action"):
        if fields.get(name):
            line(name + ": ", own, as_text(fields[name]))
    for call in fields.get("tool_calls") or []:
        ident = " [" + str(call["id"]) + "]" if call.get("id") else ""
        arguments = call.get("arguments")
        shown = "" if arguments is None else as_text(arguments)
        line("tool call" + ident + " ", calls_by, str(call.get("name")) + ": " + shown)
        if call.get("result") is not None:
            line("tool result" + ident + ": ", "read", as_text(call["result"]))
        if call.get("metadata"):
            line("tool call metadata: ", "read", as_text(call["metadata"]))
    if fields.get("observation"):
        line("observation: ", "read", as_text(fields["observation"]))
    if fields.get("metadata"):
        line("metadata: ", "read", as_text(fields["metadata"]))
    return spans


LooseSpans = tuple[list[Span], str]
"""A turn's spans (`turn_spans`) with typography and spacing dropped (`_loose`), and those
joined: what `quote_source` reads; a checker keeps them for each turn it cites."""


def loose_spans(turns: list[Turn], index: int) -> LooseSpans:
    """`LooseSpans` of turn `index` (0-based)."""
    spans = [(source, _loose(text)) for source, text in turn_spans(turns, index)]
    return spans, "".join(text for _, text in spans)


def quote_source(
    turns: list[Turn], number: int, quote: str, loose: LooseSpans | None = None
) -> QuoteSource:
    """Where a quote found in turn `number` (1-based) comes from (turn_spans): the source of
    most of its text, read before result before action on a tie. A quote of a shortened view
    that is not in the whole turn takes the source of the piece sharing most of it; read when
    none shares MIN_QUOTE_CHARS. `loose`: the turn's `loose_spans`, when known."""
    spans, joined = loose or loose_spans(turns, number - 1)
    wanted = _loose(quote)
    start = joined.find(wanted) if wanted else -1
    shares: dict[QuoteSource, int] = {}
    if start >= 0:
        end, offset = start + len(wanted), 0
        for source, text in spans:
            if offset >= end:
                break  # the spans left start past the quote
            overlap = min(end, offset + len(text)) - max(start, offset)
            if source is not None and overlap > 0:
                shares[source] = shares.get(source, 0) + overlap
            offset += len(text)
    else:
        for source, text in spans:
            if source is not None and text:
                matcher = difflib.SequenceMatcher(None, text, wanted, autojunk=False)
                size = matcher.find_longest_match(0, len(text), 0, len(wanted)).size
                if size >= MIN_QUOTE_CHARS and size > max(shares.values(), default=0):
                    shares = {source: size}
    if not shares:
        return "read"
    order: tuple[QuoteSource, ...] = ("read", "result", "action")
    return max(order, key=lambda source: (shares.get(source, 0), -order.index(source)))


@dataclass(frozen=True)
class Check:
    """What checking one quote found."""

    verified: bool
    turn: int
    """The turn it was found in: the cited one, or the one it was moved to."""
    note: str | None = None
    source: QuoteSource | None = None
    """Where a found quote comes from in that turn (quote_source)."""


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
        self._spans: dict[int, LooseSpans] = {}

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
                return Check(True, turn, note, self._source(turn, quote))
        # Cited under the wrong turn? The nearest turn that holds it.
        others = sorted(range(1, len(self._turns) + 1), key=lambda n: (abs(n - turn), n))
        for other in others:
            if other != turn and self._level(other, quote) is not None:
                note = f"cited as turn {turn}; found in turn {other}"
                return Check(True, other, note, self._source(other, quote))
        return Check(False, turn, "not found in the turn")

    def _source(self, turn: int, quote: str) -> QuoteSource:
        """`quote_source`, each turn's spans made once for all the quotes that cite it."""
        if turn not in self._spans:
            self._spans[turn] = loose_spans(self._turns, turn - 1)
        return quote_source(self._turns, turn, quote, self._spans[turn])

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
