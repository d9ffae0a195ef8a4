"""Sending a request to a model and getting its reply: the LLM protocol and the litellm client
(`llm.py`), the fast path's own HTTP client for a plain OpenAI-compatible server
(`fast_path.py`), what makes a model's calls (`clients.py`), worker processes that make them
(`call_worker.py`), provider batch APIs (`batch.py`) and the response cache.

This package imports nothing of wikitrace's but corpus_schema, and litellm only inside the code
that calls a model.
"""
