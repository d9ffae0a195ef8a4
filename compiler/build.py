"""`wikitrace build` and `wikitrace add`: trajectories in, a frozen version of the
three-layer evidence corpus out. This module checks the input, then runs the parts in order:
raw.py (the raw layer), produce.py (compiling), layers.py (compilations, insights, indexes)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from wikitrace import prompts
from wikitrace.corpus_schema import InputError, Layout, WikitraceError, id_width, manifest
from wikitrace.corpus_schema.history import VersionInfo
from wikitrace.corpus_schema.layout import MINED_PATTERNS
from wikitrace.corpus_schema.records import is_judged
from wikitrace.corpus_schema.store import CorpusWriter, build_lock, check_output
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
    left_unrecorded,
    open_store,
    publish_build,
    record_left,
    resumable,
    staging,
)

from .compile import CompileLimits, Templates
from .importers import InputPlan, plan_inputs
from .importers.runs import Unlabelled, refuse_bad_records, tally
from .judge import JUDGE_OUTPUT_TOKENS, Judge
from .layers import write_layers
from .mine import Miner, patterns_of_written, read_patterns
from .pool import build_in_workers, worker_count
from .produce import Compiled, Producer, Progress
from .raw import RawLayer, input_state
from .redact import Redactor
from .report import BuildOptions, BuildReport, sources

log = logging.getLogger(__name__)


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
    report.left_out = plan.left_out_list()
    report.unmatched_labels = plan.labels.unmatched()
    if options.on_error == "stop":
        refuse_bad_records(errors)
    report.skipped = [error.as_dict() for error in errors]
    if options.redact:  # a message may quote the record it rejects: it goes to the manifest
        redactor = Redactor(options.redact_patterns, options.redact_keep)
        for skipped in report.skipped:
            skipped["message"] = redactor.text(str(skipped["message"]))
            if skipped.get("hint"):
                skipped["hint"] = redactor.text(str(skipped["hint"]))
    if good == 0:
        unlabelled = len(report.unlabelled)
        if not unlabelled:
            refuse_bad_records(errors, "no runs to build: every record is bad{more}")
        left_out = report.left_out
        nothing = (
            f"no runs to build: the {len(left_out)} file{'s' * (len(left_out) != 1)} read "
            f"hold no run ({left_out[0]['path']}: {left_out[0]['reason']})"
            if left_out
            else "no runs to build: the input holds no valid records"
        )
        judged = f" (the first: {report.unlabelled[0]['reason']})" if plan.labeller else ""
        raise InputError(
            f"no runs to build: none of the {unlabelled} runs found has a label{judged}"
            if unlabelled
            else nothing,
            path=", ".join(str(p) for p in options.inputs),
            hint="give their outcomes with --labels FILE (run or task id -> success or reward), "
            "or have a model judge them with --judge MODEL"
            if unlabelled
            else None,
        )
    return good


def _make_llm(
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
    llm = _make_llm(options, judge_llm, options.judge, JUDGE_OUTPUT_TOKENS)
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
    plan, report = _plan(options, notice)
    with build_lock(output):
        check_new_pointer(output, force=options.force)  # as it is now that we hold the lock
        store, name = begin_build(output)
        staging = store.staging(name)
        try:
            _make_version(
                options,
                plan,
                report,
                staging,
                VersionInfo(name=name),
                llm,
                progress,
                judge_llm=judge_llm,
                say=say,
                store=store,
            )
            if report.mostly_failed:
                raise BuildFailed(
                    f"{output}: not built: {report.failed_summary()}. The replies received are "
                    "cached: once the model answers, run the same command again"
                )
            publish_build(store, staging, name)
        except BaseException:
            abandon_build(store, staging, name)
            raise
        report.version = name
    # The manifest holds the time up to its own writing; the report, all of it.
    report.seconds = round(time.monotonic() - started, 3)
    return report


def check_cache_dir(options: BuildOptions) -> None:
    """Refuse a --cache-dir inside a corpus or its store of versions (check_output, as for
    -o), the corpus this command writes included, though it may not exist yet: the replies
    written there would be files its manifest does not list."""
    if options.cache_dir is None or not options.use_cache:
        return
    check_output(options.cache_dir, "--cache-dir")
    cache = Path(os.path.realpath(options.cache_dir))
    for folder in (options.output, Store(options.output).dir):
        if cache.is_relative_to(os.path.realpath(folder)):
            raise InputError(
                f"{options.cache_dir} is inside {folder}, which this command writes; keep "
                f"the cache outside the corpus and its versions, e.g. --cache-dir "
                f"{Path(os.path.abspath(options.output)).parent / 'wikitrace-cache'}",
                field="--cache-dir",
            )


class BuildFailed(WikitraceError):
    """A build most of whose compilations failed: nothing is made current (exit 1)."""


def add_runs(
    options: BuildOptions,
    *,
    deploy: bool = True,
    llm: LLM | None = None,
    judge_llm: LLM | None = None,
    progress: Progress | None = None,
    notice: Callable[[InputPlan], None] | None = None,
    say: Say | None = None,
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
        return add_version(
            options,
            deploy=deploy,
            llm=llm,
            judge_llm=judge_llm,
            progress=progress,
            notice=notice,
            say=say,
        )


def add_version(
    options: BuildOptions,
    *,
    deploy: bool = True,
    llm: LLM | None = None,
    judge_llm: LLM | None = None,
    progress: Progress | None = None,
    notice: Callable[[InputPlan], None] | None = None,
    say: Say | None = None,
) -> BuildReport:
    """add_runs for a caller that already holds the corpus's lock (wikitrace update)."""
    started = time.monotonic()
    pointer = options.output
    store = open_store(pointer)
    check_cache_dir(options)
    left = left_unrecorded(store, sources(options.inputs))
    if left is not None:
        return _finish_left(store, left, deploy=deploy, started=started)
    base = FrozenVersion.current(store)
    parent = base.name
    options = _as_built(options, base)
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
        judge_llm=judge_llm,
        say=say,
        store=store,
    )
    if made:
        reason = f"{report.runs} run{'' if report.runs == 1 else 's'} added to {parent}"
        if report.mostly_failed and deploy:
            # A model server that died mid-add: the last good version stays current.
            reason += (
                f"; not deployed: {report.failed_summary()}; run the same command again once "
                "the model answers (replies received are cached)"
            )
            deploy = False
            report.held_back = True
        store.place(staging, name, parent=parent, deploy=deploy, event="added", reason=reason)
        report.version = name
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _finish_left(store: Store, name: str, *, deploy: bool, started: float) -> BuildReport:
    """An add of the same inputs was killed once version `name` was made, before it was
    recorded: finish that one (its report is the one its manifest keeps) rather than make it
    again."""
    kept = manifest.load(store.version_path(name)).build
    known = {field.name for field in dataclasses.fields(BuildReport)} - {"roots"}
    report = BuildReport(**{key: value for key, value in kept.items() if key in known})
    report.output = str(store.pointer)
    runs = f"{report.runs} run{'' if report.runs == 1 else 's'}"
    reason = f"{runs} added to {report.parent} (an interrupted add, finished)"
    record_left(store, name, deploy=deploy, reason=reason)
    log.warning("%s was made by an add of the same inputs that was interrupted: finished it", name)
    report.version = name
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _as_built(options: BuildOptions, base: FrozenVersion) -> BuildOptions:
    """`options` for adding to `base`: its model, called as it was (the endpoint, temperature
    and limits its manifest keeps), except what the user gives anew."""
    kept = base.manifest.model_settings
    given, default = options.limits, CompileLimits()
    # A setting left at its default takes the value the base was built with.
    limits = dataclasses.replace(
        given,
        context_tokens=int(kept.get("context_tokens") or given.context_tokens)
        if given.context_tokens == default.context_tokens
        else given.context_tokens,
        max_prompt_tokens=kept.get("max_prompt_tokens")
        if given.max_prompt_tokens is None
        else given.max_prompt_tokens,
        max_output_tokens=int(kept.get("max_output_tokens") or given.max_output_tokens)
        if given.max_output_tokens == default.max_output_tokens
        else given.max_output_tokens,
    )
    temperature = BuildOptions(inputs=[], output=options.output).temperature
    return dataclasses.replace(
        options,
        model=base.manifest.model,
        api_base=options.api_base or kept.get("api_base"),
        temperature=kept.get("temperature", options.temperature)
        if options.temperature == temperature
        else options.temperature,
        limits=limits,
        reasoning_effort=options.reasoning_effort or kept.get("reasoning_effort"),
    )


def _plan(
    options: BuildOptions, notice: Callable[[InputPlan], None] | None
) -> tuple[InputPlan, BuildReport]:
    plan = plan_inputs(
        options.inputs, options.input_format, options.labels, options.success_threshold
    )
    if notice is not None:
        notice(plan)  # which format each input was read as
    report = BuildReport(output=str(options.output), model=options.model)
    report.sources = sources(options.inputs)
    report.roots = list(options.inputs)
    report.inputs = plan.describe()
    report.ignored = plan.ignored
    return plan, report


def _make_miner(base: FrozenVersion | None, folder: Path) -> Miner:
    """A miner that starts from the parent's runs: their patterns as its table keeps them, or
    read from their logs when the parent was built without mining. What it keeps on disk
    goes in `folder`."""
    if base is None:
        return Miner(folder=folder)
    known = read_patterns(base.root / MINED_PATTERNS)
    if len(known) != len(base.rows):
        known = patterns_of_written(base.rows, lambda step: base.layout())
    return Miner(known, folder=folder)


class _NothingNew(Exception):
    """Every input run is already in the parent: no version is made."""


class _Waiting(Exception):
    """A batch round deferred some calls (--batch): wait for the batches, then build again."""


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
            "--batch keeps the batches' answers in the reply cache: drop --no-cache",
            path=str(options.output),
        )
    return batch_model(model, BatchSettings(poll_seconds=options.batch_poll_seconds), say=say)


def _make_version(
    options: BuildOptions,
    plan: InputPlan,
    report: BuildReport,
    staging_dir: Path,
    version: VersionInfo,
    llm: LLM | None,
    progress: Progress | None,
    base: FrozenVersion | None = None,
    *,
    judge_llm: LLM | None = None,
    say: Say | None = None,
    store: Store | None = None,
) -> bool:
    """Check the inputs, then write a frozen version in `staging_dir` (and what the `store`
    keeps beside it: see `finish_version`); False when nothing is new. With --batch, the
    version is built in rounds (transport/batch.py): a round whose calls the cache cannot all
    answer is abandoned, its requests batched, and the build begun again once the batches are
    answered."""
    started = time.monotonic()
    watched = input_state(plan.watched)
    judge = _make_judge(options, judge_llm)
    plan.labeller = judge
    _start_call_workers(options, llm)  # while the inputs are read
    total = _check_inputs(options, plan, report)
    if judge is not None:  # its calls were all made in this first pass
        report.judged = judge.judged
        report.abstained = judge.abstained
        report.addresses_judge = list(judge.addressed)
    log.info("%d runs to build (%d records skipped)", total, len(report.skipped))
    templates = None if options.offline else Templates.load(options.prompts_dir)
    model = None if options.offline else _make_llm(options, llm)
    batch = _batching(options, model, say)
    if batch is not None:
        model = batch

    def build_round() -> None:
        """Write the version in `staging_dir` (raises _Waiting when a batch must answer first)."""
        with staging(staging_dir) as root, CorpusWriter(root) as writer:
            layout = base.layout(root) if base else Layout(root, step_width=id_width(total))
            compiled = Compiled(
                writer,
                layout,
                first_step=len(base.rows) + 1 if base else 1,
                parent_rows=base.insight_rows if base else (),
                total=total,
                fixed_width=base is not None,
            )
            producer = Producer(total, layout, report, progress, compiled)
            raw = RawLayer(options, plan, watched, writer, layout, report, producer.advance, base)
            with contextlib.ExitStack() as spills:  # their spill files go, even when interrupted
                spills.enter_context(contextlib.closing(compiled))
                spills.enter_context(contextlib.closing(raw))
                miner = _make_miner(base, root.parent) if options.mine else None
                if miner is not None:
                    spills.enter_context(contextlib.closing(miner))
                runs = raw.runs() if miner is None else miner.watch(raw.runs(), is_judged)
                workers = worker_count(options.workers, total) if model is None else 1
                if workers > 1:  # the same work (and corpus) on other cores
                    build_in_workers(options, raw, producer, miner, workers)
                elif model is None or templates is None:
                    producer.offline(runs)
                else:
                    asyncio.run(
                        producer.with_model(
                            runs, model, templates, options.limits, options.concurrency
                        )
                    )
                if base is not None and not raw.rows:
                    raise _NothingNew
                if batch is not None and not batch.finish_round():
                    raise _Waiting(producer.deferred)
                report.seconds = round(time.monotonic() - started, 3)
                write_layers(
                    writer,
                    layout,
                    raw.rows,
                    raw.tasks,
                    producer.results,
                    report,
                    version,
                    stats=producer.stats,
                    redactor=raw.redactor,
                    templates=templates,
                    base=base,
                    model_settings=options.model_settings(),
                    miner=miner,
                    store=store,
                    judge_stats=judge.stats if judge else None,
                    judge_redactor=judge.redactor if judge else None,
                )

    # What a batch round's counts start from, when it must be built again.
    checked = copy.deepcopy(report) if batch is not None else None
    try:
        return _in_rounds(build_round, report, batch, checked, say)
    finally:
        close(model)


def _in_rounds(
    build_round: Callable[[], None],
    report: BuildReport,
    batch: BatchLLM | None,
    checked: BuildReport | None,
    say: Say | None,
) -> bool:
    """Build the version, in rounds when a batch must answer first; False when nothing is new."""
    while True:
        try:
            if batch is not None:
                batch.start_round()
            build_round()
        except _NothingNew:
            return False
        except _Waiting as waiting:
            assert batch is not None and checked is not None
            (say or log.info)(f"{waiting} runs wait for answers from the provider's batch API")
            try:
                asyncio.run(batch.settle())
            finally:
                batch.discard()
            for name, value in vars(checked).items():
                setattr(report, name, copy.deepcopy(value))
            continue
        except BaseException:
            if batch is not None:
                batch.discard()
            raise
        if batch is not None:
            report.batches = batch.submitted
        return True
