"""Our LLM boundary: a small protocol, the litellm client behind it (or the fast path's own
HTTP client, for a plain OpenAI-compatible server: transport/fast_path.py), and a response cache.

litellm is imported only when a client calls or counts with it: it takes seconds to import.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from wikitrace.corpus_schema import WikitraceError
from wikitrace.corpus_schema.render import shortened
from wikitrace.corpus_schema.setting_fields import (
    MAX_OUTPUT_TOKENS,
    MAX_RETRIES,
    TEMPERATURE,
    TIMEOUT_SECONDS,
    default,
)

log = logging.getLogger(__name__)

Message = dict[str, str]


class LLMCallError(WikitraceError):
    """A model call that failed for good (after backoff, or at once for a bad request)."""

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal
        """True when no other call can succeed either (bad key, unknown model): stop the build."""


@dataclass
class LLMReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    """What the call cost as litellm reports it; None when litellm cannot price the model."""
    cached: bool = False
    attempts: int = 1
    """HTTP attempts made, backoff retries included (0 for a cache hit)."""
    batch: str | None = None
    """The provider batch that answered (transport/batch.py); None for a call made at once."""


class LLM(Protocol):
    """What wikitrace needs from a model."""

    model: str

    def cache_identity(self) -> dict[str, Any]:
        """Everything besides the messages that changes the answer: model, parameters, endpoint."""
        ...

    async def complete(self, messages: list[Message]) -> LLMReply: ...

    def count_tokens(self, text: str) -> int: ...


class Client(LLM, Protocol):
    """A model not yet called, which can check it is reachable before the first call: this
    module's LiteLLMClient, fast_path's FastClient, or call_worker's WorkerLLM and WorkerPool
    (a process of their own)."""

    def preflight(self) -> None: ...


@dataclass
class LLMSettings:
    model: str
    api_base: str | None = None
    temperature: float = TEMPERATURE
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    timeout_seconds: float = TIMEOUT_SECONDS
    max_retries: int = MAX_RETRIES
    """Backoff retries on rate limits, time-outs and server errors."""
    backoff_seconds: float = 2.0
    backoff_cap_seconds: float = 60.0
    json_mode: bool = True
    reasoning_effort: str | None = None
    """low, medium or high, for a reasoning model (litellm's `reasoning_effort`; dropped for a
    model that has none)."""
    fast_path: bool = default("fast-path")
    """Call a plain OpenAI-compatible endpoint with our own HTTP client (transport/fast_path.py)
    rather than through litellm, where it is sure to send and read the same. Not part of the
    cache key: the requests and replies are the same."""

    def chat_body(self, model: str, messages: list[Message]) -> dict[str, Any]:
        """An OpenAI chat-completions request for `model` (the name the server knows), as
        litellm 1.110 sends it for an `openai/` model it does not know, key for key: the fast
        path posts it and a batch line carries it."""
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        return body


class Transient(Exception):
    """One attempt of a call failed in a way worth retrying: a rate limit, a time-out, a server
    error, a lost connection. `kind` names it as litellm's exceptions do (RateLimitError, ...)."""

    def __init__(self, kind: str, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.retry_after = retry_after
        """What the server's Retry-After header asks for, in seconds; None without one."""


async def with_backoff(
    settings: LLMSettings,
    attempt: Callable[[], Awaitable[Any]],
    sleep: Callable[[float], Awaitable[None]],
) -> tuple[Any, int]:
    """`attempt()`'s result and the attempts made: a Transient is retried after the delay its
    server asked for, else after exponential backoff with jitter, up to `max_retries` times;
    then the call fails for good. Any other error goes through at once."""
    number = 0
    while True:
        number += 1
        try:
            return await attempt(), number
        except Transient as error:
            if number > settings.max_retries:
                raise LLMCallError(
                    f"{settings.model}: gave up after {number} attempts: {error.kind}: "
                    f"{error.detail}"
                ) from None
            delay = error.retry_after
            if delay is None:
                # Exponential with jitter, so that N concurrent calls do not retry in step.
                delay = min(
                    settings.backoff_cap_seconds, settings.backoff_seconds * 2 ** (number - 1)
                )
                delay *= 0.5 + random.random() / 2
            log.info("%s: %s, retrying in %.1fs", settings.model, error.kind, delay)
            await sleep(delay)


def _import_litellm() -> Any:
    # litellm fetches its model cost map from the network unless told otherwise.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


class LiteLLMClient:
    """Calls any provider litellm knows, with exponential backoff on transient errors."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.model = settings.model
        self._sleep = sleep
        self._module: Any = None
        self._checked = False
        self._refused: LLMCallError | None = None
        self._transient: tuple[type[BaseException], ...] = ()
        self._fatal: tuple[type[BaseException], ...] = ()

    @property
    def _litellm(self) -> Any:
        """litellm, imported on first use (8 s, 190 MiB): a build whose every reply and token
        count is cached never pays for it."""
        if self._module is None:
            self._module = _import_litellm()
            exceptions = self._module.exceptions
            self._transient = (
                exceptions.RateLimitError,
                exceptions.Timeout,
                exceptions.APIConnectionError,
                exceptions.ServiceUnavailableError,
                exceptions.InternalServerError,
            )
            self._fatal = (
                exceptions.AuthenticationError,
                exceptions.PermissionDeniedError,
                exceptions.NotFoundError,
            )
        return self._module

    def preflight(self) -> None:
        """Fail before anything is sent when no call could succeed: unknown provider, no key.
        Done once, before the first call or token count (or at once, when asked)."""
        if self._checked:
            if self._refused is not None:
                raise self._refused  # every later call is refused the same way
            return
        self._checked = True
        try:
            self._check()
        except LLMCallError as error:
            self._refused = error
            raise

    def _check(self) -> None:
        s = self.settings
        try:
            self._litellm.get_llm_provider(s.model, api_base=s.api_base)
        except Exception as error:
            raise LLMCallError(
                f"--model {s.model}: litellm does not know this provider ({_short(error, 160)}); "
                "name it as provider/model, e.g. openai/gpt-4o-mini or ollama/llama3",
                fatal=True,
            ) from None
        missing = self._litellm.validate_environment(model=s.model, api_base=s.api_base).get(
            "missing_keys", []
        )
        # Providers have a default base URL, and a local OpenAI-compatible server gets a
        # placeholder key (see complete), so only real credentials count as missing.
        missing = [
            key
            for key in missing
            if not key.endswith("_API_BASE")
            and not (key == "OPENAI_API_KEY" and s.api_base and s.model.startswith("openai/"))
        ]
        if missing:
            raise LLMCallError(
                f"--model {s.model} needs {', '.join(missing)} in the environment", fatal=True
            )

    def cache_identity(self) -> dict[str, Any]:
        s = self.settings
        return {
            "model": s.model,
            "api_base": s.api_base,
            "temperature": s.temperature,
            "max_tokens": s.max_output_tokens,
            "json_mode": s.json_mode,
            # Only when set, so that replies cached before the setting existed still answer.
            **({"reasoning_effort": s.reasoning_effort} if s.reasoning_effort else {}),
        }

    def count_tokens(self, text: str) -> int:
        self.preflight()
        return int(self._litellm.token_counter(model=self.model, text=text))

    def _retry_after(self, error: BaseException) -> float | None:
        response = getattr(error, "response", None)
        value = getattr(response, "headers", {}).get("retry-after") if response else None
        try:
            return float(value) if value is not None else None
        except (TypeError, ValueError):
            return None

    async def complete(self, messages: list[Message]) -> LLMReply:
        self.preflight()
        s = self.settings
        kwargs: dict[str, Any] = {
            "model": s.model,
            "messages": messages,
            "temperature": s.temperature,
            "max_tokens": s.max_output_tokens,
            "timeout": s.timeout_seconds,
            "num_retries": 0,
            "drop_params": True,
        }
        if s.api_base:
            kwargs["api_base"] = s.api_base
            # Local OpenAI-compatible servers (vLLM, llama.cpp) need no key, but the client
            # refuses to start without one.
            if s.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
                kwargs["api_key"] = "no-key"
        if s.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if s.reasoning_effort:
            kwargs["reasoning_effort"] = s.reasoning_effort

        async def attempt() -> Any:
            try:
                return await self._litellm.acompletion(**kwargs)
            except self._transient as error:
                raise Transient(
                    type(error).__name__, _short(error), self._retry_after(error)
                ) from None
            except self._fatal as error:
                raise LLMCallError(
                    f"{s.model}: {type(error).__name__}: {_short(error)}", fatal=True
                ) from None
            except Exception as error:
                # litellm raises its own errors for bad model names and provider setup.
                raise LLMCallError(f"{s.model}: {type(error).__name__}: {_short(error)}") from None

        response, attempts = await with_backoff(s, attempt, self._sleep)
        choice = response.choices[0]
        text = choice.message.content or ""
        usage = getattr(response, "usage", None)
        # litellm prices every response it returns; None when it does not know the model.
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        return LLMReply(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=float(cost) if cost is not None else None,
            attempts=attempts,
        )


def _short(error: BaseException, limit: int = 300) -> str:
    return shortened(str(error), limit)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wikitrace" / "llm"


KEY_OF_PROVIDER = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "xai": "XAI_API_KEY",
    "cohere": "COHERE_API_KEY",
}
"""The key a provider's hosted API needs, checked before litellm is imported (seconds): a
missing one is reported at once. Other providers are checked by litellm itself."""


def check_key(model: str, api_base: str | None) -> None:
    """Fail at once when `model`'s provider is one whose key we know and it is not set (a
    server at --api-base takes no key)."""
    if api_base:
        return
    provider = model.split("/", 1)[0] if "/" in model else ""
    if not provider and model.startswith(("gpt-", "o1", "o3", "o4")):
        provider = "openai"  # litellm's bare OpenAI names
    key = KEY_OF_PROVIDER.get(provider)
    if key and not os.environ.get(key):
        raise LLMCallError(f"--model {model} needs {key} in the environment", fatal=True)


ANSWER_SECONDS = 10.0
"""How long a server at --api-base may take to answer a plain HTTP request at the start."""


def check_reachable(api_base: str, timeout: float = 3.0) -> None:
    """Fail at once when nothing listens at a server's address (connection refused, unknown
    host, no answer in `timeout` s), or when it accepts connections but does not answer a
    plain HTTP request within ANSWER_SECONDS (a hung server): every call would fail after its
    retries, minutes later."""
    from urllib.parse import urlsplit

    parts = urlsplit(api_base if "://" in api_base else f"http://{api_base}")
    host = parts.hostname
    if not host:
        raise LLMCallError(
            f"--api-base {api_base}: not a URL (e.g. http://localhost:8000/v1)", fatal=True
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise LLMCallError(f"--api-base {api_base}: the port is not a number", fatal=True) from None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise LLMCallError(
            f"cannot reach --api-base {api_base} ({host}:{port}: {reason}); is the server "
            "running at that address?",
            fatal=True,
        ) from None
    _check_answers(api_base, parts.scheme, host, port, parts.path or "/")


def _check_answers(api_base: str, scheme: str, host: str, port: int, path: str) -> None:
    """Any HTTP answer at all (a 404, a 401) says the server is alive; none in time, not."""
    import http.client
    import ssl

    connection: http.client.HTTPConnection = (
        http.client.HTTPSConnection(
            host, port, timeout=ANSWER_SECONDS, context=ssl.create_default_context()
        )
        if scheme == "https"
        else http.client.HTTPConnection(host, port, timeout=ANSWER_SECONDS)
    )
    try:
        connection.request("GET", path.rstrip("/") + "/models")
        connection.getresponse().read(1)
    except TimeoutError:
        raise LLMCallError(
            f"--api-base {api_base} accepts connections but does not answer (no reply in "
            f"{ANSWER_SECONDS:g} s); is the server hung or still loading its model?",
            fatal=True,
        ) from None
    except (OSError, http.client.HTTPException):
        pass  # it answered, if oddly (TLS, a closed connection): the calls will say more
    finally:
        connection.close()


@dataclass
class ResponseCache:
    """Content-addressed store of model replies: one file per request, written atomically.

    The key hashes the model, its parameters and endpoint, and the exact messages (which hold
    the rendered template and the run's content), so any change makes a new key.
    """

    root: Path
    hits: int = 0
    misses: int = 0
    failed_writes: int = 0
    """Replies that could not be saved (disk full, no permission): used all the same."""
    _made: set[Path] = field(default_factory=set)

    def __post_init__(self) -> None:
        # Never inside a corpus or its store of versions: they are frozen.
        from wikitrace.corpus_schema.destination import check_output

        check_output(self.root, "cache-dir")

    @staticmethod
    def key(identity: dict[str, Any], messages: list[Message]) -> str:
        blob = orjson.dumps(
            {"identity": identity, "messages": messages}, option=orjson.OPT_SORT_KEYS
        )
        return hashlib.sha256(blob).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMReply | None:
        try:
            data = orjson.loads(self.path(key).read_bytes())
            text = data["text"]
            tokens = [data.get("prompt_tokens", 0), data.get("completion_tokens", 0)]
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            return None  # absent, unreadable or damaged: ask the model again
        if not isinstance(text, str) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in tokens
        ):
            return None  # valid JSON of the wrong shape is damaged too
        return LLMReply(
            text=text,
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            cost_usd=None,
            cached=True,
            attempts=0,
            batch=data.get("batch") if isinstance(data.get("batch"), str) else None,
        )

    def count_path(self, key: str) -> Path:
        return self.root / "tokens" / key[:2] / key

    def get_count(self, key: str) -> int | None:
        try:
            count = int(self.count_path(key).read_bytes())
        except (OSError, ValueError):
            return None
        return count if count >= 0 else None

    def put_count(self, key: str, count: int) -> None:
        self._save(self.count_path(key), str(count).encode())

    def _save(self, path: Path, data: bytes) -> None:
        if path.parent not in self._made:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(path.parent)
        _atomic_write(path, data)

    def put(self, key: str, reply: LLMReply) -> None:
        self._save(self.path(key), self.record(reply))

    @staticmethod
    def record(reply: LLMReply) -> bytes:
        """A reply as its cache file holds it."""
        record = {
            "text": reply.text,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "cost_usd": reply.cost_usd,
            **({"batch": reply.batch} if reply.batch else {}),
        }
        return orjson.dumps(record) + b"\n"

    @classmethod
    def save_at(cls, root: Path, key: str, reply: LLMReply) -> None:
        """Save a reply in the cache at `root` (checked by the ResponseCache that named it),
        from any process: the call worker saves each reply the moment it arrives."""
        path = root / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, cls.record(reply))


def _atomic_write(path: Path, data: bytes) -> None:
    """corpus_schema.writing's `atomic_write`, imported on the first reply saved: the call
    worker then starts without the corpus's typed records (pydantic; 0.1 s of its start)."""
    from wikitrace.corpus_schema.writing import atomic_write

    atomic_write(path, data)


class CachedLLM:
    """An LLM whose replies are looked up in, and saved to, a ResponseCache."""

    def __init__(self, inner: LLM, cache: ResponseCache) -> None:
        self.inner = inner
        self.model = inner.model
        self.cache = cache

    def cache_identity(self) -> dict[str, Any]:
        return self.inner.cache_identity()

    def count_tokens(self, text: str) -> int:
        """The inner model's count, kept in the cache too: a rebuild must cut each prompt as
        before (or its key changes), and a count found costs no tokenizer (nor litellm)."""
        key = ResponseCache.key(self.inner.cache_identity(), [{"count_tokens": text}])
        found = self.cache.get_count(key)
        if found is not None:
            return found
        count = self.inner.count_tokens(text)
        with contextlib.suppress(OSError):  # an unsaved count is counted again next time
            self.cache.put_count(key, count)
        return count

    def forget(self, messages: list[Message]) -> None:
        """Drop the cached reply to `messages`: it could not be used (not valid JSON of the
        right shape), so a later build asks again rather than getting it back."""
        key = ResponseCache.key(self.inner.cache_identity(), messages)
        with contextlib.suppress(OSError):
            self.cache.path(key).unlink()

    async def complete(self, messages: list[Message]) -> LLMReply:
        key = ResponseCache.key(self.inner.cache_identity(), messages)
        cached = self.cache.get(key)
        if cached is not None:
            self.cache.hits += 1
            return cached
        self.cache.misses += 1
        saving = getattr(self.inner, "complete_saving", None)
        if callable(saving):
            # A call worker saves the reply itself, as it arrives: a build killed while the
            # reply waits for this event loop does not pay for it again.
            answer: tuple[LLMReply, bool] = await saving(messages, self.cache.root, key)
            reply, saved = answer
            if saved:
                return reply
        else:
            reply = await self.inner.complete(messages)
        # Saved before anything else happens, so a build killed now does not pay again. A
        # reply that cannot be saved (a full disk, a read-only cache) is still used: it is paid.
        try:
            self.cache.put(key, reply)
        except OSError as error:
            self.cache.failed_writes += 1
            if self.cache.failed_writes == 1:
                log.warning(
                    "cannot save model replies in the cache %s (%s); going on without it, "
                    "so an interrupted build will ask again for what it could not save",
                    self.cache.root,
                    error.strerror or error,
                )
        return reply


def close(llm: LLM | None) -> None:
    """Stop what `llm` holds open (the worker process of a model `connect`ed with one)."""
    while llm is not None:
        stop = getattr(llm, "close", None)
        if callable(stop):
            stop()
        llm = getattr(llm, "inner", None)
