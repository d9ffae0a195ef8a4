"""The rankers a version saves with its catalog (`search_files`): their texts counted a page at
a time (`count_pages`) into postings pages and stats (corpus_schema/counts.py), so that a
version made from another counts and writes only the pages whose texts it changes."""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
import struct
from array import array
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema.catalog import PastRun, damaged, page_size, tasks_and_records
from wikitrace.corpus_schema.common_lines import LINES, LineCounts, load_line_counts
from wikitrace.corpus_schema.counts import (
    PAGE_TEXTS,
    POSTINGS_VERSION,
    STATS,
    CountsPage,
    MappedPostings,
    PostingsPage,
    RankerStats,
    load_page,
    load_postings,
    load_stats,
    page_name,
    postings_name,
    text_digest,
)
from wikitrace.corpus_schema.layout import CATALOG, SEARCH_DIR, catalog_page_rel

from . import rank
from .boilerplate import LineCounter, common_lines, strip
from .rank import (
    SAVED_SEARCHES,
    SEARCH_COUNT,
    STEMMED,
    SearchName,
    insight_text,
)

FarmMap = Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]
"""`map`, or what does its work elsewhere (a build's worker processes), the results in the
items' order."""


@dataclass(frozen=True)
class Kept:
    """A page whose texts are those of the parent's page of the same number, text for text:
    the parent's postings page (`count_pages`)."""

    texts: int


def count_pages(
    texts: Iterable[str],
    parent: Path | None = None,
    farm_map: FarmMap = map,
    same: Collection[int] = (),
) -> Iterable[CountsPage | Kept]:
    """`texts` counted as a ranker indexes them, PAGE_TEXTS a page, each page by `farm_map`.
    What the ranker saved in `parent` (a folder, as search_files writes it) counted of the
    very same text is read back instead of tokenizing it again: a page of texts all counted
    before is `Kept` (its postings page taken as it is); a page is the same, text for text,
    however it was counted. `same`: the numbers of the pages known to hold the texts of the
    parent's full page of that number, which `texts` leaves out (each `Kept`, its texts
    neither read nor hashed)."""
    return farm_map(_page, _page_jobs(texts, parent, same))


_PageJob = tuple[list[str] | None, Path | None, int]
"""A page to count (`_page`): its texts (None: the parent's full page of that number), the
parent's ranker folder, its number."""


def _page_jobs(
    texts: Iterable[str], parent: Path | None, same: Collection[int]
) -> Iterator[_PageJob]:
    """`count_pages`' pages, each as `_page` takes it."""
    held = iter(texts)
    number = 0
    while True:
        number += 1
        if number in same:
            yield None, parent, number
        elif part := list(itertools.islice(held, PAGE_TEXTS)):
            yield part, parent, number
        else:
            return


def _page(job: _PageJob) -> CountsPage | Kept:
    """A page of texts counted (`count_pages`), given the parent's ranker folder; None for
    texts: the parent's full page of that number."""
    part, parent, number = job
    if part is None:
        return Kept(PAGE_TEXTS)
    digests = [text_digest(text) for text in part]
    kept: CountsPage | None = None
    if parent is not None and (parent / postings_name(number)).exists():
        postings = load_postings(parent / postings_name(number))
        if postings.digest_list() == digests:
            return Kept(len(part))
        kept = _forward(postings, _parent_words(parent))
    elif parent is not None:
        kept = load_page(parent / page_name(number))  # an earlier version's counts
        if kept is not None and kept.digests == digests:
            return kept
    return _counted(part, digests, kept)


@functools.lru_cache(maxsize=4)
def _parent_words(parent: Path) -> list[str]:
    """The words of the ranker saved in `parent`, by id."""
    stats = load_stats(parent / STATS)
    if stats is None:
        raise damaged(parent / STATS, ValueError("its postings pages have no stats"))
    return stats.words


def _forward(page: MappedPostings, words: list[str]) -> CountsPage:
    """A postings page as the counts of each of its texts (a text's words in the order of
    their ids)."""
    import numpy as np

    held = np.frombuffer(page.words, dtype=np.int32)
    ends = np.frombuffer(page.ends, dtype=np.int32)
    texts = np.frombuffer(page.texts, dtype=np.uint16)
    if len(held) and int(held[-1]) >= len(words):
        raise damaged(Path(page.name), ValueError(f"a word past the ranker's {len(words)}"))
    if len(texts) and int(texts.max()) >= len(page):
        raise damaged(Path(page.name), ValueError(f"a text past its {len(page)}"))
    word_of_pair = np.repeat(np.arange(len(held)), np.diff(ends, prepend=0))
    order = np.argsort(texts, kind="stable")  # by text, then word
    return CountsPage(
        digests=page.digest_list(),
        words=[words[word] for word in held.tolist()],
        lengths=page.lengths.tolist(),
        ends=np.cumsum(np.bincount(texts, minlength=len(page))).tolist(),
        ids=word_of_pair[order].tolist(),
        counts=np.frombuffer(page.counts, dtype=np.int32)[order].tolist(),
    )


def _counted(texts: list[str], digests: list[str], kept: CountsPage | None) -> CountsPage:
    """A page of `texts`: the counts of those `kept` counted (by digest), the rest tokenized,
    its words numbered in the order the page first meets them."""
    known: dict[str, tuple[int, list[str], Sequence[int]]] = {}
    if kept is not None:
        for digest, (length, ids, counts) in zip(kept.digests, kept.texts(), strict=True):
            known[digest] = (length, [kept.words[i] for i in ids], counts)
    fresh = [text for text, digest in zip(texts, digests, strict=True) if digest not in known]
    tokens = rank._tokenize(fresh) if fresh else None
    word_of = sorted(tokens.vocab, key=tokens.vocab.__getitem__) if tokens else []
    tokenized = iter(tokens.ids if tokens else ())
    numbered: dict[str, int] = {}
    lengths, ends, ids, counts = [], [], [], []
    for digest in digests:
        if digest in known:
            length, words, times = known[digest]
        else:
            text = next(tokenized)
            counted = Counter(text)
            length, words, times = len(text), [word_of[i] for i in counted], list(counted.values())
        ids.extend(numbered.setdefault(word, len(numbered)) for word in words)
        counts.extend(times)
        lengths.append(length)
        ends.append(len(ids))
    return CountsPage(digests, list(numbered), lengths, ends, ids, counts)


def search_files(
    root: Path,
    parent: Path | None = None,
    farm_map: FarmMap = map,
    linked: Collection[str] = (),
) -> Iterator[tuple[str, Iterator[bytes] | None]]:
    """The saved rankers of the version at `root`, made from its catalog as written: each
    file's path in the version and its bytes, or None for a file of the `parent` version's to
    take as it is. Each ranker is its texts' postings, a page at a time, and its stats
    (corpus_schema/counts.py; its scores are computed when a query asks: search/mapped.py's
    PostingsIndex), made from the texts read back from the catalog, counted a page at a time
    (`count_pages`): the parent's first pages that hold the same texts are taken as they are,
    and only the pages whose texts changed are counted and written, so that an add writes
    its last page, its new pages and the stats. `linked`: the catalog's pages of runs that
    are the parent's files (catalog_build.catalog_of); the compilations' ranker takes the
    parent's page of the same runs with neither reading nor hashing their texts.
    `farm_map`: how the pages are counted."""
    same = _same_pages(root, parent, linked, "compilations")
    same_tasks = _same_pages(root, parent, linked, "tasks")
    # The pages of runs neither ranker reads: the tasks' are read only if the common lines
    # change (`_task_texts`).
    unread = same & same_tasks
    # The catalog is read once: each ranker's texts wait on disk (search_texts' texts, read
    # back as they are needed: the tasks twice, for their common lines).
    with contextlib.ExitStack() as stack:
        spilled = {
            name: stack.enter_context(_Texts(root.parent, f"{name}-texts"))
            for name in SAVED_SEARCHES
        }
        tasks, compilations, insights = (
            spilled[name].add for name in ("tasks", "compilations", "insights")
        )
        # The runs of the pages the same: their tasks alone (page N's runs are its texts).
        for item in tasks_and_records(root / CATALOG, same, unread):
            if isinstance(item, str):
                tasks(item)
            elif isinstance(item, PastRun):
                tasks(item.task)
                compilations(item.explanation)
            else:
                insights(insight_text(item[1]))

        def every_task() -> _Texts:
            """Every run's task, those of the pages `unread` included, read from the catalog."""
            held = stack.enter_context(_Texts(root.parent, "every-task"))
            for item in tasks_and_records(root / CATALOG, same | same_tasks):
                if isinstance(item, str | PastRun):
                    held.add(item if isinstance(item, str) else item.task)
            return held

        same_of: dict[SearchName, frozenset[int]] = {"compilations": same, "tasks": same_tasks}
        task_texts = _TaskTexts(spilled["tasks"], unread, every_task)
        yield from _saved_rankers(root, parent, spilled, task_texts, farm_map, same_of)


def _same_pages(
    root: Path, parent: Path | None, linked: Collection[str], name: SearchName
) -> frozenset[int]:
    """The pages of the ranker `name` (of the compilations or the tasks: one text a run)
    that may hold the texts of the `parent` ranker's page of the same number: page N holds
    the runs of the catalog's page N when the catalog's pages hold PAGE_TEXTS runs, and that
    page is the parent's file (`linked`: the parent's page of runs at that place), full in
    both, and the parent's ranker has it as postings (PAGE_TEXTS texts, as have the pages
    before it). The compilations' texts are then the same; the tasks' are when the lines
    left out as common are (`_task_texts`)."""
    if parent is None or not linked or page_size(root / CATALOG) != PAGE_TEXTS:
        return frozenset()
    before = parent / SEARCH_DIR / name
    stats = load_stats(before / STATS) if (before / STATS).exists() else None
    if stats is None:
        return frozenset()
    full = 0  # the parent's first pages that hold PAGE_TEXTS texts
    while full < len(stats.pages) and stats.pages[full][0] == PAGE_TEXTS:
        full += 1
    return frozenset(
        number
        for number in range(1, full + 1)
        if catalog_page_rel(number) in linked and (before / postings_name(number)).exists()
    )


@dataclass(frozen=True)
class _TaskTexts:
    """The tasks as read from the catalog: `held`, those of every page of runs but the
    `unread` (full pages, PAGE_TEXTS tasks each), in order; `every`, each task, read again
    when asked."""

    held: _Texts
    unread: frozenset[int]
    every: Callable[[], _Texts]

    @property
    def count(self) -> int:
        return self.held.count + PAGE_TEXTS * len(self.unread)

    def placed(self) -> Iterator[tuple[int, str]]:
        """Each task held, with its place among every task."""
        at = 0
        for text in self.held:
            while at // PAGE_TEXTS + 1 in self.unread:  # a page left unread starts here
                at += PAGE_TEXTS
            yield at, text
            at += 1

    def off_pages(self, pages: frozenset[int]) -> Iterator[str]:
        """The tasks that are not on the pages numbered `pages` (those `unread` among them)."""
        for at, text in self.placed():
            if at // PAGE_TEXTS + 1 not in pages:
                yield text


class _Texts:
    """Texts kept in an unnamed file in `folder` in the order added, each its length and its
    UTF-8 bytes, and read back in that order (as often as asked) once all are added."""

    _LENGTH = struct.Struct("<I")

    def __init__(self, folder: Path, what: str) -> None:
        from wikitrace.corpus_schema.writing import spill_file  # writing a version only

        self._file = spill_file(folder, what)
        self.count = 0
        """Texts added."""

    def __enter__(self) -> _Texts:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def add(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self._file.write(self._LENGTH.pack(len(data)) + data)
        self.count += 1

    def __iter__(self) -> Iterator[str]:
        handle = self._file
        handle.flush()
        handle.seek(0)
        held, at = b"", 0
        size = self._LENGTH.size
        while chunk := handle.read(1 << 20):
            held, at = held[at:] + chunk, 0
            while at + size <= len(held):
                (length,) = self._LENGTH.unpack_from(held, at)
                if at + size + length > len(held):
                    break
                yield held[at + size : at + size + length].decode("utf-8", "surrogatepass")
                at += size + length
        if at != len(held):
            raise ValueError("internal error: a spilled text was cut short")


def _saved_rankers(
    root: Path,
    parent: Path | None,
    spilled: dict[SearchName, _Texts],
    task_texts: _TaskTexts,
    farm_map: FarmMap,
    same: dict[SearchName, frozenset[int]],
) -> Iterator[tuple[str, Iterator[bytes] | None]]:
    """search_files' rankers, from their texts kept on disk (`spilled`; the tasks' as
    `task_texts`), less the pages `same` says hold the parent's texts (see `count_pages`).
    Every ranker's pages are handed to `farm_map` as one stream, so that a build's workers
    count the next ranker's first pages while this process takes in the last of the one
    before."""

    def before(name: SearchName) -> Path | None:
        return parent / SEARCH_DIR / name if parent is not None else None

    tasks, same_tasks, line_counts = _task_texts(
        task_texts, before("tasks"), same.get("tasks", frozenset())
    )
    same = {**same, "tasks": same_tasks}

    def jobs(name: SearchName) -> Iterator[tuple[SearchName, _PageJob]]:
        texts = tasks if name == "tasks" else iter(spilled[name])
        for job in _page_jobs(texts, before(name), same.get(name, frozenset())):
            yield name, job

    counted = itertools.groupby(
        farm_map(_ranker_page, itertools.chain.from_iterable(map(jobs, SAVED_SEARCHES))),
        key=operator.itemgetter(0),
    )
    group = next(counted, None)
    for name in SAVED_SEARCHES:
        pages: Iterable[CountsPage | Kept] = ()
        if group is not None and group[0] == name:  # a ranker without texts has no page
            pages = (page for _, page in group[1])
            group = None
        yield from _ranker_files(f"{SEARCH_DIR}/{name}", pages, before(name))
        if name == "tasks":
            yield f"{SEARCH_DIR}/{name}/{LINES}", iter([line_counts.dumps()])
        if group is None:
            group = next(counted, None)


def _task_texts(
    held: _TaskTexts, parent: Path | None, same: frozenset[int]
) -> tuple[Iterator[str], frozenset[int], LineCounts]:
    """The tasks' ranker's texts (each task less its common lines: search/boilerplate.py),
    the pages of them that are the `parent` ranker's, and the line counts to keep. With the
    parent's line counts (`LINES`), only the tasks off the pages `same` are counted: when the
    lines common to the tasks are then those common to the parent's, the pages `same` are
    the parent's and the texts are those off them; else every task is counted and stripped
    (no page known the same before its texts are), those left unread read now."""
    kept = load_line_counts(parent / LINES) if parent is not None and same else None
    if kept is not None and parent is not None and _holds_parent_s(held, parent, same, kept):
        counter = LineCounter(kept)
        counter.extend(held.off_pages(same))
        counts = counter.counts()
        common = common_lines(counts)
        if common == common_lines(kept):
            return (strip(text, common, counter) for text in held.off_pages(same)), same, counts
    every = held.every() if held.unread else held.held
    counter = LineCounter().extend(every)
    counts = counter.counts()
    common = common_lines(counts)
    return (strip(text, common, counter) for text in every), frozenset(), counts


def _holds_parent_s(held: _TaskTexts, parent: Path, same: frozenset[int], kept: LineCounts) -> bool:
    """Whether the texts `held` begin with every text of the `parent` ranker's, so that its
    line counts count none that is gone (a view leaves runs out): as many texts at least,
    and each of the parent's off the pages `same` (those are its own) at its place, as the
    parent's postings page holds it (its digest, less the parent's common lines)."""
    stats = load_stats(parent / STATS)
    if stats is None or held.count < stats.texts:
        return False
    common, counter = common_lines(kept), LineCounter()
    digests: dict[int, list[str]] = {}
    for at, text in held.placed():
        number = at // PAGE_TEXTS + 1
        if at >= stats.texts:
            break
        if number in same:
            continue
        if number not in digests:
            digests[number] = load_postings(parent / postings_name(number)).digest_list()
        theirs = digests[number]
        if at % PAGE_TEXTS >= len(theirs):
            return False
        if text_digest(strip(text, common, counter)) != theirs[at % PAGE_TEXTS]:
            return False
    return True


def _ranker_page(job: tuple[SearchName, _PageJob]) -> tuple[SearchName, CountsPage | Kept]:
    """A page of the ranker named counted (`_page`), its ranker's name with it."""
    name, page = job
    return name, _page(page)


def _ranker_files(
    folder: str, pages: Iterable[CountsPage | Kept], parent: Path | None
) -> Iterator[tuple[str, Iterator[bytes] | None]]:
    """A ranker's files (in `folder`, a path in the version) made from its counted `pages`:
    its postings pages, None for a page of the `parent` ranker's taken as it is (the first
    pages, while each is `Kept`), then its stats and texts.json."""
    stats = load_stats(parent / STATS) if parent is not None else None
    ranker = _Postings()
    kept = 0
    taken = False
    """Whether the parent's first `kept` pages are counted into `ranker`."""
    for number, page in enumerate(pages, 1):
        rel = f"{folder}/{postings_name(number)}"
        if isinstance(page, Kept) and not taken:
            if (
                stats is None
                or number > len(stats.pages)
                or stats.pages[number - 1][0] != page.texts
            ):
                assert parent is not None  # a page is Kept only from a parent
                raise damaged(
                    parent / STATS, ValueError(f"it does not say what page {number} holds")
                )
            kept += 1
            yield rel, None
            continue
        if not taken:
            if kept:
                assert stats is not None and parent is not None
                ranker.take(stats, parent, kept)
            taken = True
        if isinstance(page, Kept):  # after a page that changed: its words numbered anew
            assert stats is not None and parent is not None
            page = _forward(load_postings(parent / postings_name(number)), stats.words)
        yield rel, iter([ranker.add(page).dumps()])
    if not taken and kept:
        assert stats is not None and parent is not None
        ranker.take(stats, parent, kept)
    made = ranker.stats()
    yield f"{folder}/{STATS}", iter([made.dumps()])
    count = {"texts": made.texts, "indexed": bool(made.words), "words": STEMMED}
    yield f"{folder}/{SEARCH_COUNT}", iter([orjson.dumps({**count, "postings": POSTINGS_VERSION})])


class _Postings:
    """A ranker's postings pages made one after another (`add`), its words numbered as the
    pages first use them (a page's new words in the order of their spelling, so that a page
    read back from its postings numbers them as counting its texts did), and its stats."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.words: list[str] = []
        self.frequencies: list[int] = []
        self.length = 0
        self.pages: list[tuple[int, int]] = []

    def take(self, stats: RankerStats, parent: Path, kept: int) -> None:
        """Start from the first `kept` pages of the ranker saved in `parent` (`stats`): its
        stats less what its later pages hold (read from those pages alone)."""
        frequencies = list(stats.frequencies)
        length = stats.length
        for number in range(kept + 1, len(stats.pages) + 1):
            page = load_postings(parent / postings_name(number))
            start = 0
            for word, end in zip(page.words.tolist(), page.ends.tolist(), strict=True):
                frequencies[word] -= end - start
                start = end
            length -= sum(page.lengths)
        words = stats.pages[kept - 1][1]
        self.words = stats.words[:words]
        self.ids = dict(zip(self.words, range(words), strict=True))
        self.frequencies = frequencies[:words]
        self.length = length
        self.pages = stats.pages[:kept]

    def add(self, page: CountsPage) -> PostingsPage:
        """The postings of a page of counted texts, its words numbered on from the pages
        before."""
        import numpy as np

        ids, words, frequencies = self.ids, self.words, self.frequencies
        for word in sorted(word for word in page.words if word not in ids):
            ids[word] = len(words)
            words.append(word)
            frequencies.append(0)
        numbered = [ids[word] for word in page.words]
        pairs_of = np.diff(np.array([0, *page.ends], dtype=np.int64)).astype(np.int64)
        by_pair = np.array(numbered, dtype=np.int64)[np.array(page.ids, dtype=np.int64)]
        order = np.argsort(by_pair, kind="stable")  # by word, then text
        held, held_by = np.unique(by_pair[order], return_counts=True)
        for number, texts in zip(held.tolist(), held_by.tolist(), strict=True):
            frequencies[number] += texts
        self.length += sum(page.lengths)
        self.pages.append((len(page.lengths), len(words)))
        texts = np.repeat(np.arange(len(page.lengths), dtype=np.int64), pairs_of)[order]
        counts = np.array(page.counts, dtype=np.int64)[order]
        return PostingsPage(
            words=array("i", held.astype("<i4").tobytes()),
            ends=array("i", np.cumsum(held_by).astype("<i4").tobytes()),
            lengths=array("i", page.lengths),
            counts=array("i", counts.astype("<i4").tobytes()),
            texts=array("H", texts.astype("<u2").tobytes()),
            digests=bytes.fromhex("".join(page.digests)),
        )

    def stats(self) -> RankerStats:
        return RankerStats(
            texts=sum(texts for texts, _ in self.pages),
            length=self.length,
            words=self.words,
            frequencies=self.frequencies,
            pages=self.pages,
        )


def _file_chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk
