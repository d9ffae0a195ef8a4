"""Search over a corpus: BM25 ranking (`rank.py`), a hit's score (`score.py`) and near-duplicate
lessons (`consolidate.py`)."""

from wikitrace.corpus_schema.setting_fields import default

MIN_SCORE: float = default("min-score")
"""The least score (search.score.scored) a search hit needs to be shown; under it for
every entry, a search answers "no match" (docs/using.md, "Scores and no match"). Chosen by
benchmarks/search_threshold_bench.py. Declared as `search --min-score`'s default
(corpus_schema/setting_fields.py); named here, not in score.py, so that the MCP server and the
site need not import the ranker for it."""
