"""The fast path: model calls to a plain OpenAI-compatible chat completions endpoint made with
one shared aiohttp session, none of litellm's work on each call.

litellm spends 3 to 10 ms of CPU a call building the request, parsing the reply into its
objects, pricing it and logging it. For `openai/NAME` with --api-base (vLLM, llama.cpp, LM
Studio, SGLang, a proxy) it sends a fixed JSON body and reads three fields of the answer, so
`FastClient` does that itself: the same body (byte for byte), the same URL, the same key, the
same retries, backoff and time-out (llm.with_backoff), the same errors, and replies the cache
keeps the same bytes of. litellm is not imported, on start-up or on any call, unless a prompt
must be counted in tokens (its tokenizer, so that a prompt is cut as before) or a reply names a
model litellm's price list knows (its price, as it would have reported it).

The fast path is taken only where litellm is known to add nothing (`takes_fast_path`): any other
provider, a hosted OpenAI model (whose names litellm rewrites requests for: o-series, gpt-5),
a model litellm prices, or fast-path = false goes through litellm as before.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema.render import shortened

from .llm import (
    LiteLLMClient,
    LLMCallError,
    LLMReply,
    LLMSettings,
    Message,
    Transient,
    _import_litellm,
    with_backoff,
)

log = logging.getLogger(__name__)

PROVIDER = "openai/"
"""The one litellm provider the fast path speaks for: a plain OpenAI-compatible server."""

_REWRITTEN = re.compile(r"gpt-([5-9]|\d\d)|(^|/)o\d|responses/", re.IGNORECASE)
"""Names litellm sends differently whatever the server (1.110: max_completion_tokens and no
temperature for gpt-5 and o-series names, the Responses API for `responses/`), kept broad."""

_ERRORS = {
    400: ("BadRequestError", False, False),
    401: ("AuthenticationError", False, True),
    403: ("PermissionDeniedError", False, True),
    404: ("NotFoundError", False, True),
    408: ("Timeout", True, False),
    422: ("BadRequestError", False, False),
    429: ("RateLimitError", True, False),
    500: ("InternalServerError", True, False),
    502: ("BadGatewayError", True, False),
    503: ("ServiceUnavailableError", True, False),
    504: ("Timeout", True, False),
}
"""HTTP status -> (the name litellm's exception has, retried?, fatal?). A key refused, a model
unknown: no call can succeed, so the build stops. Any other 4xx fails its call at once; any
other 5xx is retried."""


def takes_fast_path(settings: LLMSettings) -> bool:
    """Whether the calls `settings` name can skip litellm: `openai/NAME` at an --api-base, a
    name litellm neither rewrites requests for nor prices, and fast-path not set false."""
    if not settings.fast_path or not settings.api_base:
        return False
    name = settings.model.removeprefix(PROVIDER)
    if name == settings.model or not name or _REWRITTEN.search(name):
        return False
    if "?" in settings.api_base or "#" in settings.api_base:
        return False  # a query (Azure's api-version) is litellm's to place
    return not may_be_priced(name)


_PRICED_FAMILIES = re.compile(
    r"(gpt(?!-oss)|chatgpt|chat-|o\d|text-|ft:|sora|omni|computer-use|deep-research|tts|codex|"
    r"container|daybreak|whisper|dall-e|davinci|babbage|claude|anthropic|gemini|google|"
    r"databricks)"
)
"""Names litellm (1.110) may price as an `openai/` model's, beyond its price list's own keys:
it matches families and strips dates and regions. tests/test_fast_path.py checks this against
litellm's own pricing of every name its price list holds."""


_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")
"""A date litellm reads past to price a name (`gpt-4o-2099-01-01` as `gpt-4o`)."""


@functools.cache
def _price_list_keys() -> frozenset[str] | None:
    """The names litellm's local price list holds, in lower case; None when it cannot be read
    (then every name may be priced)."""
    # llm._import_litellm sets it to True unless it is set: otherwise litellm would price
    # from a list fetched from the network.
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").lower() != "true":
        return None
    try:
        spec = importlib.util.find_spec("litellm")  # found, not imported
        folders = list(spec.submodule_search_locations or []) if spec else []
        data = orjson.loads(
            (Path(folders[0]) / "model_prices_and_context_window_backup.json").read_bytes()
        )
    except (OSError, IndexError, ValueError):
        return None
    return frozenset(key.lower() for key in data)


def may_be_priced(name: str) -> bool:
    """Whether litellm may put a price on a call of, or a reply from, model `name` (at the
    openai provider): a name of its price list, or of a family it prices. A superset."""
    keys = _price_list_keys()
    if keys is None:
        return True
    name = _DATED.sub("", name.lower().removeprefix(PROVIDER))
    last = name.rsplit("/", 1)[-1]
    return (
        name in keys
        or PROVIDER + name in keys
        or _PRICED_FAMILIES.match(name) is not None
        or _PRICED_FAMILIES.match(last) is not None
    )


async def _holding(session: Any) -> AsyncIterator[Any]:
    """Hands out `session`, and closes it when its event loop ends: asyncio.run finalizes the
    async generators still open on its loop, so this one's `finally` runs there."""
    try:
        yield session
    finally:
        await session.close()


class FastClient:
    """Calls a plain OpenAI-compatible chat completions endpoint with one aiohttp session an
    event loop (connections kept open and shared by every call on it).

    aiohttp (its C parser), not httpx2 nor httpx: with 64 calls in flight against a local
    server, httpx's pool (httpcore 1) spent 4.8 ms of CPU a call checking every pooled
    connection on every request, httpx2 0.96 ms in its request and response models, and
    aiohttp 0.21 ms (docs/scale.md), which is the build's process's own when the calls are
    made in it. litellm, where it is taken, keeps its own clients."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self.model = settings.model
        self._sleep = sleep
        self._litellm_client = LiteLLMClient(settings)  # imports nothing until used
        self._name = settings.model.removeprefix(PROVIDER)
        base = settings.api_base or ""
        self._url = base + ("" if base.endswith("/") else "/") + "chat/completions"
        key = os.environ.get("OPENAI_API_KEY") or "no-key"  # a local server takes any key
        self._headers = {
            "authorization": f"Bearer {key}",
            "content-type": "application/json",
            "accept": "application/json",
        }
        if os.environ.get("OPENAI_ORGANIZATION"):
            self._headers["openai-organization"] = os.environ["OPENAI_ORGANIZATION"]
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._holder: AsyncIterator[Any] | None = None
        self._priced: dict[str, bool] = {}
        """Model names replies came back with -> whether litellm prices them."""

    def cache_identity(self) -> dict[str, Any]:
        return self._litellm_client.cache_identity()

    def preflight(self) -> None:
        """Nothing to check beyond `clients.connect`'s (the server answers; no key is needed)."""

    def count_tokens(self, text: str) -> int:
        """litellm's count (its tokenizer for this model), so that prompts are cut as they
        would be without the fast path; litellm is imported on the first count."""
        return self._litellm_client.count_tokens(text)

    def _body(self, messages: list[Message]) -> bytes:
        """What litellm 1.110 sends for an `openai/` model it does not know, key for key."""
        return orjson.dumps(self.settings.chat_body(self._name, messages))

    async def _http(self) -> Any:
        """This event loop's session, made on its first call (a build runs a loop a round)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            import aiohttp

            seconds = self.settings.timeout_seconds
            session = aiohttp.ClientSession(
                # The OpenAI SDK's limit on connections, which litellm's calls had.
                connector=aiohttp.TCPConnector(limit=1000),
                # As httpx's Timeout(seconds): to connect (a free connection included), and
                # between two reads of a reply.
                timeout=aiohttp.ClientTimeout(total=None, connect=seconds, sock_read=seconds),
                # The proxy the environment sets for the URL, found once: trust_env would look
                # again on every call, and would read ~/.netrc on a thread for each.
                proxy=environment_proxy(self._url),
            )
            self._holder = _holding(session)
            self._client = await anext(self._holder)
            self._loop = loop
        return self._client

    async def complete(self, messages: list[Message]) -> LLMReply:
        import aiohttp

        session = await self._http()
        content = self._body(messages)

        async def attempt() -> Any:
            try:
                async with session.post(self._url, data=content, headers=self._headers) as reply:
                    body = await reply.read()
            except TimeoutError as error:
                raise Transient("Timeout", f"the request timed out: {error!r}") from None
            except aiohttp.ClientError as error:  # refused, reset, a broken connection
                raise Transient("APIConnectionError", f"connection error: {error!r}") from None
            if reply.status != 200:
                self._refuse(reply.status, reply.headers.get("retry-after"), body)
            return self._read(body)

        data, attempts = await with_backoff(self.settings, attempt, self._sleep)
        message = data["choices"][0]["message"]
        usage = data.get("usage") or {}
        return LLMReply(
            text=message.get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cost_usd=self._cost(data),
            attempts=attempts,
        )

    def _refuse(self, status: int, retry_after: str | None, content: bytes) -> None:
        """Raise what a reply other than 200 means: Transient (retried) or LLMCallError."""
        kind, retried, fatal = _ERRORS.get(
            status,
            ("InternalServerError", True, False) if status >= 500 else ("APIError", False, False),
        )
        detail = f"HTTP {status}: {shortened(_error_message(content), 240)}"
        if retried:
            raise Transient(kind, detail, _retry_after(retry_after))
        raise LLMCallError(f"{self.model}: {kind}: {detail}", fatal=fatal)

    def _read(self, content: bytes) -> dict[str, Any]:
        try:
            data = orjson.loads(content)
            text = data["choices"][0]["message"].get("content")
            if not isinstance(text, str | None):
                raise TypeError(f"its content is {type(text).__name__}, not text")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as error:
            what = shortened(_error_message(content) if b'"error"' in content else repr(error), 240)
            raise LLMCallError(
                f"{self.model}: APIError: the reply is not a chat completion ({what})"
            ) from None
        return data  # type: ignore[no-any-return]

    def _cost(self, data: dict[str, Any]) -> float | None:
        """What litellm would report the call cost: None unless the reply names a model its
        price list may know, which litellm then prices (imported for it, once)."""
        served = data.get("model")
        if not isinstance(served, str) or self._priced.get(served) is False:
            return None
        if served not in self._priced:
            self._priced[served] = may_be_priced(served)
            if not self._priced[served]:
                return None
        litellm = _import_litellm()
        try:
            cost = litellm.completion_cost(
                completion_response=litellm.ModelResponse(**data),
                model=self._name,
                custom_llm_provider="openai",
            )
        except Exception:  # litellm does not price it after all: nor did its own calls
            self._priced[served] = False
            return None
        return float(cost)


def environment_proxy(url: str) -> str | None:
    """The proxy that HTTP_PROXY, HTTPS_PROXY or ALL_PROXY (and NO_PROXY) name for `url`, as
    httpx's clients took them; None for none."""
    import urllib.request
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    # proxy_bypass reads NO_PROXY (typeshed lacks proxy_bypass_environment, which it is).
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    # A proxy given as host:port is an http:// one, as httpx took it (aiohttp refuses it).
    return proxy if "://" in proxy else f"http://{proxy}"


def _error_message(content: bytes) -> str:
    """The message of an OpenAI-style error body, else the body's start."""
    try:
        error = orjson.loads(content).get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return str(message)
    except (orjson.JSONDecodeError, AttributeError):
        pass
    return content[:300].decode("utf-8", "replace").strip() or "(no body)"


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
