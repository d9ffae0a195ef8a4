"""What the commands share: the runner, judge and trial-row option groups, which arrive as one
typed value each, the corpus argument, --json and --nl, and the one way results are printed as
JSON.

A group such as `@row_options` adds its options to a command and hands the command one keyword
argument (`scoring: RowSettings`) instead of loose ones, so no command reads its options by
string key (common.py's option_group does the handing). The compile and input groups live in
compile_options.py, the gate's in gate_options.py; the quiet flag is common.py's `is_quiet`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import RUNNER_SETTINGS, declared, default

from .common import Command, option, option_group, options

__all__ = [
    "POINTER",
    "JudgeSettings",
    "RowSettings",
    "json_option",
    "judge_options",
    "nl_option",
    "no_deploy_option",
    "print_json",
    "print_rows",
    "row_options",
    "runner_options",
]

POINTER = click.Path(path_type=Path, file_okay=False)
"""A corpus: the link `wikitrace build -o` makes (or one version's folder, where reading)."""


def print_json(data: Any) -> None:
    """A command's result as JSON on stdout: indented, keys in their model's order."""
    import orjson

    click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())


def print_rows(rows: list[Any], *, lines: bool) -> None:
    """A listing as one JSON array (--json), or one JSON object a line (--nl)."""
    if not lines:
        print_json(rows)
        return
    import orjson

    for row in rows:
        click.echo(orjson.dumps(row).decode())


nl_option = option(declared("nl"))


def json_option(what: str) -> Callable[[Command], Command]:
    return option(declared("json"), help=f"Print {what} as JSON on stdout.")


no_deploy_option = option(declared("no-deploy"))


# --- the user's agent ----------------------------------------------------------------------


def _runner_spec(values: dict[str, Any]) -> Any:
    from wikitrace.control.runner import RunnerSpec

    return RunnerSpec(
        template=values["runner_template"],
        concurrency=values["runner_concurrency"],
        timeout_seconds=values["runner_timeout"],
        retries=values["runner_retries"],
        success_threshold=values.get("success_threshold", default("success-threshold")),
    )


def runner_options(*, reads_logs: bool = False) -> Callable[[Command], Command]:
    """--runner and how its runs go (gate, update), as `runner: RunnerSpec`. An agent's run
    succeeds at --success-threshold; `reads_logs` (update): the compile group has it already,
    and the command gives its value to the spec."""
    settings = RUNNER_SETTINGS if reads_logs else (*RUNNER_SETTINGS, declared("success-threshold"))
    return options(settings, "runner", _runner_spec)


# --- a judge of episodes (attribute, drilldowns) -------------------------------------------


@dataclass(frozen=True)
class JudgeSettings:
    """The judge model and which rows' episodes it reads."""

    model: str
    api_base: str | None
    baseline: str
    rerun: str
    cache_dir: Path | None

    def llm(self) -> Any:
        """The judge, reachable and cached (the user cache folder unless `cache-dir` says)."""
        from wikitrace.evaluation.attribute import OUTPUT_TOKENS
        from wikitrace.transport.clients import connect
        from wikitrace.transport.llm import LLMSettings, default_cache_dir

        settings = LLMSettings(
            model=self.model, api_base=self.api_base, max_output_tokens=OUTPUT_TOKENS
        )
        return connect(settings, self.cache_dir or default_cache_dir())


@dataclass(frozen=True)
class RowSettings:
    """How trial rows are read into Gain and Regression: which methods are the baseline and
    the rerun, when a score is a success, and the bootstrap behind each interval."""

    baseline: str
    rerun: str
    success_threshold: float
    resamples: int
    seed: int

    def eval_options(self, *, strict: bool = False) -> Any:
        """The evaluation's EvalOptions for these settings."""
        from wikitrace.evaluation import EvalOptions

        return EvalOptions(
            baseline=self.baseline,
            rerun=self.rerun,
            success_threshold=self.success_threshold,
            resamples=self.resamples,
            seed=self.seed,
            strict=strict,
        )


def row_options(*, tuning_hidden: bool = False) -> Callable[[Command], Command]:
    """The options that read trial rows into Gain and Regression (`eval`, `lift`), as
    `scoring: RowSettings`: the baseline and rerun methods, the success threshold, and the
    bootstrap's resamples and seed (`tuning_hidden`: those three left out of the first --help
    screen)."""
    options = [
        option(declared("baseline")),
        option(declared("rerun")),
        *(
            option(declared(key), hidden=tuning_hidden)
            for key in ("success-threshold", "resamples", "seed")
        ),
    ]
    return option_group(options, "scoring", lambda values: RowSettings(**values))


def judge_options(function: Command) -> Command:
    """--judge and the rows to judge (attribute, drilldowns), as `judge: JudgeSettings`."""
    return option_group(
        [
            option(declared("judge")),
            option(declared("api-base")),
            option(declared("baseline")),
            option(declared("rerun")),
            option(declared("cache-dir")),
        ],
        "judge",
        _judge_settings,
    )(function)


def _judge_settings(values: dict[str, Any]) -> JudgeSettings:
    judge = values.pop("judge")
    if judge is None:  # optional where a build may judge, needed where episodes are judged
        raise click.UsageError("Missing option '--judge': the model that judges the episodes")
    return JudgeSettings(model=judge, **values)
