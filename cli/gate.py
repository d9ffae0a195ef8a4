"""`wikitrace gate` and `wikitrace monitor`: the admission gate and post-commit monitoring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .options import (
    POINTER,
    is_quiet,
    no_deploy_option,
    plural,
    print_json,
    prompts_dir_option,
    runner_options,
)
from .profiles import profile_option
from .progress import agent_runs

TASKS = click.Path(path_type=Path, dir_okay=False, exists=True)


def _model_for(corpus: Path, api_base: str | None) -> Any:
    """The corpus's own model, for the one call that narrows a precondition (None offline)."""
    from wikitrace.compiler.llm import LLMSettings, connect
    from wikitrace.compiler.offline import OFFLINE_MODEL
    from wikitrace.corpus_schema import manifest

    built = manifest.load(corpus)
    if built.model == OFFLINE_MODEL:
        return None
    kept = built.model_settings  # called as the build called it, unless told otherwise
    api_base = api_base or kept.get("api_base")
    settings = LLMSettings(model=built.model, api_base=api_base)
    if "temperature" in kept:
        settings = LLMSettings(
            model=built.model, api_base=api_base, temperature=float(kept["temperature"])
        )
    return connect(settings)


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
    help="Falsification probes: boundary tasks, precondition violations, decoys of other types.",
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
@click.option(
    "--seed", type=int, default=0, show_default=True, help="The first seed (SEED, SEED+1, ...)."
)
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
@click.option(
    "--rule",
    type=click.Choice(["bounds", "estimates"]),
    default="bounds",
    show_default=True,
    help="bounds: commit when each figure's exact one-sided bound passes (at --confidence); "
    "estimates: when the figures themselves pass, as the method was published (cheaper to "
    "pass, easier to pass by luck: see the README).",
)
@click.option(
    "--p-fail",
    "p_fail",
    type=click.Choice(["citations", "outcomes"]),
    default="citations",
    show_default=True,
    help="citations: a falsification probe fails when the agent's citation report says it "
    "used the lesson there (the method's wrong activation), for runs that return one, and "
    "when the outcome got worse otherwise; outcomes: when the outcome got worse, always.",
)
@click.option("--no-narrow", is_flag=True, help="Reject instead of narrowing a precondition.")
@profile_option("gate")
@click.option(
    "--api-base",
    help="Base URL of the corpus's model server, for narrowing (default: the one it was built "
    "with).",
)
@prompts_dir_option
@no_deploy_option
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
    p_fail: str,
    rule: str,
    no_narrow: bool,
    api_base: str | None,
    prompts_dir: Path | None,
    no_deploy: bool,
    as_json: bool,
    runner: Any,
) -> None:
    """Test INSIGHTS (default: every ungated one) before letting them into CORPUS.

    Each insight is tried as a hypothesis that could be wrong: your agent runs, through
    --runner, with the committed insights alone and with the insight added, on target probes
    (tasks it claims to help), falsification probes (boundary tasks, look-alikes that violate
    its precondition, decoys) and regression probes (tasks the agent solved before).

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

    A probe run that errors (after --runner-retries) is never a failure: when errors leave too
    little to commit, the insight is undecided and stays ungated, with its decision on record.

    Prints the new version's folder (the decisions with --json). Exit 0 when every insight was
    decided, 1 when some are undecided, 2 for bad input.

    \b
    Example:
      wikitrace gate corpus --runner 'python run.py --task {task_id} --memory {memory}' \\
        --task-pool tasks.jsonl
    """

    from wikitrace.control.gate import GateOptions, gate_insights
    from wikitrace.control.pool import read_pool
    from wikitrace.versions import Store

    quiet = is_quiet()
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
        runner=runner,
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
        rule="estimates" if rule == "estimates" else "bounds",
        p_fail="outcomes" if p_fail == "outcomes" else "citations",
        narrow=not no_narrow,
        prompts_dir=prompts_dir,
    )
    llm = None if no_narrow else _model_for(corpus, api_base)
    try:
        report = gate_insights(
            corpus,
            list(insights),
            options,
            llm=llm,
            deploy=not no_deploy,
            progress=agent_runs(quiet=quiet),
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
        print_json(data)
    else:
        assert report.version is not None
        click.echo(str(Store(corpus).version_path(report.version)))
    undecided = [d.insight for d in report.decisions if d.verdict == "undecided"]
    if undecided:
        click.echo(
            f"error: {', '.join(undecided)} undecided: agent runs errored (see the decisions)",
            err=True,
        )
        raise SystemExit(1)


@click.command("monitor")
@click.argument("corpus", type=POINTER)
@click.argument(
    "reports", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False)
)
@click.option(
    "--min-judged",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="Fewest episodes that judged an insight before it can be retired.",
)
@click.option(
    "--max-violation-rate",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="Retire an insight whose violation rate is, as a lower bound, above this.",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0.5, 1, max_open=True),
    default=0.9,
    show_default=True,
    help="Of the lower bound (exact binomial).",
)
@no_deploy_option
@click.option("--json", "as_json", is_flag=True, help="Print every insight's record as JSON.")
def monitor_command(
    corpus: Path,
    reports: tuple[Path, ...],
    min_judged: int,
    max_violation_rate: float,
    confidence: float,
    no_deploy: bool,
    as_json: bool,
) -> None:
    """Track committed insights in the citation REPORTS of later episodes; retire failing ones.

    REPORTS are the episodes' citation reports (JSON, or JSON Lines; what `wikitrace cite`
    reads): {"used": {"insights": [...]}, "success": true|false, "task_id": ..., "checks":
    {"insight-0007": {"precondition_met": true, "effect_observed": false}}}. An episode violates
    an insight when it used it, its precondition held (unsaid: yes, it was used) and its
    expected effect was absent (unsaid: the episode failed). Give every report since the
    insights were committed: each call counts what it is given.

    An insight is retired when at least --min-judged episodes judged it and the lower bound of
    its violation rate is above --max-violation-rate. Retiring makes a new version: the insight
    is marked retired (kept on record, never shown to an agent again), with
    gate/monitor-NNNN.md and the report lines behind it. Prints each committed insight's record
    on stderr, and the new version's folder on stdout when one was made (the records with
    --json). Exit 0, 2 for bad input.

    \b
    Example:
      wikitrace monitor corpus reports.jsonl
    """

    from wikitrace.control.monitor import MonitorOptions, monitor_corpus
    from wikitrace.versions import Store

    result = monitor_corpus(
        corpus,
        list(reports),
        MonitorOptions(
            min_judged=min_judged, max_violation_rate=max_violation_rate, confidence=confidence
        ),
        deploy=not no_deploy,
    )
    if not is_quiet():
        if not result.records:
            click.echo(f"{result.monitored} has no insight shown to agents to monitor", err=True)
        click.echo(
            f"{plural(result.new_reports, 'report')} counted for the first time; the totals "
            "include every report counted before",
            err=True,
        )
        for record in result.records:
            verdict = "RETIRED" if record.retire else "kept"
            click.echo(
                f"{record.insight}: cited {record.cited}, judged {record.judged}, violations "
                f"{record.violations} (rate {record.rate:.3f}, at least {record.rate_lower:.3f}): "
                f"{verdict}",
                err=True,
            )
    if as_json:
        data = {
            "version": result.version,
            "new_reports": result.new_reports,
            "records": [r.as_dict() for r in result.records],
        }
        print_json(data)
    elif result.version is not None:
        click.echo(str(Store(corpus).version_path(result.version)))


@click.command("hypothesize")
@click.argument("corpus", type=POINTER)
@click.argument("insights", nargs=-1)
@click.option(
    "--api-base",
    help="Base URL of the corpus's model server (default: the one it was built with).",
)
@prompts_dir_option
@no_deploy_option
def hypothesize_command(
    corpus: Path,
    insights: tuple[str, ...],
    api_base: str | None,
    prompts_dir: Path | None,
    no_deploy: bool,
) -> None:
    """State INSIGHTS (default: every one without) as falsifiable hypotheses, in a new version.

    One call to the corpus's model per insight: from its title, guideline, applicability and
    the claims of its source compilation, a precondition, a behaviour, an expected effect and a
    verifier, which `wikitrace gate` then tests. New builds can ask for them at once with
    --hypotheses. Prints the new version's folder; exit 1 when an answer could not be used
    (the others are kept), 2 for bad input.

    \b
    Example:
      wikitrace hypothesize corpus insight-0007
    """
    from wikitrace.compiler.hypothesize import hypothesize
    from wikitrace.versions import Store

    llm = _model_for(corpus, api_base)
    if llm is None:
        raise click.UsageError(
            f"{corpus} was built offline: there is no model to state hypotheses with"
        )
    report = hypothesize(corpus, list(insights), llm, deploy=not no_deploy, prompts_dir=prompts_dir)
    for ident, problem in report.failed.items():
        click.echo(f"{ident}: the model's answer was not used: {problem}", err=True)
    if report.version is None:
        click.echo("nothing stated: every insight already has a hypothesis", err=True)
    else:
        click.echo(f"{report.version}: hypotheses for {', '.join(report.stated)}", err=True)
        click.echo(str(Store(corpus).version_path(report.version)))
    if report.failed:
        raise SystemExit(1)
