"""A ranker saved as postings pages and stats (corpus_schema/counts.py, search/saved.py), its
scores computed when a query asks (search/mapped.py's PostingsIndex): each word's float32
scores, the ranks and their tie order, the search scores and the site's export are those of
bm25s's own index of the same texts; an add takes the parent's first pages as they are, writes
only the pages whose texts changed, and saves what one save of all the texts saves; a damaged
page is the corpus's error; a query imports neither bm25s nor numpy."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from wikitrace.corpus_schema.counts import page_name, postings_name
from wikitrace.corpus_schema.errors import CorpusError
from wikitrace.search import rank, saved
from wikitrace.search.mapped import K1, B, PostingsIndex
from wikitrace.search.rank import Ranker, _bm25s
from wikitrace.search.score import covered, export, holders, scored

from helpers import heavy_modules_of_a_query


def _texts() -> list[str]:
    """Texts of few words, so that many texts score alike (ties), repeated ones, empty ones,
    compound words, stems and other scripts."""
    rng = random.Random(58)
    words = [f"w{i}" for i in range(30)]
    words += ["refund", "refunds", "refunded", "flight", "the", "mug_handling", "mugHandling"]
    words += ["Ünïcödé", "42", "x"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 9))) for _ in range(70)]
    texts[10:13] = ["w1 w2", "w2 w1", "w1 w2"]
    return [*texts, "", "w3 w3 w3 refund", texts[5]]


TEXTS = _texts()
QUERIES = [
    "w1",
    "w2 w1",
    "refund my flight",
    "w3 w3 refund",
    "mug handling",
    "Ünïcödé 42",
    "the of and",
    "zebra nothing",
    "w4 w5 w6 w7 w8 w9 w10 w11 refunded",
]


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(saved, "PAGE_TEXTS", 8)


def _save(
    texts: list[str], folder: Path, parent: Path | None = None, same: frozenset[int] = frozenset()
) -> dict[str, bytes | None]:
    """The ranker of `texts` saved into `folder` as a version saves it (a page taken from the
    `parent` ranker's is copied; `same`: pages known to be the parent's, their texts left out
    of `texts`), and each file's bytes, None for those taken."""
    folder.mkdir(parents=True)
    made: dict[str, bytes | None] = {}
    pages = saved.count_pages(texts, parent, same=same)
    for rel, chunks in saved._ranker_files("r", pages, parent):
        name = rel.split("/", 1)[1]
        if chunks is None:
            assert parent is not None
            (folder / name).write_bytes((parent / name).read_bytes())
            made[name] = None
        else:
            made[name] = b"".join(chunks)
            (folder / name).write_bytes(made[name])
    return made


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ranker, Ranker]:
    """The ranker of TEXTS saved as postings and loaded, and bm25s's own index of them."""
    folder = tmp_path_factory.mktemp("postings") / "ranker"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(saved, "PAGE_TEXTS", 8)
        _save(TEXTS, folder)
    ours = Ranker.load(folder, len(TEXTS))
    assert isinstance(ours.index, PostingsIndex)
    bm25s = _bm25s()
    index = bm25s.BM25()
    index.index(bm25s.tokenization.Tokenized(*rank._tokenize(TEXTS)), show_progress=False)
    return ours, Ranker(len(TEXTS), index)


def test_k1_and_b_are_bm25s_s() -> None:
    index = _bm25s().BM25()
    assert (index.k1, index.b, index.method) == (K1, B, "lucene")


def test_each_word_s_scores_are_bm25s_s_to_the_bit(both: tuple[Ranker, Ranker]) -> None:
    ours, theirs = both
    assert ours.index is not None and theirs.index is not None
    words = [word for word in theirs.index.vocab_dict if word]
    assert sorted(words) == sorted(ours.index.vocab_dict)
    for word in words:
        number, their_number = ours.index.known(word), theirs.index.known(word)
        assert number is not None and their_number is not None
        assert ours.index.column(number) == theirs.index.column(their_number), word
        assert ours.index.frequency(number) == theirs.index.frequency(their_number)


@pytest.mark.parametrize("query", QUERIES)
def test_ranks_ties_and_scores_are_bm25s_s(both: tuple[Ranker, Ranker], query: str) -> None:
    ours, theirs = both
    everything, some = range(len(TEXTS)), [0, 2, 3, 5, 10, 11, 12, 20, 33, 40, 71]
    for allowed in (everything, some):
        assert ours.rank(query, allowed) == theirs.rank(query, allowed)  # bm25s's retrieve
        assert ours.rank(query, allowed, matched_only=True) == theirs.rank(
            query, allowed, matched_only=True
        )
        for within in (False, True):
            assert scored(ours, query, allowed, within=within) == scored(
                theirs, query, allowed, within=within
            )
        assert covered([ours], query, allowed) == covered([theirs], query, allowed)
    assert holders(ours, query) == holders(theirs, query)


def test_the_queries_meet_ties(both: tuple[Ranker, Ranker]) -> None:
    """The ranks compared above hold texts of equal scores, ordered as bm25s orders them
    (numpy's sort, which need not keep them in text order)."""
    ours, theirs = both
    found = scored(ours, "w1 w2", range(len(TEXTS)))
    values = [value for _, value in found]
    assert len(values) > len(set(values))
    first = ours.rank("w1 w2", range(len(TEXTS)))[:3]
    assert sorted(first) == [10, 11, 12] and first == theirs.rank("w1 w2", range(len(TEXTS)))[:3]


def test_the_site_s_export_is_that_of_bm25s_s_index(both: tuple[Ranker, Ranker]) -> None:
    ours, theirs = both
    assert export(ours) == export(theirs) and export(ours)["words"]


def test_an_add_writes_only_the_pages_it_changes(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    _save(TEXTS[:45], parent)  # 5 full pages of 8 and one of 5
    added = _save(TEXTS, tmp_path / "added", parent)
    assert [name for name, data in added.items() if data is None] == [
        postings_name(n) for n in range(1, 6)
    ]
    fresh = _save(TEXTS, tmp_path / "fresh")
    for name, data in fresh.items():
        assert (tmp_path / "added" / name).read_bytes() == data, name
    # A text changed in page 2: page 1 is taken, the rest counted and written anew.
    changed = [*TEXTS[:9], "w29 w28 refund", *TEXTS[10:]]
    again = _save(changed, tmp_path / "changed", tmp_path / "added")
    assert [name for name, data in again.items() if data is None] == [postings_name(1)]
    for name, data in _save(changed, tmp_path / "changed-fresh").items():
        assert (tmp_path / "changed" / name).read_bytes() == data, name
    # Fewer texts: the pages past them are gone, the stats those of the texts left.
    fewer = _save(TEXTS[:20], tmp_path / "fewer", tmp_path / "added")
    assert fewer.keys() == _save(TEXTS[:20], tmp_path / "fewer-fresh").keys()
    for name, data in _save(TEXTS[:20], tmp_path / "fewer-again").items():
        assert (tmp_path / "fewer" / name).read_bytes() == data, name


def test_pages_known_to_be_the_parent_s_are_taken_without_their_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = tmp_path / "parent"
    _save(TEXTS[:45], parent)  # 5 full pages of 8 and one of 5
    changed = [*TEXTS[:9], "w29 w28 refund", *TEXTS[10:]]  # page 2 changed
    digested: list[str] = []
    real = saved.text_digest
    monkeypatch.setattr(saved, "text_digest", lambda text: digested.append(text) or real(text))
    # Pages 1, 3 and 4 known the same: their texts neither given nor hashed; 3 and 4, after
    # a page that changed, read back from the parent's postings with their words renumbered.
    given = [*changed[8:16], *changed[32:]]
    added = _save(given, tmp_path / "added", parent, frozenset({1, 3, 4}))
    assert digested == given
    assert [name for name, data in added.items() if data is None] == [postings_name(1)]
    for name, data in _save(changed, tmp_path / "fresh").items():
        assert (tmp_path / "added" / name).read_bytes() == data, name


def test_a_damaged_page_is_the_corpus_s_error(tmp_path: Path) -> None:
    _save(TEXTS, tmp_path / "r")
    page = tmp_path / "r" / postings_name(2)
    page.write_bytes(page.read_bytes()[:-3])
    ranker = Ranker.load(tmp_path / "r", len(TEXTS))
    with pytest.raises(CorpusError, match=r"postings-0002.bin: damaged .*wikitrace verify"):
        scored(ranker, "w1", range(len(TEXTS)))
    with pytest.raises(CorpusError, match=r"texts.json: damaged|r: damaged"):
        Ranker.load(tmp_path / "r", len(TEXTS) + 1)


def test_a_query_imports_neither_bm25s_nor_numpy(tmp_path: Path) -> None:
    _save(TEXTS, tmp_path / "r")
    assert heavy_modules_of_a_query(tmp_path / "r", len(TEXTS), "w1 refund") == "[]"


def test_an_add_to_a_ranker_saved_before_the_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parent of an earlier version (bm25s's files and counts pages of version 1): the
    texts it counted are read back, not tokenized, and the postings are those of one save."""
    old = tmp_path / "old"
    Ranker.of(TEXTS[:45]).save(old)
    for number, page in enumerate(saved.count_pages(TEXTS[:45]), 1):
        assert isinstance(page, saved.CountsPage)
        (old / page_name(number)).write_bytes(page.dumps())
    tokenized: list[int] = []
    real = rank._tokenize

    def counting(texts: list[str], **kwargs: bool) -> rank.Tokens:
        tokenized.append(len(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(rank, "_tokenize", counting)
    added = _save(TEXTS, tmp_path / "added", old)
    assert None not in added.values() and sum(tokenized) == len(TEXTS) - 45
    for name, data in _save(TEXTS, tmp_path / "fresh").items():
        assert added[name] == data, name


@pytest.mark.parametrize(
    ("field", "value"),
    [("length", 0), ("frequencies", -1), ("frequencies", "1"), ("words", 7)],
)
def test_stats_edited_out_of_range_are_the_corpus_s_error_naming_the_file(
    tmp_path: Path, field: str, value: object
) -> None:
    from wikitrace.corpus_schema.counts import STATS, load_stats

    path = tmp_path / STATS
    stats = {
        "stats": 1,
        "texts": 2,
        "length": 5,
        "words": ["alpha", "beta"],
        "frequencies": [1, 2],
        "pages": [[2, 2]],
    }
    path.write_text(json.dumps(stats))
    assert load_stats(path) is not None
    if field == "length":
        stats["length"] = value
    else:
        stats[field] = [value, *stats[field][1:]]  # type: ignore[index]
    path.write_text(json.dumps(stats))
    with pytest.raises(CorpusError, match=r"stats\.json"):
        load_stats(path)
