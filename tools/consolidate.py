"""Near-duplicate lessons: insights drawn from different runs that say the same thing.

Lexical: two insights are alike when the words of their titles and guidelines overlap enough
(Jaccard similarity of word sets). Each joins the first group whose first member it is alike
to, in corpus order, so grouping is deterministic. Nothing is merged or deleted: every insight
keeps its page and its source run, and a group says how many runs back the lesson.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

THRESHOLD = 0.6
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        *("the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "with", "before"),
        *("after", "when", "if", "it", "its", "is", "are", "be", "by", "at", "as", "from"),
        *("that", "this", "than", "then", "not", "no", "do", "does", "any", "all"),
    ]
)


def words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def group(lessons: Sequence[tuple[str, str]], threshold: float = THRESHOLD) -> list[int]:
    """For each (title, guideline), the index of the first lesson of its group (itself when it
    leads one). Alike: the titles' words overlap by `threshold` and the whole texts' by half
    of it, or the whole texts' by `threshold`."""
    leaders: list[tuple[int, frozenset[str], frozenset[str]]] = []
    found: list[int] = []
    for index, (title, guideline) in enumerate(lessons):
        head, whole = words(title), words(f"{title} {guideline}")
        leader = next(
            (
                i
                for i, their_head, their_whole in leaders
                if (
                    _jaccard(head, their_head) >= threshold
                    and _jaccard(whole, their_whole) >= threshold / 2
                )
                or _jaccard(whole, their_whole) >= threshold
            ),
            None,
        )
        if leader is None:
            leaders.append((index, head, whole))
            leader = index
        found.append(leader)
    return found
