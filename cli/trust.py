"""`wikitrace trust`: the user's say that a project's settings file may be read (its safe keys)."""

from __future__ import annotations

from pathlib import Path

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import is_quiet, option
from .settings import trust, trust_file


@click.command("trust")
@option(declared("remove"))
@click.pass_context
def trust_command(ctx: click.Context, remove: bool) -> None:
    """Trust the settings file of this folder (or of the nearest folder above it that has one):
    ./wikitrace.toml, or the [tool.wikitrace] table of ./pyproject.toml.

    Until then a run ignores it, and says so on stderr. Its path and hash are recorded in
    $XDG_CONFIG_HOME/wikitrace/trusted.json; once the file changes it is ignored again until
    trusted again. Even trusted, it may not set the keys that run code (prompts-dir, runner),
    send data (model, api-base, judge, ...), change redaction (no-redact, redact, redact-keep),
    choose outputs (output, force, cache-dir, hook-log, ...) or read files outside the folder
    (task-file, labels, ...): those go in your own settings file
    (~/.config/wikitrace/wikitrace.toml) or on the command line.
    """
    root = ctx.find_root().command
    assert isinstance(root, click.Group)
    found, refused = trust(root, Path.cwd(), remove=remove)
    if is_quiet():
        return
    if remove:
        click.echo(f"no longer trusted: {found.where}", err=True)
        return
    click.echo(f"trusted {found.where} (recorded in {trust_file()})", err=True)
    for key, why in refused:
        click.echo(f"  still ignored: {key} ({why})", err=True)
