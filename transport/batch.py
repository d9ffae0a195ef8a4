"""Compiling through a provider's batch API (`--batch`): the same requests at about half the
price, answered within hours instead of seconds.

A batch build is a pass that fills the response cache, then the build. The pass runs the
compile stage in rounds, its model calls answered from the response cache; a call the cache
cannot answer is not sent but queued (`Deferred`), and the round's work is thrown away. The
queued requests go to the provider as batch files (OpenAI's format, through litellm's files and
batches API); once the provider has answered them, the answers go into the response cache and
the next round begins. A round asks for what the answers of the last one lead to (an invalid
answer's correction, a quote repair), so the pass ends with a round that asks nothing new.
Then the build runs once, as any build does, every answer from the cache (`BatchAnswers`):
each goes through the same validation, repair and cache as a call made at once.

Each batch submitted is recorded in the cache (`batches/BATCH_ID.json`: the request keys it
answers) before anything else happens, so a process stopped while it waits (Ctrl-C, a crash)
resumes waiting when the same command is run again, without submitting anything twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import WikitraceError
from wikitrace.corpus_schema.writing import atomic_write

from .fast_path import FastClient
from .llm import CachedLLM, LiteLLMClient, LLMCallError, LLMReply, Message, ResponseCache

log = logging.getLogger(__name__)

Say = Callable[[str], None]

PROVIDERS = ("openai", "hosted_vllm", "litellm_proxy", "azure")
"""Providers whose batches litellm submits in OpenAI's batch-file format."""
MAX_REQUESTS = 50_000
"""Requests in one batch file (OpenAI's limit)."""
MAX_BYTES = 190_000_000
"""Bytes of one batch file (OpenAI's limit is 200 MB)."""
ENDPOINT = "/v1/chat/completions"
DONE = frozenset({"completed", "failed", "expired", "cancelled"})


class Deferred(Exception):
    """A model call queued for a batch: the run is compiled in a later round."""


@dataclass
class BatchSettings:
    poll_seconds: float = 60.0
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES


class BatchAPI:
    """The provider's files and batches endpoints, through litellm."""

    def __init__(self, client: LiteLLMClient) -> None:
        self.client = client
        self.settings = client.settings

    @property
    def _litellm(self) -> Any:
        return self.client._litellm

    def check(self) -> None:
        """Refuse, before anything is sent, a provider litellm cannot batch for."""
        self.client.preflight()
        provider = self.provider
        if provider not in PROVIDERS:
            raise LLMCallError(
                f"--batch: litellm submits batches for {', '.join(PROVIDERS)} models, not "
                f"{provider} ({self.settings.model}); build without --batch",
                fatal=True,
            )

    @functools.cached_property
    def _resolved(self) -> tuple[str, str]:
        """The model's name at its provider, and the provider (litellm's reading of --model)."""
        s = self.settings
        name, provider, *_ = self._litellm.get_llm_provider(s.model, api_base=s.api_base)
        return str(name), str(provider)

    @property
    def provider(self) -> str:
        return self._resolved[1]

    def _where(self) -> dict[str, Any]:
        s = self.settings
        where: dict[str, Any] = {"custom_llm_provider": self.provider}
        if s.api_base:
            where["api_base"] = s.api_base
            if not os.environ.get("OPENAI_API_KEY") and self.provider != "azure":
                where["api_key"] = "no-key"  # a local server takes any key (see complete)
        return where

    def body(self, messages: list[Message]) -> dict[str, Any]:
        """The request a batch line carries: what `complete` would send."""
        return self.settings.chat_body(self._resolved[0], messages)

    async def submit(self, path: Path) -> tuple[str, str]:
        """Upload a batch file and start its batch: (batch id, input file id)."""
        with path.open("rb") as handle:
            uploaded = await self._litellm.acreate_file(
                file=handle, purpose="batch", **self._where()
            )
        batch = await self._litellm.acreate_batch(
            completion_window="24h",
            endpoint=ENDPOINT,
            input_file_id=uploaded.id,
            metadata={"made_by": "wikitrace"},
            **self._where(),
        )
        return str(batch.id), str(uploaded.id)

    async def retrieve(self, batch_id: str) -> Any:
        # Synchronous, in a thread: litellm's async success logging (1.110) downloads a
        # finished batch's whole output to price it, and leaves a coroutine unawaited.
        return await asyncio.to_thread(
            self._litellm.retrieve_batch, batch_id=batch_id, **self._where()
        )

    async def content(self, file_id: str) -> bytes:
        # The synchronous call in a thread: litellm's async one (1.110) leaves a coroutine
        # it never awaits, which Python reports on stderr.
        response = await asyncio.to_thread(
            self._litellm.file_content, file_id=file_id, **self._where()
        )
        return bytes(response.content)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What a batched answer cost at the provider's batch price; None when unknown."""
        litellm = self._litellm
        try:
            litellm.get_model_info(self.settings.model)
            from litellm.cost_calculator import batch_cost_calculator

            usage = litellm.Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            )
            prompt_cost, completion_cost = batch_cost_calculator(usage, self.settings.model)
        except Exception:
            return None
        return float(prompt_cost) + float(completion_cost)


@dataclass
class Submitted:
    """A batch on its way: what the cache folder records of it."""

    batch_id: str
    input_file_id: str
    keys: list[str]
    submitted: float
    identity: dict[str, Any]

    def save(self, folder: Path) -> None:
        atomic_write(state_path(folder, self.batch_id), orjson.dumps(self.__dict__) + b"\n")


def state_path(folder: Path, batch_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in batch_id)
    return folder / f"{safe}.json"


@dataclass
class Round:
    """What one round deferred: the batch files of the requests it queued (each with their
    keys), and the batches already submitted that it waits on."""

    awaited: set[str] = field(default_factory=set)
    files: list[tuple[Path, list[str]]] = field(default_factory=list)
    queued: set[str] = field(default_factory=set)
    """The keys of the requests written to the batch files."""
    deferred_keys: set[str] = field(default_factory=set)
    """The keys of every request deferred: queued, or answered by a batch already out."""
    _handle: Any = None
    _bytes: int = 0

    @property
    def deferred(self) -> bool:
        return bool(self.files or self.awaited)

    def write(self, folder: Path, key: str, line: bytes, settings: BatchSettings) -> None:
        """Add a request's line to the last batch file, or to a new one in `folder` once that
        holds as many requests or bytes as one batch may."""
        if self._handle is not None and (
            len(self.files[-1][1]) >= settings.max_requests
            or self._bytes + len(line) + 1 > settings.max_bytes
        ):
            self.close_file()
        if self._handle is None:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"requests-{uuid.uuid4().hex[:12]}.jsonl"
            self._handle = path.open("wb")
            self.files.append((path, []))
            self._bytes = 0
        self._handle.write(line + b"\n")
        self._bytes += len(line) + 1
        self.files[-1][1].append(key)
        self.queued.add(key)

    def close_file(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def discard(self) -> None:
        """Close and remove the batch files (not submitted)."""
        self.close_file()
        for path, _ in self.files:
            path.unlink(missing_ok=True)
        self.files.clear()


class BatchLLM:
    """The batch pass's model (see the module's docstring): a cached model whose misses are
    queued for a batch instead of being sent; `answers()` is the build's model after it."""

    def __init__(
        self,
        cached: CachedLLM,
        api: BatchAPI,
        settings: BatchSettings,
        *,
        say: Say | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.cached = cached
        self.cache = cached.cache
        self.model = cached.model
        self.api = api
        self.settings = settings
        self.say = say or (lambda text: log.info("%s", text))
        self._sleep = sleep
        self.folder = self.cache.root / "batches"
        self.failed: dict[str, str] = {}
        """Requests a batch did not answer, in this process: their runs fail, and the same
        command again submits them anew."""
        self.settled: set[str] = set()
        """Batches whose answers this process received: those are calls, not cache hits."""
        self.submitted: list[dict[str, Any]] = []
        """Every batch waited on: id, requests, status (for the report)."""
        self._round = Round()
        self._outstanding: dict[str, str] = {}

    def cache_identity(self) -> dict[str, Any]:
        return self.cached.cache_identity()

    def count_tokens(self, text: str) -> int:
        return self.cached.count_tokens(text)

    def forget(self, messages: list[Message]) -> None:
        """Nothing, in the pass: the build that follows must find the same unusable answers,
        to ask for the same corrections, and forgets them itself (`BatchAnswers.forget`)."""

    def answers(self) -> BatchAnswers:
        """The build's model, once the pass is over: every answer from the cache."""
        return BatchAnswers(self)

    # --- a round of the pass ------------------------------------------------------------------

    def start_round(self) -> None:
        self._round = Round()
        self._outstanding = self._load_outstanding()

    def finish_round(self) -> bool:
        """True when the round made no request the cache could not answer: the pass is over."""
        self._round.close_file()
        return not self._round.deferred

    @property
    def waiting(self) -> int:
        """The requests the round queued or found in a batch still out."""
        return len(self._round.deferred_keys)

    async def complete(self, messages: list[Message]) -> LLMReply:
        key = ResponseCache.key(self.cached.cache_identity(), messages)
        reply = self.cache.get(key)
        if reply is not None:
            return reply
        if key in self.failed:
            raise LLMCallError(self.failed[key])
        batch = self._outstanding.get(key)
        if batch is not None:
            self._round.awaited.add(batch)
        elif key not in self._round.queued:
            body = self.api.body(messages)
            line = orjson.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body})
            self._round.write(self.folder, key, line, self.settings)
        self._round.deferred_keys.add(key)
        raise Deferred(key)

    def cost(self, key: str) -> float | None:
        """What the answer cached under `key` cost, as its batch priced it; None when unknown."""
        try:
            cost = orjson.loads(self.cache.path(key).read_bytes()).get("cost_usd")
        except (OSError, orjson.JSONDecodeError, AttributeError):
            return None
        return float(cost) if isinstance(cost, int | float) else None

    def discard(self) -> None:
        """Remove the batch files of a round that was not submitted (interrupted)."""
        self._round.discard()

    def _load_outstanding(self) -> dict[str, str]:
        """Request key -> batch, for batches recorded by this or an earlier process."""
        outstanding: dict[str, str] = {}
        if not self.folder.is_dir():
            return outstanding
        identity = self.cached.cache_identity()
        for path in sorted(self.folder.glob("*.json")):
            try:
                data = orjson.loads(path.read_bytes())
                if data["identity"] != identity:
                    continue  # another model's batch, in a shared cache
                for key in data["keys"]:
                    outstanding[key] = data["batch_id"]
            except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as error:
                log.warning("ignoring the damaged batch record %s: %s", path, error)
        return outstanding

    # --- between rounds of the pass -----------------------------------------------------------

    async def settle(self) -> None:
        """Submit what the round queued, then wait for every batch it needs and put their
        answers in the cache."""
        waiting = set(self._round.awaited)
        for path, keys in self._round.files:
            batch_id, file_id = await self._call("submit a batch", self.api.submit(path))
            # Recorded before anything else: a process stopped from now on waits for it again.
            record = Submitted(batch_id, file_id, keys, time.time(), self.cached.cache_identity())
            record.save(self.folder)
            path.unlink(missing_ok=True)
            self.say(f"batch {batch_id}: submitted {len(keys)} requests")
            waiting.add(batch_id)
        self._round.files.clear()
        if waiting:
            self.say(
                f"waiting for {len(waiting)} batch{'es' if len(waiting) > 1 else ''} (checked "
                f"every {self.settings.poll_seconds:g} s); Ctrl-C stops waiting, and the same "
                "command again waits for them without submitting anything twice"
            )
        last: dict[str, str] = {}
        while waiting:
            for batch_id in sorted(waiting):
                batch = await self._call("check a batch", self.api.retrieve(batch_id))
                status = str(batch.status)
                counts = getattr(batch, "request_counts", None)
                seen = f"{status}" + (
                    f", {counts.completed + counts.failed} of {counts.total} answered"
                    if counts is not None and counts.total
                    else ""
                )
                if last.get(batch_id) != seen:
                    self.say(f"batch {batch_id}: {seen}")
                    last[batch_id] = seen
                if status in DONE:
                    await self._take(batch_id, batch)
                    waiting.discard(batch_id)
            if waiting:
                await self._sleep(self.settings.poll_seconds)

    async def _take(self, batch_id: str, batch: Any) -> None:
        """Put a finished batch's answers in the cache; what it did not answer fails."""
        path = state_path(self.folder, batch_id)
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as error:
            raise BatchError(
                f"batch {batch_id}: its record {path} is unreadable: {error}"
            ) from None
        keys: list[str] = record["keys"]
        answered: set[str] = set()
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            data = await self._call("download a batch's answers", self.api.content(file_id))
            for number, raw in enumerate(data.splitlines(), 1):
                if not raw.strip():
                    continue
                key = self._answer(batch_id, file_id, number, raw)
                if key is not None:
                    answered.add(key)
        status = str(batch.status)
        reason = status
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        if errors:
            reason += ": " + "; ".join(str(getattr(e, "message", e)) for e in errors[:3])
        missing = [key for key in keys if key not in answered]
        for key in missing:
            self.failed[key] = f"batch {batch_id} ended {reason} without answering this request"
        self.settled.add(batch_id)
        self.submitted.append(
            {"batch": batch_id, "requests": len(keys), "status": status, "unanswered": len(missing)}
        )
        with contextlib.suppress(OSError):
            path.unlink()

    def _answer(self, batch_id: str, file_id: str, number: int, raw: bytes) -> str | None:
        """One line of a batch's output or error file into the cache (or `failed`)."""
        try:
            line = orjson.loads(raw)
            key = str(line["custom_id"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            log.warning(
                "batch %s, file %s line %d: not an answer line; skipped", batch_id, file_id, number
            )
            return None
        response = line.get("response") or {}
        body = response.get("body") or {}
        try:
            if response.get("status_code") != 200 or line.get("error"):
                raise ValueError(_error_text(line.get("error") or body.get("error") or response))
            text = body["choices"][0]["message"]["content"] or ""
            if not isinstance(text, str):
                raise ValueError("the answer's content is not text")
            usage = body.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            self.failed[key] = f"batch {batch_id}: {error}"
            return key
        reply = LLMReply(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.api.cost(prompt_tokens, completion_tokens),
            batch=batch_id,
        )
        try:
            self.cache.put(key, reply)
        except OSError as error:
            raise BatchError(
                f"cannot save batch {batch_id}'s answers in the cache {self.cache.root} "
                f"({error.strerror or error}); the batch stays recorded, so the same command "
                "again downloads them once the disk is fixed"
            ) from None
        return key

    async def _call(self, what: str, call: Awaitable[Any]) -> Any:
        try:
            return await call
        except (KeyboardInterrupt, asyncio.CancelledError, WikitraceError):
            raise
        except Exception as error:
            raise BatchError(
                f"could not {what} ({type(error).__name__}: {str(error)[:300]}); batches "
                "submitted are recorded in the cache, so the same command again waits for "
                "them"
            ) from None


class BatchAnswers:
    """The build's model after the batch pass: each answer from the response cache, where the
    pass put it. An answer from a batch this process waited for is a call, paid now; a request
    no batch answered fails its run (the same command again submits it anew)."""

    def __init__(self, batch: BatchLLM) -> None:
        self.cached = batch.cached
        self.cache = batch.cache
        self.model = batch.model
        self._batch = batch

    def cache_identity(self) -> dict[str, Any]:
        return self.cached.cache_identity()

    def count_tokens(self, text: str) -> int:
        return self.cached.count_tokens(text)

    def forget(self, messages: list[Message]) -> None:
        self.cached.forget(messages)

    async def complete(self, messages: list[Message]) -> LLMReply:
        key = ResponseCache.key(self.cached.cache_identity(), messages)
        reply = self.cache.get(key)
        if reply is None:
            raise LLMCallError(
                self._batch.failed.get(key)
                or "no batch answered this request (the build asked what the batch pass did "
                "not); run the same command again to submit it"
            )
        if reply.batch is not None and reply.batch in self._batch.settled:
            # Answered by a batch this process waited for: a call, paid for now.
            return replace(reply, cached=False, attempts=1, cost_usd=self._batch.cost(key))
        self.cache.hits += 1
        return reply


class BatchError(LLMCallError):
    """The batch API could not be reached or answered badly: the build stops, batches kept."""

    def __init__(self, message: str) -> None:
        super().__init__(message, fatal=True)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message") or error.get("body") or error
        code = error.get("code") or error.get("status_code")
        return f"{code}: {message}" if code else str(message)
    return str(error)


def batch_model(cached: CachedLLM, settings: BatchSettings, *, say: Say | None = None) -> BatchLLM:
    """`cached` (a cached litellm client, or the fast path's: litellm batches for the same
    settings) answering through batches."""
    inner = cached.inner
    if isinstance(inner, FastClient):
        inner = LiteLLMClient(inner.settings)
    if not isinstance(inner, LiteLLMClient):
        raise WikitraceError("--batch needs a model reached through litellm")
    api = BatchAPI(inner)
    api.check()
    return BatchLLM(cached, api, settings, say=say)
