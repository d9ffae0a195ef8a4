"""Search over a corpus: BM25 ranking (`rank.py`) and near-duplicate lessons (`consolidate.py`)."""
