"""Which logs are read and how their outcomes are told: --format, --labels and
--success-threshold, for convert and (with the compile options) build, add and update; a
command receives them as one typed value, `reading: InputSettings`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .common import Command, DetailedOption, option_group

FORMAT_NAMES = (
    "native",
    "claude-code",
    "codex",
    "gemini-cli",
    "copilot-chat",
    "cursor",
    "langfuse",
    "otel-genai",
    "opencode",
    "aider",
    "inspect-eval",
    "inspect",
    "atif",
    "tau2-bench",
    "tau-bench",
    "terminal-bench",
    "mini-swe-agent",
    "swe-agent",
    "openhands",
    "openhands-events",
    "fever",
    "webshop",
    "alfworld",
    "hotpotqa",
    "openai",
)
"""The input formats' names, for `--format` and `--help` without importing the importers (a
test keeps this list equal to wikitrace.compiler.importers.READABLE)."""


@dataclass(frozen=True)
class InputSettings:
    input_format: str
    labels: tuple[Path, ...]
    success_threshold: float


def input_option_list() -> list[Callable[[Any], Any]]:
    return [
        click.option(
            "-f",
            "--format",
            "input_format",
            type=click.Choice(["auto", *FORMAT_NAMES]),
            default="auto",
            show_default=True,
            metavar="NAME",
            help="The logs' format (`wikitrace convert --help-all`); auto: detect each file's.",
        ),
        click.option(
            "--labels",
            "labels",
            multiple=True,
            type=click.Path(path_type=Path, exists=True),
            metavar="FILE",
            cls=DetailedOption,
            help="Outcomes kept outside the logs (repeatable; a folder: every file).",
            more="JSON {id: true|false|reward}, JSON Lines or CSV rows (id, success|reward), "
            "or SWE-bench reports. Ids are run ids or task ids. Wins over the log's own outcome.",
        ),
        click.option(
            "--success-threshold",
            type=float,
            default=1.0,
            show_default=True,
            hidden=True,
            help="A run whose numeric reward is at least this succeeded (tau rewards, ATIF "
            "rewards, inspect scores; C=1, P=0.5, I=0).",
        ),
    ]


def input_options(function: Command) -> Command:
    """--format, --labels and --success-threshold, as `reading: InputSettings`."""
    return option_group(input_option_list(), "reading", lambda v: InputSettings(**v))(function)


def announce(plan: Any, *, quiet: bool) -> None:
    """Say on stderr which format each input was read as (and, with -v, what was ignored)."""
    if quiet:
        return
    for line in plan.describe():
        click.echo(line, err=True)
    if logging.getLogger("wikitrace").isEnabledFor(logging.INFO):
        for item in plan.ignored:
            click.echo(f"  ignored {item['path']}: {item['reason']}", err=True)


def where_of(item: dict[str, Any]) -> str:
    """path:line or path:position of a reported record."""
    where = str(item["path"])
    if item.get("line") is not None:
        where += f":{item['line']}"
    if item.get("at") is not None:
        where += f":{item['at']}"
    return where
