"""`wikitrace actions` and `wikitrace turn`: the corpus's drill-down tools, from the CLI."""

from __future__ import annotations

import sys

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import option


def _show(produce: object) -> None:
    from wikitrace.corpus_schema import drilldown

    try:
        text = produce()  # type: ignore[operator]
    except drilldown.DrillError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.code)
    click.echo(text)


@click.command("actions")
@click.argument("corpus", type=click.Path(file_okay=False))
@click.argument("step")
def actions_command(corpus: str, step: str) -> None:
    """One line per turn of run STEP (step-0042 or 42) of CORPUS: turn number, role, the action
    taken and the start of what came back, every tool call of the turn named and each that
    failed marked [failed] with the line that says what failed. The same as
    CORPUS/tools/actions STEP.

    \b
    Example:
      wikitrace actions corpus step-0003
    """
    from wikitrace.corpus_schema import drilldown

    _show(lambda: drilldown.actions_text(drilldown.find_root(corpus), step))


@click.command("turn")
@click.argument("corpus", type=click.Path(file_okay=False))
@click.argument("step")
@click.argument("turns", metavar="N[-M]")
@option(declared("lines"))
@option(declared("grep"))
def turn_command(corpus: str, step: str, turns: str, lines: str | None, grep: str | None) -> None:
    """Turn N (or turns N to M) of run STEP of CORPUS in full, as logged. The same as
    CORPUS/tools/turn STEP N. A long turn can be read a window at a time: --grep finds the
    lines, --lines shows them.

    \b
    Example:
      wikitrace turn corpus step-0003 12-14
      wikitrace turn corpus step-0003 40 --grep "pre-commit"
      wikitrace turn corpus step-0003 40 --lines 120-160
    """
    if lines and grep:
        raise click.UsageError("give --lines or --grep, not both")
    from wikitrace.corpus_schema import drilldown

    _show(lambda: drilldown.turns_text(drilldown.find_root(corpus), step, turns, lines, grep))
