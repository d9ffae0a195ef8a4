"""Near-duplicate lessons: insights drawn from different runs that say the same thing.

Lexical by default: two insights are alike when the words of their titles and guidelines
overlap enough (Jaccard similarity of word sets). Each joins the first group whose first
member it is alike to, in corpus order, so grouping is deterministic. Nothing is merged or
deleted: every insight keeps its page and its source run, and a group says how many runs back
the lesson. `by_vectors` groups by embeddings instead, for a caller that has an embedding
model (`wikitrace prompt --group-model`).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.render import insight_row

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


def overlap(first: str, second: str) -> float:
    """How much two texts' words overlap (Jaccard), 0 to 1."""
    return _jaccard(words(first), words(second))


def group(lessons: Sequence[tuple[str, str]], threshold: float = THRESHOLD) -> list[int]:
    """`_group`, remembered for the last lessons given: a version is grouped for its index,
    then for its catalog, and both are the same lessons unless some are withheld."""
    return list(_group(tuple((title, guideline) for title, guideline in lessons), threshold))


@functools.lru_cache(maxsize=1)
def _group(lessons: tuple[tuple[str, str], ...], threshold: float) -> tuple[int, ...]:
    """For each (title, guideline), the index of the first lesson of its group (itself when it
    leads one). Alike: the titles' words overlap by `threshold` and the whole texts' by half
    of it, or the whole texts' by `threshold`.

    Prefix filtering: two word sets that overlap by t share a word among each one's first
    |set| - ceil(t * |set|) + 1 words, in any one order of all words (rarest first here). The
    first way needs the titles to overlap by `threshold`, the second the whole texts: so a
    leader can be alike only when it shares a word of the lesson's title prefix, or of its
    whole text's prefix, and only those leaders are compared. The same groups as comparing
    with every leader (a property test checks it), in time that grows with how alike the
    lessons are rather than with their number squared, even when every word is common.

    Words are numbered by that order, so a prefix is the smallest numbers. A lesson's word
    sets are made while it is grouped and kept only when it leads a group, as tuples of the
    numbers (8 bytes a word, where a set of strings took about 100): every other lesson is
    let go once its group is found."""
    frequency: Counter[str] = Counter()
    for title, guideline in lessons:
        frequency.update(words(f"{title} {guideline}"))
    ordered = sorted(frequency, key=lambda word: (frequency[word], word))
    rank = {word: n for n, word in enumerate(ordered)}
    del ordered
    weakest = threshold / 2

    def numbered(text: str) -> frozenset[int]:
        return frozenset([rank[word] for word in words(text)])

    def prefix(found: frozenset[int]) -> list[int]:
        return sorted(found)[: len(found) - math.ceil(threshold * len(found)) + 1]

    by_title: dict[int, list[int]] = {}
    by_whole: dict[int, list[int]] = {}
    """A word -> the leaders (by position in `leaders`) with it in their title's (whole
    text's) prefix."""
    leaders: list[int] = []
    heads: list[tuple[int, ...]] = []
    wholes: list[tuple[int, ...]] = []
    found: list[int] = []
    for index, (title, guideline) in enumerate(lessons):
        head, whole = numbered(title), numbered(f"{title} {guideline}")
        head_prefix, whole_prefix = prefix(head), prefix(whole)
        titled = {c for word in head_prefix for c in by_title.get(word, ())}
        leader = None
        for c in sorted(titled.union(*(by_whole.get(word, ()) for word in whole_prefix))):
            # Alike in the whole texts; else alike enough in them and alike in the titles
            # (only a leader sharing a word of the title's prefix can be).
            alike = _jaccard_of(whole, wholes[c])
            if alike >= threshold or (
                alike >= weakest and c in titled and _jaccard_of(head, heads[c]) >= threshold
            ):
                leader = leaders[c]
                break
        if leader is None:
            for word in head_prefix:
                by_title.setdefault(word, []).append(len(leaders))
            for word in whole_prefix:
                by_whole.setdefault(word, []).append(len(leaders))
            leaders.append(index)
            heads.append(tuple(head))
            wholes.append(tuple(whole))
            leader = index
        found.append(leader)
    return tuple(found)


def _jaccard_of(mine: frozenset[int], theirs: tuple[int, ...]) -> float:
    """`_jaccard` of a set and a leader's words (a tuple of distinct words): the same float,
    from one intersection."""
    if not mine or not theirs:
        return 0.0
    shared = len(mine.intersection(theirs))
    return shared / (len(mine) + len(theirs) - shared)


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


# --- mined lessons (compiler/mine.py) ------------------------------------------------------------

_SUBJECTS = {
    "repeat": ("repeat",),
    "retry_after_error": ("repeat", "error"),
    "stuck": ("repeat",),
}


@dataclass(frozen=True)
class Mined:
    """What a mined lesson is about, for finding the model's lesson that says the same thing."""

    task_type: str | None
    pattern: str
    """`uses:K`, `order:A<B`, `repeat`, ...; `diverge` for a divergence (never grouped)."""
    goes_with: str
    """The outcome the pattern goes with: failure or success."""

    def words(self) -> frozenset[str]:
        if self.pattern.startswith("uses:"):
            return words(self.pattern[5:].replace("_", " "))
        if self.pattern.startswith("order:"):
            return words(self.pattern[6:].replace("_", " ").replace("<", " "))
        return frozenset(_SUBJECTS.get(self.pattern, ()))


def with_mined(
    lessons: Sequence[tuple[str, str]],
    mined: Sequence[Mined | None],
    outcomes: Sequence[str],
    task_types: Sequence[str | None],
    grouping: Grouping = group,
) -> list[int]:
    """`grouping` for a list that holds mined lessons too. The model's lessons (mined None) are
    grouped by `grouping`; mined ones are never grouped with each other (their titles are
    templated alike). A mined contrast joins the group of the first model lesson of its task
    type that names what it counts (every word of the tool or pattern, `repeat` and `error`
    for a repeated failed action) and was drawn from a run with the outcome the pattern goes
    with (a failed run for a pattern that goes with failure): the same lesson, once counted
    and once read from a run."""
    plain = [i for i, item in enumerate(mined) if item is None]
    found = grouping([lessons[i] for i in plain])
    leaders = list(range(len(lessons)))
    for position, index in enumerate(plain):
        leaders[index] = plain[found[position]]
    del found
    # The mined contrasts still looking for their model lesson, by (task type, outcome): one
    # pass over the model's lessons, in order, each one's words made only when it may match.
    looking: dict[tuple[str | None, str], list[tuple[int, frozenset[str]]]] = {}
    for index, item in enumerate(mined):
        if item is None or item.pattern == "diverge":
            continue
        subject = item.words()
        if subject:
            looking.setdefault((item.task_type, item.goes_with), []).append((index, subject))
    for i in plain:
        if not looking:
            break
        key = (task_types[i], outcomes[i])
        waiting = looking.get(key)
        if waiting is None:
            continue
        stems = _stems(words(f"{lessons[i][0]} {lessons[i][1]}"))
        still = []
        for index, subject in waiting:
            if subject <= stems:
                leaders[index] = leaders[i]
            else:
                still.append((index, subject))
        if still:
            looking[key] = still
        else:
            del looking[key]
    return leaders


def _stems(found: frozenset[str]) -> frozenset[str]:
    """The words and their forms without a plural or verb ending: repeated -> repeat."""
    stems = set(found)
    for word in found:
        for ending in ("ing", "ed", "es", "s"):
            if word.endswith(ending) and len(word) > len(ending) + 2:
                stems.add(word[: -len(ending)])
    return frozenset(stems)


class Lesson(Protocol):
    """What grouping reads of a lesson (an index row or a first-message entry)."""

    @property
    def title(self) -> str: ...
    @property
    def guideline(self) -> str: ...
    @property
    def task_type(self) -> str | None: ...
    @property
    def source_outcome(self) -> str: ...
    @property
    def pattern(self) -> str | None: ...
    @property
    def goes_with(self) -> str | None: ...


def of_lessons(lessons: Sequence[Lesson], grouping: Grouping = group) -> list[int]:
    """`with_mined` for lessons that say whether they were mined (`pattern`)."""
    return with_mined(
        [(item.title, item.guideline) for item in lessons],
        [
            None
            if item.pattern is None
            else Mined(item.task_type, item.pattern, item.goes_with or "success")
            for item in lessons
        ],
        [item.source_outcome for item in lessons],
        [item.task_type for item in lessons],
        grouping,
    )


def of_pages(pages: Sequence[tuple[InsightHeader, str]], grouping: Grouping = group) -> list[int]:
    """`of_lessons` for insight pages: (header, guideline) of each, read as index rows."""
    return of_lessons([insight_row(0, header, guideline) for header, guideline in pages], grouping)
