"""A saved ranker's word counts in pages: `search/NAME/postings-NNNN.bin` (`PostingsPage`: each
word's texts and counts) and `search/NAME/stats.json` (`RankerStats`), from which a query
computes the scores; an earlier version's `counts-NNNN.json` (`CountsPage`: each text's words)
is still read, so that a version made from another tokenizes only the pages whose texts
changed."""

from __future__ import annotations

import bisect
import hashlib
import mmap
import os
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson

from .catalog import damaged, versioned_json

PAGE_TEXTS = 2048
"""Texts a page counts: page N holds texts (N - 1) * PAGE_TEXTS to N * PAGE_TEXTS - 1 of the
ranker, so an add that appends texts rewrites the last page alone (and tokenizes only the
texts it has not counted: each text's digest is kept)."""
COUNTS_VERSION = 1
"""What a page's "counts" says; a page of another version is counted anew, not read."""


def page_name(number: int) -> str:
    """`counts-0001.json`: the file of page `number` (from 1), in its ranker's folder."""
    return f"counts-{number:04d}.json"


def text_digest(text: str) -> str:
    """What a text is, as a page records it (blake2b), so that a page's counts of a text are
    read back only for exactly that text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


@dataclass(frozen=True)
class CountsPage:
    """The words of up to PAGE_TEXTS texts, as a ranker indexes them (stems, less stop
    words): `words`, numbered in the order the page first meets them; for each text, its
    length in words and its distinct words with how often it uses each."""

    digests: list[str]
    """Each text's text_digest."""
    words: list[str]
    lengths: list[int]
    """Each text's length, in words."""
    ends: list[int]
    """Where each text's (word, count) pairs end in `ids` and `counts`."""
    ids: list[int]
    """Each pair's word (its place in `words`)."""
    counts: list[int]

    def texts(self) -> Iterable[tuple[int, Sequence[int], Sequence[int]]]:
        """(length, word ids, counts) of each text, in order."""
        start = 0
        for length, end in zip(self.lengths, self.ends, strict=True):
            yield length, self.ids[start:end], self.counts[start:end]
            start = end

    def dumps(self) -> bytes:
        """The page's file: one JSON object, keys in a fixed order, a trailing newline."""
        return (
            orjson.dumps(
                {
                    "counts": COUNTS_VERSION,
                    "digests": self.digests,
                    "words": self.words,
                    "lengths": self.lengths,
                    "ends": self.ends,
                    "ids": self.ids,
                    "counts_of": self.counts,
                }
            )
            + b"\n"
        )


def load_page(path: Path) -> CountsPage | None:
    """The page at `path`; None when there is none or it is of another version (its texts
    are counted anew); CorpusError when it is damaged."""
    data = versioned_json(path, "counts", COUNTS_VERSION)
    if data is None:
        return None
    try:
        page = CountsPage(
            digests=list(data["digests"]),
            words=list(data["words"]),
            lengths=list(data["lengths"]),
            ends=list(data["ends"]),
            ids=list(data["ids"]),
            counts=list(data["counts_of"]),
        )
        per_text = {len(page.lengths), len(page.ends), len(page.digests)}
        if len(per_text) != 1 or len(page.ids) != len(page.counts):
            raise ValueError("its lists do not fit together")
        if (page.ends and page.ends[-1] != len(page.ids)) or (
            page.ids and max(page.ids) >= len(page.words)
        ):
            raise ValueError("its pairs do not fit its words")
    except (KeyError, TypeError, ValueError) as error:
        raise damaged(path, error) from None
    return page


# The rankers' stored form since counts version 2: postings a page, and the stats of the
# whole ranker. A ranker's scores are computed when a query asks for them (search/mapped.py's
# PostingsIndex) from each text's length and word counts and each word's document frequency,
# so that an add writes only the pages whose texts it changes, and the stats.

POSTINGS_VERSION = 1
"""What a postings page's header says (after `_MAGIC`); a page or stats of another version
are the corpus's error when read (a query, or an add counting on its parent's pages)."""
STATS = "stats.json"
"""A ranker's stats (`RankerStats`), in its folder beside its postings pages."""
_MAGIC = b"WTPOSTS\x00"
_HEAD = struct.Struct("<8sIIII")
"""The magic, the version, and the page's texts, words and (word, text) pairs."""
DIGEST_BYTES = 12


def postings_name(number: int) -> str:
    """`postings-0001.bin`: the postings page `number` (from 1), in its ranker's folder."""
    return f"postings-{number:04d}.bin"


@dataclass(frozen=True)
class PostingsPage:
    """The texts of a page as the ranker reads them, by word: for each word any of its texts
    holds (`words`: the ranker's word ids, ascending), the texts that hold it (`texts`: their
    places in the page, ascending) and how often each does (`counts`), the word's pairs ending
    at `ends`; each text's length in words and digest (`text_digest`, 12 bytes)."""

    words: array[int]
    ends: array[int]
    lengths: array[int]
    counts: array[int]
    texts: array[int]
    digests: bytes

    def dumps(self) -> bytes:
        """The page's file: a header, then its arrays (little-endian int32; the texts uint16),
        then the digests."""
        head = _HEAD.pack(
            _MAGIC, POSTINGS_VERSION, len(self.lengths), len(self.words), len(self.counts)
        )
        arrays = [self.words, self.ends, self.lengths, self.counts, self.texts]
        if sys.byteorder != "little":
            arrays = [array(part.typecode, part) for part in arrays]
            for part in arrays:
                part.byteswap()
        return b"".join([head, *(part.tobytes() for part in arrays), self.digests])


class MappedPostings:
    """A postings page (`PostingsPage.dumps`) mapped read-only: its arrays as memoryviews
    (`words`, `ends`, `lengths`, `counts`, `texts`) and its `digests`. ValueError when the file
    is not a page of this version (OSError when it cannot be read); on a big-endian machine
    the arrays are read into memory, byte-swapped."""

    def __init__(self, path: Path) -> None:
        self.name = str(path)
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < _HEAD.size:
                raise ValueError(f"{path.name} is too short for a postings page")
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        magic, version, texts, words, pairs = _HEAD.unpack_from(mapped)
        if magic != _MAGIC or version != POSTINGS_VERSION:
            raise ValueError(f"{path.name} is not a postings page of version {POSTINGS_VERSION}")
        expected = _HEAD.size + 4 * (2 * words + texts + pairs) + 2 * pairs + DIGEST_BYTES * texts
        if size != expected:
            raise ValueError(f"{path.name} holds {size} bytes, its header says {expected}")
        body = memoryview(mapped)
        at = _HEAD.size
        parts: list[memoryview[int]] = []
        layout: list[tuple[int, Literal["i", "H"], int]] = [
            (words, "i", 4),
            (words, "i", 4),
            (texts, "i", 4),
            (pairs, "i", 4),
            (pairs, "H", 2),
        ]
        for count, kind, width in layout:
            part = body[at : at + width * count].cast(kind)
            if sys.byteorder != "little":
                swapped = array(kind, part)
                swapped.byteswap()
                part = memoryview(swapped)
            parts.append(part)
            at += width * count
        self.words, self.ends, self.lengths, self.counts, self.texts = parts
        self.digests = bytes(body[at:])
        if self.ends and self.ends[-1] != pairs:
            raise ValueError(f"{path.name}: its words' pairs do not end with its pairs")

    def __len__(self) -> int:
        return len(self.lengths)

    def pairs(self, word: int) -> tuple[int, int] | None:
        """Where the pairs of the ranker's word `word` start and end; None when no text of
        the page holds it."""
        words = self.words
        place = bisect.bisect_left(words, word)
        if place == len(words) or words[place] != word:
            return None
        return (self.ends[place - 1] if place else 0), self.ends[place]

    def digest_list(self) -> list[str]:
        """Each text's digest, as `text_digest` spells it."""
        data = self.digests
        return [data[i : i + DIGEST_BYTES].hex() for i in range(0, len(data), DIGEST_BYTES)]


def load_postings(path: Path) -> MappedPostings:
    """The postings page at `path`; CorpusError when it is missing or damaged."""
    try:
        return MappedPostings(path)
    except (OSError, ValueError) as error:
        raise damaged(path, error) from None


@dataclass(frozen=True)
class RankerStats:
    """What a ranker's scores need beyond its pages: how many texts it ranks and their
    length in all (words), each word (by id) and how many texts hold it, and each page's
    texts and how many words the pages up to it hold (the ids are numbered in the order the
    pages first use them, so a page's own new words follow those of the pages before)."""

    texts: int
    length: int
    words: list[str]
    frequencies: list[int]
    pages: list[tuple[int, int]]
    """(texts, words so far) of each page, in order."""

    def dumps(self) -> bytes:
        return (
            orjson.dumps(
                {
                    "stats": POSTINGS_VERSION,
                    "texts": self.texts,
                    "length": self.length,
                    "pages": self.pages,
                    "words": self.words,
                    "frequencies": self.frequencies,
                }
            )
            + b"\n"
        )


def load_stats(path: Path) -> RankerStats | None:
    """The stats at `path` (a ranker's STATS); None when there are none or they are of
    another version; CorpusError when they are damaged."""
    data = versioned_json(path, "stats", POSTINGS_VERSION)
    if data is None:
        return None
    try:
        stats = RankerStats(
            texts=int(data["texts"]),
            length=int(data["length"]),
            words=list(data["words"]),
            frequencies=list(data["frequencies"]),
            pages=[(int(texts), int(words)) for texts, words in data["pages"]],
        )
        if len(stats.words) != len(stats.frequencies):
            raise ValueError("its words and frequencies do not fit together")
        if sum(texts for texts, _ in stats.pages) != stats.texts:
            raise ValueError("its pages do not hold its texts")
        if stats.pages and stats.pages[-1][1] != len(stats.words):
            raise ValueError("its pages do not hold its words")
        if not all(isinstance(word, str) for word in stats.words):
            raise ValueError("a word is not a string")
        if not all(type(f) is int and 0 <= f <= stats.texts for f in stats.frequencies):
            raise ValueError("a word's frequency is not a count of its texts")
        if stats.length < 0 or (stats.length == 0 and any(stats.frequencies)):
            raise ValueError("its texts' length in all does not fit their words")
        if any(texts < 0 or words < 0 for texts, words in stats.pages):
            raise ValueError("a page holds fewer than no texts or words")
    except (KeyError, TypeError, ValueError) as error:
        raise damaged(path, error) from None
    return stats
