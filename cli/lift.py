"""`wikitrace lift`, the one evaluation command: `lift RESULTS...` reports what memory did, per
suite; its parts are subcommands (`lift eval`, `lift attribute`, `lift drilldowns`, from
evaluate.py) and `lift run-inspect` runs an inspect_ai task with and without memory, written as
the rows `lift` reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import Command, full_help, option, option_group
from .evaluate import attribute_command, drilldowns_command, eval_command, not_counted
from .options import JudgeSettings, RowSettings, row_options


def _key_values(pairs: tuple[str, ...], option: str) -> dict[str, Any]:
    """`key=value` pairs; a value is read as YAML (numbers, booleans, lists), as inspect does."""
    import yaml

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected key=value", param_hint=option)
        values[key] = yaml.safe_load(value)
    return values


@dataclass(frozen=True)
class AttributionSettings:
    """`lift --judge` and what it needs: the judge model and its server, the corpus
    the memory methods ran with, and where the judge's answers are cached."""

    judge: str | None
    api_base: str | None
    corpus: Path | None
    cache_dir: Path | None


def _attribution_settings(values: dict[str, Any]) -> AttributionSettings:
    settings = AttributionSettings(**values)
    if settings.judge and settings.corpus is None:
        raise click.UsageError("--judge needs --corpus (the corpus the memory methods ran with)")
    return settings


def attribution_options(function: Command) -> Command:
    """--judge, --api-base, --corpus and the reply cache (`cache-dir`), as
    `attribution: AttributionSettings`."""
    return option_group(
        [
            option(declared("judge")),
            option(declared("api-base"), hidden=True),  # the judge's, rarely a local one
            option(declared("corpus")),
            option(declared("cache-dir")),
        ],
        "attribution",
        _attribution_settings,
    )(function)


@click.command("report", hidden=True)
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=True))
@row_options(tuning_hidden=True)
@attribution_options
@option(declared("mount"))
@option(declared("json"), help="JSON on stdout.")
@option(declared("plot"))
def report_command(
    results: tuple[Path, ...],
    mount: str,
    as_json: bool,
    plot: Path | None,
    scoring: RowSettings,
    attribution: AttributionSettings,
) -> None:
    """What memory did, per suite: success with and without it, Gain and Regression against
    the rerun band (95% task-level bootstrap intervals), with --judge the Regression
    episodes' causes A-E, Stay/Descent, and tokens and seconds per episode.

    RESULTS are row files (JSON Lines or CSV), folders holding a results.jsonl (what `lift
    run-inspect` writes), or Harbor job folders (`harbor run`'s jobs/JOB).

    \b
    Example:
      wikitrace lift runs/ --json
      wikitrace lift jobs/baseline jobs/rerun jobs/with-memory
      wikitrace lift runs/ --judge openai/gpt-4o-mini --corpus corpus
    \f

    Stay/Descent: the memory episodes that stayed at the first message or read the memory past
    it, and how each kind ended. A row is what `wikitrace lift eval` reads. Of a Harbor job
    folder, one row a trial whose reward Harbor holds valid, the others named on stderr; with
    several agents or models a suite for each; per agent and model the plain trials of the
    first such job are the baseline, of the second the rerun; a trial run with the memory,
    wikitrace.integrations.harbor, is of its method. Tokens, seconds and Stay/Descent come
    from the rows' optional "tokens", "seconds" and "drilldowns" (or, for a memory episode
    without "drilldowns", from its log: the turns that read --mount).
    """
    from wikitrace.evaluation import lift as lift_report

    rows = _read_results(results, scoring.baseline, scoring.rerun, mount)
    report = lift_report.lift(rows, scoring.eval_options(), _attribute(rows, attribution, scoring))
    _print_lift(report, as_json=as_json, plot=plot)


def _attribute(rows: list[Any], attribution: AttributionSettings, scoring: RowSettings) -> Any:
    """With --judge, each Regression episode's cause A-E, those the judge's answer does not
    count said on stderr; None without."""
    if not attribution.judge or attribution.corpus is None:
        return None
    from wikitrace import prompts
    from wikitrace.compiler.compile import Templates
    from wikitrace.evaluation.attribute import Attributor, attribute
    from wikitrace.tools.memory import insights_shown

    settings = JudgeSettings(
        model=attribution.judge,
        api_base=attribution.api_base,
        baseline=scoring.baseline,
        rerun=scoring.rerun,
        cache_dir=attribution.cache_dir,
    )
    templates = Templates.load(also=(prompts.ATTRIBUTE,))
    attributor = Attributor(
        corpus=attribution.corpus,
        shown=insights_shown(attribution.corpus),
        llm=settings.llm(),
        templates=templates,
    )
    causes = attribute(rows, attributor, scoring.baseline, scoring.rerun)
    not_counted(causes.episodes)
    return causes


def _print_lift(report: Any, *, as_json: bool, plot: Path | None) -> None:
    """Warnings on stderr, the report on stdout (Markdown, or JSON), and the plot."""
    from wikitrace.evaluation import lift as lift_report
    from wikitrace.evaluation import output

    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(lift_report.as_json(report) if as_json else lift_report.markdown(report), nl=False)
    if as_json:
        click.echo()
    if plot is not None:
        output.plot(report.eval_report, plot)
        click.echo(f"wrote {plot}", err=True)


def _read_results(results: tuple[Path, ...], baseline: str, rerun: str, mount: str) -> list[Any]:
    """The rows of every results file, run-inspect folder and Harbor job folder; a memory
    episode's row without drill-downs is given those its log shows."""
    from wikitrace.evaluation import read_rows
    from wikitrace.evaluation.attribute import fill_drilldowns
    from wikitrace.integrations.harbor_runs import is_job, read_jobs

    jobs = [path for path in results if not (path / "results.jsonl").is_file() and is_job(path)]
    files = [
        path / "results.jsonl" if path.is_dir() else path for path in results if path not in jobs
    ]
    rows = read_rows(files)
    if jobs:
        harbor = read_jobs(jobs, baseline, rerun)
        for note in harbor.left_out:
            click.echo(f"not counted: {note}", err=True)
        for suite, (counted, left_out) in harbor.counts.items():
            if left_out:
                click.echo(f"{suite}: {counted} trials counted, {left_out} not", err=True)
        for problem in harbor.problems:
            click.echo(f"warning: {problem}", err=True)
        rows += harbor.rows
    for problem in fill_drilldowns(rows, baseline, rerun, mount):
        click.echo(f"warning: no Stay/Descent for {problem}", err=True)
    return rows


@click.command(
    "run-inspect", short_help="Run an inspect_ai task with and without memory, for `lift`."
)
@click.argument("task")
@option(declared("corpus"))
@option(declared("agent-model"))
@option(declared("output"))
@option(declared("epochs"))
@option(declared("method"))
@option(declared("T"))
@option(declared("M"))
@option(declared("samples"))
@option(declared("no-leave-one-out"))
@option(declared("sandbox"), default=None)  # tri-state: None is "when the task has one"
def run_inspect_command(
    task: str,
    corpus: Path | None,
    model: str,
    output: Path,
    epochs: int,
    methods: tuple[str, ...],
    task_args: tuple[str, ...],
    model_args: tuple[str, ...],
    limit: int | None,
    no_leave_one_out: bool,
    use_sandbox: bool | None,
) -> None:
    """Run an inspect_ai TASK with and without a wikitrace memory (needs wikitrace[inspect]).

    TASK is file.py@task_name (or package.module@task_name). It runs four times, each an
    inspect eval logged under OUTPUT/METHOD/: no-memory and no-memory-rerun (the task as it
    is: the baseline and the noise band), insights-only (the first message's insights, no
    drill-down) and wikitrace (the first message, and the corpus read-only at /work/corpus
    in the sample's sandbox, or the MCP server's tools without one). Each sample's own task
    is left out of the memory. OUTPUT/results.jsonl holds one row an episode, for `wikitrace
    lift` and its parts.

    \b
    Example:
      wikitrace lift run-inspect tasks.py@my_task --corpus corpus \\
        --agent-model openai/gpt-4o -o runs
      wikitrace lift runs
    """
    if corpus is None:  # optional where lift's report takes it, needed here
        raise click.UsageError("Missing option '--corpus': the corpus the memory methods use")
    try:
        from wikitrace.integrations.inspect_runs import METHODS, RESULTS, run_methods
    except ImportError as error:
        raise click.ClickException(
            f"run-inspect needs inspect_ai ({error}): pip install 'wikitrace[inspect]'"
        ) from None
    from inspect_ai.model import get_model

    agent = get_model(model, **_key_values(model_args, "-M"))
    eval_options: dict[str, Any] = {"limit": limit} if limit else {}
    runs = run_methods(
        task,
        corpus,
        agent,
        output,
        epochs=epochs,
        task_args=_key_values(task_args, "-T"),
        methods=methods or tuple(METHODS),
        memory_options={"leave_one_out": not no_leave_one_out, "use_sandbox": use_sandbox},
        eval_options=eval_options,
    )
    for run in runs:
        logs = ", ".join(str(path) for path in run.logs)
        click.echo(f"{run.method}: {len(run.rows)} episodes ({logs})", err=True)
    click.echo(str(output / RESULTS))


REPORT = "report"
"""The command `wikitrace lift RESULTS...` runs: the whole report."""


class _Lift(click.Group):
    """`lift` with RESULTS (or an option) first runs the whole report (`lift report`, not listed);
    with a part's name first, that part. Its --help is the report's, with the parts listed.
    A settings file's `[lift]` keys are the report's (settings.py reads `default_command`)."""

    default_command = REPORT

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args[:1] == ["--help-all"]:  # the report's, under the name the user typed
            report = self.commands[REPORT]
            shown = click.Context(report, info_name=ctx.info_name, parent=ctx.parent)
            click.echo(full_help(report, shown), color=ctx.color)
            ctx.exit()
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [REPORT, *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        report = self.commands[REPORT]
        report.format_help(
            click.Context(report, info_name=ctx.info_name, parent=ctx.parent), formatter
        )
        self.format_commands(ctx, formatter)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, command.get_short_help_str(limit=70))
            for name, command in self.commands.items()
            if not command.hidden
        ]
        with formatter.section("Its parts, alone (`wikitrace lift PART --help`)"):
            formatter.write_dl(rows)


lift_group = _Lift(
    "lift",
    help=report_command.help,
    short_help=(report_command.help or "").split("\n\n", 1)[0],
    commands=[
        report_command,
        eval_command,
        attribute_command,
        drilldowns_command,
        run_inspect_command,
    ],
)
