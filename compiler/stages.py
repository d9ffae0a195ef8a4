"""The values a build's stages hand on (compiler/build.py runs them): what is read (`Planned`),
the runs checked (`ReadInputs`), the runs compiled (`CompiledRuns`, or `NothingNew`)
and the layers written (`Layers`); the report (report.py's `BuildReport`) is assembled from them
at the end (`assemble_report`)."""

from __future__ import annotations

import pickle
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from wikitrace.corpus_schema import InputError, Layout, RunRecord
from wikitrace.corpus_schema.history import Changes
from wikitrace.corpus_schema.records import CompiledBy, InsightHeader
from wikitrace.corpus_schema.spill import InsightRows, JsonLines, RunRows
from wikitrace.corpus_schema.writing import CorpusWriter, spill_file

from .compile import CompileStats
from .importers import InputPlan
from .importers.runs import FormatCounts, SourceRun, Unlabelled, refuse_bad_records, tally
from .judge import Judge
from .mine import MinedPage, Miner
from .produce import Compiled
from .redact import Redactor
from .report import BuildOptions, BuildReport, sources

_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Planned:
    """Stage one, plan: the files to read, each with its format, and how they were found."""

    options: BuildOptions
    plan: InputPlan
    inputs: list[str]
    """What is read, a line per format (InputPlan.describe)."""
    sources: list[str]
    """Digests of the input paths (report.sources)."""


def plan_build(options: BuildOptions) -> Planned:
    """The inputs resolved into files to read (raises InputError when there are none)."""
    from .importers import plan_inputs

    plan = plan_inputs(
        options.inputs, options.input_format, options.labels, options.success_threshold
    )
    return Planned(options, plan, plan.describe(), sources(options.inputs))


class CheckedRuns:
    """The valid runs of the input in the order read, each kept whole (its JSON and where it
    came from) in an unnamed temporary file in `folder`: the input is read once, and what was
    checked is what is built, and what each round of a --batch pass compiles. A run's record
    is made again from its JSON as it is read back (`kept_run`), as the importer made it
    (importers.runs.validate): validating it costs a fifth of unpickling a record."""

    def __init__(self, folder: Path) -> None:
        self._file = spill_file(folder, "runs")
        self._end = 0
        self.count = 0

    def append(self, run: SourceRun) -> None:
        kept = (run.path, run.line, run.data, run.at, run.format)
        data = pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.seek(self._end)
        self._file.write(_LENGTH.pack(len(data)) + data)
        self._end += _LENGTH.size + len(data)
        self.count += 1

    def __iter__(self) -> Iterator[SourceRun]:
        for data in self.pickled():
            yield kept_run(data)

    def pickled(self) -> Iterator[bytes]:
        """Each run as kept: for a worker process to read (`kept_run`; compiler/workers.py)."""
        at = 0
        while at < self._end:
            self._file.seek(at)
            (length,) = _LENGTH.unpack(self._file.read(_LENGTH.size))
            data = self._file.read(length)
            at += _LENGTH.size + length
            yield data

    def close(self) -> None:
        self._file.close()


def kept_run(data: bytes, *, head_only: bool = False) -> SourceRun:
    """A run as CheckedRuns keeps it (`CheckedRuns.pickled`), its record made again; with
    `head_only`, a record of all but its turns (`record_head`)."""
    path, line, run, at, input_format = pickle.loads(data)
    record = record_head(run) if head_only else RunRecord.model_validate(run)
    return SourceRun(path, line, run, record, at, input_format)


def record_head(run: dict[str, Any]) -> RunRecord:
    """A run's record without its turns (its `turns` empty): what its fingerprint and its
    task need (raw.run_key), the checks of its other fields made as they are for the whole
    record, at a small part of the cost of validating every turn."""
    return RunRecord.model_validate({**run, "turns": []})


@dataclass(frozen=True)
class Judged:
    """What the --judge model did while the input was read (all of its calls)."""

    judged: int
    abstained: int
    addressed: list[dict[str, Any]]
    stats: CompileStats
    redactor: Redactor | None

    @classmethod
    def of(cls, judge: Judge | None) -> Judged | None:
        if judge is None:
            return None
        return cls(
            judge.judged, judge.abstained, list(judge.addressed), judge.stats, judge.redactor
        )


@dataclass(frozen=True)
class ReadInputs:
    """Stage two, read: every record of the input read once and checked before anything is
    written; the valid runs kept (`runs`), the rest listed."""

    runs: CheckedRuns
    skipped: list[dict[str, Any]]
    """Bad records left out (--on-error skip), their messages redacted."""
    unlabelled: list[dict[str, Any]]
    unlabelled_formats: FormatCounts
    """Per format, the unlabelled runs left out (the other counts are the raw layer's)."""
    left_out: list[dict[str, str]]
    unmatched_labels: list[str]
    judged: Judged | None

    @property
    def total(self) -> int:
        return self.runs.count


def read_inputs(
    options: BuildOptions, plan: InputPlan, folder: Path, judge: Judge | None
) -> ReadInputs:
    """Read every record once (the `judge` labelling what nothing else labels), keeping the
    valid runs in `folder`; raises InputError for a bad record (--on-error stop) or when no
    run is left to build."""
    plan.labeller = judge
    runs = CheckedRuns(folder)
    try:
        errors: list[InputError] = []
        unlabelled: list[dict[str, Any]] = []
        formats: FormatCounts = {}
        for item in plan.items():
            if isinstance(item, InputError):
                errors.append(item)
            elif isinstance(item, Unlabelled):
                unlabelled.append(item.as_dict())
                tally(formats, item.format, "unlabelled")
            else:
                runs.append(item)
        left_out = plan.left_out_list()
        if options.on_error == "stop":
            refuse_bad_records(errors)
        if runs.count == 0:
            _refuse_nothing(options, plan, errors, unlabelled, left_out)
    except BaseException:
        runs.close()
        raise
    return ReadInputs(
        runs,
        skipped=_skipped(options, errors),
        unlabelled=unlabelled,
        unlabelled_formats=formats,
        left_out=left_out,
        unmatched_labels=plan.labels.unmatched(),
        judged=Judged.of(judge),
    )


def _skipped(options: BuildOptions, errors: list[InputError]) -> list[dict[str, Any]]:
    """The bad records as the report lists them; a message may quote the record it rejects,
    and the report goes to the manifest: redacted."""
    skipped = [error.as_dict() for error in errors]
    if options.redact:
        redactor = Redactor(options.redact_patterns, options.redact_keep)
        for item in skipped:
            item["message"] = redactor.text(str(item["message"]))
            if item.get("hint"):
                item["hint"] = redactor.text(str(item["hint"]))
    return skipped


def _refuse_nothing(
    options: BuildOptions,
    plan: InputPlan,
    errors: list[InputError],
    unlabelled: list[dict[str, Any]],
    left_out: list[dict[str, str]],
) -> None:
    """Raise the InputError of an input with no run to build, saying why."""
    if not unlabelled:
        refuse_bad_records(errors, "no runs to build: every record is bad{more}")
    nothing = (
        f"no runs to build: the {len(left_out)} file{'s' * (len(left_out) != 1)} read "
        f"hold no run ({left_out[0]['path']}: {left_out[0]['reason']})"
        if left_out
        else "no runs to build: the input holds no valid records"
    )
    judged = f" (the first: {unlabelled[0]['reason']})" if unlabelled and plan.labeller else ""
    raise InputError(
        f"no runs to build: none of the {len(unlabelled)} runs found has a label{judged}"
        if unlabelled
        else nothing,
        path=", ".join(str(p) for p in options.inputs),
        hint="give their outcomes with --labels FILE (run or task id -> success or reward), "
        "or have a model judge them with --judge MODEL"
        if unlabelled
        else None,
    )


@dataclass(frozen=True)
class RawCounts:
    """The runs the raw layer wrote, and those it left out as held already."""

    runs: int = 0
    successes: int = 0
    failures: int = 0
    duplicates: int = 0
    """Runs the parent holds, or the input holds twice: written once, or not at all."""
    formats: FormatCounts = field(default_factory=dict)
    """Per input format: runs, successes, failures."""


@dataclass(frozen=True)
class CompiledRuns:
    """Stage three, compile: each new run's raw layer written (redacted) and compiled."""

    rows: RunRows
    """The new runs' rows, in step order."""
    tasks: JsonLines
    """Their tasks, as their pages hold them."""
    compiled: Compiled
    stats: CompileStats
    redactor: Redactor | None
    counts: RawCounts
    failed: list[dict[str, str]]
    """Runs whose compilation failed: step, task_id, error, kind."""
    miner: Miner | None
    """What mining observed of the runs (None: --no-mine)."""
    premined: Premined | None = None
    """Mining done while the last calls were in flight (a model build's), or None."""


@dataclass(frozen=True)
class Premined:
    """A version's mining, done from its runs alone once every run is read (layers_mined.premine):
    its new lessons numbered from 1, as if the model drew no insight (write_layers numbers them
    after the model's), and the lesson of each new divergence made, its id not set."""

    pages: list[MinedPage]
    mining: dict[str, Any]
    """What mining tried and found (MiningReport.as_dict)."""
    divergences: list[tuple[InsightHeader, str]]
    """Each new divergence's header and guideline, in the order of `pages`: held until
    write_layers writes their pages, then cleared (a model build holds them all at once, where
    an offline build makes each as its page is written)."""


@dataclass(frozen=True)
class NothingNew:
    """Every input run is already in the parent: no version is made."""

    counts: RawCounts
    """The runs left out as held already."""


@dataclass(frozen=True)
class Layers:
    """Stage four, write layers: every page of the version but its indexes, catalog and
    manifest, and the rows those are made from."""

    layout: Layout
    """The version's layout, its insight ids as wide as they were written."""
    all_rows: RunRows
    """The parent's rows, then the new runs'."""
    insight_rows: InsightRows
    """The parent's insights, then the model's, then the new mined lessons."""
    insights: int
    """Insights the version adds."""
    mined: int
    mining: dict[str, Any] | None
    changes: Changes
    compiled_by: CompiledBy
    prompts: dict[str, str]
    renamed: set[str] = field(default_factory=set)
    """The parent's compilation pages (and data files) written anew only to name the mined
    lessons that rest on their runs: what the catalog says of those runs is unchanged."""
    pending: PagesDue | None = None
    """The compilation pages a build's workers still write (layers.PagesLater), listed before
    the manifest."""


class PagesDue(Protocol):
    """Pages still being written by others (layers.PagesLater)."""

    def list_in(self, writer: CorpusWriter) -> None:
        """Wait for them, and list them in `writer`."""

    def close(self) -> None:
        """Let go of what is kept of them (a build that failed lists none)."""


def assemble_report(
    planned: Planned,
    read: ReadInputs,
    counts: RawCounts,
    built: tuple[CompiledRuns, Layers] | None = None,
    *,
    parent: str | None = None,
    seconds: float = 0.0,
) -> BuildReport:
    """The report of a build from its stages' values: what was planned and read, the raw
    layer's `counts`, and, for a version `built`, its compilations and layers (the calls,
    tokens and secrets redacted of the compile model and the judge are counted only then)."""
    judged = read.judged
    return BuildReport(
        output=str(planned.options.output),
        model=planned.options.model,
        runs=counts.runs,
        successes=counts.successes,
        failures=counts.failures,
        skipped=read.skipped,
        unlabelled=read.unlabelled,
        judged=judged.judged if judged else 0,
        abstained=judged.abstained if judged else 0,
        addresses_judge=judged.addressed if judged else [],
        inputs=planned.inputs,
        sources=planned.sources,
        roots=list(planned.options.inputs),
        formats=_formats(read, counts),
        ignored=planned.plan.ignored,
        left_out=read.left_out,
        parent=parent,
        duplicates=counts.duplicates,
        unmatched_labels=read.unmatched_labels,
        seconds=seconds,
        **(_built(*built, judged) if built else {}),
    )


def _formats(read: ReadInputs, counts: RawCounts) -> FormatCounts:
    """Per format, the unlabelled runs the input held, then the runs written (in the order
    each format was first met)."""
    formats = {name: dict(row) for name, row in read.unlabelled_formats.items()}
    for name, row in counts.formats.items():
        kept = formats.setdefault(name, {"runs": 0, "successes": 0, "failures": 0, "unlabelled": 0})
        for key in ("runs", "successes", "failures"):
            kept[key] += row[key]
    return formats


def _built(compiled: CompiledRuns, layers: Layers, judged: Judged | None) -> dict[str, Any]:
    """The report's fields of a version made: its compilations and insights, the calls of the
    compile model and the judge (in the totals, and the judge's apart), the secrets both
    redacted."""
    stats = compiled.stats
    results = compiled.compiled
    return {
        "compiled": results.count,
        "insights": layers.insights,
        "unverified_quotes": results.unverified_quotes,
        "read_only_insights": results.read_only_insights,
        **_calls(stats, judged.stats if judged else None),
        "invalid_retries": stats.invalid_retries,
        "quote_repairs": stats.quote_repairs,
        "cut_prompts": stats.cut_prompts,
        "addresses_compiler": sorted(stats.addressed, key=lambda found: int(found["step"])),
        "failed": sorted(compiled.failed, key=lambda item: str(item["step"])),
        # A judged run reaches the raw layer redacted already: its secrets are the judge's.
        **_redacted(compiled.redactor, judged.redactor if judged else None),
        "mined": layers.mined,
        "mining": layers.mining,
    }


def _calls(stats: CompileStats, judge_stats: CompileStats | None) -> dict[str, Any]:
    """Calls, tokens and cost of the compile calls and the judge's (in the totals too)."""
    every = [stats] if judge_stats is None else [stats, judge_stats]
    known = all(each.cost_known for each in every)
    calls: dict[str, Any] = {
        "llm_calls": sum(each.calls - each.cache_hits for each in every),
        "cache_hits": sum(each.cache_hits for each in every),
        "http_attempts": sum(each.http_attempts for each in every),
        "prompt_tokens": sum(each.prompt_tokens for each in every),
        "completion_tokens": sum(each.completion_tokens for each in every),
        "cost_usd": round(sum(each.cost_usd for each in every), 6) if known else None,
    }
    if judge_stats is not None:
        calls["judge_calls"] = judge_stats.calls - judge_stats.cache_hits
        calls["judge_cache_hits"] = judge_stats.cache_hits
        calls["judge_prompt_tokens"] = judge_stats.prompt_tokens
        calls["judge_completion_tokens"] = judge_stats.completion_tokens
    return calls


def _redacted(*redactors: Redactor | None) -> dict[str, Any]:
    """The secrets the redactors replaced, per kind, and per kind where they were."""
    redacted: Counter[str] = Counter()
    places: Counter[tuple[str, str]] = Counter()
    for redactor in redactors:
        if redactor is not None:
            redacted.update(redactor.counts)
            places.update(redactor.places)
    where: dict[str, dict[str, int]] = {}
    for (kind, place), count in sorted(places.items()):
        where.setdefault(kind, {})[place] = count
    return {"redactions": dict(sorted(redacted.items())), "redacted_where": where}
