"""What a build is asked to do (BuildOptions) and what it did (BuildReport, assembled once
from the values of the build's stages: stages.assemble_report)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from wikitrace.corpus_schema.setting_fields import (
    MAX_RETRIES,
    TEMPERATURE,
    TIMEOUT_SECONDS,
    default,
    recorded,
)

from .compile import CompileLimits
from .importers import AUTO, DEFAULT_THRESHOLD
from .importers.runs import FormatCounts
from .offline import OFFLINE_MODEL


@dataclass
class BuildOptions:
    inputs: list[Path]
    output: Path
    input_format: str = AUTO
    """A format name, or auto to detect each file's from its content."""
    labels: list[Path] = field(default_factory=list)
    """Side-car label files (or folders of them): run or task id -> success or reward."""
    success_threshold: float = DEFAULT_THRESHOLD
    """A numeric reward at or above this is a success."""
    model: str = OFFLINE_MODEL
    api_base: str | None = None
    concurrency: int = default("concurrency")
    on_error: Literal["stop", "skip"] = default("on-error")
    force: bool = False
    cache_dir: Path | None = None
    """Where model replies are cached; None means the user cache folder."""
    use_cache: bool = True
    redact: bool = True
    redact_patterns: tuple[str, ...] = ()
    redact_keep: tuple[str, ...] = ()
    """Patterns of what is no secret: a finding one of them matches in full is kept."""
    prompts_dir: Path | None = None
    limits: CompileLimits = field(default_factory=CompileLimits)
    temperature: float = TEMPERATURE
    timeout_seconds: float = TIMEOUT_SECONDS
    max_retries: int = MAX_RETRIES
    backoff_seconds: float = 2.0
    judge: str | None = None
    """The model that labels runs nothing else labels (None: they are left out)."""
    reasoning_effort: str | None = None
    """For a reasoning model: low, medium or high (litellm's `reasoning_effort`)."""
    mine: bool = True
    """Mine lessons from contrasts between runs (compiler/mine.py), with or without a model."""
    batch: bool = False
    """Send the compile calls through the provider's batch API (transport/batch.py)."""
    batch_poll_seconds: float = default("batch-poll")
    """How often a batch build asks whether its batches are done."""
    call_workers: int = default("call-workers")
    """Worker processes that make the compile calls (transport/call_worker.py), so that
    litellm's work on each runs on other cores than the build's own; 0: in the build's
    process."""
    fast_path: bool = default("fast-path")
    """Call a plain OpenAI-compatible endpoint (`openai/NAME` at --api-base) with one shared
    HTTP client instead of litellm (transport/fast_path.py); False: litellm for every call."""
    workers: int | None = None
    """Processes that read, redact, compile and render the runs of an offline build
    (compiler/workers.py), or write a model build's runs' files and pages while its calls flow
    (compiler/model_farm.py); None: offline, one for each core available that other work leaves
    idle, for a build of 5,000 runs or more; with a model, one from 256 runs; 1: all in the
    build's own process."""

    @property
    def offline(self) -> bool:
        return self.model == OFFLINE_MODEL

    def model_settings(self) -> dict[str, Any]:
        """How the model is called, less any secret: what the manifest keeps for `add`, the
        settings declared `recorded` (corpus_schema/setting_fields.py; reasoning_effort only
        when given)."""
        if self.offline:
            return {}
        values = {
            **dataclasses.asdict(self.limits),
            "api_base": self.api_base,
            "temperature": self.temperature,
            "reasoning_effort": self.reasoning_effort,
        }
        kept = {name: values[name] for name in recorded()}
        if kept["reasoning_effort"] is None:
            del kept["reasoning_effort"]
        return kept


def sources(paths: list[Path]) -> list[str]:
    """The input paths of a build, in order, as digests of their resolved paths: the same
    inputs however spelled resume a build, and the corpus keeps no path of the builder's."""
    return [
        "sha256:" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16] for path in paths
    ]


def corpus_path(path: str, inputs: Sequence[Path], *, resolved_inputs: bool = False) -> str:
    """A path as a corpus keeps it: under the input it was found in, named from that input's
    own name (`sessions/2026/01/x.jsonl` for `~/.codex/sessions`), however the input was
    spelled; never the builder's absolute path (the corpus is mounted in other machines).
    `resolved_inputs`: the inputs are their real paths already (raw.SourceNames)."""
    given = Path(path)
    resolved = given.resolve()
    for root in inputs:
        top = root if resolved_inputs else root.resolve()
        if resolved == top:
            return top.name
        if resolved.is_relative_to(top):
            return (Path(top.name) / resolved.relative_to(top)).as_posix()
    return given.name


@dataclass(frozen=True)
class BuildReport:
    """What a build did; printed at the end and stored in the manifest."""

    output: str
    model: str
    runs: int = 0
    successes: int = 0
    failures: int = 0
    compiled: int = 0
    insights: int = 0
    unverified_quotes: int = 0
    read_only_insights: int = 0
    """The model's lessons whose only support is content the agent read (a tool result, a
    page, a file): each is flagged on its page and in the first message (records.READ_ONLY)."""
    llm_calls: int = 0
    cache_hits: int = 0
    http_attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    invalid_retries: int = 0
    quote_repairs: int = 0
    cut_prompts: int = 0
    addresses_compiler: list[dict[str, Any]] = field(default_factory=list)
    """Runs whose text addresses the model reading them (compiler/injection.py), named as such
    in their compile prompt and in their compilation's notes: step, task_id, `task` and
    `turns`, and the patterns found."""
    failed: list[dict[str, Any]] = field(default_factory=list)
    """Runs whose compilation failed: step, task_id, error."""
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """Input records left out with --on-error skip: path, line, field, message."""
    unlabelled: list[dict[str, Any]] = field(default_factory=list)
    """Runs left out because nothing says whether they succeeded: where, ids, why."""
    judged: int = 0
    """Runs labelled by the --judge model."""
    abstained: int = 0
    """Runs the --judge model could not tell the outcome of: in `unlabelled`, saying why."""
    judge_calls: int = 0
    """Calls made to the --judge model (cache hits aside): in `llm_calls` too."""
    judge_cache_hits: int = 0
    """The --judge model's replies found in the cache: in `cache_hits` too."""
    judge_prompt_tokens: int = 0
    """The --judge model's prompt tokens: in `prompt_tokens` too."""
    judge_completion_tokens: int = 0
    """The --judge model's completion tokens: in `completion_tokens` too."""
    addresses_judge: list[dict[str, Any]] = field(default_factory=list)
    """Runs the judge read whose text addresses a judge or grader (compiler/injection.py):
    where, ids, `task` and `turns` (named as such to the judge) and the patterns found."""
    inputs: list[str] = field(default_factory=list)
    """What was read, a line per format: files and whether detected or given."""
    sources: list[str] = field(default_factory=list)
    """Digests of the input paths (`sources`): the same inputs again resume a build."""
    roots: list[Path] = field(default_factory=list, repr=False)
    """The input paths as given: the manifest names files under them (not kept itself)."""
    formats: FormatCounts = field(default_factory=dict)
    """Per input format: runs built, successes, failures, unlabelled runs left out."""
    ignored: list[dict[str, str]] = field(default_factory=list)
    """Files in input folders that hold no trajectory: path and why."""
    held_back: bool = False
    """A version `add` made but did not deploy because most compilations failed."""
    left_out: list[dict[str, str]] = field(default_factory=list)
    """Files read and found to hold no run (a session's side file): path and why."""
    redactions: dict[str, int] = field(default_factory=dict)
    redacted_where: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per kind, where the secrets redacted were: task, turn text, tool arguments, tool
    results, metadata."""
    version: str | None = None
    """The version written (`v0001` for a build)."""
    parent: str | None = None
    """The version runs were added to (add and update only)."""
    duplicates: int = 0
    """Input runs the parent already holds, left out (add and update only)."""
    unmatched_labels: list[str] = field(default_factory=list)
    """Label keys (--labels, or reports among the inputs) that named no run read."""
    mined: int = 0
    """Mined lessons the version adds or writes anew (compiler/mine.py); in `insights` too."""
    mining: dict[str, Any] | None = None
    """What mining tried and found, per task type (None: --no-mine)."""
    batches: list[dict[str, Any]] = field(default_factory=list)
    """Provider batches the build waited for (--batch): id, requests, status, unanswered."""
    supersede: dict[str, Any] | None = None
    """For an add: its lessons compared with the older ones of their scope (compiler/
    supersede.py, Review.as_dict): those superseded, in which version, and the likely pairs
    flagged for review; None for a build, or before the comparison (the add's manifest)."""
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.failed

    @property
    def mostly_failed(self) -> bool:
        """More of the runs' compilations failed for want of a reply than were made at all (a
        model server that died or never answered, a provider batch that failed): such a
        version is not made current. Answers the model gave but that could not be used (the
        model works) do not count."""
        return len(self.call_failures) * 2 > len(self.failed) + self.compiled

    @property
    def call_failures(self) -> list[dict[str, Any]]:
        """The failed runs that got no reply from the model (kind `call`)."""
        return [item for item in self.failed if item.get("kind") == "call"]

    def failed_summary(self) -> str:
        """How many compilations failed for want of a reply, and the first error, in a line."""
        calls = self.call_failures or self.failed
        first = calls[0]["error"] if calls else ""
        attempted = len(self.failed) + self.compiled
        return (
            f"{len(calls)} of {attempted} compilations failed, the model giving no reply "
            f"(the first: {first})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The report as the manifest keeps it: every path named as `corpus_path` names it."""
        data = dataclasses.asdict(self)
        data["complete"] = self.complete
        roots = data.pop("roots")
        data["output"] = Path(self.output).name
        for key in ("skipped", "unlabelled", "ignored", "left_out", "addresses_judge"):
            for item in data[key]:
                if isinstance(item.get("path"), str):
                    item["path"] = corpus_path(item["path"], roots)
        return data
