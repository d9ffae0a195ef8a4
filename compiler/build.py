"""`wikitrace build` (and the stages that `wikitrace add`, compiler/add.py, runs): trajectories
in, a frozen version of the three-layer evidence corpus out, as a row of stages each returning
the value the next takes (compiler/stages.py): plan (the files to read), read (every record
checked, read once), compile (raw.py writes each run's raw layer, redacted; produce.py compiles
it), write layers (layers.py: insights, mined lessons) and finish (versions/finish.py: catalog,
indexes, rankers, manifest, seal). The report is assembled once, from those values (report.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wikitrace import prompts
from wikitrace.corpus_schema import InputError, Layout, WikitraceError, id_width
from wikitrace.corpus_schema.contrast_tests import load_tests
from wikitrace.corpus_schema.destination import check_output, given
from wikitrace.corpus_schema.history import VersionInfo
from wikitrace.corpus_schema.layout import (
    MINED_PATTERNS,
    MINED_PATTERNS_PAGE_RUNS,
    MINED_TESTS,
    mined_patterns_files,
)
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.records import is_judged
from wikitrace.corpus_schema.setting_fields import declared
from wikitrace.corpus_schema.writing import CorpusWriter
from wikitrace.search.saved import FarmMap
from wikitrace.transport.batch import BatchLLM, BatchSettings, Say, batch_model
from wikitrace.transport.call_worker import start_spares, worker_client
from wikitrace.transport.clients import connect
from wikitrace.transport.llm import (
    LLM,
    CachedLLM,
    LLMSettings,
    ResponseCache,
    close,
    default_cache_dir,
)
from wikitrace.versions import (
    FrozenVersion,
    Store,
    abandon_build,
    begin_build,
    check_new_pointer,
    publish_build,
    resumable,
)
from wikitrace.versions.finish import Finished, in_staging

from . import model_farm
from .compile import Templates
from .importers import InputPlan
from .judge import JUDGE_OUTPUT_TOKENS, Judge
from .layers import finish_layers, write_layers
from .layers_mined import premine
from .mine import Miner, patterns_of_written
from .mine_contrast import mining_thresholds
from .mine_table import read_patterns
from .produce import Compiled, Producer, Progress
from .raw import RawLayer
from .redact import Redactor
from .report import BuildOptions, BuildReport, sources
from .stages import (
    CompiledRuns,
    NothingNew,
    Planned,
    ReadInputs,
    assemble_report,
    plan_build,
    read_inputs,
)
from .workers import START_METHOD, Farm, build_in_workers, fork_server, worker_count

log = logging.getLogger(__name__)


def make_llm(
    options: BuildOptions, llm: LLM | None, model: str | None = None, output_tokens: int = 0
) -> LLM:
    """The compile model (or `model`, answering in `output_tokens`, called in this process),
    cached unless told not to (a given `llm`, a test's fake, is cached too)."""
    cache = (options.cache_dir or default_cache_dir()) if options.use_cache else None
    if llm is None:
        settings = LLMSettings(
            model=model or options.model,
            api_base=options.api_base,
            temperature=options.temperature,
            max_output_tokens=output_tokens or options.limits.max_output_tokens,
            timeout_seconds=options.timeout_seconds,
            max_retries=options.max_retries,
            backoff_seconds=options.backoff_seconds,
            reasoning_effort=options.reasoning_effort,
            fast_path=options.fast_path,
        )
        # A batch build sends files, not calls; the judge calls one at a time.
        in_process = options.batch or model is not None
        workers = None if in_process else worker_client(settings, options.call_workers)
        return connect(settings, cache, client=workers)
    return CachedLLM(llm, ResponseCache(cache)) if cache else llm


def _start_call_workers(options: BuildOptions, llm: LLM | None) -> None:
    """Start the call workers the build's model will use (`start_spares`): none for a model
    given (a test's fake), an offline build or a batch build, which makes no call at once."""
    if llm is None and not options.offline and not options.batch:
        settings = LLMSettings(options.model, options.api_base, fast_path=options.fast_path)
        start_spares(settings, options.call_workers)


def _make_judge(options: BuildOptions, judge_llm: LLM | None) -> Judge | None:
    if options.judge is None:
        return None
    templates = Templates.load(options.prompts_dir, also=(prompts.JUDGE,))
    llm = make_llm(options, judge_llm, options.judge, JUDGE_OUTPUT_TOKENS)
    budget = options.limits.context_tokens - 2 * JUDGE_OUTPUT_TOKENS - 1500
    return Judge(
        llm=llm,
        model=options.judge,
        templates=templates,
        max_prompt_tokens=max(budget, 2000),
        redactor=Redactor(options.redact_patterns, options.redact_keep) if options.redact else None,
        retries=options.limits.invalid_retries,
        quote_repairs=options.limits.quote_repairs,
    )


def build_corpus(
    options: BuildOptions,
    *,
    llm: LLM | None = None,
    judge_llm: LLM | None = None,
    progress: Progress | None = None,
    notice: Callable[[InputPlan], None] | None = None,
    say: Say | None = None,
) -> BuildReport:
    """Build a frozen corpus at options.output; raises InputError or CorpusError, else reports.

    options.output becomes a pointer to version v0001 of a new store beside it (see
    wikitrace.versions). Nothing changes at options.output unless the build finishes: the
    corpus is assembled in a staging folder and moved into place at the end.
    """
    started = time.monotonic()
    output = options.output
    if not options.force and resumable(output, sources(options.inputs)):
        # The same command after some runs failed: build again, replies from the cache.
        log.warning("%s is an incomplete build of the same inputs: building it again", output)
        options = dataclasses.replace(options, force=True)
    check_new_pointer(output, force=options.force)
    check_cache_dir(options)
    planned = plan_inputs(options, notice)
    with build_lock(output):
        check_new_pointer(output, force=options.force)  # as it is now that we hold the lock
        store, name = begin_build(output)
        staging = store.staging(name)
        try:
            made = make_version(
                planned,
                staging,
                VersionInfo(name=name),
                llm,
                progress,
                judge_llm=judge_llm,
                say=say,
                store=store,
            )
            report = made.report
            if report.mostly_failed:
                raise BuildFailed(
                    f"{output}: not built: {report.failed_summary()}. The replies received are "
                    "cached: once the model answers, run the same command again"
                )
            publish_build(store, staging, name)
        except BaseException:
            abandon_build(store, staging, name)
            raise
    # The manifest holds the time up to its own writing; the report, all of it.
    return dataclasses.replace(report, version=name, seconds=round(time.monotonic() - started, 3))


def check_cache_dir(options: BuildOptions) -> None:
    """Refuse a reply cache (the `cache-dir` setting) inside a corpus or its store of
    versions (check_output, as for -o), the corpus this command writes included, though it
    may not exist yet: the replies written there would be files its manifest does not list."""
    if options.cache_dir is None or not options.use_cache:
        return
    check_output(options.cache_dir, "cache-dir")
    cache = Path(os.path.realpath(options.cache_dir))
    for folder in (options.output, Store(options.output).dir):
        if cache.is_relative_to(os.path.realpath(folder)):
            raise InputError(
                f"{options.cache_dir} is inside {folder}, which this command writes; keep "
                "the cache outside the corpus and its versions, e.g. "
                + given(
                    "cache-dir", Path(os.path.abspath(options.output)).parent / "wikitrace-cache"
                ),
                field="cache-dir",
            )


class BuildFailed(WikitraceError):
    """A build most of whose compilations failed: nothing is made current (exit 1)."""


def plan_inputs(options: BuildOptions, notice: Callable[[InputPlan], None] | None) -> Planned:
    """Stage one: the files to read; `notice` is told which format each was read as."""
    planned = plan_build(options)
    if notice is not None:
        notice(planned.plan)
    return planned


def _make_miner(base: FrozenVersion | None, folder: Path) -> Miner:
    """A miner that starts from the parent's runs: their patterns as its table keeps them, or
    read from their logs when the parent was built without mining. What it keeps on disk
    goes in `folder`."""
    if base is None:
        return Miner(folder=folder)
    # Mining takes the parent's patterns and p-values as they are: checked first, not only
    # when the new version links them (`link_kept`), after they were used.
    pages = mined_patterns_files(base.manifest.files)  # the manifest's names walked once
    base.check([*pages, MINED_TESTS])
    known = read_patterns(base.root, pages)
    if len(known) != len(base.rows):
        known = patterns_of_written(base.rows, lambda step: base.layout())
        return Miner(known, folder=folder)
    # What the parent tested of each task type: the types no new run touches are not counted
    # again (compiler/mine_contrast.py, `contrasts_of_types`). Its full pages of patterns are
    # kept as they are (not those of the one file of versions before pages).
    tests = load_tests(base.root / MINED_TESTS, mining_thresholds())
    paged = MINED_PATTERNS not in base.manifest.files
    kept = len(known) // MINED_PATTERNS_PAGE_RUNS if paged else 0
    return Miner(known, folder=folder, tests=tests, pages_kept=kept)


def _batching(options: BuildOptions, model: LLM | None, say: Say | None) -> BatchLLM | None:
    if not options.batch:
        return None
    if model is None:
        raise InputError(
            "--batch sends the compile calls to a model's batch API, and this build has no "
            "model: give --model (or leave out --batch for an offline build)",
            path=str(options.output),
        )
    if not isinstance(model, CachedLLM):
        raise InputError(
            "--batch keeps the batches' answers in the reply cache: drop no-cache (the "
            f"setting, from ${declared('no-cache').variable} or a settings file)",
            path=str(options.output),
        )
    return batch_model(model, BatchSettings(poll_seconds=options.batch_poll_seconds), say=say)


@dataclass(frozen=True)
class MadeVersion:
    """What making a version came to: its report (as its manifest keeps it, with the batches
    waited for), and what its last stage wrote; None when every run was there already and no
    version was made."""

    report: BuildReport
    finished: Finished | None


def make_version(
    planned: Planned,
    staging_dir: Path,
    version: VersionInfo,
    llm: LLM | None,
    progress: Progress | None,
    base: FrozenVersion | None = None,
    *,
    judge_llm: LLM | None = None,
    say: Say | None = None,
    store: Store | None = None,
) -> MadeVersion:
    """Read the inputs, then write a frozen version in `staging_dir` (and what the `store`
    keeps beside it: see `finish_version`). With --batch, a pass before the build fills the
    response cache through the provider's batch API (`_batch_pass`); the build then runs once,
    as any build does, and finds every answer there."""
    options = planned.options
    started = time.monotonic()
    judge = _make_judge(options, judge_llm)
    _start_call_workers(options, llm)  # while the inputs are read
    with contextlib.ExitStack() as stack:
        # An offline build's workers, asked for, start while the inputs are read.
        stack.enter_context(fork_server(options.workers if options.offline else None))
        read = read_inputs(options, planned.plan, staging_dir.parent, judge)
        stack.enter_context(contextlib.closing(read.runs))
        log.info("%d runs to build (%d records skipped)", read.total, len(read.skipped))
        templates = None if options.offline else Templates.load(options.prompts_dir)
        model = None if options.offline else make_llm(options, llm)
        try:
            stages = _Stages(
                planned, read, version, base, store, templates, model, progress, started
            )
            batch = _batching(options, model, say)
            if batch is not None:
                _batch_pass(dataclasses.replace(stages, model=batch), batch, staging_dir, say)
                stages = dataclasses.replace(stages, model=batch.answers())
            outcome = in_staging(staging_dir, stages, keep=_finished)
        finally:
            close(model)
    if isinstance(outcome, NothingNew):
        report = assemble_report(planned, read, outcome.counts, parent=version.parent)
        return MadeVersion(report, None)
    if batch is not None:
        return MadeVersion(
            dataclasses.replace(outcome.report, batches=batch.submitted), outcome.finished
        )
    return outcome


def _finished(outcome: MadeVersion | NothingNew) -> Finished | None:
    """A made version's last stage, whose folder `in_staging` freezes; None: nothing new."""
    return outcome.finished if isinstance(outcome, MadeVersion) else None


def _batch_pass(stages: _Stages, batch: BatchLLM, scratch: Path, say: Say | None) -> None:
    """--batch: fill the response cache before the build. Each round runs the compile stage in
    `scratch` (then removed) with `batch` as its model, which queues what the cache cannot
    answer; the queued requests are submitted, waited for (resumably: transport/batch.py) and
    their answers cached. The pass ends with a round that asks for nothing new: what the
    answers of the last one led to (a correction, a quote repair) was asked in its own round."""
    tell = say or log.info
    while True:
        batch.start_round()
        try:
            in_staging(scratch, stages.compile_only, keep=lambda _: None)
        except BaseException:
            batch.discard()
            raise
        if batch.finish_round():
            break
        tell(f"{batch.waiting} requests wait for answers from the provider's batch API")
        try:
            asyncio.run(batch.settle())
        finally:
            batch.discard()
    # Said even when the cache held every answer: it ends the pass's progress display.
    tell(
        "every answer is in the cache: building"
        if not batch.submitted
        else "the batches' answers are in the cache: building"
    )


@dataclass(frozen=True)
class _Stages:
    """The stages after reading, run once in a staging folder (and the compile stage alone,
    for each round of a --batch pass)."""

    planned: Planned
    read: ReadInputs
    version: VersionInfo
    base: FrozenVersion | None
    store: Store | None
    templates: Templates | None
    model: LLM | None
    """The compile model; in a --batch pass, the `BatchLLM` that queues what it is asked."""
    progress: Progress | None
    started: float

    def __call__(self, root: Path) -> MadeVersion | NothingNew:
        options, base = self.planned.options, self.base
        writing = CorpusWriter(root, track_written=base is not None)
        with writing as writer, contextlib.ExitStack() as spills:
            # Spill files go when the build ends, even when interrupted.
            layout = self._layout(root)
            farm = self._farm(layout, root, spills)
            compiled = self.compile(writer, layout, spills, farm=farm)
            if not isinstance(compiled, CompiledRuns):
                return compiled
            farm_map: FarmMap = farm.map if farm is not None else map
            seconds = round(time.monotonic() - self.started, 3)
            layers = write_layers(
                writer,
                layout,
                compiled,
                version=self.version,
                inputs=self.planned.inputs,
                templates=self.templates,
                base=base,
                miner=compiled.miner,
                farm_map=farm_map,
            )
            spills.enter_context(contextlib.closing(layers.all_rows))
            if layers.pending is not None:
                spills.enter_context(contextlib.closing(layers.pending))
            report = assemble_report(
                self.planned,
                self.read,
                compiled.counts,
                (compiled, layers),
                parent=self.version.parent,
                seconds=seconds,
            )
            finished = finish_layers(
                writer,
                compiled,
                layers,
                report,
                self.version,
                model_settings=options.model_settings(),
                base=base,
                store=self.store,
                farm_map=farm_map,
                done=farm.release if farm is not None else None,
            )
            return MadeVersion(report, finished)

    def _farm(
        self, layout: Layout, root: Path, spills: contextlib.ExitStack[bool | None]
    ) -> Farm | None:
        """The worker processes of a build that uses them (`worker_count`; a model build's:
        `model_farm.pool_size`), kept until the version is finished and stopped before its
        staging folder may be removed."""
        options = self.planned.options
        if self.model is None:
            workers = worker_count(options.workers, self.read.total)
            if workers <= 1:
                return None
        else:  # the runs' work beside the calls, while they flow (model_farm.py)
            workers = model_farm.pool_size(options.workers, self.read.total)
            if workers == 0:
                return None
        method = START_METHOD if self.model is None else model_farm.start_method()
        farm = Farm(options, layout, root, workers, mine=options.mine, start_method=method)
        spills.push(lambda failed, *_: farm.close(failed=failed is not None))
        if method == "fork":  # now, while the build has one thread (ProcessPoolExecutor forks
            # every worker as the first work is sent)
            farm.pool.submit(os.getpid).result()
        return farm

    def compile_only(self, root: Path) -> None:
        """The compile stage alone, in `root`, mining nothing: what a --batch pass's round
        asks the model."""
        with CorpusWriter(root) as writer, contextlib.ExitStack() as spills:
            self.compile(writer, self._layout(root), spills, mine=False)

    def _layout(self, root: Path) -> Layout:
        if self.base is not None:
            return self.base.layout(root)
        return Layout(root, step_width=id_width(self.read.total))

    def compile(
        self,
        writer: CorpusWriter,
        layout: Layout,
        spills: contextlib.ExitStack[bool | None],
        *,
        mine: bool = True,
        farm: Farm | None = None,
    ) -> CompiledRuns | NothingNew:
        """Stage three: each run checked written to the raw layer (redacted, numbered) and
        compiled, offline, by the model, or in worker processes."""
        options, base, model, total = self.planned.options, self.base, self.model, self.read.total
        compiled = Compiled(
            writer,
            layout,
            first_step=len(base.rows) + 1 if base else 1,
            parent_rows=base.insight_rows if base else (),
            total=total,
            fixed_width=base is not None,
        )
        spills.enter_context(contextlib.closing(compiled))
        producer = Producer(total, layout, self.progress, compiled)
        raw = RawLayer(options, self.read.runs, writer, layout, producer.advance, base)
        spills.enter_context(contextlib.closing(raw))
        miner = _make_miner(base, writer.root.parent) if options.mine and mine else None
        if miner is not None:
            spills.enter_context(contextlib.closing(miner))
        runs = raw.runs() if miner is None else miner.watch(raw.runs(), is_judged)
        premined = None
        if farm is not None and model is None:  # the same work (and corpus) on other cores
            build_in_workers(raw, producer, miner, farm)
        elif model is None or self.templates is None:
            producer.offline(runs)
        else:
            if farm is not None:  # the runs' files, their pages and what mining keeps of
                # them, made by the workers while the calls flow (the same corpus)
                compiled.off_loop = raw.off_loop = model_farm.OffLoop(
                    farm.pool, farm.workers, writer.root, layout, writer, miner
                )
                runs = raw.runs()
            # Mining needs the runs alone: it is done while the last calls are in flight.
            meanwhile = (
                functools.partial(premine, miner, layout, raw.rows, self.version, base)
                if miner is not None
                else None
            )
            premined = asyncio.run(
                producer.with_model(
                    runs, model, self.templates, options.limits, options.concurrency, meanwhile
                )
            )
        if base is not None and not raw.rows:
            return NothingNew(raw.counts())
        return CompiledRuns(
            raw.rows,
            raw.tasks,
            compiled,
            producer.stats,
            raw.redactor,
            raw.counts(),
            producer.failed,
            miner,
            premined,
        )
