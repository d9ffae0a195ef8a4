"""Which logs are read and how their outcomes are told: --format, --labels and
--success-threshold, for convert and (with the compile options) build, add and update; a
command receives them as one typed value, `reading: InputSettings`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import READ_SETTINGS

from .common import Command, options

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


FORMAT = {"format": {"type": click.Choice(["auto", *FORMAT_NAMES])}}
"""--format's choices: the formats' names, which the CLI keeps (see FORMAT_NAMES)."""


def input_options(function: Command) -> Command:
    """--format, --labels and --success-threshold, as `reading: InputSettings`."""
    return options(READ_SETTINGS, "reading", lambda v: InputSettings(**v), FORMAT)(function)


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
