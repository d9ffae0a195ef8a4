"""BM25 search over a corpus's texts (bm25s): tokenizing and stemming, building a ranker a
part at a time, saving and loading it, and the rankers a version saves with its catalog."""

from __future__ import annotations

import functools
import itertools
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import orjson

from wikitrace.corpus_schema.catalog import InsightEntry, PastRun, damaged
from wikitrace.corpus_schema.counts import POSTINGS_VERSION, STATS, load_stats

from .boilerplate import SHARE, LineCounter, common_lines, strip
from .mapped import MappedIndex, MatrixColumns, PostingsIndex, mappable, split_words, with_parts

_OPTIONAL = ("scipy", "numba", "jax", "tqdm")
"""What bm25s imports when it is installed, to build or rank another way than wikitrace does,
or to draw progress bars wikitrace never asks for (it passes show_progress=False)."""


@functools.cache
def _bm25s() -> Any:
    """bm25s, imported as if scipy, numba, jax and tqdm were not installed (they are hidden
    while it is imported, and put back after).

    bm25s imports each of them when it can: scipy to build an index (which wikitrace builds
    itself, as bm25s's numpy backend does), numba to compile its scoring, jax, whose
    import sets up XLA and which then picks the top texts (its own way of ordering ties), and
    tqdm (with asyncio), a third of the import's time, for bars it would not draw. An
    environment that has them would start seconds slower, and could rank a corpus
    differently. Hidden, the import costs the same everywhere, tests included (they install
    scipy); and `Ranker` asks for numpy's backends by name, in case bm25s was imported
    before. Another thread importing one of these during those few lines would get an
    ImportError."""
    hidden = {
        name: module
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] in _OPTIONAL
    }
    for name in [*_OPTIONAL, *hidden]:
        sys.modules[name] = None  # type: ignore[assignment]  # None: importing it fails
    try:
        import bm25s
    finally:
        for name in [*_OPTIONAL, *hidden]:
            sys.modules.pop(name, None)
        sys.modules.update(hidden)
    return bm25s


@functools.cache
def _stemmer() -> Any:
    """Snowball's English stemmer (PyStemmer): refunded, refunds and refund are one word."""
    import Stemmer

    return Stemmer.Stemmer("english")


STEMMED = "stems"
"""What a saved ranker's texts.json says under "words" when it indexed the words' stems; one
saved without it (an earlier build's) indexed the words as written, and is asked in them."""


def _tokenize(texts: Sequence[str], *, stem: bool = True) -> Tokens:
    """bm25s's words of each text (search/mapped.py's `split_words`: split as with_parts
    does, less English stop words), each word its stem unless `stem` is False. Stems are
    numbered in the order they are first met, as bm25s numbers words (its own stemming
    numbers them in a set's order, which changes from one process to the next, and with it a
    saved index's bytes)."""
    if not stem:
        return Tokens(*split_words([with_parts(text) for text in texts]))
    # Each word numbered by its stem as it is first met: the stems in the order their first
    # words are met, as bm25s numbers its words in the order of its vocab's keys.
    numbered: dict[str, int] = {}
    stem_word = _stemmer().stemWord

    def stem_number(word: str) -> int:
        return numbered.setdefault(stem_word(word), len(numbered))

    ids, _ = split_words([with_parts(text) for text in texts], stem_number)
    return Tokens(ids, numbered)


class Tokens(NamedTuple):
    """Texts' words as ids (`ids`, a list a text) and the words' ids (`vocab`), as bm25s's
    Tokenized holds them."""

    ids: list[list[int]]
    vocab: dict[str, int]


SearchName = Literal["tasks", "insights", "compilations"]
SAVED_SEARCHES: tuple[SearchName, ...] = ("tasks", "insights", "compilations")
"""The rankers a version saves: those its first message needs, and the compilations' for
`search` (so that a search loads it instead of building it on every call). A version made
before the compilations' was saved builds it when a search first asks for it."""
SEARCH_COUNT = "texts.json"
"""A saved ranker's count: how many texts it ranks, whether any holds a word to index, that
it indexed stems ("words"), and, saved as postings (search/saved.py), their version."""


def without_boilerplate(texts: Callable[[], Iterable[str]], share: float = SHARE) -> Iterator[str]:
    """Each text less the lines that many of the texts hold (a benchmark's generic
    instructions), so that similarity is judged on what sets a task apart. `texts()` is read
    twice: once to count, by their digests, the distinct texts each line of more than 20
    characters is in (search/boilerplate.py), then to leave out those in at least `share` of
    them (and of two)."""
    counter = LineCounter().extend(texts())
    common = common_lines(counter.counts(), share)
    if not common:
        yield from texts()
        return
    for text in texts():
        yield strip(text, common, counter)


def search_texts(
    name: SearchName,
    runs: Callable[[], Iterable[PastRun]],
    insights: Callable[[], Iterable[InsightEntry]],
) -> Iterator[str]:
    """What each ranker ranks, a text at a time: the runs' tasks less the lines most tasks
    share (the runs are read twice), the insights' title, guideline and applicability, or the
    compilations' titles, claims and quotes (PastRun.explanation)."""
    if name == "tasks":
        return without_boilerplate(lambda: (run.task for run in runs()))
    if name == "insights":
        return (insight_text(i) for i in insights())
    return (run.explanation for run in runs())


def insight_text(insight: InsightEntry) -> str:
    """What the insights' ranker ranks of an insight: its title, guideline and applicability."""
    return f"{insight.title} {insight.guideline} {insight.applicability}"


class Ranker:
    """BM25 over a list of texts (bm25s); ranks the indices of the texts for a query."""

    def __init__(
        self, size: int, index: Any, source: Path | None = None, stemmed: bool = True
    ) -> None:
        self.size = size
        self._index = index
        """The index: postings whose scores are computed as asked (`PostingsIndex`), bm25s's
        score matrix as saved (`MappedIndex`) or as bm25s holds it; None when no text holds a
        word to index (they rank in order)."""
        self._columns: PostingsIndex | MatrixColumns | None = None
        self._source = source
        """The folder it was loaded from, if it was."""
        self.stemmed = stemmed
        """It indexed the words' stems (an index saved by an earlier build: the words)."""

    @property
    def index(self) -> PostingsIndex | MatrixColumns | None:
        """The index read a word at a time (search/score.py reads it), or None when no text
        holds a word."""
        if self._columns is None and self._index is not None:
            held = self._index
            self._columns = (
                held if isinstance(held, (PostingsIndex, MatrixColumns)) else MatrixColumns.of(held)
            )
        return self._columns

    @property
    def source(self) -> Path | None:
        """The folder it was loaded from, if it was."""
        return self._source

    @classmethod
    def of(
        cls,
        texts: Iterable[str],
        chunk: int = 1024,
        block: int = 1 << 16,
        folder: Path | None = None,
    ) -> Ranker:
        """A ranker over `texts`, read once. They are tokenized `chunk` at a time and each
        text's distinct words kept as an id and a count (8 bytes a word of a text) in files in
        `folder` (a temporary folder when None), not as a list a text: the same words,
        numbered the same, as tokenizing them all at once. Its scores are computed about
        `block` (text, word) pairs at a time (`_scores`)."""
        tokens = _Tokens(folder)
        try:
            texts = iter(texts)
            while part := list(itertools.islice(texts, chunk)):
                tokens.extend(_tokenize(part))
            return cls._indexed(tokens, block)
        finally:
            tokens.ids.close()

    @classmethod
    def _indexed(cls, tokens: _Tokens, block: int) -> Ranker:
        """A ranker over the texts `tokens` holds (`of`)."""
        if not tokens.vocab:  # no text holds a word to index: they rank in order
            return cls(len(tokens.ids), None)
        index = _index_class()(block)
        index.index(tokens, show_progress=False)
        return cls(len(tokens.ids), index)

    def save(self, folder: Path) -> None:
        """Into `folder` (made, or empty): how many texts it ranks, and bm25s's files of its
        index, the form versions saved before their rankers' postings (search/saved.py writes
        those), which `load` still reads."""
        folder.mkdir(parents=True, exist_ok=True)
        if self._index is not None:
            self._index.save(folder, show_progress=False)
        saved: dict[str, int | bool | str] = {
            "texts": self.size,
            "indexed": self._index is not None,
        }
        if self.stemmed:
            saved["words"] = STEMMED
        (folder / SEARCH_COUNT).write_bytes(orjson.dumps(saved))

    @classmethod
    def load(cls, folder: Path, size: int) -> Ranker:
        """A ranker search/saved.py saved (its postings: `PostingsIndex`, pages mapped as a
        query needs them) or `save` wrote (its arrays mapped from the files, without bm25s
        when it can be: search/mapped.py's MappedIndex); CorpusError when it is damaged or does
        not rank `size` texts."""
        try:
            saved = orjson.loads((folder / SEARCH_COUNT).read_bytes())
            if saved["texts"] != size:
                raise ValueError(f"it ranks {saved['texts']} texts, the catalog has {size}")
            index: Any = None
            if saved.get("postings") is not None:
                stats = load_stats(folder / STATS)
                if saved["postings"] != POSTINGS_VERSION or stats is None:
                    raise ValueError(f"its postings are not of version {POSTINGS_VERSION}")
                if stats.texts != size:
                    raise ValueError(f"its stats count {stats.texts} texts, the catalog {size}")
                if saved["indexed"]:
                    index = PostingsIndex(folder, stats)
            elif saved["indexed"] and mappable(folder):
                index = MappedIndex(folder)  # read without bm25s (nor numpy)
            elif saved["indexed"]:
                index = _bm25s().BM25.load(folder, mmap=True, show_progress=False)
        except (OSError, KeyError, TypeError, ValueError) as error:
            raise damaged(folder, error) from None
        return cls(size, index, folder, stemmed=saved.get("words") == STEMMED)

    def _retriever(self) -> Any:
        """bm25s's index, to rank every text (its order of ties is numpy's): loaded by bm25s
        from the folder when the ranker was read without it (`MappedIndex`)."""
        if isinstance(self._index, MappedIndex):
            assert self._source is not None  # a MappedIndex is only read from a folder
            self._index = _bm25s().BM25.load(self._source, mmap=True, show_progress=False)
        return self._index

    def rank(self, query: str, allowed: Iterable[int], *, matched_only: bool = False) -> list[int]:
        """Indices in `allowed`, most similar first; then, unless `matched_only`, those that
        share no word with the query, in their order."""
        allowed = set(allowed)
        if not allowed or not self.size:
            return []
        ranked: list[int] = []
        query_tokens = _tokenize([query], stem=self.stemmed)
        if isinstance(self._index, PostingsIndex) and query_tokens.vocab:
            ranked = self._ranked(query_tokens)
        elif self._index is not None and query_tokens.vocab:
            try:
                documents, scores = self._retriever().retrieve(
                    _bm25s().tokenization.Tokenized(*query_tokens),
                    k=self.size,
                    show_progress=False,
                    backend_selection="numpy",
                )
            except (IndexError, ValueError) as error:
                if self._source is None:
                    raise
                # Files that load but do not fit together (a word's entries past the texts).
                raise damaged(self._source, error) from None
            # numpy picks the scored ones: every text is ranked (100,000 numbers at a time).
            ranked = documents[0][scores[0] > 0].tolist()
        matched = [i for i in ranked if i in allowed]
        if matched_only:
            return matched
        # Runs with no word in common with the task come last, in corpus order.
        scored = set(ranked)
        rest = sorted(i for i in allowed if i not in scored and 0 <= i < self.size)
        return matched + rest

    def _ranked(self, query_tokens: Tokens) -> list[int]:
        """The texts with a score above 0 for the query, best first, as bm25s's `retrieve`
        ranks them (a `PostingsIndex`): each text's score summed in float32 word by word in
        the query's order (bm25s's `np.add.at`), then ordered by bm25s's own top-k."""
        import numpy as np

        index = self._index
        assert isinstance(index, PostingsIndex)
        by_id = {number: word for word, number in query_tokens.vocab.items()}
        scores = np.zeros(self.size, dtype=np.float32)
        for word in (by_id[number] for number in query_tokens.ids[0]):
            number = index.known(word)
            if number is None:
                continue
            try:
                texts, entries = index.column(number)
                np.add.at(scores, np.array(texts, dtype=np.int64), np.array(entries, np.float32))
            except IndexError as error:
                assert self._source is not None  # a PostingsIndex is only read from a folder
                raise damaged(self._source, error) from None
        found, documents = _bm25s().selection.topk(scores, self.size, backend="numpy", sorted=True)
        return documents[found > 0].tolist()  # type: ignore[no-any-return]


class _TokenIds:
    """Each text's distinct word ids and how often it uses each, a (text, word) pair at a
    time, in two unnamed files in `folder` (a temporary folder when None): 8 bytes a pair on
    disk, not in memory, where `_scores` reads them back a block at a time. Each text's end
    (in pairs) and length (in words) stay in memory."""

    def __init__(self, folder: Path | None = None) -> None:
        # Only building a ranker spills: loading one (a hook's recall) imports no store.
        from wikitrace.corpus_schema.writing import spill_file

        self._words = spill_file(folder, "ranker-words")
        self._counts = spill_file(folder, "ranker-counts")
        self.pairs = 0
        self.ends = array("q")
        self.lengths = array("q")

    def append(self, text: list[int]) -> None:
        counted = Counter(text)
        self.append_counted(array("i", counted), array("i", counted.values()), len(text))

    def append_counted(self, words: array[int], counts: array[int], length: int) -> None:
        """A text of `length` words, its distinct `words` used `counts` times each."""
        self._words.write(words.tobytes())
        self._counts.write(counts.tobytes())
        self.pairs += len(words)
        self.ends.append(self.pairs)
        self.lengths.append(length)

    def blocks(self, size: int) -> Iterator[tuple[int, Any, Any]]:
        """(position of the first pair, word ids, counts) of up to `size` pairs at a time, in
        text order, as numpy arrays."""
        import numpy as np

        for handle in (self._words, self._counts):
            handle.flush()
            handle.seek(0)
        for first in range(0, self.pairs, size):
            count = min(size, self.pairs - first)
            words = np.frombuffer(self._words.read(4 * count), dtype=np.int32)
            counts = np.frombuffer(self._counts.read(4 * count), dtype=np.int32)
            yield first, words, counts

    def close(self) -> None:
        self._words.close()
        self._counts.close()

    def __len__(self) -> int:
        return len(self.ends)


@functools.cache
def _index_class() -> Any:
    """bm25s.BM25 whose index is built by `_scores` (bm25s imported when first needed)."""
    base: Any = _bm25s().BM25

    class Streamed(base):  # type: ignore[misc]
        def __init__(self, block: int) -> None:
            super().__init__()
            self.block = block

        def build_index_from_ids(
            self, unique_token_ids: list[int], corpus_token_ids: Any, **_: Any
        ) -> dict[str, Any]:
            # bm25s's documented hook for building the index another way.
            self.nonoccurrence_array = None  # lucene, its default, has none
            return _scores(self, len(unique_token_ids), corpus_token_ids)

    return Streamed


def _scores(index: Any, vocabulary: int, ids: _TokenIds) -> dict[str, Any]:
    """bm25s's score matrix (compressed sparse columns: a word's texts and scores together)
    of the texts in `ids`, as bm25s's own `build_index_from_ids` makes it with its numpy
    backend, to the byte (a property test checks it), in a fraction of its memory: bm25s
    holds five or six arrays the length of all the (text, word) pairs at once, about 50 bytes
    a pair; this fills the two results from the pairs on disk, about `index.block` pairs at
    a time: each pair goes to the next free place of its word's column, so a column holds its
    texts in order. It holds the two results (8 bytes a pair)."""
    import numpy as np

    if index.method in index.methods_requiring_nonoccurrence:
        raise ValueError(f"BM25 variant {index.method} is not built here")
    columns = _Columns(index, vocabulary, ids)
    pairs = int(columns.indptr[-1])
    data = np.empty(pairs, dtype=index.dtype)
    indices = np.empty(pairs, dtype=index.int_dtype)
    columns.fill(data, indices)
    return {
        "data": data,
        "indices": indices,
        "indptr": columns.indptr,
        "num_docs": len(columns.ends),
    }


class _Columns:
    """What filling a score matrix's columns reads: each text's end (in pairs) and length
    (in words), each word's idf, and where each word's column starts (`indptr`)."""

    def __init__(self, index: Any, vocabulary: int, ids: _TokenIds) -> None:
        import numpy as np

        scoring = _bm25s().scoring
        self.index = index
        self.vocabulary = vocabulary
        self.ids = ids
        self.ends = np.frombuffer(ids.ends, dtype=np.int64)
        self.lengths = np.frombuffer(ids.lengths, dtype=np.int64)  # each text's words
        self.average = self.lengths.mean()
        frequencies = np.zeros(vocabulary, dtype=np.int64)  # a word's texts
        for _, words, _ in ids.blocks(index.block):
            frequencies += np.bincount(words, minlength=vocabulary)
        self.idf = scoring._build_idf_array(
            dict(enumerate(frequencies.tolist())),
            len(self.ends),
            scoring._select_idf_scorer(index.idf_method),
            dtype=index.dtype,
        )
        self.tfc = scoring._select_tfc_scorer(index.method)
        self.indptr = np.zeros(vocabulary + 1, dtype=np.int64)
        np.cumsum(frequencies, out=self.indptr[1:])

    def fill(self, data: Any, indices: Any) -> None:
        """Every word's column into `data` and `indices`."""
        import numpy as np

        index, ends = self.index, self.ends
        free = self.indptr[:-1].copy()
        """The next place of each word's column."""
        for first, words, counts in self.ids.blocks(index.block):
            order = np.argsort(words, kind="stable")  # by word, then text
            texts = np.searchsorted(ends, first + order, side="right")
            by_word = words[order]
            starts = np.flatnonzero(np.concatenate(([True], by_word[1:] != by_word[:-1])))
            runs = np.diff(np.append(starts, len(by_word)))
            places = free[by_word] + (np.arange(len(by_word)) - np.repeat(starts, runs))
            free[by_word[starts]] += runs
            data[places] = self.idf[by_word] * self.tfc(
                tf_array=counts[order].astype(index.dtype),
                l_d=self.lengths[texts],
                l_avg=self.average,
                k1=index.k1,
                b=index.b,
                delta=index.delta,
            )
            indices[places] = texts


class _Tokens:
    """Texts tokenized a part at a time, as bm25s indexes them: `ids` (on disk, in `folder`)
    and `vocab`."""

    def __init__(self, folder: Path | None = None) -> None:
        self.ids = _TokenIds(folder)
        self.vocab: dict[str, int] = {}

    def extend(self, part: Any) -> None:
        """Add a part bm25s tokenized: its words numbered on from the parts before, in the
        order it numbered them (the order it met them in)."""
        local = sorted(part.vocab.items(), key=lambda item: item[1])
        ids = [self.vocab.setdefault(word, len(self.vocab)) for word, _ in local]
        for text in part.ids:
            self.ids.append([ids[i] for i in text])
