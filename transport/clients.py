"""What makes a model's calls: the fast path's HTTP client for a plain OpenAI-compatible
endpoint (transport/fast_path.py) or litellm (transport/llm.py), and `connect`, which checks the
model is reachable and caches its replies. Apart from both, so that neither imports the other."""

from __future__ import annotations

from pathlib import Path

from .fast_path import FastClient, takes_fast_path
from .llm import (
    LLM,
    CachedLLM,
    Client,
    LiteLLMClient,
    LLMSettings,
    ResponseCache,
    check_key,
    check_reachable,
)


def make_client(settings: LLMSettings) -> Client:
    """What calls the model in this process: the fast path's HTTP client for a plain
    OpenAI-compatible endpoint (transport/fast_path.py), else litellm."""
    return FastClient(settings) if takes_fast_path(settings) else LiteLLMClient(settings)


def connect(
    settings: LLMSettings, cache_dir: Path | None = None, *, client: Client | None = None
) -> LLM:
    """The model `settings` name, reachable and with its credentials checked before anything
    is sent (an unreachable --api-base, an unknown provider or a missing key is an error now,
    not after the first run); its replies cached in `cache_dir` unless None. The calls are
    made by `client` (call_worker's `worker_client`: other processes; stop them with `close`),
    else in this process."""
    check_key(settings.model, settings.api_base)
    if settings.api_base:
        check_reachable(settings.api_base)
    client = client or make_client(settings)
    if cache_dir is None:
        # Call workers are started, not waited for: each call waits for them, and refuses
        # what they refuse (nothing is sent), while the build reads and writes the first runs.
        start = getattr(client, "start", None)
        if start is not None:
            start()
        else:
            client.preflight()
        return client
    # Checked before the first call or token count the cache cannot answer: a rebuild whose
    # every answer is cached never imports litellm.
    return CachedLLM(client, ResponseCache(cache_dir))
