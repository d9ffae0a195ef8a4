"""Test-time commands: `wikitrace prompt`, `wikitrace cite`, `wikitrace audit`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import PROMPT_SETTINGS, declared
from wikitrace.corpus_schema.work import KINDS
from wikitrace.tools.message_options import (
    MessageOptions,
)

from .common import (
    Command,
    is_quiet,
    option,
    option_group,
    plural,
)
from .options import print_json
from .profiles import profile_option

CORPUS = click.Path(path_type=Path, file_okay=False, exists=True)


@dataclass(frozen=True)
class PromptSettings:
    """What the first message shows, and how (prompt's options)."""

    task_type: str | None
    project: str | None
    kind: str | None
    exclude_tasks: tuple[str, ...]
    mount: str
    insights_only: bool
    report_at: str
    all_types: bool
    similar: int
    message_tokens: int
    all_insights: bool
    flag_conflicts: bool
    prompts_dir: Path | None
    embedding_model: str | None
    embedding_api_base: str | None

    def grouping(self) -> Any:
        """How near-duplicate lessons are told apart: by words, by an embedding model's
        vectors, or not at all (--all-insights)."""
        from wikitrace.search import consolidate

        if self.all_insights:

            def each_alone(lessons: Sequence[tuple[str, str]]) -> list[int]:
                return list(range(len(lessons)))

            return each_alone
        if self.embedding_model in (None, "local"):
            return consolidate.group
        from wikitrace.control.embed import LiteLLMEmbedder

        embedder = LiteLLMEmbedder(self.embedding_model, self.embedding_api_base)

        def by_model(lessons: Sequence[tuple[str, str]]) -> list[int]:
            vectors = embedder.embed([f"{title}\n{guideline}" for title, guideline in lessons])
            return consolidate.by_vectors([list(map(float, v)) for v in vectors])

        return by_model

    def message(self) -> MessageOptions:
        """The first message's options: these, with the project (given, else the repository
        of the current folder) and the folder it is checked out in."""
        from wikitrace.corpus_schema.projects import folder_aliases, project_named, repository_at

        from .hook_io import compiled_templates
        from .settings import user_projects

        project = project_named(self.project) if self.project else repository_at(Path.cwd())
        folder = Path(self.project or ".").expanduser()
        aliases = user_projects()
        if project is not None and folder.is_dir():  # Gemini CLI's runs know it by its folder
            aliases = folder_aliases(folder, project) | aliases
        return MessageOptions(
            task_type=self.task_type,
            exclude_tasks=self.exclude_tasks,
            similar=self.similar,
            max_tokens=self.message_tokens or None,
            mount=self.mount,
            prompts_dir=self.prompts_dir,
            compiled_templates=compiled_templates(),  # as a hook keeps it, for the next call
            infer_type=not self.all_types,
            insights_only=self.insights_only,
            report_at="end" if self.report_at == "end" else "first",
            flag_conflicts=self.flag_conflicts,
            project=project,
            kind=self.kind,
            project_aliases=aliases,
            project_found=not self.project,
            checkout=folder if folder.is_dir() else None,
        )


def prompt_options(function: Command) -> Command:
    """What the first message shows, as `shown: PromptSettings`."""
    return option_group(_prompt_option_list(), "shown", lambda values: PromptSettings(**values))(
        function
    )


KIND_CHOICE = {
    "kind": {
        "type": click.Choice(list(KINDS), case_sensitive=False),
        "more": f"KIND is one of {', '.join(KINDS)}. {declared('kind').more}",
    }
}
"""--kind's KINDS, in any case, and its help naming them."""

_template_option = option(declared("prompts-dir"))
"""The first message's template."""

_NEAR_DUPLICATES: list[Callable[[Any], Any]] = [
    option(declared("embedding-model")),
    option(declared("embedding-api-base")),
]
"""What tells near-duplicate lessons apart."""


def _prompt_option_list() -> list[Callable[[Any], Any]]:
    """Every prompt option, in the order --help lists them: what the message shows (declared,
    corpus_schema/setting_fields.py), its template, what tells near-duplicates apart."""
    shown = [option(s, **KIND_CHOICE.get(s.key, {})) for s in PROMPT_SETTINGS]
    return [*shown, _template_option, *_NEAR_DUPLICATES]


def _task_text(task_file: str) -> str:
    """The task --task-file names: stdin for '-', else a regular file (never a FIFO or a
    device: a link to /dev/zero would never end)."""
    if task_file == "-":
        return sys.stdin.read()
    from wikitrace.corpus_schema.input_files import read_input

    try:
        return read_input(Path(task_file)).decode("utf-8", "replace")
    except OSError as error:
        raise click.BadParameter(
            f"{task_file}: {error.strerror or error}", param_hint="'--task-file'"
        ) from None


@click.command("prompt")
@click.argument("corpus", type=CORPUS)
@click.argument("task", required=False)
@option(declared("task-file"))
@prompt_options
@option(declared("report-request"))
@profile_option("prompt")
@option(declared("json"), help="One JSON object: text, insights, similar.")
def prompt_command(
    corpus: Path,
    task: str | None,
    task_file: str | None,
    report_request: bool,
    as_json: bool,
    shown: PromptSettings,
) -> None:
    """The first message for an agent about to solve TASK with CORPUS mounted at --mount.

    It lists the insights by task type (each with its source run and that run's outcome), the
    most similar past runs, when and how to drill down from a lesson to its raw turns, and
    asks the agent to report which entries it used (see `wikitrace cite`).

    \b
    Example:
      wikitrace prompt corpus "Cancel my reservation ABC123" --exclude-task 7
    """
    if report_request:
        from wikitrace.tools.first_message import report_request as request_text

        click.echo(
            request_text(insights_only=shown.insights_only, prompts_dir=shown.prompts_dir),
            nl=False,
        )
        return
    if (task is None) == (task_file is None):
        raise click.UsageError("give the task as an argument or with --task-file, not both")
    text = task if task is not None else _task_text(task_file) if task_file else ""
    if not text.strip():
        raise click.UsageError("the task is empty")

    from wikitrace.tools.memory import Memory

    message = Memory.load(corpus, shown.grouping(), indexed=True).first_message(
        text, shown.message()
    )
    if message.kind_unsure is not None and not message.project_has_runs and not is_quiet():
        cues = ", ".join(f"{n} {name}" for name, n in message.kind_unsure.items())
        why = f"its words name several kinds as often: {cues}" if cues else "no word names one"
        click.echo(
            f"warning: the task's kind of work could not be inferred ({why}): every kind's "
            "lessons are listed; say it with --kind",
            err=True,
        )
    if message.type_unsure is not None and not is_quiet():
        votes = ", ".join(f"{n} {name}" for name, n in message.type_unsure.items())
        near = "no past run is near enough to tell"
        why = f"the most similar past runs: {votes}" if votes else near
        click.echo(
            f"warning: the task's domain could not be told ({why}): no lesson is listed; "
            "say it with --task-type or --project",
            err=True,
        )
    if as_json:
        print_json(message.as_dict())
    else:
        click.echo(message.text, nl=not message.text.endswith("\n"))


@click.command("cite")
@click.argument("corpus", type=CORPUS)
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@option(declared("read-log"))
@option(declared("json"), help="Print the counts as one JSON object.")
def cite_command(
    corpus: Path, reports: tuple[Path, ...], read_logs: tuple[Path, ...], as_json: bool
) -> None:
    """Check citation REPORTS against CORPUS and count which entries were used.

    A report is a JSON object, or a JSON Lines file of them, as the first message asks:
    {"used": {"raw": ["step-0003"], "compilations": ["step-0003"], "insights":
    ["insight-0007"]}}, to which a harness may add "episode", "task_id" and "success".
    An id that is not in the corpus is an error (exit 2).

    Stay vs Descent: an episode descended below the insight layer when it cites a
    compilation or a raw run, or when its read log (--read-log, the file the harness named
    in $WIKITRACE_READ_LOG, joined by $WIKITRACE_EPISODE) shows a drill-down tool; each
    group is counted with its outcomes, and --json lists each episode with the bytes its
    drill-downs printed.

    \b
    Example:
      wikitrace cite corpus reports/*.json --json
    """

    from wikitrace.tools.cite import summarize

    summary = summarize(corpus, reports, read_logs)
    if as_json:
        print_json(summary.as_dict())
        return
    click.echo(plural(summary.episodes, "episode"))
    for name, group in (("stay", summary.stay), ("descent", summary.descent)):
        click.echo(
            f"{name}: {plural(group.episodes, 'episode')} ({group.successes} succeeded, "
            f"{group.failures} failed, {group.unknown} unknown)"
        )
    if summary.unmatched_reads:
        click.echo(
            f"warning: {plural(summary.unmatched_reads, 'read-log line')} name no reported episode",
            err=True,
        )
    for kind in ("insights", "compilations", "raw"):
        table = getattr(summary, kind)
        click.echo(f"\n{kind}: {len(table)} used")
        if table:
            click.echo("| id | episodes | successes | failures | unknown |\n|---|---|---|---|---|")
        for ident, usage in sorted(table.items()):
            click.echo(
                f"| {ident} | {usage.episodes} | {usage.successes} | {usage.failures} "
                f"| {usage.unknown} |"
            )


@click.command("audit")
@click.argument("corpus", type=CORPUS)
@click.argument("ids", nargs=-1, metavar="[INSIGHT|STEP]...")
@option(declared("json"), help="Corpus-wide findings as JSON.")
def audit_command(corpus: Path, ids: tuple[str, ...], as_json: bool) -> None:
    """Show the evidence behind insights, the lessons drawn from runs, or what deserves a look
    across CORPUS.

    An insight id (insight-0007 or 7): the insight, the compilation claims behind it, and each
    cited raw turn around the quoted passage, which stands between >>> and <<<. A step id
    (step-0003): every insight drawn from that run (its source) and every one that quotes it
    as evidence, each under its heading. Several ids: each in turn. None: insights
    drawn from failed runs, compilations with unverified quotes, insights whose evidence is
    missing, and runs no insight rests on (drawn from or quoting them), with titles.

    \b
    Example:
      wikitrace audit corpus insight-0007 insight-0009
      wikitrace audit corpus step-0003
    """

    from wikitrace.tools.audit import audit_corpus, audit_insight, audit_step, findings_text

    if ids:
        if as_json:
            raise click.UsageError("--json is for corpus-wide findings (no id)")
        texts = [
            audit_step(corpus, ident) if ident.startswith("step-") else audit_insight(corpus, ident)
            for ident in ids
        ]
        click.echo("\n".join(texts), nl=False)
        return
    findings = audit_corpus(corpus)
    if as_json:
        print_json(findings.as_dict())
    else:
        click.echo(findings_text(findings), nl=False)


@click.command("view")
@click.argument("corpus", type=CORPUS)
@option(declared("exclude-task"))
@option(declared("output"))
@option(declared("force"))
@option(declared("json"), help="Print what was left out as JSON.")
def view_command(
    corpus: Path, exclude_tasks: tuple[str, ...], output: Path, force: bool, as_json: bool
) -> None:
    """Write a leave-one-task-out view of CORPUS: nothing of the given tasks in any layer.

    For evaluations: mount the view, not the corpus, while the agent solves those tasks. The
    tasks' runs, their compilations, the insights drawn from them and every gate or monitoring
    record that names them are left out; the rest is copied read-only (never hard-linked: the
    agent cannot change the corpus through the view), and the indexes, tools and
    manifest are written afresh, so `wikitrace verify OUTPUT` checks it like any corpus. Steps
    and insights keep their ids. Prints OUTPUT (what was left out with --json).

    \b
    Example:
      wikitrace view corpus --exclude-task 12 -o /tmp/view-12
      docker run -v /tmp/view-12:/work/corpus:ro my-agent-image ...
    """
    from dataclasses import asdict

    from wikitrace.versions import FrozenVersion, Store, leave_out

    if not exclude_tasks:  # what it leaves out is what a view is
        raise click.UsageError("Missing option '--exclude-task': name a task to leave out")
    store = Store(corpus)
    base = FrozenVersion.current(store)
    report = leave_out(base, output, list(exclude_tasks), force=force)
    click.echo(
        f"view of {report.version} without tasks {', '.join(report.tasks)}: left out "
        f"{report.runs_left_out} runs, {len(report.insights_left_out)} insights, "
        f"{len(report.records_left_out)} decision records; {report.runs} runs and "
        f"{report.insights} insights remain",
        err=True,
    )
    if as_json:
        print_json(asdict(report))
    else:
        click.echo(str(output))
