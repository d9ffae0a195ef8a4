"""The lines many tasks share (a benchmark's generic instructions): counted by how many distinct
tasks hold each (`LineCounter`, kept with the tasks' ranker as corpus_schema/common_lines.py's
`LineCounts`) and left out of what the tasks' ranker indexes (`strip`), so that similarity is
judged on what sets a task apart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from wikitrace.corpus_schema.common_lines import LineCounts, key_of

SHARE = 0.3
"""A line is common when at least this share of the distinct tasks hold it (and two)."""
LONGER_THAN = 20
"""Characters a line (stripped) has beyond this to be counted."""
_CACHED = 1 << 16
"""Lines whose digest is remembered (the common ones recur in every task)."""


class LineCounter:
    """Line counts (`LineCounts`) that texts are added to: a text counted before (by its
    digest) is not counted again."""

    def __init__(self, kept: LineCounts | None = None) -> None:
        self._kept = kept
        self._seen: set[int] = set(kept.texts.tolist()) if kept is not None else set()
        self._new_texts: list[int] = []
        self._new_lines: Counter[int] = Counter()
        self._keys: dict[str, int] = {}

    def line_key(self, line: str) -> int:
        """`key_of(line)`, remembered for the first lines met."""
        key = self._keys.get(line)
        if key is None:
            key = key_of(line)
            if len(self._keys) < _CACHED:
                self._keys[line] = key
        return key

    def add(self, text: str) -> None:
        key = key_of(text)
        if key in self._seen:
            return
        self._seen.add(key)
        self._new_texts.append(key)
        self._new_lines.update(
            {
                self.line_key(line)
                for line in map(str.strip, text.splitlines())
                if len(line) > LONGER_THAN
            }
        )

    def extend(self, texts: Iterable[str]) -> LineCounter:
        for text in texts:
            self.add(text)
        return self

    def counts(self) -> LineCounts:
        """What was counted, the kept counts and every text added since."""
        import numpy as np

        texts = np.array(self._new_texts, dtype=np.uint64)
        lines = np.fromiter(self._new_lines.keys(), dtype=np.uint64, count=len(self._new_lines))
        counts = np.fromiter(self._new_lines.values(), dtype=np.int64, count=len(self._new_lines))
        if self._kept is not None:
            texts = np.concatenate([self._kept.texts, texts])
            lines = np.concatenate([self._kept.lines, lines])
            counts = np.concatenate([self._kept.counts.astype(np.int64), counts])
        held, where = np.unique(lines, return_inverse=True)
        summed = np.bincount(where, weights=counts, minlength=len(held)) if len(held) else counts
        return LineCounts(
            texts=np.sort(texts), lines=held, counts=summed.astype(np.uint32, copy=False)
        )


def common_lines(counts: LineCounts, share: float = SHARE) -> frozenset[int]:
    """The digests of the lines at least `share` of the counted texts (and two) hold."""
    limit = max(2, int(len(counts.texts) * share))
    return frozenset(counts.lines[counts.counts >= limit].tolist())


def strip(text: str, common: frozenset[int], counter: LineCounter) -> str:
    """`text` less its `common` lines (itself when it has nothing else, or none are common)."""
    if not common:
        return text
    kept = [
        line
        for line in text.splitlines()
        if len(stripped := line.strip()) <= LONGER_THAN or counter.line_key(stripped) not in common
    ]
    return "\n".join(kept) or text
