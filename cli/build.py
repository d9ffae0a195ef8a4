"""`wikitrace build`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import is_quiet, option, plural
from .compile_options import CompileSettings, compile_options
from .input_options import announce, where_of
from .options import json_option, print_json
from .profiles import profile_option
from .progress import Progress


def _places(counts: dict[str, int]) -> str:
    """` (task 1, tool results 2)`: where a kind of secret was redacted."""
    return f" ({', '.join(f'{place} {n}' for place, n in counts.items())})" if counts else ""


def _summary(report: Any) -> str:
    """The build report as printed on stderr: what was made and what it cost, then what is
    worth a line of its own (mining, the judge, batches, formats, each record left out)."""
    lines = _totals(report) + _notes(report) + _judge_lines(report) + _listed(report)
    from wikitrace.compiler.importers.labels import unmatched_message

    unmatched = unmatched_message(report.unmatched_labels)
    if unmatched:
        lines.append(f"  {unmatched}")
    for item in report.failed:
        lines.append(f"  FAILED {item['step']} (task {item['task_id']}): {item['error']}")
    return "\n".join(lines)


def _what(report: Any) -> str:
    """`built OUTPUT`, or `added VERSION to OUTPUT (parent ...)`."""
    if report.parent:
        return (
            f"added {report.version} to {report.output} (parent {report.parent}, "
            f"{plural(report.duplicates, 'run')} it holds left out)"
        )
    return f"built {report.output}" + (
        f" ({plural(report.duplicates, 'duplicate run')} of the input left out)"
        if report.duplicates
        else ""
    )


def _totals(report: Any) -> list[str]:
    """The four lines every report starts with: runs, calls and cost, answers, input."""
    cost = "unknown" if report.cost_usd is None else f"${report.cost_usd:.4f}"
    redacted = (
        ", ".join(
            f"{kind} {n}" + _places(report.redacted_where.get(kind, {}))
            for kind, n in report.redactions.items()
        )
        or "none"
    )
    judge = " and the judge model" if report.judge_calls or report.judge_cache_hits else ""
    return [
        f"{_what(report)}: {plural(report.runs, 'run')} ({report.successes} succeeded, "
        f"{report.failures} failed), {plural(report.compiled, 'compilation')}, "
        f"{plural(report.insights, 'insight')}",
        f"  model {report.model}{judge}: {report.llm_calls} LLM calls, "
        f"{report.cache_hits} from cache, "
        f"{report.prompt_tokens} prompt + {report.completion_tokens} completion tokens, "
        f"cost {cost}",
        f"  {report.invalid_retries} invalid answers retried, {report.quote_repairs} quote "
        f"repairs, {report.unverified_quotes} unverified quotes, {report.cut_prompts} prompts "
        "cut to budget",
        f"  {len(report.skipped)} input records skipped, {len(report.unlabelled)} unlabelled runs "
        f"left out, secrets redacted: {redacted}, "
        f"{report.seconds:.1f} s",
    ]


def _notes(report: Any) -> list[str]:
    """Insights on read content only, and what mining found."""
    lines = []
    if report.read_only_insights:
        lines.append(
            f"  {plural(report.read_only_insights, 'insight')} resting on read content only "
            "(text the agent read, not what it did): flagged on its page and in the first message"
        )
    if report.mining is not None:
        mining = report.mining
        lines.append(
            f"  mined: {plural(mining['contrasts'], 'contrast lesson')} from "
            f"{plural(mining['patterns_tried'], 'pattern')} tried, "
            f"{plural(mining['divergences'], 'divergence')} between runs of one task (not "
            "lessons: each is shown for its own task alone)"
            + (f", {plural(report.mined, 'page')} written" if report.mined else "")
        )
    return lines


def _judge_lines(report: Any) -> list[str]:
    """What the --judge model did, and the runs whose text addresses it."""
    lines = []
    if report.judged or report.abstained or report.judge_calls or report.judge_cache_hits:
        lines.append(
            f"  {plural(report.judged, 'run')} labelled by the judge model (marked judged), "
            f"{report.abstained} left unlabelled as it could not tell; its "
            f"{plural(report.judge_calls, 'LLM call')} ({report.judge_cache_hits} from cache), "
            f"{report.judge_prompt_tokens} prompt + {report.judge_completion_tokens} completion "
            "tokens are in the totals above"
        )
    for item in report.addresses_judge:
        where = (["the task"] if item["task"] else []) + [f"turn {n}" for n in item["turns"]]
        lines.append(
            f"  addresses the judge {where_of(item)}: task {item['task_id']} "
            f"(run {item['run_id']}), {', '.join(where)}; named as such to the judge"
        )
    return lines


def _listed(report: Any) -> list[str]:
    """A line for each batch, each input format, and each file or record left out."""
    lines = []
    for item in report.batches:
        lines.append(
            f"  batch {item['batch']}: {plural(item['requests'], 'request')}, {item['status']}"
            + (f", {item['unanswered']} unanswered" if item["unanswered"] else "")
        )
    for name, counts in report.formats.items():
        lines.append(
            f"  {name}: {plural(counts['runs'], 'run')} ({counts['successes']} succeeded, "
            f"{counts['failures']} failed), {counts['unlabelled']} unlabelled left out"
        )
    for item in report.left_out:
        lines.append(f"  left out {item['path']}: {item['reason']}")
    for item in report.skipped:
        field = f" field '{item['field']}':" if item["field"] else ""
        lines.append(f"  skipped {where_of(item)}:{field} {item['message']}")
    for item in report.unlabelled:
        lines.append(
            f"  unlabelled {where_of(item)}: task {item['task_id']} (run {item['run_id']}): "
            f"{item['reason']}"
        )
    return lines


def compile_with_progress(
    make: Any,
    options: Any,
    *,
    quiet: bool,
    written: str | Any,
    again: str = "building again",
) -> Any:
    """Run build or add with a progress display; Ctrl-C says what was kept and exits 130."""
    progress = Progress("processed {done}/{total} runs", bar="compiling", quiet=quiet)

    def say(text: str) -> None:
        progress.close()  # each round of a batch pass, and the build, show their progress anew
        if not quiet:
            click.echo(text, err=True)

    try:
        return make(
            options,
            progress=progress,
            notice=lambda plan: announce(plan, quiet=quiet),
            say=say,
        )
    except KeyboardInterrupt:
        progress.close()
        cached = (
            ""
            if options.offline or not options.use_cache
            else (
                f"; the model replies received so far are cached, so {again} resumes "
                "without paying for them twice"
            )
        )
        if options.batch and cached:
            cached += (
                "; the batches submitted are recorded there too, so the same command again "
                "waits for them and submits nothing twice"
            )
        said = written() if callable(written) else written
        click.echo(f"\ninterrupted: {said}{cached}", err=True)
        sys.exit(130)
    finally:
        progress.close()


RETRY_BUILD = (
    "run the same command again to retry them (replies received so far come from the cache)"
)
RETRY_ADD = (
    "they are in the new version without a compilation; a build of all the runs with --force "
    "compiles them (cached replies are not paid for again)"
)


def finish_report(
    report: Any, *, quiet: bool, as_json: bool, stdout: str, retry: str = RETRY_BUILD
) -> None:
    """The report on stderr, the result on stdout, exit 1 when some runs failed to compile."""
    if not quiet or not report.complete:
        click.echo(_summary(report), err=True)
    if as_json:
        print_json(report.as_dict())
    else:
        click.echo(stdout)
    if not report.complete:
        held = (
            f"; {report.version} was not deployed, the current version stays"
            if report.held_back
            else ""
        )
        click.echo(
            f"error: incomplete: {plural(len(report.failed), 'run')} failed to compile (listed "
            f"above){held}; " + retry,
            err=True,
        )
        sys.exit(1)


def _points_at(pointer: Path) -> str | None:
    import os

    return os.readlink(pointer) if pointer.is_symlink() else None


@click.command("build")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@option(declared("output"))
@option(declared("model"))
@option(declared("force"))
@compile_options
@profile_option("build")
@json_option("the build report")
def build_command(
    inputs: tuple[Path, ...],
    output: Path,
    model: str,
    force: bool,
    as_json: bool,
    compile: CompileSettings,
) -> None:
    """Build a frozen evidence corpus from agent logs (files or folders).

    INPUTS are log files or folders, in any format `wikitrace convert --help` lists. Each run
    gets its raw turns, a compilation (why it succeeded or failed, quoting numbered turns) and
    up to 3 insights; --model offline (the default) calls no LLM. Prints the corpus folder
    (the report with --json). Exit 0 when every run compiled, 1 when some failed, 2 for bad
    input.

    \b
    Example:
      wikitrace build runs.jsonl -o corpus
      wikitrace build trajs/ --labels reports/ -o corpus   # mini-swe-agent, SWE-bench
      wikitrace build runs.jsonl -o corpus --model openai/gpt-4o-mini
    \f
    A run whose outcome is nowhere (no label in the log, no --labels entry, no reward) is
    listed and left out; the native JSON Lines format is read too.

    Each run gets raw/step-NNNN/ (its metadata and every turn as logged), a compilation and
    up to 3 insights. With --model offline the compilation is mechanical. With or without a
    model, lessons are also mined from contrasts between runs (--no-mine turns it off):
    patterns of action that separate failed from successful runs of the same task (an
    exact test stratified by task, Benjamini-Hochberg corrected), and where a task's failed
    and successful runs first diverged.

    The corpus is version v0001: OUTPUT is a link to OUTPUT.versions/v0001, and `wikitrace add`
    grows it into new versions beside it.

    When some runs failed to compile, the corpus is written and lists them; rerun with --force
    to retry them, paying only for what is not cached. Bad input writes nothing.

    \b
    More examples:
      wikitrace build results/gpt-4o-airline.json -o corpus          # tau-bench, detected
      wikitrace build runs.jsonl -o corpus --model openai/qwen --api-base http://localhost:8000/v1
    """
    from wikitrace.compiler import build_corpus

    quiet = is_quiet()
    options = compile.build_options(inputs, output, model, force=force)
    if model == "offline" and options.api_base and not quiet:
        click.echo("warning: --api-base has no effect with --model offline", err=True)
    before = _points_at(output)

    def written() -> str:
        after = _points_at(output)
        if after == before:
            return (
                f"{output} is as it was ({before} is current)"
                if before
                else f"nothing was written to {output}"
            )
        return f"{output} was replaced just before the interruption ({after} is current)"

    report = compile_with_progress(build_corpus, options, quiet=quiet, written=written)
    finish_report(report, quiet=quiet, as_json=as_json, stdout=str(output))
