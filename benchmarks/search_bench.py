"""Recall@5 of `search` on plain-language queries written from the sample logs.

Builds the corpus of tests/search_queries.py (the two sample logs' 32 runs, a compilation and
a lesson each, written from what each run did) and prints, for each query, the place of its
right lesson or compilation among the top 5 hits, then recall@5: with words stemmed and names
split (as wikitrace searches), and without (each word as written, as before issue 41), with
the least score search shows (wikitrace.search.MIN_SCORE) and, as written, with none.
Asserts nothing.

    python benchmarks/search_bench.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import search_queries

from wikitrace.search import rank
from wikitrace.tools.memory import Memory


class _AsWritten:
    def stemWords(self, words: list[str]) -> list[str]:
        return words


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = search_queries.build(Path(scratch) / "corpus")
        loaded = Memory.load(root)
        now = search_queries.ranks(loaded)
        with (
            mock.patch.object(rank, "_stemmer", _AsWritten),
            mock.patch.object(rank, "with_parts", lambda text: text),
        ):
            # Rankers built anew from the same records, each word as written.
            plain = Memory(root, loaded.runs, loaded.insights, loaded.offline)
            before = search_queries.ranks(plain)
            unscored = search_queries.ranks(plain, min_score=0.0)
    print(f"{'now':>4} {'before':>6}  query (kind)")
    for query, place, old in zip(search_queries.QUERIES, now, before, strict=True):
        print(f"{place or '-':>4} {old or '-':>6}  {query.text} ({query.kind})")
    total = len(search_queries.QUERIES)
    for name, places in (
        ("stems and name parts", now),
        ("words as written", before),
        ("words as written, no least score", unscored),
    ):
        found = sum(place is not None for place in places)
        print(f"recall@{search_queries.TOP}, {name}: {found}/{total} = {found / total:.2f}")


if __name__ == "__main__":
    main()
