"""`--profile`: a named set of option defaults, one table for every command that takes it.

`paper` sets each choice the three method descriptions (`../shared/method/`) state to the
method's value; `default` is ours. A value given on the command line always wins over the
profile's, and so does a value from a settings file (see settings.py). The table of
docs/paper.md, "Reproducing the method as published", is this table, and a test keeps the
two the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from .common import DetailedOption

PROFILES = ("default", "paper")


@dataclass(frozen=True)
class Choice:
    """One setting where the method as published and our default differ."""

    commands: tuple[str, ...]
    option: str
    """The option's parameter name (`falsify` for --falsify)."""
    flag: str
    """The option as typed."""
    paper: Any
    ours: Any
    why: str
    """Why ours differs."""


_BUILDS = ("build", "add", "update")

CHOICES: tuple[Choice, ...] = (
    Choice(
        ("gate",),
        "rule",
        "--rule",
        "estimates",
        "sequential",
        "On 8/16/16 probes the estimates commit a lesson whose true D_reg or P_fail is 0.40 "
        "about 15% of the time (gate_bench.py); the sequential tests commit one at the limits "
        "at most --alpha of the time, and one at 0.40 under 2%, spending runs until the "
        "evidence is clear.",
    ),
    Choice(
        ("gate",),
        "falsify",
        "--falsify",
        16,
        8,
        "Agent runs: 8 + 16 + 16 probes cost 80 runs a decision (both sides); 8 + 8 + 8, 48.",
    ),
    Choice(("gate",), "regress", "--regress", 16, 8, "As --falsify."),
    Choice(
        _BUILDS,
        "no_mine",
        "--no-mine",
        True,
        False,
        "The method draws lessons with a model only; ours also mines them from contrasts "
        "between runs, with their numbers, so that an offline corpus has lessons too.",
    ),
    Choice(
        _BUILDS,
        "hypotheses",
        "--hypotheses",
        True,
        False,
        "The method states every lesson as a hypothesis (precondition, behaviour, expected "
        "effect, verifier); without one the gate tests its applicability, which is the "
        "method's no-structured-hypothesis ablation. Ours asks only when told: the answer is "
        "longer, and a corpus that is never gated does not need it.",
    ),
    Choice(
        _BUILDS,
        "reasoning_effort",
        "--reasoning-effort",
        "high",
        None,
        "The compiler's reasoning effort: high costs more time and tokens, and a model "
        "without reasoning ignores it; ours leaves the model's own default.",
    ),
    Choice(
        _BUILDS,
        "unfiltered_insights",
        "--unfiltered-insights",
        True,
        False,
        "The method keeps up to three insights per run, unfiltered; in its own attribution, "
        "wrong entries and entries applied beyond their scope are the commonest causes of the "
        "regressions it traces to memory (111 of 184), so our prompt asks for no insight "
        "rather than a vague or over-broad one.",
    ),
    Choice(
        ("prompt",),
        "report_at",
        "--report-at",
        "end",
        "first",
        "The method asks for the citation report after the episode, which needs a second "
        "message from the harness (`prompt --report-request`); ours asks in the first message.",
    ),
    Choice(
        ("prompt",),
        "max_tokens",
        "--max-tokens",
        0,
        6000,
        "The method lists every insight; the message then grows with the memory, so ours "
        "lists the most relevant that fit 6000 tokens and points to the index (0: no budget).",
    ),
    Choice(
        ("prompt",),
        "all_types",
        "--all-types",
        True,
        False,
        "The method's first message lists all insights grouped by task type; ours keeps to "
        "the task's own type (given, or that of its most similar past runs), so that a coding "
        "task in a corpus of airline runs and coding sessions is not shown airline lessons.",
    ),
    Choice(
        ("prompt",),
        "all_insights",
        "--all-insights",
        True,
        False,
        "The method lists every insight; ours lists one of each group of near-duplicates "
        "(the same lesson drawn from several runs), with how many runs back it.",
    ),
)


def defaults(profile: str, command: str) -> dict[str, Any]:
    """The option defaults `profile` gives `command`."""
    if profile == "default":
        return {}
    return {c.option: c.paper for c in CHOICES if command in c.commands}


def profile_option(command: str) -> Callable[[Any], Any]:
    """`--profile NAME` for `command`: it sets the other options' defaults before they are
    read (an eager option), so that any option given, or set in a settings file, still wins."""

    def apply(ctx: click.Context, _: click.Parameter, value: str | None) -> str | None:
        if value:
            # Under what the settings file says (already this context's default_map): the
            # command line wins over the file, the file over the profile.
            ctx.default_map = {**defaults(value, command), **(ctx.default_map or {})}
        return value

    names = ", ".join(
        f"{c.flag} {_shown(c.paper)}".strip() for c in CHOICES if command in c.commands
    )
    said = (
        "'paper': the choices the published method states; 'default': ours."
        if names
        else f"'paper' or 'default': `{command}` already does what the published method states."
    )
    return click.option(
        "--profile",
        type=click.Choice(PROFILES),
        is_eager=True,
        expose_value=False,
        callback=apply,
        cls=DetailedOption,
        help=said,
        more=(f"'paper' sets {names}. " if names else "")
        + "Options given, or set in a settings file, still win. See docs/paper.md.",
    )


def _shown(value: Any) -> str:
    return "" if value is True else str(value)
