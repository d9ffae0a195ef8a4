"""The options that say how runs are compiled (build, add, update), in named groups; each
command receives them as one typed value, `compile: CompileSettings` (which holds the
`reading: InputSettings` of input_options.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wikitrace.transport import limits

from .common import Command, DetailedOption, is_quiet, option_group
from .input_options import InputSettings, input_option_list

# --- how runs are compiled -----------------------------------------------------------------


def _check_redact(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> Any:
    if not value:
        return value  # nothing to check, so nothing to import: a hook must start fast
    from wikitrace.compiler.redact import check_keep_pattern, check_pattern

    check = check_keep_pattern if param.name == "redact_keep" else check_pattern
    for pattern in value:
        problem = check(pattern)
        if problem:
            raise click.BadParameter(f"{pattern!r}: {problem}")
    return value


@dataclass(frozen=True)
class CompileSettings:
    """The compile options of build, add and update."""

    reading: InputSettings
    api_base: str | None
    concurrency: int
    max_prompt_tokens: int | None
    context_tokens: int
    outcome_details: bool
    on_error: str
    cache_dir: Path | None
    no_cache: bool
    redact_patterns: tuple[str, ...]
    redact_keep: tuple[str, ...]
    no_redact: bool
    prompts_dir: Path | None
    temperature: float
    max_output_tokens: int
    timeout: float
    max_retries: int
    hypotheses: bool
    invalid_retries: int
    quote_repairs: int
    judge: str | None
    no_mine: bool
    reasoning_effort: str | None
    unfiltered_insights: bool
    batch: bool
    batch_poll: float
    call_worker: bool
    call_workers: int
    workers: int | None
    fast_path: bool

    def build_options(
        self, inputs: tuple[Path, ...], output: Path, model: str, *, force: bool = False
    ) -> Any:
        """The compiler's BuildOptions for these settings."""
        from wikitrace.compiler import BuildOptions, CompileLimits

        if not self.call_worker and self.call_workers != 1:
            raise click.UsageError(
                "--no-call-worker makes the calls in the build's process: leave out "
                "--call-workers, or --no-call-worker"
            )
        if model == "offline" and self.hypotheses:
            raise click.UsageError(
                "--hypotheses needs a model: with --model offline there is none to state "
                "hypotheses with (--profile paper asks for them, and for --no-mine: offline, "
                "that corpus would have no insight at all). Give --model, or leave out "
                "--hypotheses (--profile default)"
            )
        if model == "offline" and self.no_mine and not is_quiet():
            click.echo(
                "warning: --no-mine with --model offline: no lesson is mined or written, so "
                "the corpus has runs and compilations but no insight",
                err=True,
            )
        return BuildOptions(
            inputs=list(inputs),
            output=output,
            input_format=self.reading.input_format,
            labels=list(self.reading.labels),
            success_threshold=self.reading.success_threshold,
            model=model,
            api_base=self.api_base,
            concurrency=self.concurrency,
            on_error="skip" if self.on_error == "skip" else "stop",
            force=force,
            cache_dir=self.cache_dir,
            use_cache=not self.no_cache,
            redact=not self.no_redact,
            redact_patterns=self.redact_patterns,
            redact_keep=self.redact_keep,
            prompts_dir=self.prompts_dir,
            limits=CompileLimits(
                invalid_retries=self.invalid_retries,
                quote_repairs=self.quote_repairs,
                max_prompt_tokens=self.max_prompt_tokens,
                context_tokens=self.context_tokens,
                max_output_tokens=self.max_output_tokens,
                outcome_details=self.outcome_details,
                hypotheses=self.hypotheses,
                unfiltered_insights=self.unfiltered_insights,
            ),
            temperature=self.temperature,
            timeout_seconds=self.timeout,
            max_retries=self.max_retries,
            judge=self.judge,
            mine=not self.no_mine,
            reasoning_effort=self.reasoning_effort,
            batch=self.batch,
            batch_poll_seconds=self.batch_poll,
            call_workers=self.call_workers if self.call_worker else 0,
            workers=self.workers,
            fast_path=self.fast_path,
        )


api_base_option = click.option(
    "--api-base",
    help="Base URL of a local model server (vLLM, Ollama, ...).",
)

prompts_dir_option = click.option(
    "--prompts-dir",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    hidden=True,
    help="Folder of templates that override the bundled ones of the same name.",
)


_MODEL_SERVER: list[Callable[[Any], Any]] = [
    api_base_option,
    click.option(
        "--concurrency",
        type=click.IntRange(1, 512),
        metavar="N",
        default=8,
        show_default=True,
        help="Model calls in flight at once.",
    ),
]
"""Where the model is, and how many calls it is sent at once."""

_PROMPT_BUDGET: list[Callable[[Any], Any]] = [
    click.option(
        "--context-tokens",
        type=click.IntRange(4000),
        default=limits.CONTEXT_TOKENS,
        show_default=True,
        hidden=True,
        help="The model's context window. Every call for a run fits in it: the prompt, "
        "the answer (--max-output-tokens) and one repair round. A run of any length is "
        "shown to fit (long fields cut, then the run's skeleton with the turns that matter "
        "in full).",
    ),
    click.option(
        "--max-prompt-tokens",
        type=click.IntRange(1000),
        default=None,
        hidden=True,
        help="The prompt's budget, instead of what --context-tokens leaves "
        "(context - 2 x max-output-tokens - 1500).",
    ),
    click.option(
        "--outcome-details",
        is_flag=True,
        hidden=True,
        help="Show the model the grader's details when the log has them (tau's "
        "reward_info, test results), labelled as the grader's. Off by default: graders "
        "often hold the expected answer, which then leaks into lessons.",
    ),
]
"""How much of a run one prompt holds, and whether the grader's details are in it."""

_on_error_option = click.option(
    "--on-error",
    type=click.Choice(["stop", "skip"]),
    default="stop",
    show_default=True,
    help="Bad input record: stop before writing, or skip it and report it.",
)
"""What a bad input record does to the build."""

_REPLY_CACHE: list[Callable[[Any], Any]] = [
    click.option(
        "--cache-dir",
        type=click.Path(path_type=Path, file_okay=False),
        hidden=True,
        help="Cache of model replies (default: ~/.cache/wikitrace/llm). A rebuild of the "
        "same input, or a resumed build, makes no call twice.",
    ),
    click.option(
        "--no-cache", is_flag=True, hidden=True, help="Neither read nor write the reply cache."
    ),
]
"""The cache of the model's replies."""

_REDACTION: list[Callable[[Any], Any]] = [
    click.option(
        "--redact",
        "redact_patterns",
        multiple=True,
        callback=_check_redact,
        metavar="REGEX",
        cls=DetailedOption,
        help="Also redact text matching REGEX (repeatable).",
        more="Known secret formats (API keys, tokens, private keys, URL passwords, password "
        "assignments) are always redacted unless --no-redact.",
    ),
    click.option(
        "--redact-keep",
        "redact_keep",
        multiple=True,
        callback=_check_redact,
        metavar="REGEX",
        hidden=True,
        help="Keep what REGEX matches in full although a secret rule found it (repeatable): "
        "a test fixture's fake key, a documented example token.",
    ),
    click.option("--no-redact", is_flag=True, help="Send and write the runs exactly as logged."),
]
"""What is redacted before a run is sent or written."""

_EACH_CALL: list[Callable[[Any], Any]] = [
    click.option(
        "--temperature",
        type=float,
        default=limits.TEMPERATURE,
        show_default=True,
        hidden=True,
        help="Sampling temperature of the model's calls.",
    ),
    click.option(
        "--max-output-tokens",
        type=click.IntRange(256),
        default=limits.MAX_OUTPUT_TOKENS,
        show_default=True,
        hidden=True,
        help="The longest answer one call may write.",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(1),
        default=limits.TIMEOUT_SECONDS,
        show_default=True,
        hidden=True,
        help="Seconds before one model call times out (and is retried).",
    ),
    click.option(
        "--max-retries",
        type=click.IntRange(0, 20),
        default=limits.MAX_RETRIES,
        show_default=True,
        hidden=True,
        help="Backoff retries of a call on rate limits, time-outs and server errors.",
    ),
]
"""How one model call is made: sampling, answer length, time-out, retries."""

_ANSWERS: list[Callable[[Any], Any]] = [
    click.option(
        "--hypotheses",
        is_flag=True,
        hidden=True,
        help="Ask the model to state each insight as a falsifiable hypothesis too "
        "(precondition, behaviour, expected effect, verifier), as `wikitrace gate` tests.",
    ),
    click.option(
        "--invalid-retries",
        type=click.IntRange(0, 10),
        default=2,
        show_default=True,
        hidden=True,
        help="Times an answer that is not valid JSON of the right shape is sent back.",
    ),
    click.option(
        "--quote-repairs",
        type=click.IntRange(0, 10),
        default=1,
        show_default=True,
        hidden=True,
        help="Times quotes not found in their turn are sent back for repair; "
        "those still not found are marked UNVERIFIED.",
    ),
]
"""What the model is asked for, and how often an answer that does not hold is sent back."""

_judge_option = click.option(
    "--judge",
    metavar="MODEL",
    cls=DetailedOption,
    help="Label runs nothing else labels (sessions, traces) with MODEL.",
    more="One call of MODEL (any litellm model; --api-base applies) each: success, "
    "failure or "
    "cannot_tell, why, and verbatim quotes checked against the log (sent back once "
    "when none is found). The label is marked as judged wherever the outcome is shown; "
    "a run the judge cannot tell, or whose quotes are not found, stays unlabelled. "
    "Text in a run that addresses a judge is named to it and listed in the report. "
    "Cached like compile calls; its calls and tokens are counted in the report.",
)
"""Labelling the runs nothing else labels."""

_reasoning_effort_option = click.option(
    "--reasoning-effort",
    type=click.Choice(["low", "medium", "high"]),
    hidden=True,
    help="For a reasoning model: how hard it thinks (litellm's reasoning_effort; "
    "ignored by a model without one). Part of the cache key.",
)
"""How hard a reasoning model thinks."""

_LESSONS: list[Callable[[Any], Any]] = [
    click.option(
        "--unfiltered-insights",
        is_flag=True,
        hidden=True,
        help="Leave out the prompt's \"write no insight rather than a vague or over-broad "
        'one": the method as published keeps up to three insights per run, unfiltered.',
    ),
    click.option(
        "--no-mine",
        is_flag=True,
        hidden=True,
        help="Do not mine lessons from contrasts between runs. By default, with or without "
        "a model, each task type's runs are searched for patterns of action (a tool used, "
        "one tool before another, an action repeated after it failed, ...) that separate "
        "failed from successful runs of the same task (an exact test stratified by task, "
        "Benjamini-Hochberg corrected), "
        "and each task with both outcomes for where its runs first diverged; each finding "
        "becomes an insight with `compiled_by: mined`, its numbers and the runs it rests on.",
    ),
]
"""Which lessons are kept: the model's, unfiltered or not, and those mined from contrasts."""

_BATCH: list[Callable[[Any], Any]] = [
    click.option(
        "--batch",
        is_flag=True,
        cls=DetailedOption,
        help="Send compile calls as a batch: half the price, answered within 24 h.",
        more="Through the provider's batch API (OpenAI-compatible and Azure models). The "
        "build waits, checking every --batch-poll seconds; stopped while it waits "
        "(Ctrl-C), the same command again waits for the same batches without submitting "
        "anything twice. Corrections and quote repairs go in further batches. Needs the "
        "reply cache.",
    ),
    click.option(
        "--batch-poll",
        type=click.FloatRange(0.1),
        default=60.0,
        show_default=True,
        metavar="SECONDS",
        hidden=True,
        help="With --batch: how often to ask whether the batches are done.",
    ),
]
"""Sending the compile calls as a provider's batch."""

_PROCESSES: list[Callable[[Any], Any]] = [
    click.option(
        "--call-worker/--no-call-worker",
        default=True,
        show_default=True,
        hidden=True,
        help="Make the model calls in a second process, which imports litellm, so that "
        "litellm's work on each call (3 to 8 ms of CPU) runs on another core than the "
        "build's own: with many calls in flight their answers queue less. With "
        "--no-call-worker, the calls are made in the build's process.",
    ),
    click.option(
        "--call-workers",
        type=click.IntRange(1, 64),
        default=1,
        show_default=True,
        metavar="N",
        hidden=True,
        help="Processes that make the model calls, each importing litellm (about 225 MB "
        "each). One is enough unless it is the limit: a fast model server (a local vLLM, "
        "say) with hundreds of calls in flight, on a machine with cores to spare. Each "
        "call goes to the worker with the fewest calls waiting.",
    ),
    click.option(
        "--workers",
        type=click.IntRange(1, 256),
        default=None,
        metavar="N",
        hidden=True,
        help="Processes that read, redact, compile and render the runs of an offline "
        "build (--model offline), on as many cores. Default: one for each core this "
        "process may use that other work leaves idle (by the load average), for a build of "
        "5,000 runs or more (fewer are built in the build's own process, as with 1). The "
        "corpus is the same, byte for byte, whatever N.",
    ),
    click.option(
        "--fast-path/--no-fast-path",
        default=True,
        show_default=True,
        hidden=True,
        help="Call a plain OpenAI-compatible server (--model openai/NAME with --api-base, "
        "a name litellm neither rewrites nor prices) with one shared HTTP client instead "
        "of litellm: the same requests, replies and errors, about 1 ms of CPU a call "
        "instead of 3 to 10, and no litellm import (8 s) at the start. --no-fast-path "
        "sends every call through litellm.",
    ),
]
"""Which processes do the work: the call workers, the offline build's workers, the fast path."""


def _compile_option_list() -> list[Callable[[Any], Any]]:
    """Every compile option, group by group, in the order --help lists them."""
    return [
        *_MODEL_SERVER,
        *_PROMPT_BUDGET,
        _on_error_option,
        *_REPLY_CACHE,
        *_REDACTION,
        prompts_dir_option,
        *_EACH_CALL,
        *_ANSWERS,
        _judge_option,
        _reasoning_effort_option,
        *_LESSONS,
        *_BATCH,
        *_PROCESSES,
    ]


def compile_options(function: Command) -> Command:
    """How runs are compiled (and which logs are read), as `compile: CompileSettings`."""

    def with_inputs(values: dict[str, Any]) -> CompileSettings:
        names = ("input_format", "labels", "success_threshold")
        reading = InputSettings(**{name: values.pop(name) for name in names})
        return CompileSettings(reading=reading, **values)

    return option_group(_compile_option_list() + input_option_list(), "compile", with_inputs)(
        function
    )
