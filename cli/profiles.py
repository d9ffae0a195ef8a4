"""`--profile`: a named settings file shipped with wikitrace, read by the loader that reads the
user's (settings.py), one table for each command it sets.

`paper` (`paper.toml`, package data) sets each choice the three method descriptions
(`../shared/method/`) state to the method's value; `default` is ours, the options' own
defaults. A value given on the command line always wins over the profile's, and so does a value
from a settings file. docs/paper.md's table, "Reproducing the method as published", says why
ours differ; a test keeps it equal to paper.toml.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import option

PROFILES: dict[str, Path | None] = {
    "default": None,
    "paper": Path(__file__).with_name("paper.toml"),
}
"""Each profile's settings file (`default`: none, the options' own defaults)."""


@functools.cache
def table(profile: str) -> dict[str, Any]:
    """The profile's file as written: a table a command (`{}` for `default`)."""
    path = PROFILES[profile]
    if path is None:
        return {}
    with path.open("rb") as handle:
        return tomllib.load(handle)


def defaults(profile: str, ctx: click.Context) -> dict[str, Any]:
    """The option defaults `profile` gives the command `ctx` runs, by parameter name: its file
    read and checked as a settings file (an unknown key or a bad value is an error)."""
    from .settings import shipped

    path = PROFILES[profile]
    if path is None:
        return {}
    names: list[str] = []
    at: click.Context | None = ctx
    while at is not None and at.parent is not None:
        names.insert(0, at.info_name or "")
        at = at.parent
    root = ctx.find_root().command
    where = f"--profile {profile} ({path.name})"
    if isinstance(root, click.Group):
        mapped: Any = shipped(root, path, where)
    else:  # a command run on its own, not under `wikitrace`
        name = ctx.info_name or ""
        mapped = shipped(click.Group(commands={name: root}), path, where, only=name)
        names = [name]
    for name in names:
        mapped = mapped.get(name, {})
    return dict(mapped)


def profile_option(command: str) -> Callable[[Any], Any]:
    """`--profile NAME` for `command`: it sets the other options' defaults before they are
    read (an eager option), so that any option given, or set in a settings file, still wins."""

    def apply(ctx: click.Context, _: click.Parameter, value: str | None) -> str | None:
        if value:
            # Under what the settings file says (already this context's default_map): the
            # command line wins over the file, the file over the profile.
            ctx.default_map = {**defaults(value, ctx), **(ctx.default_map or {})}
        return value

    profile = declared("profile")
    paper = table("paper").get(command, {})
    names = ", ".join(f"--{key} {_shown(value)}".strip() for key, value in paper.items())
    # What the profile sets for this command is paper.toml's to say.
    said = (
        {"more": f"'paper' sets {names}. {profile.more}"}
        if names
        else {
            "help": f"'paper' or 'default': `{command}` already does what the published method "
            "states."
        }
    )
    return option(profile, is_eager=True, expose_value=False, callback=apply, **said)


def _shown(value: Any) -> str:
    return "" if value is True else str(value)
