"""`wikitrace add`: the runs a corpus's current version lacks, compiled into a new version
beside it with the model and settings its manifest keeps (`add_runs`, `add_version`); then the
lessons it added compared with the older ones of their scope (`supersede_added`,
compiler/supersede.py). The stages themselves are the build's (build.py)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from wikitrace.corpus_schema import manifest
from wikitrace.corpus_schema.history import VersionInfo
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.setting_fields import recorded_defaults
from wikitrace.transport.batch import Say
from wikitrace.transport.llm import (
    LLM,
)
from wikitrace.versions import (
    FrozenVersion,
    Store,
    left_unrecorded,
    open_store,
    record_left,
)

from .ask import Asker
from .build import check_cache_dir, make_llm, make_version, plan_inputs
from .compile import CompileLimits
from .importers import InputPlan
from .judge import JUDGE_OUTPUT_TOKENS
from .produce import Progress
from .report import BuildOptions, BuildReport, sources
from .supersede import PairJudge, finish_interrupted, supersede_after_add

log = logging.getLogger(__name__)


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
    supersede: bool = True,
) -> BuildReport:
    """add_runs for a caller that already holds the corpus's lock (wikitrace update). With
    `supersede`, the version's lessons are then compared with the older ones
    (`supersede_added`); `wikitrace update` does that once it deploys the version."""
    started = time.monotonic()
    pointer = options.output
    store = open_store(pointer)
    check_cache_dir(options)
    finish_interrupted(store, deploy=deploy)
    left = left_unrecorded(store, sources(options.inputs))
    if left is not None:
        return _finish_left(store, left, deploy=deploy, started=started)
    with FrozenVersion.held(store) as base:  # checked as linked: layers.py
        parent = base.name
        built = _as_built(options, base.manifest)
        planned = plan_inputs(built, notice)
        name = store.next_name()
        staging = store.staging(name)
        made = make_version(
            planned,
            staging,
            VersionInfo(name=name, parent=parent),
            llm,
            progress,
            base,
            judge_llm=judge_llm,
            say=say,
            store=store,
        )
    report = made.report
    if made.finished is None:  # nothing new
        return dataclasses.replace(report, seconds=round(time.monotonic() - started, 3))
    reason = f"{report.runs} run{'' if report.runs == 1 else 's'} added to {parent}"
    held_back = report.mostly_failed and deploy
    if held_back:
        # A model server that died mid-add: the last good version stays current.
        reason += (
            f"; not deployed: {report.failed_summary()}; run the same command again once "
            "the model answers (replies received are cached)"
        )
    store.place(
        staging, name, parent=parent, deploy=deploy and not held_back, event="added", reason=reason
    )
    review = None
    if supersede and not held_back:
        judge = _pair_judge(built, llm, judge_llm)
        review = supersede_after_add(
            store, name, judge, deploy=deploy, offline=built.offline
        ).as_dict()
    return dataclasses.replace(
        report,
        version=name,
        held_back=held_back,
        supersede=review,
        seconds=round(time.monotonic() - started, 3),
    )


def supersede_added(
    store: Store,
    name: str,
    options: BuildOptions,
    *,
    llm: LLM | None = None,
    judge_llm: LLM | None = None,
    deploy: bool = True,
) -> dict[str, Any]:
    """Compare the lessons version `name` added with the older ones of their scope, and retire
    those it supersedes in a new version (compiler/supersede.py; the caller holds the lock):
    judged by the --judge model when given, else by the corpus's own, else only flagged.
    What was found and done (`Review.as_dict`)."""
    built = _as_built(options, manifest.load(store.version_path(name)))
    judge = _pair_judge(built, llm, judge_llm)
    return supersede_after_add(store, name, judge, deploy=deploy, offline=built.offline).as_dict()


def _pair_judge(options: BuildOptions, llm: LLM | None, judge_llm: LLM | None) -> PairJudge | None:
    """What judges whether an added lesson supersedes an older one: the --judge model when
    given, else the corpus's own; None for an offline corpus (likely pairs are flagged)."""
    if options.judge is not None:
        model, given = options.judge, judge_llm
    elif not options.offline:
        model, given = options.model, llm
    else:
        return None
    asker = Asker(make_llm(options, given, model, JUDGE_OUTPUT_TOKENS), options.prompts_dir)
    return PairJudge(asker)


def _finish_left(store: Store, name: str, *, deploy: bool, started: float) -> BuildReport:
    """An add of the same inputs was killed once version `name` was made, before it was
    recorded: finish that one (its report is the one its manifest keeps) rather than make it
    again."""
    kept = manifest.load(store.version_path(name)).build
    known = {field.name for field in dataclasses.fields(BuildReport)} - {"roots"}
    fields = {key: value for key, value in kept.items() if key in known}
    report = BuildReport(**{**fields, "output": str(store.pointer)})
    runs = f"{report.runs} run{'' if report.runs == 1 else 's'}"
    reason = f"{runs} added to {report.parent} (an interrupted add, finished)"
    record_left(store, name, deploy=deploy, reason=reason)
    log.warning("%s was made by an add of the same inputs that was interrupted: finished it", name)
    return dataclasses.replace(report, version=name, seconds=round(time.monotonic() - started, 3))


def _as_built(options: BuildOptions, base: manifest.Manifest) -> BuildOptions:
    """`options` for adding to the version of manifest `base`: its model, called as it was
    (every setting its manifest records: corpus_schema/setting_fields.py, `recorded`), except
    what the user gives anew."""
    kept = base.model_settings
    in_limits = {field.name for field in dataclasses.fields(CompileLimits)}
    limits: dict[str, Any] = {}
    others: dict[str, Any] = {}
    for name, default in recorded_defaults().items():
        in_limit = name in in_limits
        given = getattr(options.limits if in_limit else options, name)
        recorded = kept.get(name)
        # A setting left at its default takes the value the base was built with.
        (limits if in_limit else others)[name] = (
            recorded if given == default and recorded is not None else given
        )
    return dataclasses.replace(
        options, model=base.model, limits=dataclasses.replace(options.limits, **limits), **others
    )
