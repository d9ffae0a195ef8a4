"""Near-duplicate lessons: insights drawn from different runs that say the same thing.

Lexical by default: two insights are alike when the words of their titles and guidelines
overlap enough (Jaccard similarity of word sets). Each joins the first group whose first
member it is alike to, in corpus order, so grouping is deterministic. Nothing is merged or
deleted: every insight keeps its page and its source run, and a group says how many runs back
the lesson. `by_vectors` groups by embeddings instead, for a caller that has an embedding
model (`wikitrace prompt --group-model`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

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


Grouping = Callable[[Sequence[tuple[str, str]]], list[int]]
"""(title, guideline) of each lesson -> the index of its group's first lesson."""
VECTOR_THRESHOLD = 0.85


def by_vectors(
    vectors: Sequence[Sequence[float]], threshold: float = VECTOR_THRESHOLD
) -> list[int]:
    """`group` for embeddings: alike when the cosine with a group's first vector is at least
    `threshold` (deterministic, in corpus order)."""
    import math

    def unit(vector: Sequence[float]) -> list[float]:
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else list(vector)

    leaders: list[tuple[int, list[float]]] = []
    found: list[int] = []
    for index, vector in enumerate(vectors):
        mine = unit(vector)
        leader = next(
            (
                i
                for i, theirs in leaders
                if sum(a * b for a, b in zip(mine, theirs, strict=True)) >= threshold
            ),
            None,
        )
        if leader is None:
            leaders.append((index, mine))
            leader = index
        found.append(leader)
    return found
