"""`wikitrace add`, `wikitrace versions` (and its --deploy) and `wikitrace update`: growing a
corpus in versions."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import UPDATE_SETTINGS, declared

from .build import RETRY_ADD, compile_with_progress, finish_report
from .common import Command, is_quiet, option, options
from .compile_options import CompileSettings, compile_options
from .options import (
    POINTER,
    json_option,
    nl_option,
    no_deploy_option,
    print_json,
    print_rows,
    runner_options,
)
from .profiles import profile_option
from .progress import agent_runs

DEPLOYED_BY_HAND = "deployed by hand"


@click.command("add")
@click.argument("corpus", type=POINTER)
# Text, not a Path: with --from-hook it may be Codex's JSON, which a Path would normalise.
@click.argument("inputs", nargs=-1, type=click.Path())
@no_deploy_option
@option(declared("from-hook"))
@option(declared("wait"))
@option(declared("hook-log"))
@compile_options
@profile_option("add")
@json_option("the report")
def add_command(
    corpus: Path,
    inputs: tuple[str, ...],
    no_deploy: bool,
    from_hook: bool,
    wait: bool,
    hook_log: Path | None,
    as_json: bool,
    compile: CompileSettings,
) -> None:
    """Add runs to CORPUS as a new version, compiling only the runs it does not hold.

    The new version keeps every step, compilation and insight of the current one under the
    same ids and appends the new runs and their insights; runs it already holds are left out
    and counted. CORPUS then points at it, unless --no-deploy. Prints the new version's folder
    (the report with --json); with nothing new, says so and exits 0 without making a version.

    \b
    Example:
      wikitrace add corpus new-runs.jsonl
      wikitrace add corpus logs/ --no-deploy      # a candidate: `wikitrace versions`
      wikitrace add ~/corpus --from-hook --labels ~/labels.json   # a SessionEnd hook
    \f
    The new version (CORPUS.versions/vNNNN) appends the new runs after the last step and their
    insights after the last insight, and names its parent and what it adds in its manifest.
    Runs the current version already holds (same task, same turns) are left out and counted.
    The model is the one CORPUS was compiled with (its manifest's `model`), so cached replies
    are reused; give --api-base again for a local server. Older versions stay as they were: a
    sandbox that mounted one keeps it.

    With --from-hook, adds the session an agent's hook names as it ends (see docs/growing.md,
    "Capturing sessions as they end"): the turns CORPUS does not hold yet, as a run of their
    own when it holds the session's earlier ones (`<session>/part-2`, ...). A session nothing
    labels (--labels, --judge) is kept in CORPUS.unlabelled/ instead. It waits up to 10
    minutes for another add into CORPUS, and never fails the agent: exit 0, problems in
    --hook-log.
    """
    if from_hook:
        from .hook import hook_add

        hook_add(
            corpus,
            inputs,
            compile,
            wait=wait,
            log_file=hook_log,
            no_deploy=no_deploy,
            as_json=as_json,
        )
        return
    if wait:
        raise click.UsageError("--wait goes with --from-hook")
    if not inputs:
        raise click.UsageError("Missing argument 'INPUTS...'.")
    report = _add_runs(corpus, tuple(Path(i) for i in inputs), compile, deploy=not no_deploy)
    _print_added(corpus, report, as_json=as_json)


def _add_runs(
    corpus: Path, inputs: tuple[Path, ...], compile: CompileSettings, *, deploy: bool
) -> Any:
    """The add's report, the compile's progress on stderr."""
    from wikitrace.compiler import add_runs

    # The model is the corpus's own; add_runs reads it from the manifest.
    options = compile.build_options(inputs, corpus, "offline")
    return compile_with_progress(
        lambda opts, **kw: add_runs(opts, deploy=deploy, **kw),
        options,
        quiet=is_quiet(),
        written=f"no version was added to {corpus}",
        again="adding again",
    )


def _print_added(corpus: Path, report: Any, *, as_json: bool) -> None:
    """The report on stderr, the new version's folder (or the report as JSON) on stdout; with
    nothing new, says so."""
    from wikitrace.versions import Store

    if report.version is None:
        click.echo(
            f"nothing to add: all {report.duplicates} runs are already in {report.parent}",
            err=True,
        )
        if as_json:
            finish_report(report, quiet=True, as_json=True, stdout="")
        return
    store = Store(corpus)
    review = report.supersede or {}
    for line in superseding_lines(corpus, review):
        click.echo(line, err=True)
    finish_report(
        report,
        quiet=is_quiet(),
        as_json=as_json,
        stdout=str(store.version_path(review.get("version") or report.version)),
        retry=RETRY_ADD,
    )


def superseding_lines(corpus: Path, review: dict[str, Any]) -> list[str]:
    """What comparing the added lessons with the older ones did (compiler/supersede.py), a
    line each: those retired as superseded, and the likely pairs left for a person."""
    lines = [
        f"{review['version']}: {item['older']} retired, superseded by {item['newer']} "
        f"(it {item['relation']} it: {item['reason']})"
        for item in review.get("superseded", [])
    ]
    lines += [
        f"review: {flag['newer']} may {flag['relation'].rstrip('s')} {flag['older']} "
        f"({flag['why']}); no model judged it. If so: wikitrace retire {corpus} "
        f"{flag['older']} --by {flag['newer']} --reason '...'"
        for flag in review.get("flagged", [])
    ]
    return lines


@click.command("versions")
@click.argument("corpus", type=POINTER)
@json_option("an array")
@nl_option
@option(declared("history"))
@option(declared("current"))
@option(declared("deploy"))
@option(declared("reason"))
def versions_command(
    corpus: Path,
    as_json: bool,
    as_lines: bool,
    history: bool,
    current: bool,
    deploy: str | None,
    reason: str | None,
) -> None:
    """List the versions of CORPUS: which is current, their parents and what each added; with
    --deploy, point CORPUS at one.

    Status: current (CORPUS points at it), previous (was current once), candidate (made with
    --no-deploy or by `wikitrace update`, never deployed), refused (the update controller
    kept it out; its comparison is in CORPUS.versions/updates/).

    --deploy replaces the pointer in one step, so a reader sees the old version or the new
    one, never neither. Sandboxes already running keep the version they mounted.

    \b
    Example:
      wikitrace versions corpus
      wikitrace versions corpus --history
      wikitrace versions corpus --deploy v0002
    """
    if deploy is not None:
        if history or current or as_json or as_lines:
            raise click.UsageError(
                "--deploy lists nothing: give it without --history, --current, --json or --nl"
            )
        _deploy(corpus, deploy, reason, hint="--deploy")
        return
    from wikitrace.versions import Store, list_versions

    store = Store(corpus)
    if current:
        click.echo(str(store.version_path(store.current())))
        return
    if history:
        entries = store.history()
        if as_json or as_lines:
            print_rows([entry.model_dump(mode="json") for entry in entries], lines=as_lines)
            return
        for entry in entries:
            previous = f" (was {entry.previous})" if entry.previous else ""
            update = f" [{entry.update}]" if entry.update else ""
            click.echo(
                f"{entry.time}  {entry.event:<9} {entry.version}{previous}: {entry.reason}{update}"
            )
        return
    rows = list_versions(store)
    if as_json or as_lines:
        print_rows([row.model_dump(mode="json") for row in rows], lines=as_lines)
        return
    click.echo("version  status     parent  runs (+new)  insights (+new)  created")
    for row in rows:
        click.echo(
            f"{row.name:<8} {row.status:<10} {row.parent or '-':<7} "
            f"{row.runs:>4} (+{row.added_runs:<3}) {row.insights:>8} (+{row.added_insights:<3})   "
            f"{row.created}"
        )


@click.command("deploy")
@click.argument("corpus", type=POINTER)
@click.argument("version")
@option(declared("reason"))
def deploy_command(corpus: Path, version: str, reason: str | None) -> None:
    """Point CORPUS at VERSION (vNNNN): now `wikitrace versions CORPUS --deploy VERSION`."""
    _deploy(corpus, version, reason, hint="VERSION")


def _deploy(corpus: Path, version: str, reason: str | None, *, hint: str) -> None:
    """Point CORPUS at VERSION under the build lock, for `reason` (none given: deployed by
    hand); say so on stderr, its folder on stdout."""
    from wikitrace.corpus_schema import CorpusError
    from wikitrace.corpus_schema.lock import build_lock
    from wikitrace.versions import Store

    store = Store(corpus)
    with build_lock(store.pointer):
        try:
            path = store.version_path(version)
        except CorpusError as error:
            raise click.BadParameter(str(error), param_hint=hint) from None
        if not path.is_dir():
            raise click.BadParameter(
                f"no version {version} in {store.dir} (see `wikitrace versions {corpus}`)",
                param_hint=hint,
            )
        previous = store.deploy(path.name, reason=reason or DEPLOYED_BY_HAND)
    click.echo(f"{corpus} -> {path.name} (was {previous})", err=True)
    click.echo(str(path))


@dataclass(frozen=True)
class UpdateSettings:
    """When an update is compared, on which tasks, and how its direction is measured."""

    momentum: float
    threshold: float
    always_compare: bool
    rerun_band: bool
    coverage: int
    boundary: int
    fresh: int
    trials: int
    seed: int
    task_pool: Path | None
    embedding_model: str
    embedding_api_base: str | None
    encode: str

    def update_options(self, runner: Any) -> Any:
        """The update controller's UpdateOptions: these settings, the task pool read."""
        from wikitrace.control.embed import HashingEmbedder, LiteLLMEmbedder
        from wikitrace.control.pool import read_pool
        from wikitrace.control.update import UpdateOptions

        return UpdateOptions(
            runner=runner,
            momentum=self.momentum,
            threshold=self.threshold,
            coverage=self.coverage,
            boundary=self.boundary,
            fresh=self.fresh,
            trials=self.trials,
            seed=self.seed,
            always_compare=self.always_compare,
            rerun_band=self.rerun_band,
            task_pool=[task.key.name for task in read_pool(self.task_pool)]
            if self.task_pool
            else None,
            embedder=HashingEmbedder()
            if self.embedding_model == "local"
            else LiteLLMEmbedder(self.embedding_model, self.embedding_api_base),
            encoded="insights" if self.encode == "insights" else "corpus",
        )


def update_options(function: Command) -> Command:
    """The update controller's options, as `update: UpdateSettings`."""
    # The gate's trials, seed and pool sit among them, where --help lists them.
    settings = UPDATE_SETTINGS[:7] + tuple(declared(key) for key in ("trials", "seed", "task-pool"))
    return options(
        settings + UPDATE_SETTINGS[7:], "update", lambda values: UpdateSettings(**values)
    )(function)


@click.command("update")
@click.argument("corpus", type=POINTER)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@runner_options(reads_logs=True)
@update_options
@compile_options
@profile_option("update")
@json_option("the update record")
def update_command(
    corpus: Path,
    inputs: tuple[Path, ...],
    as_json: bool,
    compile: CompileSettings,
    runner: Any,
    update: UpdateSettings,
) -> None:
    """Add runs to CORPUS as a candidate version and deploy it only if it does better.

    The runs are compiled as `wikitrace add --no-deploy` would. An update that points the way
    deployed ones have is accepted as is; otherwise your agent runs (--runner) with the
    current and the candidate memory on a mixed set of tasks, and the candidate is deployed
    only when its gain is beyond the noise of a rerun. Prints the deployed version's folder
    (the record with --json). Exit 0 on a decision, 1 when no task gave results on both sides
    (the current version is kept), 2 for bad input.

    \b
    Example:
      wikitrace update corpus new-runs.jsonl \\
        --runner 'python run_agent.py --task {task_id} --memory {memory}'
    \f
    A momentum trigger decides whether to compare: the candidate's new insights are embedded,
    and an update that points the way deployed updates have (cosine with their moving average
    >= threshold) is accepted as is. One that turns away, the first one, or any with
    always-compare set is compared: your agent runs with the current and with the candidate
    memory on a mixed set of tasks (fresh, boundary, coverage), --trials times each with
    the same seeds, and the current memory once more on other seeds (the rerun band: how much
    outcomes move when nothing changes). The candidate is deployed when its gain (new minus
    current, summed over tasks) is beyond that noise; a tie keeps the current version.

    A comparison costs 3 x trials x (tasks chosen) agent runs, at most
    3 x trials x (fresh + boundary + coverage): 48 with the defaults (32 with
    rerun-band = false). threshold, always-compare, fresh, boundary, coverage and
    rerun-band are settings with no flag (docs/settings.md), listed by --help-all. Runs
    that crash, time out or print no valid JSON are retried, then recorded as errors and
    left out of the scores.

    Every agent run is appended to CORPUS.versions/runs.jsonl, the decision (trigger figures,
    tasks and why each was chosen, seeds, run ids, scores) to
    CORPUS.versions/updates/update-NNNN.json, and the history says deployed or refused.
    """

    # One threshold for the logs read and the agent's runs (--success-threshold).
    runner = replace(runner, success_threshold=compile.reading.success_threshold)
    options = update.update_options(runner)
    build = compile.build_options(inputs, corpus, "offline")
    result = _update(corpus, build, options)
    _print_update(corpus, result, as_json=as_json)


def _update(corpus: Path, build: Any, options: Any) -> Any:
    """The update's result: the runs compiled and the candidate compared, progress on stderr."""
    from wikitrace.control.update import update_corpus
    from wikitrace.versions import Store

    quiet = is_quiet()
    return compile_with_progress(
        lambda opts, progress, notice, say: update_corpus(
            opts,
            options,
            progress=agent_runs(quiet=quiet),
            compile_progress=progress,
            notice=notice,
            say=say,
        ),
        build,
        quiet=quiet,
        written=f"runs recorded so far are in {Store(corpus).runs_path}; {corpus} was not moved",
        again="updating again",
    )


def _print_update(corpus: Path, result: Any, *, as_json: bool) -> None:
    """The decision on stderr, the deployed version's folder (or the record as JSON) on
    stdout; exit 1 when undecided."""
    from wikitrace.versions import Store

    record = result.record
    if record is None:
        click.echo(
            f"nothing to update: all {result.add.duplicates} runs are already in "
            f"{result.add.parent}",
            err=True,
        )
        if as_json:
            click.echo("null")
        return
    if not is_quiet():
        # The history's words: a kept current version means the candidate was refused.
        verdict = {"kept": "refused", "accepted": "deployed"}.get(record.decision, record.decision)
        click.echo(f"{verdict}: {record.reason}\n  record: {result.record_path}", err=True)
    if as_json:
        print_json(record.model_dump(mode="json"))
    else:
        click.echo(str(Store(corpus).version_path(record.deployed)))
    if record.decision == "undecided":
        click.echo(f"error: {record.reason}", err=True)
        raise SystemExit(1)
