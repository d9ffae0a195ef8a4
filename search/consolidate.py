"""Near-duplicate lessons: insights drawn from different runs that say the same thing.

Lexical by default: two insights are alike when the words of their titles and guidelines
overlap enough (Jaccard similarity of word sets); two drawn from runs of one project, when
their titles alone do (`within_projects`). Each joins the first group whose first
member it is alike to, in corpus order, so grouping is deterministic. Nothing is merged or
deleted: every insight keeps its page and its source run, and a group says how many runs back
the lesson. `by_vectors` groups by embeddings instead, for a caller that has an embedding
model (`wikitrace prompt --embedding-model`).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, overload

if TYPE_CHECKING:
    from wikitrace.corpus_schema.records import InsightHeader

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


_NEGATIONS = frozenset(["not", "never", "avoid", "don", "dont", "cannot", "no"])
"""Words that make a title advise against what it names ("Do not pass --strict")."""


def negated(title: str) -> bool:
    """Whether a lesson's title advises against what it names: such a lesson and one that
    advises for the same words are opposites, never near-duplicates (search/contradict.py
    decides whether one supersedes the other)."""
    return not _NEGATIONS.isdisjoint(_WORD.findall(title.lower()))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def overlap(first: str, second: str) -> float:
    """How much two texts' words overlap (Jaccard), 0 to 1."""
    return _jaccard(words(first), words(second))


def group(lessons: Sequence[tuple[str, str]], threshold: float = THRESHOLD) -> list[int]:
    """`_group`, remembered for the last lessons given (by a digest of their texts): a version
    is grouped for its index, then for its catalog, and both are the same lessons unless some
    are withheld. `lessons` is read twice, in order, and never held: it may be on disk."""
    frequency: Counter[str] = Counter()
    digest = hashlib.blake2b(str(threshold).encode(), digest_size=16)
    for title, guideline in lessons:
        frequency.update(words(f"{title} {guideline}"))
        digest.update(f"{len(title)}:{title}{len(guideline)}:{guideline}".encode())
    key = digest.digest()
    last_key, groups = _last[0]  # one read: another thread may group meanwhile
    if last_key != key:
        groups = _group(lessons, frequency, threshold)
        _last[0] = (key, groups)
    return list(groups)


_last: list[tuple[bytes, tuple[int, ...]]] = [(b"", ())]
"""The digest of the lessons last grouped, and their groups."""


def _group(
    lessons: Iterable[tuple[str, str]], frequency: Counter[str], threshold: float
) -> tuple[int, ...]:
    """For each (title, guideline), the index of the first lesson of its group (itself when it
    leads one). Alike: the titles' words overlap by `threshold` and the whole texts' by half
    of it, or the whole texts' by `threshold`.

    Prefix filtering: two word sets that overlap by t (Jaccard) share at least k words among
    each one's first |set| - ceil(t * |set|) + k words, in any one order of all words
    (rarest first here), for any k up to ceil(t * the larger size). The first way needs the
    titles to overlap by `threshold`, the second the whole texts: so a leader can be alike
    only when it shares enough words of the lesson's title prefix, or of its whole text's
    prefix (see _EXTRA), and only those leaders are compared. The same groups as comparing
    with every leader (a property test checks it). Its time grows with how many leaders share
    a word of a prefix: with the lessons squared when their words are common, with a small
    constant (the sharing is counted in C, and only a leader sharing two words is compared).

    A lesson's word sets are made while it is grouped and kept only when it leads a group
    (`_Leaders`): every other lesson is let go once its group is found. `frequency`: how
    many lessons have each word."""
    leaders = _Leaders(frequency, threshold)
    found = array("q")
    for index, (title, guideline) in enumerate(lessons):
        lesson = leaders.words_of(title, guideline)
        leader = leaders.alike(lesson)
        if leader is None:
            leaders.add(index, lesson)
            leader = index
        found.append(leader)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class _Words:
    """A lesson's word sets as `_group` compares them (word numbers), with their prefixes."""

    head: frozenset[int]
    """Its title's words."""
    whole: frozenset[int]
    """Its title's and guideline's words."""
    head_prefix: list[int]
    whole_prefix: list[int]
    negative: bool = False
    """Its title advises against what it names (`negated`): alike only to such a leader."""


class _Leaders:
    """The groups `_group` has found so far: each group's first lesson, with its word sets.

    Words are numbered by the order prefix filtering uses (rarest first), so a prefix is the
    smallest numbers. A leader's word sets are kept as arrays of the numbers (4 bytes a word,
    where a set of strings took about 100), and so are the lists of leaders by word."""

    def __init__(self, frequency: Counter[str], threshold: float) -> None:
        ordered = sorted(frequency, key=lambda word: (frequency[word], word))
        self._rank = {word: n for n, word in enumerate(ordered)}
        self._threshold = threshold
        self._by_title: dict[int, array[int]] = {}
        self._by_whole: dict[int, array[int]] = {}
        """A word -> the leaders (by position in `_leaders`) with it in their title's (whole
        text's) prefix."""
        self._leaders = array("q")
        """The index of each group's first lesson."""
        self._negative = bytearray()
        """Whether each leader's title advises against what it names (`negated`)."""
        self._kept = array("i")
        self._bounds = array("q", [0])
        """Each leader's title words, then its whole text's, one after another in `_kept`:
        leader c's title is _kept[_bounds[2c]:_bounds[2c+1]] and its whole text the rest up
        to _bounds[2c+2]."""

    def words_of(self, title: str, guideline: str) -> _Words:
        head = self._numbered(title)
        whole = self._numbered(f"{title} {guideline}")
        return _Words(head, whole, self._prefix(head), self._prefix(whole), negative=negated(title))

    def _numbered(self, text: str) -> frozenset[int]:
        return frozenset([self._rank[word] for word in words(text)])

    def _prefix(self, found: frozenset[int]) -> list[int]:
        return sorted(found)[: len(found) - math.ceil(self._threshold * len(found)) + _EXTRA + 1]

    def alike(self, lesson: _Words) -> int | None:
        """The first lesson of the first group (in corpus order) `lesson` is alike to; None
        when it is alike to none."""
        bounds, kept, threshold = self._bounds, self._kept, self._threshold
        titled = self._sharing(self._by_title, lesson.head_prefix, len(lesson.head), 0)
        whole_sharing = self._sharing(self._by_whole, lesson.whole_prefix, len(lesson.whole), 1)
        for c in sorted(titled | whole_sharing):
            if self._negative[c] != lesson.negative:
                continue  # "do X" and "do not X" are opposites, not near-duplicates
            # Alike in the whole texts; else alike enough in them and alike in the titles
            # (only a leader sharing a word of the title's prefix can be).
            alike = _jaccard_of(lesson.whole, kept[bounds[2 * c + 1] : bounds[2 * c + 2]])
            if alike >= threshold or (
                alike >= threshold / 2
                and c in titled
                and _jaccard_of(lesson.head, kept[bounds[2 * c] : bounds[2 * c + 1]]) >= threshold
            ):
                return self._leaders[c]
        return None

    def _sharing(
        self, postings: dict[int, array[int]], mine: list[int], size: int, part: int
    ) -> set[int]:
        """The leaders whose prefix shares enough words with `mine`, the prefix of a set of
        `size` words (see _EXTRA); `part` says which of a leader's sets to size: 0 its
        title's, 1 its whole text's."""
        threshold = self._threshold
        hits = Counter(itertools.chain.from_iterable(postings.get(word, ()) for word in mine))
        if math.ceil(threshold * size) - 1 >= _SHARED:  # true of most sets: one word is too few
            return {c for c, shared in hits.items() if shared >= _SHARED}
        return {
            c
            for c, shared in hits.items()
            if shared >= min(_SHARED, math.ceil(threshold * max(size, self._size(c, part))) - 1)
        }

    def _size(self, c: int, part: int) -> int:
        """How many words leader `c` has in its title (`part` 0) or its whole text (1)."""
        return self._bounds[2 * c + part + 1] - self._bounds[2 * c + part]

    def add(self, index: int, lesson: _Words) -> None:
        """The lesson at `index` leads a new group."""
        position = len(self._leaders)
        for word in lesson.head_prefix:
            self._by_title.setdefault(word, array("i")).append(position)
        for word in lesson.whole_prefix:
            self._by_whole.setdefault(word, array("i")).append(position)
        self._leaders.append(index)
        self._negative.append(lesson.negative)
        self._kept.extend(lesson.head)
        self._bounds.append(len(self._kept))
        self._kept.extend(lesson.whole)
        self._bounds.append(len(self._kept))


_SHARED = 2
"""Prefix words a leader must share with a lesson to be compared with it (fewer only when
the sets are so small that their overlap may be smaller)."""
_EXTRA = _SHARED
"""Words a prefix holds past the one shared word plain prefix filtering needs: one for each
word more to be shared, and one more because ceil(t * n) computed in floating point may be
one past the overlap it bounds (so the bound used is one less)."""


def _jaccard_of(mine: frozenset[int], theirs: array[int]) -> float:
    """`_jaccard` of a set and a leader's words (distinct word numbers): the same float, from
    one intersection."""
    if not mine or not theirs:
        return 0.0
    shared = len(mine.intersection(theirs))
    return shared / (len(mine) + len(theirs) - shared)


PROJECT_SHARED = 2
"""Title words two lessons of one project must share, besides overlapping by THRESHOLD."""


def within_projects(
    leaders: Sequence[int],
    titles: Sequence[str],
    steps: Sequence[str],
    project_of: Callable[[str], str | None],
    threshold: float = THRESHOLD,
) -> list[int]:
    """`leaders` (each lesson's group's first, as `of_lessons` gives them) with the groups of
    one project joined: two groups whose first lessons were drawn from different runs of the
    same project (`project_of` a source step; None: no project) join when the words of their
    titles overlap by `threshold` (Jaccard, `words`) and share at least PROJECT_SHARED words,
    whatever their guidelines say. One project's runs draw the same lesson again in other
    words, naming other files, commands and turns, so that the whole texts overlap less than
    `group` asks, while the title stays the same. A group joins the first (in corpus order)
    it is alike to; lessons of no project, or of different projects, are never joined here."""
    return list(ProjectGroups(leaders, titles, steps, project_of, threshold))


class ProjectLessons(Protocol):
    """Which lessons are each project's (those whose source runs are), as a reader that
    knows it without reading every lesson tells it (a catalog's index)."""

    def project_of(self, lesson: int) -> str | None:
        """The project of a lesson's source run; None: none."""

    def lessons(self, project: str) -> Sequence[int]:
        """A project's lessons, in corpus order."""


class ProjectGroups(Sequence[int]):
    """`within_projects`, each project's groups joined when first asked for one of its
    lessons: a reader that lists one project's lessons (a hook's recall) compares only its
    titles, not every project's."""

    def __init__(
        self,
        leaders: Sequence[int],
        titles: Sequence[str],
        steps: Sequence[str],
        project_of: Callable[[str], str | None],
        threshold: float = THRESHOLD,
        *,
        lessons: ProjectLessons | None = None,
    ):
        self._leaders = leaders
        self._titles = titles
        self._steps = steps
        self._threshold = threshold
        self._lessons = lessons
        """Each lesson's project and each project's lessons, when known without reading
        every lesson's step (a catalog's index): `project_of` is then not asked."""
        self._project: dict[int, str] = {}
        """A group's first lesson -> its project (groups of no project are never joined)."""
        self._firsts: dict[str, list[int]] = {}
        """A project -> the first lessons of its groups, in corpus order."""
        if lessons is None:
            for index, leader in enumerate(leaders):
                if leader == index and (project := project_of(steps[index])) is not None:
                    self._project[index] = project
                    self._firsts.setdefault(project, []).append(index)
        self._joined: dict[str, dict[int, int]] = {}
        """A project -> its groups that join an earlier one: first lesson -> the one joined."""

    def _project_of(self, leader: int) -> str | None:
        if self._lessons is None:
            return self._project.get(leader)
        if self._leaders[leader] != leader:  # no group's first: never joined, as above
            return None
        return self._lessons.project_of(leader)

    def _firsts_of(self, project: str) -> list[int]:
        if self._lessons is None:
            return self._firsts[project]
        leaders = self._leaders
        return [i for i in self._lessons.lessons(project) if leaders[i] == i]

    def __len__(self) -> int:
        return len(self._leaders)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        leader = self._leaders[index]
        project = self._project_of(leader)
        if project is None:
            return leader
        joined = self._joined.get(project)
        if joined is None:
            joined = self._joined[project] = self._join(self._firsts_of(project))
        return joined.get(leader, leader)

    def _join(self, members: list[int]) -> dict[int, int]:
        """One project's groups (their first lessons, in corpus order) joined."""
        joined: dict[int, int] = {}
        kept: list[tuple[int, frozenset[str]]] = []
        """The groups still leading, with their titles' words."""
        by_word: dict[str, set[int]] = {}
        """A title word -> positions in `kept` of the leading groups whose titles have it."""
        for index in members:
            mine = words(self._titles[index])
            alike = next(
                (
                    kept[position][0]
                    for position in _sharing(mine, by_word)
                    if self._steps[kept[position][0]] != self._steps[index]
                    and negated(self._titles[kept[position][0]]) == negated(self._titles[index])
                    and _jaccard(mine, kept[position][1]) >= self._threshold
                ),
                None,
            )
            if alike is not None:
                joined[index] = alike
                continue
            for word in mine:
                by_word.setdefault(word, set()).add(len(kept))
            kept.append((index, mine))
        return joined


def _sharing(mine: frozenset[str], by_word: dict[str, set[int]]) -> list[int]:
    """The positions, in order, that have at least PROJECT_SHARED of the words `mine` in
    `by_word`. A word most titles have (`check`, `use`) is only looked up in, never walked:
    a position that shares enough words has all but one of them among the rarer ones."""
    lists = sorted((by_word[word] for word in mine if word in by_word), key=len)
    if len(lists) < PROJECT_SHARED:
        return []
    *rarer, commonest = lists
    shared = Counter(itertools.chain.from_iterable(rarer))
    return sorted(
        position
        for position, count in shared.items()
        if count + (position in commonest) >= PROJECT_SHARED
    )


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
    """For each lesson, the index of the first lesson of its group (itself when it leads one).
    The model's lessons (no `pattern`) are grouped by `grouping`; mined ones are never grouped
    with each other (their titles are templated alike). A mined contrast joins the group of
    the first model lesson of its task type that names what it counts (every word of the tool
    or pattern, `repeat` and `error` for a repeated failed action) and was drawn from a run
    with the outcome the pattern goes with (a failed run for a pattern that goes with
    failure): the same lesson, once counted and once read from a run.

    `lessons` is read in order a few times and never held (it may be on disk, as a build's
    index rows are): memory keeps the groups and the contrasts still looking for a lesson."""
    plain = array("q")
    looking: dict[tuple[str | None, str], list[tuple[int, frozenset[str]]]] = {}
    """The mined contrasts still looking for their model lesson, by (task type, outcome)."""
    for index, item in enumerate(lessons):
        if item.pattern is None:
            plain.append(index)
        elif item.pattern != "diverge":
            goes_with = item.goes_with or "success"
            subject = Mined(item.task_type, item.pattern, goes_with).words()
            if subject:
                looking.setdefault((item.task_type, goes_with), []).append((index, subject))
    found = grouping(_Texts(lessons, plain)) if plain else []  # none: no text read
    leaders = list(range(len(lessons)))
    for position, index in enumerate(plain):
        leaders[index] = plain[found[position]]
    del found
    # One pass over the model's lessons, in order; each one's words made only when it may match.
    for index, item in enumerate(lessons):
        if not looking:
            break
        if item.pattern is not None:
            continue
        key = (item.task_type, item.source_outcome)
        waiting = looking.get(key)
        if waiting is None:
            continue
        stems = _stems(words(f"{item.title} {item.guideline}"))
        still = []
        for mined, subject in waiting:
            if subject <= stems:
                leaders[mined] = leaders[index]
            else:
                still.append((mined, subject))
        if still:
            looking[key] = still
        else:
            del looking[key]
    return leaders


class _Texts(Sequence[tuple[str, str]]):
    """(title, guideline) of the model's lessons among `lessons` (at positions `plain`), read
    when asked: iterating reads `lessons` in order."""

    def __init__(self, lessons: Sequence[Lesson], plain: array[int]) -> None:
        self._lessons = lessons
        self._plain = plain

    def __len__(self) -> int:
        return len(self._plain)

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, str]]: ...

    def __getitem__(self, index: int | slice) -> tuple[str, str] | list[tuple[str, str]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        item = self._lessons[self._plain[index]]
        return item.title, item.guideline

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for item in self._lessons:
            if item.pattern is None:
                yield item.title, item.guideline


def with_mined(
    lessons: Sequence[tuple[str, str]],
    mined: Sequence[Mined | None],
    outcomes: Sequence[str],
    task_types: Sequence[str | None],
    grouping: Grouping = group,
) -> list[int]:
    """`of_lessons` for lessons given as lists: (title, guideline), what each mined one counts
    (None for a model's lesson), each source run's outcome and each task type."""
    # Imported here: reading a corpus (a hook's recall) needs neither module.
    from wikitrace.corpus_schema.catalog_build import LessonTexts

    return of_lessons(
        [
            LessonTexts(
                title,
                guideline,
                task_type,
                outcome,
                found.pattern if found else None,
                found.goes_with if found else None,
            )
            for (title, guideline), found, outcome, task_type in zip(
                lessons, mined, outcomes, task_types, strict=True
            )
        ],
        grouping,
    )


def of_pages(pages: Sequence[tuple[InsightHeader, str]], grouping: Grouping = group) -> list[int]:
    """`of_lessons` for insight pages: (header, guideline) of each, read as index rows."""
    from wikitrace.corpus_schema.indexes import insight_row

    return of_lessons([insight_row(0, header, guideline) for header, guideline in pages], grouping)
