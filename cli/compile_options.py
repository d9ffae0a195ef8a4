"""The options that say how runs are compiled (build, add, update), made from their
declarations (corpus_schema/setting_fields.py, COMPILE_SETTINGS, in the order --help lists
them); each command receives them as one typed value, `compile: CompileSettings` (which holds
the `reading: InputSettings` of input_options.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import COMPILE_SETTINGS, READ_SETTINGS, declared

from .common import Command, is_quiet, option, options
from .input_options import FORMAT, InputSettings

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
    call_workers: int
    workers: int | None
    fast_path: bool

    def build_options(
        self, inputs: tuple[Path, ...], output: Path, model: str, *, force: bool = False
    ) -> Any:
        """The compiler's BuildOptions for these settings."""
        from wikitrace.compiler import BuildOptions, CompileLimits

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
            call_workers=self.call_workers,
            workers=self.workers,
            fast_path=self.fast_path,
        )


REDACT_CHECK = {"redact": {"callback": _check_redact}, "redact-keep": {"callback": _check_redact}}
"""The redaction settings' patterns are checked as they are parsed."""

prompts_dir_option = option(declared("prompts-dir"))
"""The prompts-dir setting, for the commands that take it besides the compile group (gate,
hypothesize)."""


def compile_options(function: Command) -> Command:
    """How runs are compiled (and which logs are read), as `compile: CompileSettings`."""

    def with_inputs(values: dict[str, Any]) -> CompileSettings:
        names = ("input_format", "labels", "success_threshold")
        reading = InputSettings(**{name: values.pop(name) for name in names})
        return CompileSettings(reading=reading, **values)

    settings = COMPILE_SETTINGS + READ_SETTINGS
    return options(settings, "compile", with_inputs, {**REDACT_CHECK, **FORMAT})(function)
