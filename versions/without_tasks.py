"""A leave-one-task-out view: a version as a frozen, verifiable corpus of its own with nothing of
some tasks in any layer, to mount while an agent solves those tasks in an evaluation.

Left out: the tasks' raw runs, their compilations, the insights drawn from them, and every
decision record (gate/) that names one of the tasks. Everything else is copied from the version,
read-only (never hard-linked: a write to the view must not reach the version; a file system that
clones copies them without writing the bytes); the indexes, tools and manifest are written
afresh. Steps and insights keep their ids, so the view's numbering has gaps where the tasks were.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from wikitrace.corpus_schema import CorpusError, InputError, Layout, compilation_pages, read
from wikitrace.corpus_schema.destination import check_destination, check_output
from wikitrace.corpus_schema.history import Changes, VersionInfo
from wikitrace.corpus_schema.indexes import InsightRow, RunRow
from wikitrace.corpus_schema.layout import (
    GATE_DIR,
    MINED_PATTERNS_PAGE_RUNS,
    MINED_TESTS,
    mined_patterns_files,
    mined_patterns_page,
    parse_insight,
    parse_step,
)
from wikitrace.corpus_schema.records import CompilationHeader
from wikitrace.corpus_schema.writing import CorpusWriter, remove_tree

from .finish import finish_version, staging
from .frozen import FrozenVersion


@dataclass
class ViewReport:
    dest: str
    version: str
    tasks: list[str]
    runs_left_out: int = 0
    insights_left_out: list[str] = field(default_factory=list)
    records_left_out: list[str] = field(default_factory=list)
    runs: int = 0
    insights: int = 0


def leave_out(
    base: FrozenVersion,
    dest: Path,
    tasks: Sequence[str],
    *,
    force: bool,
    probe: bool = False,
) -> ViewReport:
    """Write the view of `base` without `tasks` at `dest` (a new folder), never inside a
    corpus or its store (`check_output`) unless it is a `probe` memory, which an update
    keeps in the store's probes/ folder while its runs last. Its files are copies, read-only,
    never the version's own: whoever is handed the view cannot change the corpus."""
    _check_tasks(base, tasks)
    if not probe:
        check_output(dest)
    check_destination(dest, force=force)
    excluded = set(tasks)
    layout = base.layout(dest)
    gone = _left_out(base, layout, excluded)
    rows = [row for row in base.rows if row.step not in gone.steps]
    insight_rows = [row for row in base.insight_rows if row.number not in gone.numbers]
    report = ViewReport(
        dest=str(dest),
        version=base.name,
        tasks=sorted(excluded),
        runs_left_out=len(gone.steps),
        insights_left_out=gone.insights,
        records_left_out=sorted(r for r in gone.records if r.endswith(".md")),
        runs=len(rows),
        insights=len(insight_rows),
    )
    partial = dest.with_name(f".{dest.name}.partial")
    with staging(partial) as root, CorpusWriter(root) as writer:
        _copy_kept(base, layout, writer, gone)
        _finish_view(base, writer, root, rows, insight_rows, report)
    if dest.exists() or dest.is_symlink():
        remove_tree(dest)  # a view replaced with --force (check_destination allowed it)
    os.replace(partial, dest)
    return report


def _check_tasks(base: FrozenVersion, tasks: Sequence[str]) -> None:
    """Refuse a task the version has no run of (named by its id, or its source and id)."""
    known = {name for row in base.rows for name in (row.task_id, row.task_key.name)}
    unknown = [task for task in tasks if task not in known]
    if unknown:
        raise InputError(
            f"no task {unknown[0]!r} in {base.name}",
            field="--exclude-task",
            hint="task ids are listed in raw/_index.md",
        )


@dataclass
class _LeftOut:
    """What a view leaves out of its version."""

    steps: set[int]
    """The tasks' runs."""
    numbers: set[int]
    """The insights drawn from them, or mined on them."""
    insights: list[str]
    """The same insights, as ids, in order."""
    renamed: set[int]
    """Runs left in that a left-out mined lesson rests on: their compilations are written
    anew, naming it no more."""
    records: set[str]
    """Decision records (and the runs beside them) that name a task or a left-out insight."""
    files: set[str]
    """Every file of the version not copied into the view."""


def _left_out(base: FrozenVersion, layout: Layout, excluded: set[str]) -> _LeftOut:
    steps = {row.step for row in base.rows if row.task_key.named_in(excluded)}
    types = {row.task_type for row in base.rows if row.step in steps}
    numbers = {
        row.number
        for row in base.insight_rows
        if row.source_step in steps or _mined_on(base, layout, row, steps, types)
    }
    insights = sorted(layout.insight(number) for number in numbers)
    renamed = _renamed(base, layout, insights, steps)
    # A decision record names a task by its id (a gate's pool has no sources): one that names
    # a left-out task's id goes too, whichever source's task of that id it meant.
    ids = {row.task_id for row in base.rows if row.step in steps}
    records = _records_naming(base, excluded | ids | set(insights))
    files = _files_gone(base, layout, steps, insights, renamed) | records
    return _LeftOut(steps, numbers, insights, renamed, records, files)


def _renamed(
    base: FrozenVersion, layout: Layout, insights: list[str], gone_steps: set[int]
) -> set[int]:
    """The runs left in that a left-out mined lesson rests on, and that have a compilation."""
    naming = {
        parse_step(step)
        for ident in insights
        for step in base.insights[ident].header.rests_on
        if base.insights[ident].header.mined is not None
    } - gone_steps
    return {step for step in naming if layout.compilation_rel(step) in base.manifest.files}


def _files_gone(
    base: FrozenVersion,
    layout: Layout,
    gone_steps: set[int],
    insights: list[str],
    renamed: set[int],
) -> set[str]:
    """The files of left-out runs and insights, and those written anew (the mined-pattern
    table, the renamed compilations)."""
    # The pattern table names every run: written anew without them. The tests of each task
    # type counted them: left out (an add to the view counts every type anew).
    gone_files: set[str] = {MINED_TESTS, *mined_patterns_files(base.manifest.files)}
    for step in gone_steps:
        prefix = layout.raw_dir_rel(step) + "/"
        gone_files |= {rel for rel in base.manifest.files if rel.startswith(prefix)}
        gone_files |= {layout.compilation_rel(step), layout.compilation_data_rel(step)}
    gone_files |= {
        rel
        for ident in insights
        for rel in (
            layout.insight_rel(parse_insight(ident)),
            layout.insight_data_rel(parse_insight(ident)),
        )
    }
    gone_files |= {
        rel
        for step in renamed
        for rel in (layout.compilation_rel(step), layout.compilation_data_rel(step))
    }
    return gone_files


def _copy_kept(base: FrozenVersion, layout: Layout, writer: CorpusWriter, gone: _LeftOut) -> None:
    """Copy what the view keeps, and write anew the compilations and the mined-pattern table
    that named what it leaves out."""
    for rel, file_hash, _ in base.kept_files():
        if rel not in gone.files:
            writer.copy(rel, base.root / rel, file_hash)
    for step in sorted(gone.renamed):
        page = read.read_page(base.root, layout.compilation_rel(step), CompilationHeader)
        writer.write_files(
            compilation_pages.with_mined(layout, page.header, page.body, dropped=set(gone.insights))
        )
    kept = _patterns_without(base, gone.steps)
    size = MINED_PATTERNS_PAGE_RUNS
    for start in range(0, len(kept), size):
        writer.write(mined_patterns_page(start // size + 1), kept[start : start + size])


def _finish_view(
    base: FrozenVersion,
    writer: CorpusWriter,
    root: Path,
    rows: list[RunRow],
    insight_rows: list[InsightRow],
    report: ViewReport,
) -> None:
    """The view's indexes, tools and manifest, as for any version."""
    manifest = base.manifest
    finish_version(
        writer,
        base.layout(root),
        rows,
        insight_rows,
        compiled_by=manifest.compiled_by,
        model=manifest.model,
        prompts=manifest.prompts,
        # The tasks are not named: the view holds no trace of them, ids included.
        report={
            "view": {
                "of": base.name,
                "tasks_left_out": len(report.tasks),
                "runs_left_out": report.runs_left_out,
                "insights_left_out": len(report.insights_left_out),
                "records_left_out": len(report.records_left_out),
            }
        },
        redactions=manifest.redactions,
        model_settings=manifest.model_settings,
        version=VersionInfo(
            name=f"{base.name}-without-{len(report.tasks)}-tasks",
            parent=base.name,
            changes=Changes(reason=f"leave-one-task-out view of {base.name}"),
        ),
        parent=base,
        copy=True,
    )


def _mined_on(
    base: FrozenVersion,
    layout: Layout,
    row: InsightRow,
    gone_steps: set[int],
    gone_types: set[str | None],
) -> bool:
    """Whether a mined lesson rests on left-out runs: a divergence of a left-out task, or a
    contrast of their task type (it counts every run of the type)."""
    if row.pattern is None:
        return False
    finding = base.insights[layout.insight(row.number)].header.mined
    if finding is None:
        return False
    if any(parse_step(step) in gone_steps for step in finding.runs):
        return True
    return finding.kind == "contrast" and row.task_type in gone_types


def _patterns_without(base: FrozenVersion, gone_steps: set[int]) -> list[bytes]:
    """The version's mined patterns' lines (each with its newline) less those of left-out
    runs; none when it has none."""
    lines = [
        line
        for rel in mined_patterns_files(base.manifest.files)
        for line in (base.root / rel).read_bytes().splitlines()
    ]
    kept = [line for line in lines if line.strip() and orjson.loads(line)["step"] not in gone_steps]
    return [line + b"\n" for line in kept]


def _records_naming(base: FrozenVersion, names: set[str]) -> set[str]:
    """Decision records (and the runs beside them) whose text names any of `names`."""
    found: set[str] = set()
    for rel in base.manifest.files:
        if not rel.startswith(f"{GATE_DIR}/") or not rel.endswith(".md"):
            continue
        try:
            text = (base.root / rel).read_text(encoding="utf-8")
        except OSError as error:
            raise CorpusError(f"{rel}: cannot read it ({error})") from None
        if any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in names):
            stem = rel.removesuffix(".md")
            found |= {r for r in base.manifest.files if r == rel or r.startswith(stem + ".")}
    return found
