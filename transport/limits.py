"""The defaults of a model call, each declared once: the client's settings (`llm.py`), the
build's options and limits (compiler) and the command line's options read them here. Nothing
is imported, so `wikitrace --help` can show them without loading a client."""

from __future__ import annotations

MAX_OUTPUT_TOKENS = 4096
"""The longest answer one call may write."""
CONTEXT_TOKENS = 32_768
"""The model's context window: every call of a run's conversation fits in it."""
TEMPERATURE = 0.0
"""Sampling temperature of the model's calls."""
TIMEOUT_SECONDS = 300.0
"""Seconds before one call times out (and is retried)."""
MAX_RETRIES = 6
"""Backoff retries of a call on rate limits, time-outs and server errors."""
