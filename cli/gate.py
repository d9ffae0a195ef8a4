"""`wikitrace gate` and `wikitrace monitor`: the admission gate and post-commit monitoring."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .common import DetailedOption
from .options import (
    POINTER,
    Command,
    is_quiet,
    no_deploy_option,
    option_group,
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
    from wikitrace.compiler.offline import OFFLINE_MODEL
    from wikitrace.corpus_schema import manifest
    from wikitrace.transport.clients import connect
    from wikitrace.transport.llm import LLMSettings

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


@dataclass(frozen=True)
class GateSettings:
    """Which probes test a lesson, and what decides it (gate's tuning options)."""

    task_pool: Path | None
    targets: int
    falsify: int
    regress: int
    target_tasks: Path | None
    falsify_tasks: Path | None
    regress_tasks: Path | None
    trials: int
    seed: int
    confidence: float
    eta: float
    delta: float
    beta: float
    rule: str
    alpha: float
    alpha_miss: float
    max_runs: int
    p_fail: str
    no_narrow: bool

    def rates(self) -> Any:
        """The error rates and limits the sequential tests keep to."""
        from wikitrace.control.sequential import Rates

        return Rates(
            eta=self.eta,
            delta=self.delta,
            beta=self.beta,
            alpha=self.alpha,
            alpha_miss=self.alpha_miss,
        )

    def gate_options(self, runner: Any, prompts_dir: Path | None) -> Any:
        """The gate's GateOptions: these settings, the probe files read."""
        from wikitrace.control.gate import GateOptions
        from wikitrace.control.pool import read_pool

        given = {
            kind: [task.task_id for task in read_pool(path)]
            for kind, path in (
                ("target", self.target_tasks),
                ("falsify", self.falsify_tasks),
                ("regress", self.regress_tasks),
            )
            if path is not None
        }
        rule = self.rule
        return GateOptions(
            runner=runner,
            pool=read_pool(self.task_pool) if self.task_pool else None,
            targets=self.targets,
            falsify=self.falsify,
            regress=self.regress,
            given=given,
            trials=self.trials,
            seed=self.seed,
            confidence=self.confidence,
            eta=self.eta,
            delta=self.delta,
            beta=self.beta,
            rule="estimates"
            if rule == "estimates"
            else "bounds"
            if rule == "bounds"
            else "sequential",
            alpha=self.alpha,
            alpha_miss=self.alpha_miss,
            max_runs=self.max_runs,
            p_fail="outcomes" if self.p_fail == "outcomes" else "citations",
            narrow=not self.no_narrow,
            prompts_dir=prompts_dir,
        )


def gate_options(function: Command) -> Command:
    """The probes and the decision rule, as `gate: GateSettings`."""
    return option_group(_gate_option_list(), "gate", lambda values: GateSettings(**values))(
        function
    )


def _gate_option_list() -> list[Callable[[Any], Any]]:
    return [
        click.option(
            "--task-pool",
            type=TASKS,
            cls=DetailedOption,
            help="The tasks your runner can run, one a line (default: the corpus's tasks).",
            more="Each is JSON with task_id, task (its text) and task_type, or a bare id (its "
            "text then comes from the corpus).",
        ),
        click.option(
            "--rule",
            type=click.Choice(["sequential", "bounds", "estimates"]),
            default="sequential",
            show_default=True,
            cls=DetailedOption,
            help="What decides: sequential tests, bounds or the published estimates.",
            more="sequential: probe pairs in rounds until anytime-valid tests decide; bounds: "
            "each figure's exact one-sided bound (at --confidence) on fixed probes; estimates: "
            "the figures themselves, as published (easier to pass by luck).",
        ),
        click.option(
            "--max-runs",
            type=click.IntRange(2),
            default=128,
            show_default=True,
            help="sequential: agent runs a lesson may take (both sides of every pair).",
        ),
        click.option(
            "--targets",
            type=click.IntRange(0),
            default=8,
            show_default=True,
            hidden=True,
            help="Target probe tasks, at most: those of the insight's type its precondition "
            "covers, most similar first (BM25); under sequential, pairs are drawn from them.",
        ),
        click.option(
            "--falsify",
            type=click.IntRange(0),
            default=8,
            show_default=True,
            hidden=True,
            help="Falsification probe tasks, at most: boundary tasks, precondition violations "
            "(most alike to it), decoys of other types.",
        ),
        click.option(
            "--regress",
            type=click.IntRange(0),
            default=8,
            show_default=True,
            hidden=True,
            help="Regression probe tasks, at most: tasks the corpus shows the agent solved.",
        ),
        click.option(
            "--target-tasks",
            type=TASKS,
            hidden=True,
            help="Use these target probes (ids, one a line).",
        ),
        click.option(
            "--falsify-tasks", type=TASKS, hidden=True, help="Use these falsification probes."
        ),
        click.option(
            "--regress-tasks", type=TASKS, hidden=True, help="Use these regression probes."
        ),
        click.option(
            "--trials",
            type=click.IntRange(1),
            default=1,
            show_default=True,
            hidden=True,
            help="Runs of each probe task on each side (seeds SEED, SEED+1, ...).",
        ),
        click.option(
            "--seed",
            type=int,
            default=0,
            show_default=True,
            hidden=True,
            help="The first seed (SEED, SEED+1, ...).",
        ),
        click.option(
            "--confidence",
            type=click.FloatRange(0.5, 1, max_open=True),
            default=0.9,
            show_default=True,
            hidden=True,
            help="Of each one-sided bound (exact binomial).",
        ),
        click.option(
            "--eta",
            type=float,
            default=0.1,
            show_default=True,
            hidden=True,
            help="Least transfer gain G worth having: sequential stops a lesson shown to gain "
            "less; bounds and estimates commit only at this G or more (its lower bound, or "
            "itself).",
        ),
        click.option(
            "--delta",
            type=click.FloatRange(0, 1),
            default=0.3,
            show_default=True,
            hidden=True,
            help="Most falsification failure rate P_fail to commit (sequential: shown below it; "
            "bounds: its upper bound at most this).",
        ),
        click.option(
            "--beta",
            type=click.FloatRange(0, 1),
            default=0.3,
            show_default=True,
            hidden=True,
            help="Most regression damage D_reg to commit (sequential: shown below it; bounds: "
            "its upper bound at most this).",
        ),
        click.option(
            "--alpha",
            type=click.FloatRange(0, 1, min_open=True, max_open=True),
            default=0.1,
            show_default=True,
            hidden=True,
            help="sequential: chance, at most, that a lesson with D_reg >= --beta or P_fail >= "
            "--delta, or one that does not help its targets, is committed (across one call's "
            "lessons: the expected share of such among those committed, by e-BH).",
        ),
        click.option(
            "--alpha-miss",
            type=click.FloatRange(0, 1, min_open=True, max_open=True),
            default=0.1,
            show_default=True,
            hidden=True,
            help="sequential: chance, at most, that a lesson worth committing (gain >= --eta, "
            "harm at most half the limits) is stopped early.",
        ),
        click.option(
            "--p-fail",
            "p_fail",
            type=click.Choice(["citations", "outcomes"]),
            default="citations",
            show_default=True,
            hidden=True,
            help="citations: a falsification probe fails when the agent's citation report says "
            "it used the lesson there (the method's wrong activation), for runs that return "
            "one, and when the outcome got worse otherwise; outcomes: when the outcome got "
            "worse, always.",
        ),
        click.option(
            "--no-narrow",
            is_flag=True,
            hidden=True,
            help="Reject instead of narrowing a precondition.",
        ),
    ]


@click.command("gate")
@click.argument("corpus", type=POINTER)
@click.argument("insights", nargs=-1)
@runner_options
@gate_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Run nothing: print what the sequential gate can detect, and its cost in agent runs.",
)
@profile_option("gate")
@click.option(
    "--api-base",
    hidden=True,
    help="Base URL of the corpus's model server, for narrowing (default: the one it was built "
    "with).",
)
@prompts_dir_option
@no_deploy_option
@click.option("--json", "as_json", is_flag=True, help="Print the decisions as JSON on stdout.")
def gate_command(
    corpus: Path,
    insights: tuple[str, ...],
    dry_run: bool,
    api_base: str | None,
    prompts_dir: Path | None,
    no_deploy: bool,
    as_json: bool,
    runner: Any,
    gate: GateSettings,
) -> None:
    """Test INSIGHTS (default: every ungated one) before letting them into CORPUS.

    Your agent runs (--runner) without and with each insight on the same seeds, on tasks it
    claims to help, look-alikes outside its precondition and tasks it solved before, until
    anytime-valid tests show it helps and stays within the harm limits, or that it does not.
    One new version holds every decision; prints its folder (the decisions with --json).
    Exit 0 when every insight was decided, 1 when some are undecided, 2 for bad input.

    \b
    Example:
      wikitrace gate corpus --runner 'python run.py --task {task_id} --memory {memory}' \\
        --task-pool tasks.jsonl
    \f
    The probes: target probes (tasks it claims to help), falsification probes (boundary
    tasks, look-alikes that violate its precondition, decoys) and regression probes (tasks
    the agent solved before). Every probe runs without and with the insight on the same seed
    (a pair). By default (--rule sequential) pairs are drawn in rounds, tasks at random
    from each kind's probes, and three anytime-valid tests decide as they come: it helps
    its targets (more pairs better than worse), its regression damage D_reg is below --beta
    and its falsification failure rate P_fail (cited where it should not apply) below
    --delta. It is committed once all three are shown, each at --alpha; rejected early once
    it is shown not worth it (--alpha-miss), or when --max-runs are spent first.

    When it helped targets but failed elsewhere, on tasks it never helped, the corpus's model
    narrows its precondition once, and the narrowed lesson is tested on held-out probes (half
    the pool, which the narrowing never saw) at a quarter of --alpha. Otherwise it is rejected.

    The new version holds the insights' status (committed, or rejected: kept on record, never
    shown to an agent), gate/gate-NNNN.md (figures, tests, probes, why) and
    gate/gate-NNNN.runs.jsonl (every probe run). Cost per insight: at most --max-runs, twice
    that when narrowed (runs without it are shared by the insights of one call). --rule bounds
    and estimates test a fixed set of probes instead (--targets, --falsify, --regress,
    --trials).

    A probe run that errors (after --runner-retries) is never a failure: when errors leave too
    little to commit, the insight is undecided and stays ungated, with its decision on record.
    """

    from wikitrace.control.gate import gate_insights
    from wikitrace.control.sequential import Schedule, dry_run_text
    from wikitrace.versions import Store

    quiet = is_quiet()
    if dry_run:
        click.echo(dry_run_text(gate.rates(), Schedule(max_runs=gate.max_runs)))
        return
    options = gate.gate_options(runner, prompts_dir)
    llm = None if gate.no_narrow else _model_for(corpus, api_base)
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
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.3,
    show_default=True,
    help="Retire an insight once its violation rate is shown to be above this.",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0.5, 1, max_open=True),
    default=0.95,
    show_default=True,
    help="1 - the chance, at most, that an insight violated no more often than "
    "--max-violation-rate is ever retired, however often monitoring runs.",
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
    expected effect was absent (unsaid: the episode failed, allowing for how often the corpus's
    runs of that task failed anyway). Reports already counted are not counted again.

    An insight is retired when at least --min-judged episodes judged it and an anytime-valid
    test shows its violation rate above --max-violation-rate (so checking after every episode
    does not retire sound insights more often). Retiring makes a new version: the insight
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
                f"{record.violations} (rate {record.rate:.3f}, at least {record.rate_lower:.3f}; "
                f"evidence {record.evidence:.3g}): {verdict}",
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
