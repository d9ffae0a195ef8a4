"""`wikitrace actions` and `wikitrace turn`: the corpus's drill-down tools, from the CLI."""

from __future__ import annotations

import sys

import click

CORPUS_HELP = "The corpus folder (default: $WIKITRACE_CORPUS)."


def _show(produce: object) -> None:
    from wikitrace.tools import drilldown

    try:
        text = produce()  # type: ignore[operator]
    except drilldown.DrillError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.code)
    click.echo(text)


@click.command("actions")
@click.argument("step")
@click.option("--corpus", envvar="WIKITRACE_CORPUS", required=True, help=CORPUS_HELP)
def actions_command(step: str, corpus: str) -> None:
    """One line per turn of run STEP (step-0042 or 42): turn number, role, the action taken
    and the start of what came back. The same as CORPUS/tools/actions."""
    from wikitrace.tools import drilldown

    _show(lambda: drilldown.actions_text(drilldown.find_root(corpus), step))


@click.command("turn")
@click.argument("step")
@click.argument("turns", metavar="N[-M]")
@click.option("--corpus", envvar="WIKITRACE_CORPUS", required=True, help=CORPUS_HELP)
def turn_command(step: str, turns: str, corpus: str) -> None:
    """Turn N (or turns N to M) of run STEP in full, as logged. The same as CORPUS/tools/turn."""
    from wikitrace.tools import drilldown

    _show(lambda: drilldown.turns_text(drilldown.find_root(corpus), step, turns))
