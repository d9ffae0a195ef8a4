"""Embedding a memory (the insight set of a corpus version) to see which way an update moves it.

The memory's embedding is the sum of its items' unit vectors, so the difference between two
versions is exactly the added items minus the removed ones: the direction of the update.

The default embedder is local and needs no download: hashed word and word-pair counts (the
"hashing trick"), stable across machines and Python runs, each weighed by how rare it is among
the items of the two memories compared (a smoothed inverse document frequency, log(1 + items /
items holding it)), so that what every task repeats (an environment's template: "You are in
the middle of a room. Looking quickly around you, you see ...") counts less than what tells
one topic from another. `LiteLLMEmbedder` uses any embedding model litellm reaches instead.
benchmarks/trigger_bench.py measures, on simulated topic changes, how often each is compared.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from wikitrace.corpus_schema import WikitraceError
from wikitrace.corpus_schema import read as corpus_read

Vector = npt.NDArray[np.float64]

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "then",
        "this",
        "to",
        "was",
        "were",
        "when",
        "with",
        "without",
    ]
)


class Embedder(Protocol):
    @property
    def identity(self) -> str:
        """Names the embedding space: directions from different spaces are never compared."""
        ...

    def embed(self, texts: Sequence[str]) -> list[Vector]: ...

    def fit(self, items: Sequence[str]) -> Embedder:
        """This embedder, for comparing memories made of `items` (the local one weighs each
        word by its rarity among them; a model's embedding stays as it is)."""
        ...


ONE_ITEM_WEIGHT = 0.5
"""A word only one item holds (an object's name, an id) tells that item from others, not a
topic: it weighs half."""


class HashingEmbedder:
    """Local, offline: each word and word pair hashed into `dim` signed buckets, log-scaled,
    and once `fit`, weighed by its rarity among the items compared."""

    def __init__(self, dim: int = 1024, rarity: dict[str, float] | None = None) -> None:
        self.dim = dim
        self.rarity = rarity
        """Feature -> its weight, log(1 + items / items holding it); None weighs all as 1."""

    @property
    def identity(self) -> str:
        return f"local-hash-idf-{self.dim}"

    def fit(self, items: Sequence[str]) -> HashingEmbedder:
        # An item given twice (a task run again) is one item: its words are no commoner.
        distinct = set(items)
        held: Counter[str] = Counter()
        for text in distinct:
            held.update(_features(text).keys())
        total = len(distinct)
        return HashingEmbedder(
            self.dim,
            {
                feature: math.log1p(total / count) * (ONE_ITEM_WEIGHT if count == 1 else 1.0)
                for feature, count in held.items()
            },
        )

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> Vector:
        vector = np.zeros(self.dim)
        rarity = self.rarity
        for feature, count in _features(text).items():
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            sign = 1.0 if digest[4] & 1 else -1.0
            weight = 1.0 if rarity is None else rarity.get(feature, 1.0)
            vector[bucket] += sign * weight * (1.0 + math.log(count))
        return vector


def _features(text: str) -> Counter[str]:
    """A text's words (less the commonest English ones) and word pairs, counted."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP]
    features = Counter(words)
    features.update(f"{a} {b}" for a, b in pairwise(words))
    return features


class LiteLLMEmbedder:
    """Any embedding model litellm reaches (openai/text-embedding-3-small, ollama/..., a server)."""

    def __init__(self, model: str, api_base: str | None = None) -> None:
        self.model = model
        self.api_base = api_base

    @property
    def identity(self) -> str:
        return self.model

    def fit(self, items: Sequence[str]) -> LiteLLMEmbedder:
        return self

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm  # heavy: only when a model is really asked for

        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self.api_base:
            kwargs["api_base"] = self.api_base
            # A local OpenAI-compatible server needs no key; the client refuses to start without.
            if self.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                kwargs["api_key"] = "no-key"
        try:
            response = litellm.embedding(**kwargs)
        except Exception as error:
            first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
            raise EmbeddingError(
                f"--embedding-model {self.model}: {type(error).__name__}: {first}"
            ) from None
        return [np.asarray(item["embedding"], dtype=np.float64) for item in response.data]


class EmbeddingError(WikitraceError):
    """The embedding model could not be reached or refused the request."""


def insight_texts(root: Path) -> dict[str, str]:
    """Insight id -> the text that stands for it: title, guideline and applicability.

    Only what an agent is shown counts: rejected and retired insights are not in the memory,
    and a near-duplicate of a lesson already there adds nothing.
    """
    from wikitrace.search import consolidate

    pages = [
        (page.header, corpus_read.guideline(page))
        for page in corpus_read.insights(root)
        if page.header.status not in ("rejected", "retired")
    ]
    # A lesson drawn again from other runs is one lesson: its group's first member stands
    # for it, so thirteen copies do not weigh thirteen times (search/consolidate.py).
    leaders = consolidate.of_pages(pages)
    return {
        header.id: "\n".join([header.title, guideline, header.applicability])
        for index, (header, guideline) in enumerate(pages)
        if leaders[index] == index
    }


Encoded = Literal["insights", "corpus"]
"""What stands for a memory's state: its insight set (what the first message lists), or the
whole corpus an agent reads (the insights and every run: its task and what its compilation
says), as the method's momentum trigger encodes the memory state."""


def memory_texts(root: Path, encoded: Encoded) -> dict[str, str]:
    """Item id -> its text, for the items `encoded` counts (insights by id, runs by step).

    A run stands for its task alone: what the memory is about; and, when its log names one,
    for its task type too, as an item of its own (`TYPE_PREFIX`): a task type's few words are
    lost among a task text's many (a room's furniture outweighs "heat" or "clean"), so the
    kinds of task a memory covers are a part of its own. Not its compilation's title,
    which offline reads "task ... succeeded in 6 turns (0 with an error signal)" for every
    run of every domain alike and made updates of any topic point the same way (a kitchen
    update and the first garage one scored cosine 0.75)."""
    texts = insight_texts(root)
    if encoded == "insights":
        return texts
    for page in corpus_read.runs(root):
        texts[page.header.step] = corpus_read.task_text(page)
        if page.header.task_type:
            texts[TYPE_PREFIX + page.header.step] = page.header.task_type
    return texts


def unit(vector: Vector) -> Vector:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def memory_embedding(texts: Sequence[str], embedder: Embedder) -> Vector | None:
    """The sum of the insights' unit vectors; None for a memory with no insights."""
    vectors = embedder.embed(texts)
    if not vectors:
        return None
    total: Vector = np.sum([unit(v) for v in vectors], axis=0)
    return total


PART_KINDS = ("insight", "run", "type")
"""The kinds of item a memory's change is told apart by: lessons, runs, their task types."""


def update_parts(
    old: dict[str, str], new: dict[str, str], embedder: Embedder
) -> tuple[Vector | None, list[str], list[str]]:
    """The update's change kind by kind (`PART_KINDS`), side by side in one vector: for each
    kind, the unit embedding of what it added minus what it removed (zeros for a kind it did
    not change); and the ids added, removed. None when nothing changed (or the change embeds
    to nothing). Only what changed is embedded: an item the two share cancels out."""
    added = [ident for ident in new if ident not in old or new[ident] != old[ident]]
    removed = [ident for ident in old if ident not in new or new[ident] != old[ident]]
    parts = []
    for kind in PART_KINDS:
        # Words are weighed by their rarity among the items of this kind: a task type's words
        # must not make the runs' template look rare, nor the reverse.
        items = [text for ident, text in old.items() if _kind(ident) == kind]
        fitted = embedder.fit([*items, *(new[i] for i in added if _kind(i) == kind)])
        parts.append(
            _change(
                [new[i] for i in added if _kind(i) == kind],
                [old[i] for i in removed if _kind(i) == kind],
                fitted,
            )
        )
    found = [part for part in parts if part is not None]
    if not found:
        return None, added, removed
    size = found[0].shape[0]
    stacked: Vector = np.concatenate(
        [unit(part) if part is not None else np.zeros(size) for part in parts]
    )
    return stacked, added, removed


def update_direction(
    old: dict[str, str], new: dict[str, str], embedder: Embedder
) -> tuple[Vector | None, list[str], list[str]]:
    """The unit direction from the old memory to the new one, and the ids added, removed.

    When the memory holds runs (and their task types) as well as insights
    (`memory_texts(..., "corpus")`), each kind's change counts alike, so that five runs added
    do not drown the one lesson added with them. None when nothing changed.
    """
    stacked, added, removed = update_parts(old, new, embedder)
    if stacked is None:
        return None, added, removed
    total: Vector = stacked.reshape(len(PART_KINDS), -1).sum(axis=0)
    if float(np.linalg.norm(total)) == 0:
        return None, added, removed
    return unit(total), added, removed


def turning(parts: Vector, average: Vector) -> float:
    """How far an update goes the way of past ones: the lowest cosine, over the kinds of item
    it changed, between its change of that kind and the average's (both from `update_parts`).
    An update is as new as its newest part: a new room with the usual task types, or the
    usual rooms with a new task type, each turns away."""
    mine = parts.reshape(len(PART_KINDS), -1)
    past = average.reshape(len(PART_KINDS), -1)
    return min(cosine(part, before) for part, before in zip(mine, past, strict=True) if part.any())


RUN_PREFIX = "step-"
"""Runs are keyed by their step in `memory_texts`; insights by `insight-NNNN`."""
TYPE_PREFIX = "type:"
"""A run's task type is keyed by `type:` and its step."""


def _kind(ident: str) -> str:
    if ident.startswith(TYPE_PREFIX):
        return "type"
    return "run" if ident.startswith(RUN_PREFIX) else "insight"


def _change(plus_texts: list[str], minus_texts: list[str], embedder: Embedder) -> Vector | None:
    """The embedding of what was added minus what was removed; None when it is nothing."""
    plus = memory_embedding(plus_texts, embedder)
    minus = memory_embedding(minus_texts, embedder)
    if plus is None and minus is None:
        return None
    reference = plus if plus is not None else minus
    assert reference is not None
    difference: Vector = (plus if plus is not None else np.zeros_like(reference)) - (
        minus if minus is not None else np.zeros_like(reference)
    )
    return None if float(np.linalg.norm(difference)) == 0 else difference


def cosine(a: Vector, b: Vector) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))
