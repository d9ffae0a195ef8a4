"""`wikitrace build`."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import click

MODEL_ENV = "WIKITRACE_MODEL"


class _Progress:
    """A bar on a terminal; a line every 10% (or 30 s) when stderr is a file or a pipe."""

    def __init__(self, *, quiet: bool = False) -> None:
        self._quiet = quiet
        self._bar: Any = None
        self._tty = sys.stderr.isatty()
        self._last_line = 0.0
        self._last_decile = -1

    def __call__(self, done: int, total: int) -> None:
        if self._quiet:
            return
        if self._tty:
            if self._bar is None:
                self._bar = click.progressbar(length=total, label="compiling", file=sys.stderr)
                self._bar.__enter__()
            self._bar.update(done - self._bar.pos)
            return
        decile = done * 10 // max(total, 1)
        now = time.monotonic()
        if decile != self._last_decile or now - self._last_line > 30 or done == total:
            self._last_decile, self._last_line = decile, now
            click.echo(f"compiled {done}/{total} runs", err=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def announce(plan: Any, *, quiet: bool) -> None:
    """Say on stderr which format each input was read as (and, with -v, what was ignored)."""
    if quiet:
        return
    for line in plan.describe():
        click.echo(line, err=True)
    if logging.getLogger("wikitrace").isEnabledFor(logging.INFO):
        for item in plan.ignored:
            click.echo(f"  ignored {item['path']}: {item['reason']}", err=True)


def _check_redact(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> Any:
    from wikitrace.compiler.redact import check_pattern

    for pattern in value:
        problem = check_pattern(pattern)
        if problem:
            raise click.BadParameter(f"{pattern!r}: {problem}")
    return value


def where_of(item: dict[str, Any]) -> str:
    """path:line or path:position of a reported record."""
    where = str(item["path"])
    if item.get("line") is not None:
        where += f":{item['line']}"
    if item.get("at") is not None:
        where += f":{item['at']}"
    return where


def _summary(report: Any) -> str:
    cost = "unknown" if report.cost_usd is None else f"${report.cost_usd:.4f}"
    redacted = ", ".join(f"{kind} {n}" for kind, n in report.redactions.items()) or "none"
    what = (
        f"added {report.version} to {report.output} (parent {report.parent}, "
        f"{report.duplicates} runs it holds left out)"
        if report.parent
        else f"built {report.output}"
    )
    lines = [
        f"{what}: {report.runs} runs ({report.successes} succeeded, "
        f"{report.failures} failed), {report.compiled} compilations, {report.insights} insights",
        f"  model {report.model}: {report.llm_calls} LLM calls, {report.cache_hits} from cache, "
        f"{report.prompt_tokens} prompt + {report.completion_tokens} completion tokens, "
        f"cost {cost}",
        f"  {report.invalid_retries} invalid answers retried, {report.quote_repairs} quote "
        f"repairs, {report.unverified_quotes} unverified quotes, {report.cut_prompts} prompts "
        "cut to budget",
        f"  {len(report.skipped)} input records skipped, {len(report.unlabelled)} unlabelled runs "
        f"left out, secrets redacted: {redacted}, "
        f"{report.seconds:.1f} s",
    ]
    for name, counts in report.formats.items():
        lines.append(
            f"  {name}: {counts['runs']} runs ({counts['successes']} succeeded, "
            f"{counts['failures']} failed), {counts['unlabelled']} unlabelled left out"
        )
    for item in report.skipped:
        field = f" field '{item['field']}':" if item["field"] else ""
        lines.append(f"  skipped {where_of(item)}:{field} {item['message']}")
    for item in report.unlabelled:
        lines.append(
            f"  unlabelled {where_of(item)}: task {item['task_id']} (run {item['run_id']}): "
            f"{item['reason']}"
        )
    for item in report.failed:
        lines.append(f"  FAILED {item['step']} (task {item['task_id']}): {item['error']}")
    return "\n".join(lines)


def input_options(function: Any) -> Any:
    """--format, --labels and --success-threshold: shared by build and convert."""
    from wikitrace.cli.formats import FORMAT_NAMES

    function = click.option(
        "--success-threshold",
        type=float,
        default=1.0,
        show_default=True,
        help="A run whose numeric reward is at least this succeeded (tau rewards, ATIF "
        "rewards, inspect scores; C=1, P=0.5, I=0).",
    )(function)
    function = click.option(
        "--labels",
        "labels",
        multiple=True,
        type=click.Path(path_type=Path, exists=True),
        metavar="FILE",
        help="Outcomes kept outside the logs (repeatable; a folder reads every file in it): "
        "JSON {id: true|false|reward}, JSON Lines or CSV rows (id, success|reward), or "
        "SWE-bench reports. Ids are run ids or task ids. Wins over the log's own outcome.",
    )(function)
    function = click.option(
        "-f",
        "--format",
        "input_format",
        type=click.Choice(["auto", *FORMAT_NAMES]),
        default="auto",
        show_default=True,
        help="The logs' format; auto detects each file's from its content and says which.",
    )(function)
    return function


def compile_options(function: Any) -> Any:
    """How runs are compiled: shared by build, add and update."""
    options = [
        click.option(
            "--api-base",
            help="Base URL of a local or self-hosted server (vLLM, llama.cpp, Ollama).",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(1, 512),
            default=8,
            show_default=True,
            help="Model calls in flight at once.",
        ),
        click.option(
            "--max-prompt-tokens",
            type=click.IntRange(1000),
            default=24_000,
            show_default=True,
            help="Token budget of one prompt; long fields lose their middle (marked) to fit.",
        ),
        click.option(
            "--on-error",
            type=click.Choice(["stop", "skip"]),
            default="stop",
            show_default=True,
            help="Bad input record: stop before writing anything, or skip it and list it in "
            "the report.",
        ),
        click.option(
            "--cache-dir",
            type=click.Path(path_type=Path, file_okay=False),
            help="Cache of model replies (default: ~/.cache/wikitrace/llm). A rebuild of the "
            "same input, or a resumed build, makes no call twice.",
        ),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the reply cache."),
        click.option(
            "--redact",
            "redact_patterns",
            multiple=True,
            callback=_check_redact,
            metavar="REGEX",
            help="Also redact text matching REGEX (repeatable). Well-known secret formats (API "
            "keys, tokens, private keys, URL passwords) are always redacted unless --no-redact.",
        ),
        click.option(
            "--no-redact", is_flag=True, help="Send and write the runs exactly as logged."
        ),
        click.option(
            "--prompts-dir",
            type=click.Path(path_type=Path, file_okay=False, exists=True),
            help="Folder of templates that override the bundled ones of the same name.",
        ),
        click.option("--temperature", type=float, default=0.0, show_default=True),
        click.option(
            "--max-output-tokens", type=click.IntRange(256), default=4096, show_default=True
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(1),
            default=300.0,
            show_default=True,
            help="Seconds before one model call times out (and is retried).",
        ),
        click.option(
            "--max-retries",
            type=click.IntRange(0, 20),
            default=6,
            show_default=True,
            help="Backoff retries of a call on rate limits, time-outs and server errors.",
        ),
        click.option(
            "--hypotheses",
            is_flag=True,
            help="Ask the model to state each insight as a falsifiable hypothesis too "
            "(precondition, behaviour, expected effect, verifier), as `wikitrace gate` tests.",
        ),
        click.option(
            "--invalid-retries",
            type=click.IntRange(0, 10),
            default=2,
            show_default=True,
            help="Times an answer that is not valid JSON of the right shape is sent back.",
        ),
        click.option(
            "--quote-repairs",
            type=click.IntRange(0, 10),
            default=1,
            show_default=True,
            help="Times quotes not found in their turn are sent back for repair; "
            "those still not found are marked UNVERIFIED.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return input_options(function)


def make_options(inputs: tuple[Path, ...], output: Path, model: str, params: dict[str, Any]) -> Any:
    """BuildOptions from the parsed input_options and compile_options."""
    from wikitrace.compiler import BuildOptions, CompileLimits

    return BuildOptions(
        inputs=list(inputs),
        output=output,
        input_format=params["input_format"],
        labels=list(params["labels"]),
        success_threshold=params["success_threshold"],
        model=model,
        api_base=params["api_base"],
        concurrency=params["concurrency"],
        on_error="skip" if params["on_error"] == "skip" else "stop",
        force=bool(params.get("force")),
        cache_dir=params["cache_dir"],
        use_cache=not params["no_cache"],
        redact=not params["no_redact"],
        redact_patterns=params["redact_patterns"],
        prompts_dir=params["prompts_dir"],
        limits=CompileLimits(
            invalid_retries=params["invalid_retries"],
            quote_repairs=params["quote_repairs"],
            max_prompt_tokens=params["max_prompt_tokens"],
            hypotheses=params["hypotheses"],
        ),
        temperature=params["temperature"],
        max_output_tokens=params["max_output_tokens"],
        timeout_seconds=params["timeout"],
        max_retries=params["max_retries"],
    )


def is_quiet() -> bool:
    return bool(click.get_current_context().find_root().params.get("quiet"))


def compile_with_progress(
    make: Any,
    options: Any,
    *,
    quiet: bool,
    written: str | Any,
    again: str = "building again",
) -> Any:
    """Run build or add with a progress display; Ctrl-C says what was kept and exits 130."""
    progress = _Progress(quiet=quiet)
    try:
        return make(options, progress=progress, notice=lambda plan: announce(plan, quiet=quiet))
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
        said = written() if callable(written) else written
        click.echo(f"\ninterrupted: {said}{cached}", err=True)
        sys.exit(130)
    finally:
        progress.close()


def finish_report(report: Any, *, quiet: bool, as_json: bool, stdout: str) -> None:
    """The report on stderr, the result on stdout, exit 1 when some runs failed to compile."""
    import orjson

    if not quiet or not report.complete:
        click.echo(_summary(report), err=True)
    if as_json:
        click.echo(orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(stdout)
    if not report.complete:
        click.echo(
            f"error: incomplete: {len(report.failed)} runs failed to compile (listed above); "
            "run it again to retry them (cached replies are not paid for again)",
            err=True,
        )
        sys.exit(1)


def _points_at(pointer: Path) -> str | None:
    import os

    return os.readlink(pointer) if pointer.is_symlink() else None


@click.command("build")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="The corpus to create: a link to its first version, mem.versions/v0001 beside it. "
    "It appears only once the build is complete.",
)
@click.option(
    "--model",
    envvar=MODEL_ENV,
    default="offline",
    show_default=True,
    help="Any model name litellm accepts (openai/gpt-4o-mini, anthropic/..., ollama/...), or "
    f"'offline' for a mechanical compilation with no LLM and no insights. Env: {MODEL_ENV}.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing corpus (all its versions). The old one stays current until the "
    "new one is complete; a folder that is not a wikitrace corpus is never replaced.",
)
@compile_options
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON on stdout.")
def build_command(
    inputs: tuple[Path, ...], output: Path, model: str, as_json: bool, **params: Any
) -> None:
    """Build a frozen evidence corpus from agent logs (files or folders).

    INPUTS are trajectory files or folders of them, in any format `wikitrace convert --help`
    lists (detected from content), or the native JSON Lines format. A run whose outcome is
    nowhere (no label in the log, no --labels entry, no reward) is listed and left out.

    Each run gets raw/step-NNNN/ (its metadata and every turn as logged), a compilation
    (why it succeeded or failed, each claim quoting numbered turns) and up to 3 insights.
    With --model offline (the default) no LLM is called: the compilation is mechanical
    and there are no insights.

    The corpus is version v0001: OUTPUT is a link to OUTPUT.versions/v0001, and `wikitrace add`
    grows it into new versions beside it.

    Prints the corpus folder on stdout (the report with --json) and the build report on
    stderr. Exit 0 when every run compiled, 1 when some failed (the corpus is written and
    lists them; rerun with --force to retry them, paying only for what is not cached),
    2 for bad input (nothing written).

    \b
    Example:
      wikitrace build runs.jsonl -o corpus
      wikitrace build results/gpt-4o-airline.json -o corpus          # tau-bench, detected
      wikitrace build trajs/ --labels reports/ -o corpus              # mini-swe-agent + SWE-bench
      wikitrace build runs.jsonl -o corpus --model openai/gpt-4o-mini
      wikitrace build runs.jsonl -o corpus --model openai/qwen --api-base http://localhost:8000/v1
    """
    from wikitrace.compiler import build_corpus

    quiet = is_quiet()
    options = make_options(inputs, output, model, params)
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
