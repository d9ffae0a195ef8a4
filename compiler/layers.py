"""The layers a version's compiled runs add: insights numbered after the parent's, each
compilation and insight page written, the parent's files kept, then the version finished."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from wikitrace.corpus_schema import (
    Layout,
    compilation_pages,
    id_width,
    indexes,
    insight_pages,
    parse_step,
    read,
)
from wikitrace.corpus_schema.catalog import PastRun, explanation
from wikitrace.corpus_schema.catalog_build import WrittenRun
from wikitrace.corpus_schema.history import Changes, VersionInfo
from wikitrace.corpus_schema.layout import MINED_PATTERNS, data_rel
from wikitrace.corpus_schema.records import CompilationHeader, CompiledBy, InsightHeader
from wikitrace.corpus_schema.spill import RunRows
from wikitrace.corpus_schema.store import CorpusWriter
from wikitrace.versions import FrozenVersion, Store, finish_version

from .compile import CompileStats, Templates
from .mine import MinedPage, Miner, mine_version, patterns_file
from .produce import Compiled, Summary
from .redact import Redactor
from .report import BuildReport


def write_layers(
    writer: CorpusWriter,
    layout: Layout,
    rows: Sequence[indexes.RunRow],
    tasks: Iterable[str],
    compiled: Compiled,
    report: BuildReport,
    version: VersionInfo,
    *,
    stats: CompileStats,
    redactor: Redactor | None,
    templates: Templates | None,
    base: FrozenVersion | None,
    model_settings: dict[str, Any] | None = None,
    miner: Miner | None = None,
    store: Store | None = None,
    judge_stats: CompileStats | None = None,
    judge_redactor: Redactor | None = None,
) -> None:
    """Everything of the version but its raw layer (written as the runs were read). `rows`
    are the new runs' rows, in step order, and `tasks` their tasks as their pages hold them;
    `judge_stats` and `judge_redactor` are the --judge model's calls and redactions."""
    # The parent's rows, then each new one as its compilation and insights are known: on disk.
    with RunRows(writer.root.parent, base.rows if base else ()) as all_rows:
        insight_rows = compiled.insight_rows  # the parent's, then the model's, numbered
        first_new = compiled.first_number
        first_row = len(all_rows)
        summaries = compiled.in_order()  # in step order, as the rows: one for each compiled row
        summary = next(summaries, None)
        for row in rows:
            if summary is not None and summary.step == row.step:
                row.compiled = True
                row.title = summary.title
                row.unverified_quotes = summary.unverified_quotes
                row.insights = summary.insights
                summary = next(summaries, None)
            all_rows.append(row)
        number = compiled.number
        mined = _mine(miner, layout, all_rows, report, version, base, number + 1)
        number += sum(page.new for page in mined)
        # Ids keep the parent's width, so nothing is renamed; a new corpus sizes them to fit.
        if not base:
            layout = dataclasses.replace(layout, insight_width=id_width(number))
        compiled.finish(layout.insight_width)  # the model's insights' pages, all written
        if miner is not None:
            writer.write(MINED_PATTERNS, patterns_file(miner.runs))
            miner.release()
        # A parent's mined lesson, recounted, replaces its row (a parent's rows come first).
        position = (
            {item.number: index for index, item in enumerate(base.insight_rows)} if base else {}
        )
        rewritten = {MINED_PATTERNS}
        cites: list[tuple[str, int, bool]] = []  # (step, row position, whether its source)
        for page in mined:
            header, guideline = page.content()
            header.id = layout.insight(page.number)
            writer.write_files(insight_pages.insight_files(header, guideline))
            mined_row = indexes.insight_row(page.number, header, guideline)
            if page.new:
                at = len(insight_rows)
                insight_rows.append(mined_row)
                compiled.written_insights.add(page.number, header, guideline)
            else:  # a parent's mined lesson, recounted
                at = position[page.number]
                insight_rows[at] = mined_row
                rewritten |= {layout.insight_rel(page.number), layout.insight_data_rel(page.number)}
            cites += [(step, at, step == header.source_step) for step in header.rests_on]
        del mined  # each page's lesson was made as it was written: none is held from here
        rewritten |= _name_mined(writer, layout, base, cites, insight_rows)
        if base:
            writer.link_all(base.root, base.kept_files(rewritten))
        compiled_by: CompiledBy = "offline" if templates is None else "llm"
        fill_report(
            report,
            compiled,
            stats,
            redactor,
            insights=number - first_new + 1,
            judge_stats=judge_stats,
            judge_redactor=judge_redactor,
        )
        new_rows = all_rows.iter_from(first_row)
        steps: list[str] = []
        task_ids: dict[str, None] = {}  # in order, once each
        for row in new_rows:
            steps.append(layout.step(row.step))
            task_ids[row.task_id] = None
        version.changes = Changes(
            runs=len(steps),
            steps=steps,
            insights=[layout.insight(n) for n in range(first_new, number + 1)],
            task_ids=list(task_ids),
            duplicates=report.duplicates,
            inputs=report.inputs,
        )
        prompts = dict(base.manifest.prompts) if base else {}
        prompts.update(templates.hashes if templates else {})
        finish_version(
            writer,
            layout,
            all_rows,
            insight_rows,
            compiled_by=compiled_by,
            model=report.model,
            prompts=prompts,
            report=report.as_dict(),
            redactions=report.redactions,
            model_settings=model_settings,
            version=version,
            parent=base,
            store=store,
            written=_written(layout, rows, tasks, compiled.in_order()),
            written_insights=compiled.written_insights,
        )
        compiled.close()


def _name_mined(
    writer: CorpusWriter,
    layout: Layout,
    base: FrozenVersion | None,
    cites: list[tuple[str, int, bool]],
    insight_rows: Sequence[indexes.InsightRow],
) -> set[str]:
    """Each compilation page of a run a mined lesson rests on, written anew to name it
    (compilation_pages.with_mined); the parent's pages so written, which the version does not
    keep."""
    replaced: set[str] = set()
    parent_steps = len(base.rows) if base else 0
    cites.sort()
    for step_id, group in itertools.groupby(cites, key=lambda cite: cite[0]):
        step = parse_step(step_id)
        rel = layout.compilation_rel(step)
        if base is not None and step <= parent_steps:
            if rel not in base.manifest.files:
                continue  # its compilation failed
            page = read.read_page(base.root, rel, CompilationHeader)
            replaced |= {rel, data_rel(rel)}
        else:
            if not (writer.root / rel).exists():
                continue
            page = read.read_page(writer.root, rel, CompilationHeader)
            writer.remove(rel)
            if page.header.data:
                writer.remove(page.header.data)
        source_of: list[tuple[int, str]] = []
        cited_by: list[tuple[int, str]] = []
        for _, at, source in group:
            row = insight_rows[at]
            (source_of if source else cited_by).append((row.number, row.title))
        writer.write_files(
            compilation_pages.with_mined(layout, page.header, page.body, source_of, cited_by)
        )
    return replaced


def _written(
    layout: Layout,
    rows: Iterable[indexes.RunRow],
    tasks: Iterable[str],
    summaries: Iterator[Summary],
) -> Iterator[WrittenRun]:
    """The new runs as their pages say, in step order, for the catalog (catalog_build.catalog_of):
    from their rows and tasks and their compilations' summaries (one for each compiled run,
    in the same order)."""
    summary = next(summaries, None)
    for row, task in zip(rows, tasks, strict=True):
        compiled = summary if summary is not None and summary.step == row.step else None
        if compiled is not None:
            summary = next(summaries, None)
        run = PastRun(
            step=layout.step(row.step),
            task_id=row.task_id,
            task_type=row.task_type,
            outcome=row.outcome,
            task=task,
            title=compiled.title if compiled else None,
            judged=row.judged,
            explanation=explanation(compiled.title, compiled.statements) if compiled else "",
            project=row.project,
            kind=row.kind,
        )
        yield WrittenRun(run, compiled.backing if compiled else None)


def _mine(
    miner: Miner | None,
    layout: Layout,
    rows: RunRows,
    report: BuildReport,
    version: VersionInfo,
    base: FrozenVersion | None,
    first_number: int,
) -> list[MinedPage]:
    """The mined lessons of the version (compiler/mine.py), numbered after the model's."""
    if miner is None:
        return []
    parent: dict[int, tuple[InsightHeader, str]] = {}
    if base is not None:
        for row in base.insight_rows:
            if row.pattern is not None:  # a mined lesson: only its page is read
                page = base.insights[base.layout().insight(row.number)]
                if page.header.mined is not None:
                    parent[row.number] = (page.header, row.guideline)
    pages, mining = mine_version(
        miner,
        layout,
        version=version.name,
        first_number=first_number,
        task_text=lambda step: rows.by_step(step).task,
        parent=parent if base is not None else None,
        parent_root=base.root if base else None,
        parent_steps=len(base.rows) if base else 0,
    )
    report.mining = mining.as_dict()
    report.mined = len(pages)
    return pages


def fill_report(
    report: BuildReport,
    compiled: Compiled,
    stats: CompileStats,
    redactor: Redactor | None,
    *,
    insights: int,
    judge_stats: CompileStats | None = None,
    judge_redactor: Redactor | None = None,
) -> None:
    """The report's counts from the compile calls' and the judge's (which are in the totals
    too, and apart): calls, tokens, cost; and the secrets both redacted."""
    report.compiled = compiled.count
    report.insights = insights
    report.unverified_quotes = compiled.unverified_quotes
    report.read_only_insights = compiled.read_only_insights
    every = [stats] if judge_stats is None else [stats, judge_stats]
    report.llm_calls = sum(each.calls - each.cache_hits for each in every)
    report.cache_hits = sum(each.cache_hits for each in every)
    report.http_attempts = sum(each.http_attempts for each in every)
    report.prompt_tokens = sum(each.prompt_tokens for each in every)
    report.completion_tokens = sum(each.completion_tokens for each in every)
    known = all(each.cost_known for each in every)
    report.cost_usd = round(sum(each.cost_usd for each in every), 6) if known else None
    if judge_stats is not None:
        report.judge_calls = judge_stats.calls - judge_stats.cache_hits
        report.judge_cache_hits = judge_stats.cache_hits
        report.judge_prompt_tokens = judge_stats.prompt_tokens
        report.judge_completion_tokens = judge_stats.completion_tokens
    report.invalid_retries = stats.invalid_retries
    report.quote_repairs = stats.quote_repairs
    report.cut_prompts = stats.cut_prompts
    report.addresses_compiler = sorted(stats.addressed, key=lambda found: int(found["step"]))
    # A judged run reaches the raw layer redacted already: its secrets are the judge's count.
    redacted: Counter[str] = Counter()
    places: Counter[tuple[str, str]] = Counter()
    for each_redactor in (redactor, judge_redactor):
        if each_redactor is not None:
            redacted.update(each_redactor.counts)
            places.update(each_redactor.places)
    report.redactions = dict(sorted(redacted.items()))
    report.redacted_where = {}
    for (kind, place), count in sorted(places.items()):
        report.redacted_where.setdefault(kind, {})[place] = count
    report.failed.sort(key=lambda item: str(item["step"]))
