"""Lessons that may contradict or narrow an older one of the same scope: the mechanical filter.

It decides which pairs of lessons are worth asking a judge about, and, with no judge, which
are flagged for a person to review (never retired on its word). Precision comes first: two
lessons that share words must not retire each other. So a pair is *likely* only when one
piece of advice of each is about the same action and object (most of the shorter one's words
shared) and they point opposite ways ("do not retry the payment" against "retry the
payment"; "before" against "after"), under the same conditions; or when the newer says the
same as the older, or its opposite, only under a condition the older does not name (it
narrows it). A pair of the same scope whose words overlap without that is only *similar*:
worth a judge's call, never flagged. Standard library only: it runs at every `add`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Relation = Literal["contradicts", "narrows", "similar"]

SIMILAR = 0.3
"""Least word overlap (Jaccard, whole lessons) for a pair of the same scope with no sign of
contradiction to be worth a judge's call."""
DUPLICATE = 0.6
"""Word overlap from which a pair with the same advice under the same conditions is a
near-duplicate (search/consolidate.py groups those), not worth a call."""
SAME_OBJECT = 0.75
"""Share of the shorter piece of advice's words the other must hold to be about the same
action and object (and it must hold more than half the longer's: a short piece of advice
inside a long one is not the same advice)."""

_WORD = re.compile(r"[a-z0-9_]+(?:'[a-z]+)?")
_STOP = frozenset(
    [
        *("the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "it", "its"),
        *("is", "are", "be", "by", "at", "as", "from", "that", "this", "than", "then", "any"),
        *("all", "do", "does", "did", "you", "your", "agent", "should", "must", "can", "will"),
        *("always", "first", "each", "every", "one", "there", "their", "them", "they", "was"),
        *("were", "has", "have", "had", "so", "such", "into", "out", "up", "again", "just"),
        *("yourself", "also", "which", "what", "who", "been", "being", "try", "make", "sure"),
    ]
)
_NEGATIONS = frozenset(
    ["not", "never", "avoid", "stop", "skip", "refrain", "no", "nor", "cannot", "neither"]
)
_CONDITIONS = frozenset(["when", "if", "unless", "once", "whenever", "while", "where"])
_RESTRICTIONS = frozenset(["only", "unless", "except", "excluding", "solely", "provided"])
_ANTONYMS = {
    "before": "after",
    "enable": "disable",
    "increase": "decrease",
    "add": "remove",
    "include": "exclude",
    "allow": "block",
    "open": "close",
    "upper": "lower",
    "more": "less",
    "earlier": "later",
    "accept": "reject",
    "keep": "delete",
    "sync": "async",
    "true": "false",
    "start": "finish",
    "install": "uninstall",
    "lock": "unlock",
    "show": "hide",
    "trust": "distrust",
    "ask": "guess",
    "manual": "automatic",
    "local": "global",
}
# Where a piece of advice ends and a condition or an opposite one begins.
_SPLIT = re.compile(
    r"[.;!?]+\s|[.;!?]+$|\n|\s+but\s+|,\s*and\s+|\s+(?=instead of\s|rather than\s|without\s|"
    r"unless\s|otherwise\s|except\s|when\s|if\s|once\s|whenever\s|while\s)"
)
_ONLY_FOR = re.compile(r"\bonly\s+((?:for|on|in)\s.*)$")
_LEAD_CONDITION = re.compile(r"^(when|if|unless|once|whenever|while|where)\b([^,]*),\s*(.*)$")


@dataclass(frozen=True)
class Lesson:
    """What the filter reads of a lesson, and its scope."""

    id: str
    title: str
    guideline: str
    applicability: str = ""
    task_type: str | None = None
    project: str | None = None
    """The code project its source run worked in, if known."""
    kind: str | None = None
    """The kind of work its source run did, if known."""


@dataclass(frozen=True)
class Flag:
    """A newer lesson and an older one it may contradict or narrow."""

    newer: str
    older: str
    relation: Relation
    """contradicts or narrows: likely, flagged for review (or a judge); similar: worth a
    judge's call only."""
    overlap: float
    """Jaccard overlap of the two lessons' words."""
    why: str
    """The two pieces of advice the relation rests on, or the overlap."""

    @property
    def likely(self) -> bool:
        return self.relation != "similar"

    def as_dict(self) -> dict[str, object]:
        return {
            "newer": self.newer,
            "older": self.older,
            "relation": self.relation,
            "overlap": self.overlap,
            "why": self.why,
        }


@dataclass(frozen=True)
class _Clause:
    negative: bool
    stems: frozenset[str]
    text: str


@dataclass(frozen=True)
class _Read:
    advice: tuple[_Clause, ...]
    conditions: frozenset[str]
    """The words of the conditions it names (when, if, unless, only ...)."""
    restricted: bool
    """It says only, unless, except ...: it applies to part of a situation."""
    words: frozenset[str]


def same_scope(first: Lesson, second: Lesson) -> bool:
    """Whether two lessons are for the same scope: the same task type, and the same project
    and kind of work wherever either names one (a lesson of a known project and one of an
    unknown are not compared)."""
    return (
        first.task_type == second.task_type
        and first.project == second.project
        and (first.kind is None or second.kind is None or first.kind == second.kind)
    )


def compare(newer: Lesson, older: Lesson) -> Flag | None:
    """How `newer` stands to `older` (the scope is not checked: see `candidates`); None when
    the pair is not worth a call: the words barely overlap, or they say the same thing under
    the same conditions (a near-duplicate)."""
    new, old = _read(newer), _read(older)
    overlap = _jaccard(new.words, old.words)
    opposite, same = _advice_pairs(new.advice, old.advice)
    conditions = _conditions(new, old)
    if opposite and conditions == "same":
        return Flag(newer.id, older.id, "contradicts", overlap, _pair(*opposite))
    if (opposite or same) and conditions == "narrower":
        pair = opposite or same
        assert pair is not None
        return Flag(newer.id, older.id, "narrows", overlap, _pair(*pair))
    if same and conditions == "same" and overlap >= DUPLICATE:
        return None
    if opposite or overlap >= SIMILAR:
        return Flag(newer.id, older.id, "similar", overlap, f"words overlap {overlap:.2f}")
    return None


def candidates(newer: Sequence[Lesson], older: Iterable[Lesson]) -> list[Flag]:
    """Every pair of a `newer` lesson and an `older` one of the same scope worth a judge's
    call, likely ones first (then by overlap)."""
    older = list(older)
    found = [
        flag
        for new in newer
        for old in older
        if old.id != new.id and same_scope(new, old)
        for flag in [compare(new, old)]
        if flag is not None
    ]
    return sorted(found, key=lambda flag: (not flag.likely, -flag.overlap, flag.older))


def _pair(new: _Clause, old: _Clause) -> str:
    return f"{new.text!r} against {old.text!r}"


def _advice_pairs(
    new: Sequence[_Clause], old: Sequence[_Clause]
) -> tuple[tuple[_Clause, _Clause] | None, tuple[_Clause, _Clause] | None]:
    """The first pair of pieces of advice about the same action and object pointing opposite
    ways, and the first pointing the same way (None when there is none)."""
    opposite = same = None
    for a in new:
        for b in old:
            flipped = a.negative != b.negative
            a_stems, b_stems = set(a.stems), set(b.stems)
            for word in a.stems:
                other = _OPPOSITE.get(word)
                if other is not None and other in b.stems and word not in b.stems:
                    flipped = not flipped
                    a_stems.discard(word)
                    b_stems.discard(other)
            shared = a_stems & b_stems
            shorter, longer = sorted((len(a_stems), len(b_stems)))
            if len(shared) < 2 or len(shared) < SAME_OBJECT * shorter or 2 * len(shared) <= longer:
                continue
            if flipped and opposite is None:
                opposite = (a, b)
            elif not flipped and same is None:
                same = (a, b)
    return opposite, same


def _conditions(new: _Read, old: _Read) -> Literal["same", "narrower", "different"]:
    """Whether the newer lesson's conditions are the older's, narrower (it names one the older
    does not, or says only/unless where the older does not), or different."""
    if new.restricted and not old.restricted:
        return "narrower"
    if new.conditions == old.conditions or (
        new.conditions and old.conditions and _jaccard(new.conditions, old.conditions) >= 0.5
    ):
        return "same"
    if not old.conditions or new.conditions > old.conditions:
        return "narrower" if new.conditions else "same"
    if not new.conditions:
        return "same"
    return "different"


def _read(lesson: Lesson) -> _Read:
    advice: list[_Clause] = []
    conditions: set[str] = set()
    restricted = False
    for text in (lesson.title, lesson.guideline):
        for clause, negative, condition in _clauses(text):
            stems = _stems(clause)
            if condition:
                conditions |= stems
            elif stems:
                advice.append(_Clause(negative, stems, clause.strip()))
            restricted |= bool(_RESTRICTIONS & set(_WORD.findall(clause)))
    whole = f"{lesson.title} {lesson.guideline}"
    return _Read(tuple(advice), frozenset(conditions), restricted, _stems(whole))


def _clauses(text: str) -> Iterable[tuple[str, bool, bool]]:
    """(clause, whether it is negative, whether it is a condition) of a text's pieces."""
    text = re.sub(r"n't\b", " not", text.lower().replace("no longer", "not"))
    previous, previous_negative = "", False
    for piece in _SPLIT.split(text):
        piece = piece.strip(" ,:-")
        if not piece:
            continue
        lead = _LEAD_CONDITION.match(piece)
        if lead:
            yield f"{lead.group(1)}{lead.group(2)}", False, True
            piece = lead.group(3)
        head = piece.split(" ", 1)[0]
        if head in ("unless", "except") or head in _CONDITIONS:
            yield piece, False, True
            continue
        words = _WORD.findall(piece)
        if head in ("instead", "rather"):
            # "instead of X": X is advised against.
            previous_negative = True
            yield " ".join(words[2:]), True, False
            continue
        if head == "without":
            # "do X without Y" advises X-and-Y against; "do not X without Y", X-and-Y.
            yield f"{previous} {' '.join(words[1:])}", not previous_negative, False
            continue
        only = _ONLY_FOR.search(piece)
        if only:
            # "X only for Y": Y is a condition (when, if, unless are split off already).
            yield only.group(1), False, True
            piece = piece[: only.start()] + "only"
        previous_negative = bool(_NEGATIONS & set(words))
        previous = piece
        yield piece, previous_negative, False


def _stems(text: str) -> frozenset[str]:
    return frozenset(
        _stem(word)
        for word in _WORD.findall(text.lower())
        if len(word) > 2
        and word not in _STOP
        and word not in _NEGATIONS
        and word not in _CONDITIONS
        and word not in _RESTRICTIONS
    )


def _stem(word: str) -> str:
    """A crude English stem: refunds, refunded, refunding are one word, and so are retry and
    retries."""
    word = word.split("'", 1)[0]
    for suffix, keep in (
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + keep
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]  # stopped, stopping -> stop
    return word.rstrip("e") if len(word) > 4 else word


_OPPOSITE = {
    **{_stem(a): _stem(b) for a, b in _ANTONYMS.items()},
    **{_stem(b): _stem(a) for a, b in _ANTONYMS.items()},
}
"""Each antonym's stem -> its opposite's."""


def _jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    return round(len(first & second) / len(first | second), 3) if first and second else 0.0
