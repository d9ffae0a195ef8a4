"""`wikitrace gate` and `wikitrace monitor`: the admission gate and post-commit monitoring."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wikitrace.corpus_schema.setting_fields import MONITOR_SETTINGS, declared

from .common import Command, is_quiet, option, options, plural
from .compile_options import prompts_dir_option
from .gate_options import GateSettings, gate_options
from .options import POINTER, no_deploy_option, print_json, runner_options
from .profiles import profile_option
from .progress import agent_runs

if TYPE_CHECKING:
    from wikitrace.control.monitor import MonitorOptions


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


@click.command("gate")
@click.argument("corpus", type=POINTER)
@click.argument("insights", nargs=-1)
@runner_options()
@gate_options
@option(declared("dry-run"))
@profile_option("gate")
@option(declared("api-base"), hidden=True)  # for narrowing: the corpus's server by default
@prompts_dir_option
@no_deploy_option
@option(declared("json"), help="Print the decisions as JSON on stdout.")
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
      wikitrace gate corpus --task-pool tasks.jsonl \\
        --runner 'python run.py --task {task_id} --memory {memory}'
    \f
    The probes: target probes (tasks it claims to help), falsification probes (boundary
    tasks, look-alikes that violate its precondition, decoys) and regression probes (tasks
    the agent solved before). Every probe runs without and with the insight on the same seed
    (a pair). By default (--rule sequential) pairs are drawn in rounds, every probe task of
    a kind once before any again (the task is the unit), and anytime-valid tests decide as
    they come: its falsification failure rate P_fail (cited where it should not apply) is
    below --delta, read first from runs with the lesson alone; its regression damage D_reg
    is below --beta on the falsification probes and on the regression probes, each its own
    test; and its net gain on its targets (pairs better minus pairs worse) is above --eta.
    It is committed once all are shown, each at --alpha; rejected as soon as one shows harm
    or no worthwhile gain (--alpha-miss), or when --max-runs are spent first (with several
    lessons, a budget grown for the evidence e-BH may ask).

    When it helped targets but failed elsewhere, on tasks it never helped, the corpus's model
    narrows its precondition once, and the narrowed lesson is tested on held-out probes (half
    the pool, which the narrowing never saw) at a quarter of --alpha. Otherwise it is rejected.

    The new version holds the insights' status (committed, or rejected: kept on record, never
    shown to an agent), gate/gate-NNNN.md (figures, tests, probes, why) and
    gate/gate-NNNN.runs.jsonl (every probe run). Cost per insight: at most --max-runs, twice
    that when narrowed (runs without it are shared by the insights of one call). --rule bounds
    and estimates test a fixed set of probes instead (--targets, --falsify, --regress,
    --trials).

    A probe run that errors (after runner-retries tries, a setting) is never a failure: when
    errors leave too little to commit, the insight is undecided and stays ungated, with its
    decision on record.
    """

    from wikitrace.control.gate_sim import dry_run_text
    from wikitrace.control.sequential import Schedule

    if dry_run:
        click.echo(dry_run_text(gate.rates(), Schedule(max_runs=gate.max_runs)))
        return
    options = gate.gate_options(runner, prompts_dir)
    llm = None if gate.no_narrow else _model_for(corpus, api_base)
    report = _gate(corpus, insights, options, llm, deploy=not no_deploy)
    _print_decisions(corpus, report, as_json=as_json)


def _gate(corpus: Path, insights: tuple[str, ...], options: Any, llm: Any, *, deploy: bool) -> Any:
    """The gate's report, its agent runs counted on stderr; Ctrl-C says where the runs so far
    are and exits 130."""
    from wikitrace.control.gate import gate_insights
    from wikitrace.versions import Store

    try:
        return gate_insights(
            corpus,
            list(insights),
            options,
            llm=llm,
            deploy=deploy,
            progress=agent_runs(quiet=is_quiet()),
        )
    except KeyboardInterrupt:
        click.echo(
            f"\ninterrupted: no decision was written; the probe runs so far are in "
            f"{Store(corpus).runs_path}",
            err=True,
        )
        raise SystemExit(130) from None


def _print_decisions(corpus: Path, report: Any, *, as_json: bool) -> None:
    """Each decision on stderr, the new version's folder (or the decisions as JSON) on stdout;
    exit 1 when some insight is undecided."""
    from wikitrace.versions import Store

    if not report.decisions:
        click.echo(f"nothing to gate: {report.tested_on} has no ungated insight", err=True)
        if as_json:
            click.echo("[]")
        return
    if not is_quiet():
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


def _monitor_settings(values: dict[str, Any]) -> MonitorOptions:
    from wikitrace.control.monitor import MonitorOptions

    return MonitorOptions(**{**values, "controls": list(values["controls"])})


def monitor_options(function: Command) -> Command:
    """When monitoring retires an insight, as `limits: MonitorOptions`."""
    return options(MONITOR_SETTINGS, "limits", _monitor_settings)(function)


@click.command("monitor")
@click.argument("corpus", type=POINTER)
@click.argument(
    "reports", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False)
)
@monitor_options
@no_deploy_option
@option(declared("json"), help="Print every insight's record as JSON.")
def monitor_command(
    corpus: Path,
    reports: tuple[Path, ...],
    no_deploy: bool,
    as_json: bool,
    limits: MonitorOptions,
) -> None:
    """Track committed insights in the citation REPORTS of later episodes; retire failing ones.

    REPORTS are the episodes' citation reports (JSON, or JSON Lines; what `wikitrace cite`
    reads): {"used": {"insights": [...]}, "success": true|false, "task_id": ..., "checks":
    {"insight-0007": {"precondition_met": true, "effect_observed": false}}}. An episode violates
    an insight when it used it, its precondition held (unsaid: yes, it was used) and its
    expected effect was absent (unsaid: the episode failed, allowing for how often the task
    fails anyway: its --controls episodes, else the corpus's runs of it, else, for a new task,
    the lesson's task type in the corpus at its upper 95% bound). An episode with none of these
    (or no task_id) is not judged: reported as such, never held against the lesson. Reports
    already counted are not counted again.

    An insight is retired when at least --min-judged episodes judged it and an anytime-valid
    test shows its violation rate above --max-violation-rate (so checking after every episode
    does not retire sound insights more often). Retiring makes a new version: the insight
    is marked retired (kept on record, never shown to an agent again), with
    gate/monitor-NNNN.md and the report lines behind it; a committed lesson of its scope
    added later that contradicts or narrows it replaces it (its superseded_by: the first
    message shows that one with a link back), else it says none. Prints each committed
    insight's record on stderr, and the new version's folder on stdout when one was made
    (the records with --json). Exit 0, 2 for bad input.

    \b
    Example:
      wikitrace monitor corpus reports.jsonl
    """

    from wikitrace.control.monitor import FEED_CONTROLS, NO_BASE, monitor_corpus
    from wikitrace.versions import Store

    result = monitor_corpus(corpus, list(reports), limits, deploy=not no_deploy)
    if not is_quiet():
        if not result.records:
            click.echo(f"{result.monitored} has no insight shown to agents to monitor", err=True)
        click.echo(
            f"{plural(result.new_reports, 'report')} counted for the first time; the totals "
            "include every report counted before",
            err=True,
        )
        for record in result.records:
            verdict = "kept"
            if record.retire:
                verdict = f"RETIRED, replaced by {record.replaced_by or 'none'}"
            unjudged = record.not_judged.get(NO_BASE, 0)
            click.echo(
                f"{record.insight}: cited {record.cited}, judged {record.judged}, violations "
                f"{record.violations} (rate {record.rate:.3f}, at least {record.rate_lower:.3f}; "
                f"evidence {record.evidence:.3g})"
                + (f", {unjudged} not judged ({NO_BASE})" if unjudged else "")
                + f": {verdict}",
                err=True,
            )
        if result.not_judged:
            click.echo(
                f"{plural(result.not_judged, 'episode')} not judged: {NO_BASE} for their tasks, "
                "so a failure there may be the task's, not the lesson's, and counts against "
                f"no lesson; to judge them, {FEED_CONTROLS}",
                err=True,
            )
    if as_json:
        data = {
            "version": result.version,
            "new_reports": result.new_reports,
            "not_judged": result.summary(),
            "records": [r.as_dict() for r in result.records],
        }
        print_json(data)
    elif result.version is not None:
        click.echo(str(Store(corpus).version_path(result.version)))


@click.command("retire")
@click.argument("corpus", type=POINTER)
@click.argument("insight")
@option(declared("by"))
@option(declared("reason"))
@no_deploy_option
def retire_command(
    corpus: Path, insight: str, newer: str | None, reason: str | None, no_deploy: bool
) -> None:
    """Retire INSIGHT by hand, or mark it superseded by a newer lesson (--by), in a new version.

    As monitoring's retirement does, the insight is marked retired (kept on record, never shown
    to an agent again) with gate/retire-NNNN.md saying why. With --by NEWER, the newer
    lesson's page names the one it supersedes, and the first message shows the newer one with
    a link back ("Supersedes: insight-0012"). Prints the new version's folder; exit 2 when
    either insight is unknown or INSIGHT is already withheld.

    \b
    Example:
      wikitrace retire corpus insight-0012 --by insight-0031 --reason "the API changed"
    """
    from wikitrace.control.retire import retire_insight
    from wikitrace.versions import Store

    if reason is None:  # a retirement says why
        raise click.UsageError("Missing option '--reason': why the insight is retired")
    version = retire_insight(corpus, insight, reason, by=newer, deploy=not no_deploy)
    if not is_quiet():
        click.echo(f"{version}: {insight} retired", err=True)
    click.echo(str(Store(corpus).version_path(version)))


@click.command("hypothesize")
@click.argument("corpus", type=POINTER)
@click.argument("insights", nargs=-1)
@option(declared("api-base"))
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
