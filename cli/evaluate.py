"""The parts of `wikitrace lift` that run alone: `lift eval`, `lift attribute` and
`lift drilldowns` (the group is lift.py's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import option
from .options import JudgeSettings, RowSettings, judge_options, print_json, row_options
from .profiles import profile_option


@click.command("eval", short_help="Gain and Regression only, against the no-memory baseline.")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@row_options()
@option(declared("strict"))
@option(declared("json"), help="JSON on stdout.")
@option(declared("csv"))
@option(declared("plot"))
@profile_option("eval")
def eval_command(
    results: tuple[Path, ...],
    strict: bool,
    as_json: bool,
    as_csv: bool,
    plot: Path | None,
    scoring: RowSettings,
) -> None:
    """Gain and Regression of each method against the no-memory baseline, per suite.

    RESULTS are JSON Lines or CSV files of rows: suite, method, task_id, trial, and success
    (true/false) or score. Per task, B is the majority outcome of the baseline's trials. Gain is
    the share of a method's trials that succeed where B failed; Regression, the share that fail
    where B succeeded. Intervals are 95% task-level bootstrap intervals; a method beats the
    noise only where its interval lies wholly outside the rerun's.

    \b
    Example:
      wikitrace lift eval results.jsonl --plot gain.png
    """
    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    from wikitrace.evaluation import evaluate, output, read_rows

    report = evaluate(read_rows(list(results)), scoring.eval_options(strict=strict))
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(output.as_json(report))
    elif as_csv:
        click.echo(output.as_csv(report), nl=False)
    else:
        click.echo(output.markdown(report), nl=False)
    if plot is not None:
        output.plot(report, plot)
        click.echo(f"wrote {plot}", err=True)


def not_counted(episodes: Sequence[Any]) -> None:
    """Say on stderr which episodes the judge's answer does not count, and why."""
    for item in episodes:
        if item.problem:
            click.echo(
                f"not counted: {item.suite}/{item.method}/{item.task_id}#{item.trial} "
                f"({item.where}): {item.problem}",
                err=True,
            )


@click.command(
    "attribute", short_help="Why memory broke what worked without it: causes A-E, by a judge."
)
@click.argument("corpus", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@judge_options
@option(declared("second-model"))
@option(declared("second-api-base"))
@option(declared("json"), help="JSON on stdout.")
def attribute_command(
    corpus: Path,
    results: tuple[Path, ...],
    judge: JudgeSettings,
    second_model: str | None,
    second_api_base: str | None,
    as_json: bool,
) -> None:
    """Why memory broke what the agent could do without it: each Regression episode (a failed
    trial of a memory method on a task the baseline solved in every trial) classified by a
    judge model as the method's attribution does: A the memory entry it followed was wrong,
    B a sound entry applied outside its applicability, C an entry misread or misused, D a
    better entry in memory was missed, E no link to memory.

    RESULTS are the rows `wikitrace lift eval` reads; a row to attribute names its episode's log
    in "trajectory" (any format `wikitrace build` reads, relative to the results file) and may
    carry the agent's citation report in "used". One cached call per episode; quotes from the
    episode are checked, and an answer none of whose quotes is found is not counted. With
    --second-model, a second judge labels the same episodes and the report gives their
    agreement (Cohen's kappa) and each episode they label differently.

    \b
    Example:
      wikitrace lift attribute corpus results.jsonl --model openai/gpt-4o-mini
    """
    from wikitrace import prompts
    from wikitrace.compiler.compile import Templates
    from wikitrace.evaluation import read_rows
    from wikitrace.evaluation.attribute import CAUSES, Attributor, attribute
    from wikitrace.tools.memory import insights_shown

    rows = read_rows(list(results))
    templates = Templates.load(also=(prompts.ATTRIBUTE,))
    shown = insights_shown(corpus)
    attributor = Attributor(corpus=corpus, shown=shown, llm=judge.llm(), templates=templates)
    second = None
    if second_model:
        other = replace(judge, model=second_model, api_base=second_api_base)
        second = (
            second_model,
            Attributor(corpus=corpus, shown=shown, llm=other.llm(), templates=templates),
        )
    report = attribute(rows, attributor, judge.baseline, judge.rerun, second=second)
    if as_json:
        print_json(report.as_dict())
        return
    click.echo(f"{report.regressions} Regression episodes")
    for cause, episodes in report.counts.items():
        click.echo(f"{cause} ({CAUSES[cause]}): {len(episodes)}  {' '.join(episodes)}")
    not_counted(report.episodes)
    if report.agreement is not None:
        agreed = report.agreement
        kappa = "undefined" if agreed.kappa is None else f"{agreed.kappa:.2f}"
        click.echo(
            f"second judge {agreed.model}: the same cause on {agreed.agreed} of "
            f"{agreed.episodes} episodes both counted, Cohen's kappa {kappa}"
        )
        for first, other_answer in zip(report.episodes, agreed.second, strict=True):
            if first.cause and other_answer.cause and first.cause != other_answer.cause:
                click.echo(
                    f"  {first.suite}/{first.method}/{first.task_id}#{first.trial}: "
                    f"{first.cause} vs {other_answer.cause}"
                )
        not_counted(agreed.second)


@click.command(
    "drilldowns", short_help="Label each drill-down: what triggered it, read and changed."
)
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@judge_options
@option(declared("mount"))
@option(declared("json"), help="JSON on stdout.")
def drilldowns_command(
    results: tuple[Path, ...], judge: JudgeSettings, mount: str, as_json: bool
) -> None:
    """Label each drill-down of the episodes on the method's three axes: what triggered it
    (blocked, conflict, missing_detail, failed_source, routine), what it read (insight page,
    compilation, raw run, search: from the path in the action) and what it changed (revised,
    detail, new_fact, none), with the success rate of the episodes behind each label.

    RESULTS are the rows `wikitrace lift eval` reads; each row of a memory method that names its
    episode's log in "trajectory" is read. A drill-down is a turn whose action names --mount.
    One cached judge call per episode that drilled down; its quotes are checked, and an
    answer with none found is not counted.

    \b
    Example:
      wikitrace lift drilldowns results.jsonl --model openai/gpt-4o-mini
    """
    from wikitrace import prompts
    from wikitrace.compiler.compile import Templates
    from wikitrace.evaluation import read_rows
    from wikitrace.evaluation.attribute import DrillLabeller, label_drilldowns

    rows = read_rows(list(results))
    labeller = DrillLabeller(
        llm=judge.llm(), templates=Templates.load(also=(prompts.DRILLDOWNS,)), mount=mount
    )
    report = label_drilldowns(rows, labeller, judge.baseline, judge.rerun)
    if as_json:
        print_json(report.as_dict())
        return
    data = report.as_dict()
    click.echo(
        f"{data['episodes']} episodes, {data['descended']} drilled down "
        f"({data['drilldowns']} drill-downs)"
    )
    for axis, labels in data["axes"].items():
        click.echo(f"\n{axis}:")
        for label, cell in sorted(labels.items()):
            rate = cell["successes"] / cell["drilldowns"]
            click.echo(f"  {label}: {cell['drilldowns']} ({rate:.0%} of their episodes succeeded)")
    not_counted(report.episodes)
