"""`wikitrace add`, `wikitrace versions` and `wikitrace deploy`: growing a corpus in versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .build import compile_options, compile_with_progress, finish_report, is_quiet

POINTER = click.Path(path_type=Path, file_okay=False)


@click.command("add")
@click.argument("corpus", type=POINTER)
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--no-deploy",
    is_flag=True,
    help="Leave the new version as a candidate; CORPUS keeps pointing where it did.",
)
@compile_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def add_command(
    corpus: Path, inputs: tuple[Path, ...], no_deploy: bool, as_json: bool, **params: Any
) -> None:
    """Add runs to CORPUS as a new version, compiling only the runs it does not hold.

    The new version (CORPUS.versions/vNNNN) keeps every step, compilation and insight of the
    current one under the same ids, appends the new runs after the last step and their insights
    after the last insight, and names its parent and what it adds in its manifest. Runs the
    current version already holds (same task, same turns) are left out and counted. The model
    is the one CORPUS was compiled with (its manifest's `model`), so cached replies are reused;
    give --api-base again for a local server.

    CORPUS then points at the new version, unless --no-deploy. Older versions stay as they
    were: a sandbox that mounted one keeps it. Prints the new version's folder on stdout (the
    report with --json); with nothing new, says so and exits 0 without making a version.

    \b
    Example:
      wikitrace add corpus new-runs.jsonl
      wikitrace add corpus logs/ --no-deploy        # a candidate: see `wikitrace versions`
    """
    from wikitrace.compiler import add_runs
    from wikitrace.corpus_schema.versions import Store

    quiet = is_quiet()
    options = make_add_options(corpus, inputs, params)
    report = compile_with_progress(
        lambda opts, **kw: add_runs(opts, deploy=not no_deploy, **kw),
        options,
        quiet=quiet,
        written=f"no version was added to {corpus}",
        again="adding again",
    )
    if report.version is None:
        click.echo(
            f"nothing to add: all {report.duplicates} runs are already in {report.parent}",
            err=True,
        )
        if as_json:
            finish_report(report, quiet=True, as_json=True, stdout="")
        return
    store = Store(corpus)
    finish_report(
        report, quiet=quiet, as_json=as_json, stdout=str(store.version_path(report.version))
    )


def make_add_options(corpus: Path, inputs: tuple[Path, ...], params: dict[str, Any]) -> Any:
    from .build import make_options

    # The model is the corpus's own; add_runs reads it from the manifest.
    return make_options(inputs, corpus, "offline", params)


@click.command("versions")
@click.argument("corpus", type=POINTER)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on stdout.")
@click.option("--history", is_flag=True, help="List every event (history.jsonl) instead.")
def versions_command(corpus: Path, as_json: bool, history: bool) -> None:
    """List the versions of CORPUS: which is current, their parents and what each added.

    Status: current (CORPUS points at it), previous (was current once), candidate (made with
    --no-deploy or by `wikitrace update`, never deployed), refused (the update controller
    kept it out; its comparison is in CORPUS.versions/updates/).
    """
    import orjson

    from wikitrace.corpus_schema.versions import Store, list_versions

    store = Store(corpus)
    if history:
        entries = store.history()
        if as_json:
            data = [entry.model_dump(mode="json") for entry in entries]
            click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
            return
        for entry in entries:
            previous = f" (was {entry.previous})" if entry.previous else ""
            update = f" [{entry.update}]" if entry.update else ""
            click.echo(
                f"{entry.time}  {entry.event:<9} {entry.version}{previous}: {entry.reason}{update}"
            )
        return
    rows = list_versions(store)
    if as_json:
        data = [row.model_dump(mode="json") for row in rows]
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
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
@click.option("--reason", default="deployed by hand", show_default=True, help="Kept in history.")
def deploy_command(corpus: Path, version: str, reason: str) -> None:
    """Point CORPUS at VERSION (vNNNN): roll back, or deploy a candidate by hand.

    The pointer is replaced in one step, so a reader sees the old version or the new one, never
    neither. Sandboxes already running keep the version they mounted. Prints the version's
    folder on stdout.
    """
    from wikitrace.corpus_schema import CorpusError
    from wikitrace.corpus_schema.store import build_lock
    from wikitrace.corpus_schema.versions import Store

    store = Store(corpus)
    with build_lock(store.pointer):
        try:
            path = store.version_path(version)
        except CorpusError as error:
            raise click.BadParameter(str(error), param_hint="VERSION") from None
        if not path.is_dir():
            raise click.BadParameter(
                f"no version {version} in {store.dir} (see `wikitrace versions {corpus}`)",
                param_hint="VERSION",
            )
        previous = store.deploy(path.name, reason=reason)
    click.echo(f"{corpus} -> {path.name} (was {previous})", err=True)
    click.echo(str(path))
