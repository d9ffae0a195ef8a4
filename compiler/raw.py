"""The raw layer of a version: each valid run checked (stages.CheckedRuns) redacted, left
out when the parent holds it, numbered, and written as logged with its metadata and turn index."""

from __future__ import annotations

import pickle
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from wikitrace.corpus_schema import Layout, RunRecord, indexes, raw_pages, render
from wikitrace.corpus_schema.identity import digest, fingerprint, given_attempt, turn_log
from wikitrace.corpus_schema.records import RawHeader, is_judged, repo_json
from wikitrace.corpus_schema.spill import JsonLines, RunRows
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.corpus_schema.turns import summarize
from wikitrace.corpus_schema.writing import CorpusWriter
from wikitrace.versions import FrozenVersion

from .importers.runs import FormatCounts, SeenRuns, SourceRun, tally
from .redact import Redactor
from .report import BuildOptions, corpus_path
from .signals import failed_calls
from .stages import CheckedRuns, RawCounts, kept_run


class OffLoop(Protocol):
    """Where a model build's worker processes write each new run's raw files
    (model_farm.OffLoop)."""

    def raw(self, step: int, attempt: int, source: str, data: bytes, redacted: bool) -> None: ...


class RawLayer:
    """Writes each new run's raw files and keeps the row the indexes need."""

    def __init__(
        self,
        options: BuildOptions,
        checked: CheckedRuns,
        writer: CorpusWriter,
        layout: Layout,
        advance: Callable[[], None],
        base: FrozenVersion | None = None,
    ) -> None:
        self.options = options
        self.checked = checked
        self.writer = writer
        self.layout = layout
        self.advance = advance
        """Called for a run left out (the parent holds it): it counts as done."""
        self.base = base
        self.rows = RunRows(writer.root.parent)
        """The new runs' rows, on disk: close() removes them."""
        self.tasks = JsonLines(writer.root.parent, "tasks")
        """The new runs' tasks as their pages hold them, whole (a row's is cut), on disk."""
        self.redactor = (
            Redactor(options.redact_patterns, options.redact_keep) if options.redact else None
        )
        self.attempts: Counter[TaskKey] = Counter(base.attempts) if base else Counter()
        self.source_names = SourceNames(options.inputs)
        self._step = 0
        """The last step numbered (`number`)."""
        self._seen = SeenRuns()
        self._runs = self._successes = self._failures = self._duplicates = 0
        self._formats: FormatCounts = {}
        self.off_loop: OffLoop | None = None
        """Where a model build's worker processes write each run's files (model_farm.py);
        None: written here."""

    def counts(self) -> RawCounts:
        """What was written so far, and left out as held already."""
        return RawCounts(
            self._runs, self._successes, self._failures, self._duplicates, self._formats
        )

    def close(self) -> None:
        self.rows.close()
        self.tasks.close()

    def runs(self) -> Iterator[tuple[int, RunRecord]]:
        """Each run checked, numbered, after its raw layer is written (or handed to the
        `off_loop` to write)."""
        for kept in self.pickled_sources():
            item = kept_run(kept)
            data, record = redacted(self.redactor, item.data, item.record)
            # Interned: mining holds these for every run, and runs share them.
            record.task_id = sys.intern(record.task_id)
            if record.task_type:
                record.task_type = sys.intern(record.task_type)
            if record.origin:
                record.origin = sys.intern(record.origin)
            log_bytes, offsets = turn_log(data["turns"])
            step = self.number(run_key(record, log_bytes))
            if step is None:
                continue
            if self.off_loop is None:
                yield step, self.write(step, item, data, record, log_bytes, offsets)
                continue
            attempt = self.attempt(record.task_key, record.metadata.get("attempt"))
            source = self.source_names(item.path, item.line, item.at)
            changed = data is not item.data
            payload = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL) if changed else kept
            self.off_loop.raw(step, attempt, source, payload, changed)
            self.add(
                run_row(step, record), raw_pages.page_task(record.task), item.format, record.success
            )
            yield step, record

    def pickled_sources(self) -> Iterator[bytes]:
        """The runs checked, before redaction, each pickled as kept (stages.CheckedRuns.pickled,
        read by stages.kept_run); `number` numbers them in this order."""
        self._restart()
        yield from self.checked.pickled()

    def _restart(self) -> None:
        self._step = len(self.base.rows) if self.base else 0
        self._seen = SeenRuns()

    def number(self, key: str) -> int | None:
        """The step of the next run read, known by its fingerprint `key` (`run_key`); None
        for a run the parent holds or one this input holds twice (the same file given
        twice, a log copied into two folders), which is written once: it is counted, and
        done."""
        if self._seen.again(key) or (self.base and key in self.base.fingerprints):
            self._duplicates += 1
            self.advance()
            return None
        self._step += 1
        return self._step

    def attempt(self, task: TaskKey, given: Any) -> int:
        """The attempt number of a new run of `task`, in step order: the one its log gives
        (`given`, its metadata's `attempt`), else its count among the task's runs."""
        self.attempts[task] += 1
        return (
            given if isinstance(given, int) and not isinstance(given, bool) else self.attempts[task]
        )

    def write(
        self,
        step: int,
        item: SourceRun,
        data: dict[str, Any],
        record: RunRecord,
        log_bytes: bytes,
        offsets: list[int],
    ) -> RunRecord:
        attempt = self.attempt(record.task_key, record.metadata.get("attempt"))
        source = self.source_names(item.path, item.line, item.at)
        self.writer.write_files(
            raw_files(self.layout, step, attempt, source, data, record, log_bytes, offsets)
        )
        self.add(
            run_row(step, record), raw_pages.page_task(record.task), item.format, record.success
        )
        return record

    def add(self, row: indexes.RunRow, task: str, input_format: str, success: bool) -> None:
        """A new run whose raw files are written: its row, its task as its page holds it
        (raw_pages.page_task), and its counts."""
        self.rows.append(row)
        self.tasks.append(task)
        self._runs += 1
        tally(self._formats, input_format, "runs")
        tally(self._formats, input_format, "successes" if success else "failures")
        if success:
            self._successes += 1
        else:
            self._failures += 1


def redacted(
    redactor: Redactor | None, data: dict[str, Any], record: RunRecord
) -> tuple[dict[str, Any], RunRecord]:
    """A run as the corpus keeps it: its JSON with its secrets replaced, and its record (the
    one given when nothing was redacted)."""
    if redactor is None:
        return data, record
    clean = redactor.value(data)
    if clean is data:  # nothing to redact
        return data, record
    return clean, RunRecord.model_validate(clean)


def run_key(record: RunRecord, log_bytes: bytes) -> str:
    """A run's identity across versions (corpus_schema/identity.py's fingerprint), from its
    redacted record and its turn log as written (turn_log)."""
    return fingerprint(
        record.task_id, record.outcome, digest(log_bytes), given_attempt(record.metadata)
    )


class SourceNames:
    """Where each run of one build came from, as the corpus names it (report.corpus_path):
    each input file's name found once. Finding it resolves the file's path and the inputs',
    some system calls a folder of each, and a file holds many runs (a JSONL of thousands)."""

    KEPT = 4096
    """Files' names kept at once: runs of one file come together."""

    def __init__(self, inputs: Sequence[Path]) -> None:
        self._inputs = [root.resolve() for root in inputs]
        self._names: dict[str, str] = {}

    def __call__(self, path: str, line: int | None, at: str | None) -> str:
        where = self._names.get(path)
        if where is None:
            if len(self._names) >= self.KEPT:
                self._names.clear()
            where = self._names[path] = corpus_path(path, self._inputs, resolved_inputs=True)
        if line is not None:
            where += f":{line}"
        if at is not None:
            where += f":{at}"
        return where


def raw_files(
    layout: Layout,
    step: int,
    attempt: int,
    source: str,
    data: dict[str, Any],
    record: RunRecord,
    log_bytes: bytes,
    offsets: list[int],
) -> list[tuple[str, str | bytes]]:
    """A new run's raw files: its metadata page, its turns as logged (`log_bytes` and the
    `offsets` identity.turn_log gives) and their index."""
    header = RawHeader(
        step=layout.step(step),
        task_id=record.task_id,
        task_type=record.task_type,
        attempt=attempt,
        outcome=record.outcome,
        turns=len(record.turns),
        origin=record.origin,
        project=record.project,
        kind=record.kind,
        kind_basis=record.kind_basis,
        repo=record.repo,
        source=source,
        turns_file=layout.raw_turns_rel(step),
        metadata=record.metadata,
    )
    marks = failed_calls(record.turns)
    summaries = [summarize(turn, failed) for turn, failed in zip(data["turns"], marks, strict=True)]
    return [
        (layout.raw_metadata_rel(step), raw_pages.raw_metadata(header, record.task)),
        (layout.raw_turns_rel(step), log_bytes),
        (layout.raw_turn_index_rel(step), raw_pages.turn_index(offsets, summaries)),
    ]


def run_row(step: int, record: RunRecord) -> indexes.RunRow:
    """A new run's row in the indexes (its task cut short: render.task_preview)."""
    return indexes.RunRow(
        step=step,
        task_id=record.task_id,
        task_type=record.task_type,
        outcome=record.outcome,
        turns=len(record.turns),
        task=render.task_preview(record.task),
        judged=is_judged(record.metadata),
        attempt=given_attempt(record.metadata),
        project=record.project,
        kind=record.kind,
        origin=record.origin,
        repo=repo_json(record.repo),
    )
