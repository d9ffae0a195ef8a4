"""The rankers a version saves with its catalog (`search_files`), their texts counted a page at
a time (`count_pages`: corpus_schema/counts.py), so that a version made from another tokenizes
only the texts it changes."""

from __future__ import annotations

import contextlib
import functools
import itertools
import struct
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema.catalog import PastRun, records_in
from wikitrace.corpus_schema.counts import PAGE_TEXTS, CountsPage, load_page, page_name, text_digest
from wikitrace.corpus_schema.layout import CATALOG, SEARCH_DIR

from . import rank
from .rank import (
    SAVED_SEARCHES,
    SCORE_COLUMNS,
    Ranker,
    SearchName,
    insight_text,
    without_boilerplate,
)

FarmMap = Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]
"""`map`, or what does its work elsewhere (a build's worker processes), the results in the
items' order."""


def count_pages(
    texts: Iterable[str], parent: Path | None = None, farm_map: FarmMap = map
) -> Iterable[CountsPage]:
    """`texts` counted as a ranker indexes them, PAGE_TEXTS a page, each page by `farm_map`.
    What a page of the ranker saved in `parent` (a folder, as search_files writes it) counted
    of the very same text is read back instead of tokenizing it again: a page of texts all
    counted before is the parent's as it is; a page is the same, text for text, however it
    was counted."""

    def pages() -> Iterator[tuple[list[str], Path | None]]:
        held = iter(texts)
        number = 0
        while part := list(itertools.islice(held, PAGE_TEXTS)):
            number += 1
            yield part, parent / page_name(number) if parent is not None else None

    return farm_map(_page, pages())


def _page(job: tuple[list[str], Path | None]) -> CountsPage:
    """A page of texts counted (`count_pages`), given the parent's page of the same number."""
    part, kept_path = job
    digests = [text_digest(text) for text in part]
    kept = load_page(kept_path) if kept_path is not None else None
    if kept is not None and kept.digests == digests:
        return kept
    return _counted(part, digests, kept)


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
    root: Path, parent: Path | None = None, farm_map: FarmMap = map
) -> Iterator[tuple[str, Iterator[bytes]]]:
    """The saved rankers of the version at `root`, made from its catalog as written: each
    file's path in the version and its bytes. One ranker is held at a time, each made from the
    texts read back from the catalog, counted a page at a time (`count_pages`: a page of the
    `parent` version's ranker that counted the same texts is taken as it is, so a version made
    from another tokenizes only the pages whose texts it changes); the pages are saved with it.
    bm25s writes its files into a scratch folder in `root`, gone when the last is read.
    `farm_map`: how the pages are counted (`count_pages`)."""
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
        for item in records_in(root / CATALOG):
            if isinstance(item, PastRun):
                tasks(item.task)
                compilations(item.explanation)
            else:
                insights(insight_text(item[1]))
        yield from _saved_rankers(root, parent, spilled, farm_map)


class _Texts:
    """Texts kept in an unnamed file in `folder` in the order added, each its length and its
    UTF-8 bytes, and read back in that order (as often as asked) once all are added."""

    _LENGTH = struct.Struct("<I")

    def __init__(self, folder: Path, what: str) -> None:
        from wikitrace.corpus_schema.writing import spill_file  # writing a version only

        self._file = spill_file(folder, what)

    def __enter__(self) -> _Texts:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def add(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self._file.write(self._LENGTH.pack(len(data)) + data)

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
    root: Path, parent: Path | None, spilled: dict[SearchName, _Texts], farm_map: FarmMap
) -> Iterator[tuple[str, Iterator[bytes]]]:
    """search_files' rankers, from their texts kept on disk (`spilled`)."""
    with tempfile.TemporaryDirectory(dir=root, prefix=".search-") as scratch:
        for name in SAVED_SEARCHES:
            folder = Path(scratch) / name
            folder.mkdir()
            held = spilled[name]
            texts: Iterable[str] = (
                without_boilerplate(functools.partial(iter, held))
                if name == "tasks"
                else iter(held)
            )
            before = parent / SEARCH_DIR / name if parent is not None else None
            pages = _saved(count_pages(texts, before, farm_map), folder)
            Ranker.of_pages(pages, folder=Path(scratch), columns=SCORE_COLUMNS).save(folder)
            for path in sorted(folder.iterdir()):
                yield f"{SEARCH_DIR}/{name}/{path.name}", _file_chunks(path)


def _saved(pages: Iterable[CountsPage], folder: Path) -> Iterator[CountsPage]:
    """`pages`, each written into `folder` as it passes."""
    for number, page in enumerate(pages, 1):
        (folder / page_name(number)).write_bytes(page.dumps())
        yield page


def _file_chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk
