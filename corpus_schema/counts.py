"""A saved ranker's word counts in pages (`search/NAME/counts-NNNN.json`): each text's words
as counted, so that a version made from another tokenizes only the pages whose texts changed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

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
