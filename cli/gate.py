"""`wikitrace gate` and `wikitrace monitor`: the admission gate and post-commit monitoring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .build import is_quiet
from .runner import RunProgress, make_runner_spec, runner_options

POINTER = click.Path(path_type=Path, file_okay=False)
TASKS = click.Path(path_type=Path, dir_okay=False, exists=True)


def _model_for(corpus: Path, api_base: str | None) -> Any:
    """The corpus's own model, for the one call that narrows a precondition (None offline)."""
    from wikitrace.compiler.llm import LiteLLMClient, LLMSettings
    from wikitrace.compiler.offline import OFFLINE_MODEL
    from wikitrace.corpus_schema import manifest

    model = manifest.load(corpus).model
    if model == OFFLINE_MODEL:
        return None
    client = LiteLLMClient(LLMSettings(model=model, api_base=api_base))
    client.preflight()
    return client


@click.command("gate")
@click.argument("corpus", type=POINTER)
@click.argument("insights", nargs=-1)
@runner_options
@click.option(
    "--task-pool",
    type=TASKS,
    help="The tasks your runner can run, one a line: JSON with task_id, task (its text) and "
    "task_type, or a bare id (its text then comes from the corpus). Default: the corpus's tasks.",
)
@click.option(
    "--targets",
    type=click.IntRange(0),
    default=8,
    show_default=True,
    help="Target probes: tasks of the insight's type most similar to it (BM25).",
)
@click.option(
    "--falsify",
    type=click.IntRange(0),
    default=8,
    show_default=True,
    help="Falsification probes: boundary tasks, look-alikes of other types, decoys.",
)
@click.option(
    "--regress",
    type=click.IntRange(0),
    default=8,
    show_default=True,
    help="Regression probes: tasks the corpus shows the agent solved.",
)
@click.option("--target-tasks", type=TASKS, help="Use these target probes (ids, one a line).")
@click.option("--falsify-tasks", type=TASKS, help="Use these falsification probes.")
@click.option("--regress-tasks", type=TASKS, help="Use these regression probes.")
@click.option(
    "--trials",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Runs of each probe task on each side (seeds SEED, SEED+1, ...).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--confidence",
    type=click.FloatRange(0.5, 1, max_open=True),
    default=0.9,
    show_default=True,
    help="Of each one-sided bound (exact binomial).",
)
@click.option(
    "--eta",
    type=float,
    default=0.1,
    show_default=True,
    help="Commit only if the lower bound of the transfer gain G is at least this.",
)
@click.option(
    "--delta",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="... and the upper bound of the falsification failure rate is at most this.",
)
@click.option(
    "--beta",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="... and the upper bound of the regression damage is at most this.",
)
@click.option("--no-narrow", is_flag=True, help="Reject instead of narrowing a precondition.")
@click.option("--api-base", help="Base URL of the corpus's model server, for narrowing.")
@click.option("--no-deploy", is_flag=True, help="Leave the new version as a candidate.")
@click.option("--json", "as_json", is_flag=True, help="Print the decisions as JSON on stdout.")
def gate_command(
    corpus: Path,
    insights: tuple[str, ...],
    task_pool: Path | None,
    targets: int,
    falsify: int,
    regress: int,
    target_tasks: Path | None,
    falsify_tasks: Path | None,
    regress_tasks: Path | None,
    trials: int,
    seed: int,
    confidence: float,
    eta: float,
    delta: float,
    beta: float,
    no_narrow: bool,
    api_base: str | None,
    no_deploy: bool,
    as_json: bool,
    **params: Any,
) -> None:
    """Test INSIGHTS (default: every ungated one) before letting them into CORPUS.

    Each insight is tried as a hypothesis that could be wrong: your agent runs, through
    --runner, with the current memory without the insight and with it, on target probes (tasks
    it claims to help), falsification probes (boundary tasks, look-alikes that violate its
    precondition, decoys) and regression probes (tasks the agent solved before).

    G (transfer gain on targets), P_fail (falsification probes made worse) and D_reg (solved
    tasks broken, over every probe) each get an exact one-sided binomial bound at --confidence.
    An insight is committed when G >= --eta, P_fail <= --delta and D_reg <= --beta, all as
    bounds. When the gain is real but the failures fall on tasks it never helped, the corpus's
    model narrows its precondition once and the same probes run again; otherwise it is rejected.

    One new version holds every decision: the insights' status (committed, or rejected: kept
    on record, never shown to an agent), gate/gate-NNNN.md (figures, probes, why) and
    gate/gate-NNNN.runs.jsonl (every probe run). Cost per insight: trials x (probe tasks) runs
    with it, plus the same without it (shared by the insights of one call), plus trials x
    (probe tasks) again when narrowed: at most 2 x 24 + 24 = 72 runs with the defaults.

    Prints the new version's folder (the decisions with --json). Exit 0 when every insight was
    decided, 2 for bad input.
    """
    import orjson

    from wikitrace.control.gate import GateOptions, gate_insights
    from wikitrace.control.pool import read_pool
    from wikitrace.corpus_schema.versions import Store

    quiet = is_quiet()
    spec = make_runner_spec(params)
    given = {
        kind: [task.task_id for task in read_pool(path)]
        for kind, path in (
            ("target", target_tasks),
            ("falsify", falsify_tasks),
            ("regress", regress_tasks),
        )
        if path is not None
    }
    options = GateOptions(
        runner=spec,
        pool=read_pool(task_pool) if task_pool else None,
        targets=targets,
        falsify=falsify,
        regress=regress,
        given=given,
        trials=trials,
        seed=seed,
        confidence=confidence,
        eta=eta,
        delta=delta,
        beta=beta,
        narrow=not no_narrow,
    )
    llm = None if no_narrow else _model_for(corpus, api_base)
    try:
        report = gate_insights(
            corpus,
            list(insights),
            options,
            llm=llm,
            deploy=not no_deploy,
            progress=RunProgress(quiet=quiet),
        )
    except KeyboardInterrupt:
        click.echo(
            f"\ninterrupted: no decision was written; the probe runs so far are in "
            f"{Store(corpus).runs_path}",
            err=True,
        )
        raise SystemExit(130) from None
    if not report.decisions:
        click.echo(f"nothing to gate: {report.tested_on} has no ungated insight", err=True)
        if as_json:
            click.echo("[]")
        return
    if not quiet:
        for decision in report.decisions:
            click.echo(f"{decision.insight} {decision.verdict}: {decision.reason}", err=True)
        click.echo(
            f"{report.version}: {len(report.decisions)} decisions, {report.agent_runs} agent runs",
            err=True,
        )
    if as_json:
        data = [decision.model_dump(mode="json") for decision in report.decisions]
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
    else:
        assert report.version is not None
        click.echo(str(Store(corpus).version_path(report.version)))
