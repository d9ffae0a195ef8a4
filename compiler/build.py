"""`wikitrace build`: trajectories in, frozen three-layer evidence corpus out."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from wikitrace.corpus_schema import (
    Compilation,
    InputError,
    Layout,
    RunRecord,
    id_width,
    render,
)
from wikitrace.corpus_schema.history import Changes, VersionInfo
from wikitrace.corpus_schema.records import CompiledBy, RawHeader
from wikitrace.corpus_schema.store import CorpusWriter, build_lock, digest
from wikitrace.tools import drilldown
from wikitrace.versions import (
    FrozenVersion,
    abandon_build,
    begin_build,
    check_new_pointer,
    fingerprint,
    finish_version,
    open_store,
    publish_build,
    staging,
)

from .compile import CompileLimits, CompileStats, Templates, compile_with_llm
from .importers import AUTO, DEFAULT_THRESHOLD, InputPlan, plan_inputs
from .inputs import FormatCounts, SourceRun, Unlabelled, refuse_bad_records, tally
from .llm import (
    LLM,
    CachedLLM,
    LiteLLMClient,
    LLMCallError,
    LLMSettings,
    ResponseCache,
    default_cache_dir,
)
from .offline import OFFLINE_MODEL, compile_offline
from .redact import Redactor

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass
class BuildOptions:
    inputs: list[Path]
    output: Path
    input_format: str = AUTO
    """A format name, or auto to detect each file's from its content."""
    labels: list[Path] = field(default_factory=list)
    """Side-car label files (or folders of them): run or task id -> success or reward."""
    success_threshold: float = DEFAULT_THRESHOLD
    """A numeric reward at or above this is a success."""
    model: str = OFFLINE_MODEL
    api_base: str | None = None
    concurrency: int = 8
    on_error: Literal["stop", "skip"] = "stop"
    force: bool = False
    cache_dir: Path | None = None
    """Where model replies are cached; None means the user cache folder."""
    use_cache: bool = True
    redact: bool = True
    redact_patterns: tuple[str, ...] = ()
    prompts_dir: Path | None = None
    limits: CompileLimits = field(default_factory=CompileLimits)
    temperature: float = 0.0
    max_output_tokens: int = 4096
    timeout_seconds: float = 300.0
    max_retries: int = 6
    backoff_seconds: float = 2.0

    @property
    def offline(self) -> bool:
        return self.model == OFFLINE_MODEL


@dataclass
class BuildReport:
    """What a build did; printed at the end and stored in the manifest."""

    output: str
    model: str
    runs: int = 0
    successes: int = 0
    failures: int = 0
    compiled: int = 0
    insights: int = 0
    unverified_quotes: int = 0
    llm_calls: int = 0
    cache_hits: int = 0
    http_attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    invalid_retries: int = 0
    quote_repairs: int = 0
    cut_prompts: int = 0
    failed: list[dict[str, Any]] = field(default_factory=list)
    """Runs whose compilation failed: step, task_id, error."""
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """Input records left out with --on-error skip: path, line, field, message."""
    unlabelled: list[dict[str, Any]] = field(default_factory=list)
    """Runs left out because nothing says whether they succeeded: where, ids, why."""
    inputs: list[str] = field(default_factory=list)
    """What was read, a line per format: files and whether detected or given."""
    formats: FormatCounts = field(default_factory=dict)
    """Per input format: runs built, successes, failures, unlabelled runs left out."""
    ignored: list[dict[str, str]] = field(default_factory=list)
    """Files in input folders that hold no trajectory: path and why."""
    redactions: dict[str, int] = field(default_factory=dict)
    version: str | None = None
    """The version written (`v0001` for a build)."""
    parent: str | None = None
    """The version runs were added to (add and update only)."""
    duplicates: int = 0
    """Input runs the parent already holds, left out (add and update only)."""
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.failed

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["complete"] = self.complete
        return data


def _input_state(paths: list[Path]) -> list[tuple[int, int]]:
    """Size and modification time of each input (a missing one is reported by the reader)."""
    state = []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            state.append((-1, -1))
        else:
            state.append((info.st_size, info.st_mtime_ns))
    return state


def _check_inputs(options: BuildOptions, plan: InputPlan, report: BuildReport) -> int:
    """Pass one: check every record before anything is written; returns the number of good runs."""
    good = 0
    errors: list[InputError] = []
    for item in plan.items():
        if isinstance(item, InputError):
            errors.append(item)
        elif isinstance(item, Unlabelled):
            report.unlabelled.append(item.as_dict())
            tally(report.formats, item.format, "unlabelled")
        else:
            good += 1
    if options.on_error == "stop":
        refuse_bad_records(errors)
    report.skipped = [error.as_dict() for error in errors]
    if options.redact:  # a message may quote the record it rejects: it goes to the manifest
        redactor = Redactor(options.redact_patterns)
        for skipped in report.skipped:
            skipped["message"] = redactor.text(str(skipped["message"]))
            if skipped.get("hint"):
                skipped["hint"] = redactor.text(str(skipped["hint"]))
    if good == 0:
        unlabelled = len(report.unlabelled)
        if not unlabelled and errors:
            first, more = errors[0], len(errors) - 1
            raise InputError(
                first.message,
                path=first.path,
                line=first.line,
                at=first.at,
                field=first.field,
                hint=(first.hint + "; " if first.hint else "")
                + "no runs to build: every record is bad"
                + (f"; {more} more bad records" if more else ""),
            )
        raise InputError(
            f"no runs to build: none of the {unlabelled} runs found has a label"
            if unlabelled
            else "no runs to build: the input holds no valid records",
            path=", ".join(str(p) for p in options.inputs),
            hint="give their outcomes with --labels FILE (run or task id -> success or reward)"
            if unlabelled
            else None,
        )
    return good


def _make_llm(options: BuildOptions, llm: LLM | None) -> LLM:
    if llm is None:
        client = LiteLLMClient(
            LLMSettings(
                model=options.model,
                api_base=options.api_base,
                temperature=options.temperature,
                max_output_tokens=options.max_output_tokens,
                timeout_seconds=options.timeout_seconds,
                max_retries=options.max_retries,
                backoff_seconds=options.backoff_seconds,
            )
        )
        client.preflight()
        llm = client
    if options.use_cache:
        llm = CachedLLM(llm, ResponseCache(options.cache_dir or default_cache_dir()))
    return llm


class _Builder:
    """State of one build in its staging folder."""

    def __init__(
        self,
        options: BuildOptions,
        total: int,
        staging: Path,
        report: BuildReport,
        llm: LLM | None,
        templates: Templates | None,
        progress: Progress | None,
        input_state: list[tuple[int, int]],
        plan: InputPlan,
        base: FrozenVersion | None = None,
    ) -> None:
        self.options = options
        self.total = total
        self.report = report
        self.llm = llm
        self.templates = templates
        self.progress = progress
        self.base = base
        # Ids keep the parent's width, so nothing is renamed; past it they just grow a digit.
        self.layout = (
            Layout(staging, base.manifest.step_id_width, base.manifest.insight_id_width)
            if base
            else Layout(staging, step_width=id_width(total))
        )
        self.writer = CorpusWriter(staging)
        self.rows: list[render.RunRow] = []
        self.results: dict[int, Compilation] = {}
        self.stats = CompileStats()
        self.redactor = Redactor(options.redact_patterns) if options.redact else None
        self.attempts: Counter[str] = Counter(base.attempts) if base else Counter()
        self.done = 0
        self.input_state = input_state
        self.plan = plan
        self.fatal: LLMCallError | None = None
        """A model error no other call can escape (bad key, unknown model): ends the build."""

    # --- raw layer ----------------------------------------------------------------------

    def _redacted(self, item: SourceRun) -> tuple[dict[str, Any], RunRecord]:
        if self.redactor is None:
            return item.data, item.record
        data = self.redactor.value(item.data)
        if data is item.data:  # nothing to redact
            return data, item.record
        return data, RunRecord.model_validate(data)

    def write_raw(
        self,
        step: int,
        item: SourceRun,
        data: dict[str, Any],
        record: RunRecord,
        log_bytes: bytes,
        offsets: list[int],
    ) -> RunRecord:
        self.attempts[record.task_id] += 1
        given = record.metadata.get("attempt")
        attempt = (
            given
            if isinstance(given, int) and not isinstance(given, bool)
            else (self.attempts[record.task_id])
        )
        header = RawHeader(
            step=self.layout.step(step),
            task_id=record.task_id,
            task_type=record.task_type,
            attempt=attempt,
            outcome=record.outcome,
            turns=len(record.turns),
            source=item.source,
            turns_file=self.layout.raw_turns_rel(step),
            metadata=record.metadata,
        )
        self.writer.write(
            self.layout.raw_metadata_rel(step), render.raw_metadata(header, record.task)
        )
        self.writer.write(self.layout.raw_turns_rel(step), log_bytes)
        summaries = [drilldown.summarize(turn) for turn in data["turns"]]
        self.writer.write(
            self.layout.raw_turn_index_rel(step), render.turn_index(offsets, summaries)
        )
        self.rows.append(
            render.RunRow(
                step=step,
                task_id=record.task_id,
                task_type=record.task_type,
                outcome=record.outcome,
                turns=len(record.turns),
                task=record.task,
            )
        )
        self.report.runs += 1
        tally(self.report.formats, item.format, "runs")
        tally(self.report.formats, item.format, "successes" if record.success else "failures")
        if record.success:
            self.report.successes += 1
        else:
            self.report.failures += 1
        return record

    # --- compilation -------------------------------------------------------------------

    def _record_failure(self, step: int, record: RunRecord, error: Exception) -> None:
        self.report.failed.append(
            {"step": self.layout.step(step), "task_id": record.task_id, "error": str(error)}
        )
        log.warning("%s (task %s): %s", self.layout.step(step), record.task_id, error)

    def _runs(self) -> Iterator[tuple[int, RunRecord]]:
        """Pass two: each valid run, numbered, after its raw layer is written."""
        if _input_state(self.plan.watched) != self.input_state:
            raise InputError(
                "an input file changed after it was checked; build again once it is complete",
                path=", ".join(str(p) for p in self.options.inputs),
            )
        step = len(self.base.rows) if self.base else 0
        for item in self.plan.items():
            if not isinstance(item, SourceRun):
                continue  # reported by the first pass
            data, record = self._redacted(item)
            log_bytes, offsets = render.turn_log(data["turns"])
            if self.base and (
                fingerprint(record.task_id, record.outcome, digest(log_bytes), record.metadata)
                in self.base.fingerprints
            ):
                self.report.duplicates += 1
                self._advance()
                continue
            step += 1
            yield step, self.write_raw(step, item, data, record, log_bytes, offsets)

    def _advance(self) -> None:
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total)

    def produce_offline(self) -> None:
        # No event loop: Ctrl-C interrupts at once, wherever the build is.
        for step, record in self._runs():
            try:
                self.results[step] = compile_offline(step, record)
            except Exception as error:  # one run's failure never aborts the others
                log.debug("step %d failed", step, exc_info=True)
                self._record_failure(step, record, error)
            self._advance()

    async def compile_one(self, step: int, record: RunRecord) -> None:
        assert self.llm is not None and self.templates is not None
        try:
            self.results[step] = await compile_with_llm(
                step, record, self.llm, self.templates, self.options.limits, self.stats
            )
        except LLMCallError as error:
            if error.fatal:
                self.fatal = error
            else:
                self._record_failure(step, record, error)
        except Exception as error:  # one run's failure never aborts the others
            log.debug("step %d failed", step, exc_info=True)
            self._record_failure(step, record, error)
        finally:
            self._advance()

    async def produce(self) -> None:
        """Write each run's raw layer as it is read; compile up to `concurrency` at once."""
        slots = asyncio.Semaphore(self.options.concurrency)
        tasks: set[asyncio.Task[None]] = set()

        async def guarded(step: int, record: RunRecord) -> None:
            try:
                await self.compile_one(step, record)
            finally:
                slots.release()

        for step, record in self._runs():
            await slots.acquire()
            if self.fatal:
                break
            task = asyncio.create_task(guarded(step, record))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        if self.fatal:
            raise self.fatal

    # --- the rest of the corpus ---------------------------------------------------------

    def finish(self, staging: Path, version: VersionInfo) -> None:
        base = self.base
        self.rows.sort(key=lambda row: row.step)
        insight_rows: list[render.InsightRow] = list(base.insight_rows) if base else []
        first_new = len(insight_rows) + 1
        number = len(insight_rows)
        for row in self.rows:
            result = self.results.get(row.step)
            if result is None:
                continue
            row.compiled = True
            row.title = result.title
            row.unverified_quotes = result.unverified_quotes
            for draft in result.insights:
                number += 1
                row.insights.append(number)
                insight_rows.append(
                    render.InsightRow(
                        number=number,
                        title=draft.title,
                        task_type=row.task_type,
                        source_step=row.step,
                        source_outcome=row.outcome,
                    )
                )
        layout = (
            self.layout
            if base
            else dataclasses.replace(self.layout, insight_width=id_width(number))
        )
        if base:
            for rel, file_hash in base.kept_files():
                self.writer.link(rel, base.root / rel, file_hash)
        for row in self.rows:
            result = self.results.get(row.step)
            if result is None:
                continue
            self.writer.write(
                layout.compilation_rel(row.step),
                render.compilation(
                    layout,
                    result,
                    task_id=row.task_id,
                    task_type=row.task_type,
                    insight_numbers=row.insights,
                ),
            )
            for insight_number, draft in zip(row.insights, result.insights, strict=True):
                self.writer.write(
                    layout.insight_rel(insight_number),
                    render.insight(
                        layout, insight_number, draft, source=result, task_type=row.task_type
                    ),
                )
        all_rows = [*(base.rows if base else []), *self.rows]
        compiled_by: CompiledBy = "offline" if self.templates is None else "llm"
        self._fill_report(number - first_new + 1)
        version.changes = Changes(
            runs=len(self.rows),
            steps=[layout.step(row.step) for row in self.rows],
            insights=[layout.insight(n) for n in range(first_new, number + 1)],
            task_ids=list(dict.fromkeys(row.task_id for row in self.rows)),
            duplicates=self.report.duplicates,
            inputs=self.report.inputs,
        )
        prompts = dict(base.manifest.prompts) if base else {}
        prompts.update(self.templates.hashes if self.templates else {})
        finish_version(
            self.writer,
            layout,
            all_rows,
            insight_rows,
            compiled_by=compiled_by,
            model=self.report.model,
            prompts=prompts,
            report=self.report.as_dict(),
            redactions=self.report.redactions,
            version=version,
        )

    def _fill_report(self, insights: int) -> None:
        report, stats = self.report, self.stats
        report.compiled = len(self.results)
        report.insights = insights
        report.unverified_quotes = sum(r.unverified_quotes for r in self.results.values())
        report.llm_calls = stats.calls - stats.cache_hits
        report.cache_hits = stats.cache_hits
        report.http_attempts = stats.http_attempts
        report.prompt_tokens = stats.prompt_tokens
        report.completion_tokens = stats.completion_tokens
        report.cost_usd = round(stats.cost_usd, 6) if stats.cost_known else None
        report.invalid_retries = stats.invalid_retries
        report.quote_repairs = stats.quote_repairs
        report.cut_prompts = stats.cut_prompts
        report.redactions = dict(sorted(self.redactor.counts.items())) if self.redactor else {}
        report.failed.sort(key=lambda item: str(item["step"]))


def build_corpus(
    options: BuildOptions,
    *,
    llm: LLM | None = None,
    progress: Progress | None = None,
    notice: Callable[[InputPlan], None] | None = None,
) -> BuildReport:
    """Build a frozen corpus at options.output; raises InputError or CorpusError, else reports.

    options.output becomes a pointer to version v0001 of a new store beside it (see
    wikitrace.versions). Nothing changes at options.output unless the build finishes: the
    corpus is assembled in a staging folder and moved into place at the end.
    """
    started = time.monotonic()
    output = options.output
    check_new_pointer(output, force=options.force)
    plan, report = _plan(options, notice)
    with build_lock(output):
        check_new_pointer(output, force=options.force)  # as it is now that we hold the lock
        store, name = begin_build(output)
        staging = store.staging(name)
        try:
            _make_version(options, plan, report, staging, VersionInfo(name=name), llm, progress)
            publish_build(store, staging, name)
        except BaseException:
            abandon_build(store, staging, name)
            raise
        report.version = name
    # The manifest holds the time up to its own writing; the report, all of it.
    report.seconds = round(time.monotonic() - started, 3)
    return report


def add_runs(
    options: BuildOptions,
    *,
    deploy: bool = True,
    llm: LLM | None = None,
    progress: Progress | None = None,
    notice: Callable[[InputPlan], None] | None = None,
) -> BuildReport:
    """Compile only the runs the current version lacks into a new version beside it.

    options.output is the corpus pointer. The new version keeps every file of its parent as it
    is (same step and insight ids, shared hard links), adds the new runs after the last step and
    their insights after the last insight, and names its parent in its manifest. With `deploy`,
    the pointer moves to it; otherwise it waits in the store as a candidate. The model is the
    one the parent was compiled with, so the response cache answers anything compiled before.
    When every run is already there, no version is made (report.version is None).
    """
    with build_lock(options.output):
        return add_version(options, deploy=deploy, llm=llm, progress=progress, notice=notice)


def add_version(
    options: BuildOptions,
    *,
    deploy: bool = True,
    llm: LLM | None = None,
    progress: Progress | None = None,
    notice: Callable[[InputPlan], None] | None = None,
) -> BuildReport:
    """add_runs for a caller that already holds the corpus's lock (wikitrace update)."""
    started = time.monotonic()
    pointer = options.output
    store = open_store(pointer)
    base = FrozenVersion.current(store)
    parent = base.name
    options = dataclasses.replace(options, model=base.manifest.model)
    plan, report = _plan(options, notice)
    report.parent = parent
    name = store.next_name()
    staging = store.staging(name)
    made = _make_version(
        options,
        plan,
        report,
        staging,
        VersionInfo(name=name, parent=parent),
        llm,
        progress,
        base,
    )
    if made:
        reason = f"{report.runs} run{'' if report.runs == 1 else 's'} added to {parent}"
        store.place(staging, name, parent=parent, deploy=deploy, event="added", reason=reason)
        report.version = name
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _plan(
    options: BuildOptions, notice: Callable[[InputPlan], None] | None
) -> tuple[InputPlan, BuildReport]:
    plan = plan_inputs(
        options.inputs, options.input_format, options.labels, options.success_threshold
    )
    if notice is not None:
        notice(plan)  # which format each input was read as
    report = BuildReport(output=str(options.output), model=options.model)
    report.inputs = plan.describe()
    report.ignored = plan.ignored
    return plan, report


class _NothingNew(Exception):
    """Every input run is already in the parent: no version is made."""


def _make_version(
    options: BuildOptions,
    plan: InputPlan,
    report: BuildReport,
    staging_dir: Path,
    version: VersionInfo,
    llm: LLM | None,
    progress: Progress | None,
    base: FrozenVersion | None = None,
) -> bool:
    """Check the inputs, then write a frozen version in `staging_dir`; False when nothing is
    new."""
    started = time.monotonic()
    input_state = _input_state(plan.watched)
    total = _check_inputs(options, plan, report)
    log.info("%d runs to build (%d records skipped)", total, len(report.skipped))
    templates = None if options.offline else Templates.load(options.prompts_dir)
    model = None if options.offline else _make_llm(options, llm)
    try:
        with staging(staging_dir) as root:
            builder = _Builder(
                options, total, root, report, model, templates, progress, input_state, plan, base
            )
            if model is None:
                builder.produce_offline()
            else:
                asyncio.run(builder.produce())
            if base is not None and not builder.rows:
                raise _NothingNew
            report.seconds = round(time.monotonic() - started, 3)
            builder.finish(root, version)
    except _NothingNew:
        return False
    return True
