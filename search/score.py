"""A search hit's score (`scored`): a text's BM25 score over the query's own weight, so that a
threshold means the same whatever the query and the corpus; and what the static site's script
needs to score as it does (`export`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from wikitrace.corpus_schema.catalog import damaged

from .mapped import COMMON_WORDS, NUMBER_WORDS, STOP_WORDS, idf_lucene
from .rank import Ranker, _bm25s, _tokenize


def scored(
    ranker: Ranker,
    query: str,
    allowed: Iterable[int],
    *,
    within: bool = False,
    ignore: frozenset[str] = frozenset(),
) -> list[tuple[int, float]]:
    """(index, score) of each text in `allowed` that shares a word with `query`, best first
    (ties in text order). The score is the text's BM25 score over the query's own weight, the
    sum of its words' idf, where a word no text holds weighs as a word in none would: from 0
    to under 1. A query most of whose words the texts lack scores low whatever it matches; a
    text of average length that holds each of the query's words once scores 1 / (1 + k1), 0.4
    with bm25s's k1 of 1.5 (docs/using.md, "Scores and no match").

    `within`: each word weighs by its idf among the `allowed` texts alone, not the whole
    index, so that the words most of a scope's texts hold (a project's own vocabulary:
    "mix", "spotter", "bead" among one Elixir project's runs) weigh little there, however
    rare they are in the corpus (`_scoped`).

    `ignore`: words (as the index holds them: `common_words`) left out of the query, so that
    they neither match a text nor weigh in the query's weight."""
    allowed = set(allowed)
    words = [word for word in _query_words(query, stem=ranker.stemmed) if word not in ignore]
    if not allowed or not words or ranker.index is None:  # None: no text holds a word
        return []
    known, weight = _weights(ranker, words)
    if not known or weight <= 0:
        return []
    try:
        factors: list[float] | None = None
        if within:
            factors, weight = _scoped(ranker, words, known, allowed)
        scores = _sums(ranker, known, factors)
    except (IndexError, ValueError) as error:
        if ranker.source is None:
            raise
        # Files that load but do not fit together (a word's entries past the texts).
        raise damaged(ranker.source, error) from None
    found = [(i, float(scores[i]) / weight) for i in sorted(allowed) if scores[i] > 0]
    found.sort(key=lambda item: -item[1])  # stable: ties stay in text order
    return found


def holders(ranker: Ranker, query: str) -> dict[str, frozenset[int]]:
    """The indices of the texts that hold each of the query's words the index knows (a word
    as the index holds it: its stem), the texts that `scored` finds by that word."""
    words = _query_words(query, stem=ranker.stemmed)
    index = ranker.index
    if not words or index is None:
        return {}
    found: dict[str, frozenset[int]] = {}
    for word in dict.fromkeys(words):
        number = index.known(word)
        if number is not None:
            found[word] = frozenset(index.texts(number))
    return found


def covered(
    rankers: list[Ranker],
    query: str,
    allowed: Iterable[int],
    also: Mapping[int, set[str]] | None = None,
    ignore: frozenset[str] = frozenset(),
) -> dict[int, float]:
    """For each item in `allowed` that holds a word of `query` in any of its texts (the same
    items indexed several ways: a run's task text, its compilation), the share of the query's
    weight it holds, from 0 to 1: each distinct word weighs its idf among the `allowed` items,
    so a word most of them hold weighs little and a word one holds weighs most. Unlike
    `scored`, a text's length does not count against it: a long compilation of a run that did
    the task's work holds its words as surely as a short one that merely shares two.
    `also`: more words an item holds (as the first ranker's index holds them: `words_of`),
    from a text no ranker indexes (the files a run touched). `ignore`: words (as the first
    ranker's index holds them: `common_words`) left out of the query, as `scored` leaves them."""
    allowed = set(allowed)
    if not allowed or not rankers or rankers[0].index is None:
        return {}
    # Position by position: each ranker's form of the same query word (stemmed or not).
    forms = [_query_words(query, stem=ranker.stemmed) for ranker in rankers]
    held_by = [holders(ranker, query) for ranker in rankers]
    index = rankers[0].index
    idf = idf_scorer(index)
    held_also: dict[str, set[int]] = {}
    for item, words in (also or {}).items():
        if item in allowed:
            for word in words:
                held_also.setdefault(word, set()).add(item)
    holding: dict[str, set[int]] = {}
    for position, word in enumerate(forms[0]):
        if word in ignore:
            continue
        items = holding.setdefault(word, set())
        items |= held_also.get(word, set())
        for form, held in zip(forms, held_by, strict=True):
            items |= held.get(form[position], frozenset()) & allowed
    if not holding:
        return {}
    weight = {word: idf(len(items), len(allowed)) for word, items in holding.items()}
    total = sum(weight.values())
    share: dict[int, float] = {}
    for word, items in holding.items():
        for item in items:
            share[item] = share.get(item, 0.0) + weight[word] / total
    return share


def words_of(ranker: Ranker, text: str) -> set[str]:
    """A text's words as the ranker's index holds them (their stems, when it indexed stems):
    those `holders` names."""
    return set(_query_words(text, stem=ranker.stemmed))


def common_words(
    ranker: Ranker, but: frozenset[str] = frozenset(), *, numbers: bool = False
) -> frozenset[str]:
    """The common English words (search/mapped.py's `COMMON_WORDS`), with `numbers` its
    `NUMBER_WORDS` too, those in `but` aside, as the ranker's index holds them (their stems,
    when it indexed stems): words that say nothing of a task's subject. `scored` and
    `covered` leave them out of a query when given them as `ignore`."""
    return _common_forms(ranker.stemmed, but, numbers)


@functools.cache
def _common_forms(stem: bool, but: frozenset[str], numbers: bool) -> frozenset[str]:
    words = (COMMON_WORDS | NUMBER_WORDS) if numbers else COMMON_WORDS
    return frozenset(_query_words(" ".join(sorted(words - but)), stem=stem))


def _weights(ranker: Ranker, words: list[str]) -> tuple[list[int], float]:
    """The ids of the query's `words` the index holds, and the query's weight: the sum of
    every word's idf, a word the index lacks counted as held by no text."""
    index = ranker.index
    assert index is not None  # its callers ask of an index
    idf = idf_scorer(index)
    known: list[int] = []
    weight = 0.0
    for word in words:
        number = index.known(word)
        if number is None:
            weight += idf(0, ranker.size)
            continue
        known.append(number)
        weight += idf(index.frequency(number), ranker.size)
    return known, weight


def _scoped(
    ranker: Ranker, words: list[str], known: list[int], allowed: set[int]
) -> tuple[list[float], float]:
    """For each of the `known` word ids, the factor that turns its idf over the whole index
    into its idf among the `allowed` texts (a BM25 entry is idf times a part that depends on
    the word's count and the text's length only); and the query's weight counted the same
    way, a word the index lacks weighing as one no allowed text holds."""
    index = ranker.index
    assert index is not None  # its callers ask of an index
    idf = idf_scorer(index)
    size = len(allowed)
    factors: list[float] = []
    weights: list[float] = []
    for number in known:
        overall = idf(index.frequency(number), ranker.size)
        weights.append(idf(len(allowed.intersection(index.texts(number))), size))
        factors.append(weights[-1] / overall if overall > 0 else 0.0)
    # sum() as before (Python's own float summation), to give the same weight to the bit.
    return factors, sum(weights) + idf(0, size) * (len(words) - len(known))


def _sums(ranker: Ranker, known: list[int], factors: list[float] | None = None) -> list[float]:
    """Each text's BM25 score for the words `known` (ids, repeats counted), summed in float64
    word by word in their order, as the site's script sums them (`export`), so that both give
    the same numbers to the last bit; each word's entries times its factor, when given
    (`_scoped`)."""
    index = ranker.index
    assert index is not None  # its callers ask of an index
    sums = [0.0] * ranker.size
    for position, number in enumerate(known):
        texts, entries = index.column(number)  # float32 scores, as float64 exactly
        factor = 1.0 if factors is None else factors[position]
        try:
            for text, entry in zip(texts, entries, strict=True):
                sums[text] += entry if factors is None else entry * factor
        except IndexError:
            past = next(t for t in texts if not -ranker.size <= t < ranker.size)
            raise IndexError(f"index {past} is past the {ranker.size} texts") from None
    return sums


def export(ranker: Ranker) -> dict[str, Any]:
    """What the static site's script needs to score a query as `scored` does: how many texts,
    whether words are stemmed, the weight of a word no text holds, and for each word its idf
    and the texts that hold it with their scores (in the index's order)."""
    exported: dict[str, Any] = {"texts": ranker.size, "stemmed": ranker.stemmed, "words": {}}
    index = ranker.index
    if index is None:
        return {**exported, "unknown": 0.0}
    idf = idf_scorer(index)
    for word in index.vocab_dict:
        number = index.known(word) if word else None
        if number is None:
            continue
        texts, entries = index.column(number)
        exported["words"][word] = [idf(index.frequency(number), ranker.size), texts, entries]
    return {**exported, "unknown": idf(0, ranker.size)}


def stop_words() -> list[str]:
    """The English stop words search leaves out of every text and query (bm25s's)."""
    return sorted(STOP_WORDS)


def idf_scorer(index: Any) -> Callable[[int, int], float]:
    """The idf of `index` (search/mapped.py's MatrixColumns or PostingsIndex): Lucene's, which
    wikitrace's rankers use; bm25s's own for another method (bm25s then imported)."""
    method = index.idf_method or index.method
    if method == "lucene":
        return idf_lucene
    return _bm25s().scoring._select_idf_scorer(method)  # type: ignore[no-any-return]


def _query_words(query: str, *, stem: bool) -> list[str]:
    """The query's words as the index holds them (its stems, unless `stem` is False), in
    order, repeats kept."""
    tokens = _tokenize([query], stem=stem)
    by_id = {number: word for word, number in tokens.vocab.items()}
    return [by_id[number] for number in tokens.ids[0]] if tokens.ids else []
