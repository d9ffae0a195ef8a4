"""A saved ranker read without bm25s or numpy (search/mapped.py): its words split as bm25s
splits them, its scores, holders, shares, ranking and export the same to the bit as with
bm25s's own loaded index, a hook's query imports neither package, and a damaged array file is
the corpus's one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.corpus_schema.errors import CorpusError
from wikitrace.search.mapped import (
    COMMON_WORDS,
    STOP_WORDS,
    MappedIndex,
    idf_lucene,
    split_words,
)
from wikitrace.search.rank import Ranker, _bm25s
from wikitrace.search.score import _query_words, _weights, covered, export, holders, scored

from helpers import heavy_modules_of_a_query

TEXTS = [
    "Cancel the reservation and refund the card",
    "refunds are issued to the original card; cancelled flights_refund",
    "The shelf module's mug handling test fails on empty shelves",
    "mugHandling on the shelf: a test of the handling of mugs",
    "",
    "Ünïcödé wörds and 42 numbers, x y z",
    "book a flight, then change the booking to a later flight",
] * 3
QUERIES = [
    "refund my cancelled card",
    "mug handling shelf test",
    "flight booking change later",
    "the of and",
    "wörds 42 numbers",
    "nothing matches zebra",
]


def test_the_stop_words_are_bm25s_s() -> None:
    assert set(_bm25s().stopwords.STOPWORDS_EN) == STOP_WORDS


def test_the_common_words_are_bm25s_s_longer_list() -> None:
    assert set(_bm25s().stopwords.STOPWORDS_EN_PLUS) == COMMON_WORDS


def test_the_idf_is_bm25s_s_to_the_bit() -> None:
    theirs = _bm25s().scoring._select_idf_scorer("lucene")
    for n in (1, 2, 7, 30_000, 123_457):
        for df in {0, 1, 2, n // 3, n - 1, n}:
            assert idf_lucene(df, n) == theirs(df, n)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from([*"abcAB_1 ,.'-éÜßİ\n\t", "the", "is", "Ünï", "x2", "THEN"]),
            max_size=30,
        ).map("".join),
        max_size=5,
    )
)
def test_words_are_split_as_bm25s_splits_them(texts: list[str]) -> None:
    tokens = _bm25s().tokenize(texts, stopwords="en", show_progress=False)
    assert split_words(texts) == (tokens.ids, tokens.vocab)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mapped") / "ranker"
    Ranker.of(TEXTS).save(folder)
    return folder


def both(folder: Path) -> tuple[Ranker, Ranker]:
    """The ranker saved in `folder` as Ranker.load reads it (mapped), and read by bm25s."""
    mapped = Ranker.load(folder, len(TEXTS))
    assert isinstance(mapped.index, MappedIndex)
    loaded = _bm25s().BM25.load(folder, mmap=True, show_progress=False)
    return mapped, Ranker(len(TEXTS), loaded, folder)


@pytest.mark.parametrize("query", QUERIES)
def test_a_mapped_ranker_answers_as_bm25s_s_index_does(saved: Path, query: str) -> None:
    mapped, loaded = both(saved)
    everything, some = range(len(TEXTS)), [0, 2, 3, 5, 9, 13, 20]
    for allowed in (everything, some):
        for within in (False, True):
            found = scored(mapped, query, allowed, within=within)
            assert found == scored(loaded, query, allowed, within=within)
        assert covered([mapped], query, allowed) == covered([loaded], query, allowed)
        assert mapped.rank(query, allowed) == loaded.rank(query, allowed)
    assert holders(mapped, query) == holders(loaded, query)
    assert any(scored(mapped, q, everything) for q in QUERIES)  # the queries find something


def numpy_scored(ranker: Ranker, query: str, allowed: list[int], within: bool) -> object:
    """`scored` as it was computed with numpy, before search/mapped.py (the reference)."""
    import numpy as np

    index = ranker.index
    idf = _bm25s().scoring._select_idf_scorer("lucene")
    data, indices, indptr = (index.scores[k] for k in ("data", "indices", "indptr"))
    words = _query_words(query, stem=True)
    known, weight = _weights(ranker, words)
    if not known:
        return []
    factors = [1.0] * len(known)
    if within:
        members = np.zeros(ranker.size, dtype=bool)
        members[sorted(allowed)] = True
        local = [
            idf(int(members[indices[indptr[n] : indptr[n + 1]]].sum()), len(allowed)) for n in known
        ]
        overall = [idf(int(indptr[n + 1] - indptr[n]), ranker.size) for n in known]
        factors = [a / b if b > 0 else 0.0 for a, b in zip(local, overall, strict=True)]
        weight = float(sum(local) + idf(0, len(allowed)) * (len(words) - len(known)))
    sums = np.zeros(ranker.size, dtype=np.float64)
    for position, number in enumerate(known):
        start, end = int(indptr[number]), int(indptr[number + 1])
        entries = data[start:end].astype(np.float64)
        sums[indices[start:end]] += entries if not within else entries * factors[position]
    found = [(i, float(sums[i]) / weight) for i in sorted(allowed) if sums[i] > 0]
    return sorted(found, key=lambda item: -item[1])


@pytest.mark.parametrize("query", QUERIES)
def test_scores_are_those_numpy_summed_to_the_bit(saved: Path, query: str) -> None:
    mapped, loaded = both(saved)
    for allowed in (list(range(len(TEXTS))), [0, 2, 3, 5, 9, 13, 20]):
        for within in (False, True):
            expected = numpy_scored(loaded, query, allowed, within)
            assert scored(mapped, query, allowed, within=within) == expected


def test_a_mapped_ranker_exports_as_bm25s_s_index_does(saved: Path) -> None:
    mapped, loaded = both(saved)
    assert export(mapped) == export(loaded)
    assert export(mapped)["words"]


def test_a_query_to_a_saved_ranker_imports_neither_bm25s_nor_numpy(saved: Path) -> None:
    assert heavy_modules_of_a_query(saved, len(TEXTS), "mug handling") == "[]"


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-3],  # cut short: not whole numbers
        lambda raw: raw[:-4],  # a number fewer than its header says
        lambda raw: b"garbage" + raw,
    ],
)
def test_a_damaged_array_file_is_the_corpus_s_error(
    saved: Path, tmp_path: Path, damage: object
) -> None:
    folder = tmp_path / "ranker"
    folder.mkdir()
    for path in saved.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    data = folder / "data.csc.index.npy"
    data.write_bytes(damage(data.read_bytes()))  # type: ignore[operator]
    with pytest.raises(CorpusError, match="damaged"):
        Ranker.load(folder, len(TEXTS))
