"""Search over a corpus: BM25 ranking (`rank.py`), a hit's score (`score.py`) and near-duplicate
lessons (`consolidate.py`)."""

MIN_SCORE = 0.15
"""The least score (search.score.scored) a search hit needs to be shown; under it for
every entry, a search answers "no match" (docs/using.md, "Scores and no match"). Chosen by
benchmarks/search_threshold_bench.py. Here, not in score.py, so that the command line can name
it without importing the ranker."""
