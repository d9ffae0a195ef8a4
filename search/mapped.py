"""A saved ranker read with the standard library alone: its words split as bm25s splits them
(`split_words`), its index mapped from bm25s's saved files (`MappedIndex`), a word's idf
(`idf_lucene`). Answering a query from a saved ranker then imports neither bm25s nor numpy
(about 0.1 s of a hook's start-up); building one, and ranking every text (`Ranker.rank`),
still go through bm25s."""

from __future__ import annotations

import ast
import math
import mmap
import re
import sys
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn

import orjson

from wikitrace.corpus_schema.catalog import damaged
from wikitrace.corpus_schema.counts import (
    MappedPostings,
    RankerStats,
    load_postings,
    postings_name,
)

STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    }
)
"""bm25s's English stop words (`stopwords="en"`: bm25s.stopwords.STOPWORDS_EN; a test checks
that they are the same)."""

COMMON_WORDS = frozenset(
    [
        *("a", "about", "above", "after", "again", "against", "ain", "all", "am", "an", "and"),
        *("any", "are", "aren", "aren't", "as", "at", "be", "because", "been", "before", "being"),
        *("below", "between", "both", "but", "by", "can", "couldn", "couldn't", "d", "did"),
        *("didn", "didn't", "do", "does", "doesn", "doesn't", "doing", "don", "don't", "down"),
        *("during", "each", "few", "for", "from", "further", "had", "hadn", "hadn't", "has"),
        *("hasn", "hasn't", "have", "haven", "haven't", "having", "he", "her", "here", "hers"),
        *("herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn"),
        *("isn't", "it", "it's", "its", "itself", "just", "ll", "m", "ma", "me", "mightn"),
        *("mightn't", "more", "most", "mustn", "mustn't", "my", "myself", "needn", "needn't"),
        *("no", "nor", "not", "now", "o", "of", "off", "on", "once", "only", "or", "other", "our"),
        *("ours", "ourselves", "out", "over", "own", "re", "s", "same", "shan", "shan't", "she"),
        *("she's", "should", "should've", "shouldn", "shouldn't", "so", "some", "such", "t"),
        *("than", "that", "that'll", "the", "their", "theirs", "them", "themselves", "then"),
        *("there", "these", "they", "this", "those", "through", "to", "too", "under", "until"),
        *("up", "ve", "very", "was", "wasn", "wasn't", "we", "were", "weren", "weren't", "what"),
        *("when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "won't"),
        *("wouldn", "wouldn't", "y", "you", "you'd", "you'll", "you're", "you've", "your"),
        *("yours", "yourself", "yourselves"),
    ]
)
"""Common English words: bm25s's longer list (bm25s.stopwords.STOPWORDS_EN_PLUS; a test checks
that they are the same), kept here so that a query need not import bm25s. Search still ranks
with them as bm25s does (`STOP_WORDS` aside); they are never evidence of what a task is about
("my", "who", "over" open a request in any domain: tools/task_scope.py `_evidence`)."""

NUMBER_WORDS = frozenset(
    [
        *("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
        *("eleven", "twelve", "twenty", "hundred", "thousand"),
    ]
)
"""Numbers in words: a count says nothing of what a task is about ("a two-minute toast" met
one spotter compilation by "two"; "one" let a lesson about OpenTelemetry into a task about
beads), though a question may be told by one, so they are common only where a task is matched
to a project's own texts (search/score.py `common_words`, `numbers`)."""

_WORD = re.compile(r"\w{2,}")
"""bm25s's default token pattern (scikit-learn's, two word characters or more between word
boundaries) as findall meets it: a run of word characters is matched whole, greedily from its
first, so the boundaries add nothing but their cost."""


class _Numbering(dict[str, int | None]):
    """Words numbered as first met: a word not yet held takes `number(word)` when given, else
    the next number; the stop words held as None."""

    def __init__(self, number: Callable[[str], int] | None) -> None:
        super().__init__(dict.fromkeys(STOP_WORDS))
        self.count = 0
        self._number = number

    def __missing__(self, word: str) -> int:
        if self._number is not None:
            self[word] = number = self._number(word)
            return number
        self[word] = number = self.count
        self.count += 1
        return number


_SNAKE = re.compile(r"_\w")
_CAPITAL = re.compile(r"[A-Z]")
_WORD_REST = re.compile(r"\w*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def with_parts(text: str) -> str:
    """`text` with each snake_case or camelCase word followed by its parts, so that plain
    words find a tool's name ("transfer to human" finds transfer_to_human_agents) and the
    name still finds itself. A word is compound where it holds `_` and a word character, or
    a lower-case letter then a capital (a-z, A-Z): only the words around those are read,
    found by searching for the underscore and the capital alone (a substitution that tried
    its pattern at every word, most of the rankers' time before, is 5 to 8x slower)."""
    pieces: list[str] = []
    done = 0
    snake = _SNAKE.search(text)
    while True:
        # The first compound pair from `done`: the snake's, or a capital's after a-z before it.
        first = snake.start() if snake is not None else len(text)
        capital = _CAPITAL.search(text, done + 1, first + 1)
        while capital is not None and not "a" <= text[capital.start() - 1] <= "z":
            capital = _CAPITAL.search(text, capital.start() + 1, first + 1)
        if capital is not None:
            first = capital.start() - 1
        elif snake is None:
            break
        start = first
        while start > done and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1  # to the word's start: `\w` is a letter, digit or underscore
        end = _WORD_REST.match(text, first + 2).end()  # type: ignore[union-attr]
        word = text[start:end]
        pieces += (text[done:end], " ", _CAMEL.sub(" ", word).replace("_", " "))
        done = end
        if snake is not None and snake.start() < end:
            snake = _SNAKE.search(text, end)
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def split_words(
    texts: list[str], number: Callable[[str], int] | None = None
) -> tuple[list[list[int]], dict[str, int]]:
    """What `bm25s.tokenize(texts, stopwords="en")` gives without a stemmer: each text's words
    (lower-cased, the pattern's matches less the stop words) as ids, numbered in the order
    first met, and the words' ids. `number`: each new word's id, asked once a word, in the
    order first met (its stem's, say: search/rank.py `_tokenize`), in place of that order."""
    numbering = _Numbering(number)
    ids = [
        [
            found
            for found in map(numbering.__getitem__, _WORD.findall(text.lower()))
            if found is not None
        ]
        for text in texts
    ]
    return ids, {word: found for word, found in numbering.items() if found is not None}


def idf_lucene(df: int, n: int) -> float:
    """A word's idf when `df` of `n` texts hold it, as bm25s's "lucene" idf computes it."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


_FILES = {
    "data": "data.csc.index.npy",
    "indices": "indices.csc.index.npy",
    "indptr": "indptr.csc.index.npy",
}
"""The score matrix's arrays as bm25s saves them (compressed sparse columns)."""
_TYPES: dict[str, Literal["f", "i", "q", "d"]] = {"<f4": "f", "<i4": "i", "<i8": "q", "<f8": "d"}
"""numpy's names of the arrays' types, and memoryview's (on a little-endian machine)."""


def mappable(folder: Path) -> bool:
    """Whether `MappedIndex` reads the index saved in `folder`: its method needs no array
    but the score matrix's (bm25s's "lucene", which wikitrace saves) and this machine stores
    numbers little-endian, as the files do."""
    if sys.byteorder != "little":
        return False
    params = orjson.loads((folder / "params.index.json").read_bytes())
    return bool(params.get("method") == "lucene" and params.get("idf_method") in (None, "lucene"))


class MatrixColumns:
    """bm25s's score matrix (compressed sparse columns: `scores`' data, indices, indptr) read
    a word's column at a time, as search/score.py reads every index: mapped from the files
    bm25s saved (`MappedIndex`), or as bm25s holds it (`of`)."""

    def __init__(
        self, vocab_dict: dict[str, int], scores: dict[str, Any], method: str, idf_method: Any
    ) -> None:
        self.vocab_dict = vocab_dict
        self.scores = scores
        self.method = method
        self.idf_method: str | None = idf_method

    @classmethod
    def of(cls, index: Any) -> MatrixColumns:
        """bm25s's BM25 `index`, read by column."""
        return cls(index.vocab_dict, index.scores, index.method, index.idf_method)

    def known(self, word: str) -> int | None:
        """The word's id; None when the index does not hold it (or holds no column for it)."""
        number = self.vocab_dict.get(word)
        if number is None or number >= len(self.scores["indptr"]) - 1:
            return None
        return number

    def frequency(self, number: int) -> int:
        """How many texts hold word `number`."""
        indptr = self.scores["indptr"]
        return int(indptr[number + 1] - indptr[number])

    def texts(self, number: int) -> list[int]:
        """The texts that hold word `number`, in order."""
        indptr = self.scores["indptr"]
        return self.scores["indices"][int(indptr[number]) : int(indptr[number + 1])].tolist()  # type: ignore[no-any-return]

    def column(self, number: int) -> tuple[list[int], list[float]]:
        """The texts that hold word `number`, in order, and each one's score for it (a
        float32, as a float)."""
        indptr = self.scores["indptr"]
        start, end = int(indptr[number]), int(indptr[number + 1])
        return (
            self.scores["indices"][start:end].tolist(),
            self.scores["data"][start:end].tolist(),  # float32 to float64, exactly
        )


class MappedIndex(MatrixColumns):
    """An index bm25s saved (`BM25.save`), as `BM25.load(folder, mmap=True)` reads it, for
    what search/score.py reads of it: `vocab_dict`, `method`, `idf_method` and `scores` (its
    arrays as memoryviews of the mapped files: slicing, `tolist` and indexing as numpy's
    do). ValueError or OSError when a file is not one bm25s writes."""

    def __init__(self, folder: Path) -> None:
        params = orjson.loads((folder / "params.index.json").read_bytes())
        vocab_dict = orjson.loads((folder / "vocab.index.json").read_bytes())
        if not isinstance(vocab_dict, dict):
            raise ValueError("vocab.index.json is not an object")
        scores: dict[str, Any] = {
            name: _mapped_array(folder / file) for name, file in _FILES.items()
        }
        scores["num_docs"] = params.get("num_docs")
        super().__init__(vocab_dict, scores, params["method"], params.get("idf_method"))


K1 = 1.5
B = 0.75
"""bm25s's k1 and b (BM25's defaults there; a test checks them), with which wikitrace's
rankers score."""


class PostingsIndex:
    """A ranker saved as postings pages and stats (corpus_schema/counts.py), its scores
    computed as a query asks for them, as bm25s's "lucene" BM25 computes them into its score
    matrix (float32, to the bit): a word's idf from how many of the texts hold it, and a
    text's part from how often it holds the word, its length and the texts' average length.
    Each page is mapped when a word is first looked up in it."""

    method = "lucene"
    idf_method = "lucene"

    def __init__(self, folder: Path, stats: RankerStats) -> None:
        self.size = stats.texts
        self.vocab_dict = dict(zip(stats.words, range(len(stats.words)), strict=True))
        self._frequencies = stats.frequencies
        self._average = stats.length / stats.texts if stats.texts else 0.0
        self._folder = folder
        self._bases: list[int] = []
        """Where each page's texts start among the ranker's."""
        base = 0
        for texts, _ in stats.pages:
            self._bases.append(base)
            base += texts
        self._pages: list[MappedPostings | None] = [None] * len(stats.pages)
        self._page_norms: list[list[float] | None] = [None] * len(stats.pages)
        """Each page's texts' length parts, made when a word many of them hold is scored."""
        self._norms: dict[int, float] = {}
        """The length part of a text's score, k1 * ((1 - b) + b * length / average), by
        length, made when first needed."""

    def known(self, word: str) -> int | None:
        return self.vocab_dict.get(word)

    def frequency(self, number: int) -> int:
        return self._frequencies[number]

    def _page(self, place: int) -> MappedPostings:
        page = self._pages[place]
        if page is None:
            page = self._pages[place] = load_postings(self._folder / postings_name(place + 1))
        return page

    def _found(self, number: int) -> Iterator[tuple[int, MappedPostings, int, int]]:
        """(page's place, page, start, end) of each page that holds word `number`."""
        for place in range(len(self._pages)):
            page = self._page(place)
            found = page.pairs(number)
            if found is not None:
                yield place, page, found[0], found[1]

    def _held(
        self, place: int, page: MappedPostings, start: int, end: int, held: list[int]
    ) -> list[int]:
        """The page's own numbers of the texts in its entries `start:end`, their numbers in
        the whole ranker added to `held`."""
        local = page.texts[start:end].tolist()
        if local and local[-1] >= len(page):  # its texts ascend
            self._damaged(place, IndexError(f"text {local[-1]} is past its {len(page)}"))
        base = self._bases[place]
        held.extend(map(base.__add__, local) if base else local)
        return local

    def texts(self, number: int) -> list[int]:
        held: list[int] = []
        for place, page, start, end in self._found(number):
            self._held(place, page, start, end, held)
        return held

    def column(self, number: int) -> tuple[list[int], list[float]]:
        # bm25s's entry: idf (float32) times tf / (k1 * ((1 - b) + b * length / average) +
        # tf), in float64, stored as float32 (search/rank.py's `_Columns.fill`).
        idf = array("f", [idf_lucene(self._frequencies[number], self.size)])[0]
        norms = self._norms
        held: list[int] = []
        values: list[float] = []
        for place, page, start, end in self._found(number):
            local = self._held(place, page, start, end, held)
            counts = page.counts[start:end].tolist()
            if len(local) > len(page) >> 4:  # a word of many of its texts: each text's part
                of_text = self._page_norms[place] or self._norms_of(place, page)
                pairs = zip(local, counts, strict=True)
                values.extend([idf * (count / (of_text[text] + count)) for text, count in pairs])
                continue
            lengths = page.lengths
            for text, count in zip(local, counts, strict=True):
                length = lengths[text]
                norm = norms.get(length)
                if norm is None:  # the length part, once a length
                    norm = norms[length] = K1 * ((1 - B) + B * length / self._average)
                values.append(idf * (count / (norm + count)))
        return held, array("f", values).tolist()

    def _norms_of(self, place: int, page: MappedPostings) -> list[float]:
        """The length part of the score of each text of a page (`_norms`), kept."""
        norms, average = self._norms, self._average
        for length in set(page.lengths.tolist()) - norms.keys():
            norms[length] = K1 * ((1 - B) + B * length / average)
        made = self._page_norms[place] = [norms[length] for length in page.lengths.tolist()]
        return made

    def _damaged(self, place: int, error: Exception) -> NoReturn:
        raise damaged(self._folder / postings_name(place + 1), error)


def _mapped_array(path: Path) -> memoryview[Any]:
    """A one-dimensional array np.save wrote (format 1.0 to 3.0), mapped read-only."""
    with path.open("rb") as handle:
        head = handle.read(10)
        if len(head) < 10 or head[:6] != b"\x93NUMPY" or head[6] not in (1, 2, 3):
            raise ValueError(f"{path.name} is not a .npy file")
        if head[6] == 1:
            size, start = int.from_bytes(head[8:10], "little"), 10
        else:
            size, start = int.from_bytes(head[8:10] + handle.read(2), "little"), 12
        header = ast.literal_eval(handle.read(size).decode("latin1"))
        if not isinstance(header, dict):
            raise ValueError(f"{path.name}: its header is not a dictionary")
        kind = _TYPES.get(header.get("descr"))  # type: ignore[arg-type]
        shape = header.get("shape")
        if kind is None or header.get("fortran_order") or not isinstance(shape, tuple):
            raise ValueError(f"{path.name}: not a one-dimensional array of a type read here")
        if len(shape) != 1:
            raise ValueError(f"{path.name}: not a one-dimensional array")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    body = memoryview(mapped)[start + size :]
    array: memoryview[Any] = body.cast(kind)
    if len(array) != shape[0]:
        raise ValueError(f"{path.name} holds {len(array)} numbers, its header says {shape[0]}")
    return array
