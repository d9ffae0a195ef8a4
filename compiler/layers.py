"""The layers a version's compiled runs add: insights numbered after the parent's, each
compilation and insight page written, the parent's files kept, then the version finished."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
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
from wikitrace.corpus_schema.catalog_runs import WrittenRun
from wikitrace.corpus_schema.history import Changes, VersionInfo
from wikitrace.corpus_schema.layout import (
    MINED_PATTERNS,
    MINED_TESTS,
    data_rel,
    mined_patterns_files,
)
from wikitrace.corpus_schema.records import CompilationHeader, InsightHeader
from wikitrace.corpus_schema.spill import RunRows
from wikitrace.corpus_schema.writing import CorpusWriter, NewFiles, spill_file
from wikitrace.search.saved import FarmMap
from wikitrace.versions import FrozenVersion, Store, finish_version
from wikitrace.versions.finish import Finished

from .compile import Templates
from .layers_mined import divergence_jobs, divergence_pages, in_jobs, mined_pages, task_text_of
from .mine import MinedPage, Miner, NewDivergence
from .mine_table import ActionHashes, patterns_pages
from .produce import Compiled, Summary, unpickled_page
from .report import BuildReport
from .stages import CompiledRuns, Layers


def write_layers(
    writer: CorpusWriter,
    layout: Layout,
    runs: CompiledRuns,
    *,
    version: VersionInfo,
    inputs: list[str],
    templates: Templates | None,
    base: FrozenVersion | None,
    miner: Miner | None = None,
    farm_map: FarmMap = map,
) -> Layers:
    """Everything of the version but its raw layer (written as the runs were read) and what
    `finish_layers` writes: its mined lessons, the pages of every insight, the parent's files
    kept; and the rows the indexes are made from. `inputs`: what was read, a line per format.
    `farm_map`: how the pages of the new divergences and the compilation pages (each naming
    the mined lessons that rest on its run) are made (`map`, or a build's worker processes:
    workers.Farm.map)."""
    compiled = runs.compiled
    # Pages of mined patterns written: the parent's are not linked (none kept without mining).
    patterns_written = (
        set(mined_patterns_files(base.manifest.files)) if base and not miner else set()
    )
    # The parent's rows, then each new one as its compilation and insights are known: on disk.
    all_rows = base.run_rows(writer.root.parent) if base else RunRows(writer.root.parent)
    later: PagesLater | None = None
    try:
        first_row = len(all_rows)
        _add_rows(all_rows, runs.rows, compiled.in_order())
        number = compiled.number
        premined = runs.premined
        pages, mining = mined_pages(miner, layout, runs, all_rows, version, base, number)
        mined = len(pages)
        number += sum(page.new for page in pages)
        # Ids keep the parent's width, so nothing is renamed; a new corpus sizes them to fit.
        if not base:
            layout = dataclasses.replace(layout, insight_width=id_width(number))
        compiled.finish(layout.insight_width)  # the model's insights' pages, all written
        if miner is not None:
            for rel, lines in patterns_pages(miner.runs, miner.pages_kept):
                writer.write(rel, lines)
                patterns_written.add(rel)
            if miner.tests is not None:
                writer.write(MINED_TESTS, [miner.tests.dumps()])
            miner.release()
        rewritten, renamed, later = _write_mined(
            writer,
            layout,
            base,
            compiled,
            pages,
            all_rows,
            farm_map,
            miner.actions if miner is not None else None,
            premined.divergences if premined is not None else None,
        )
        if base:
            base.link_kept(writer, rewritten | patterns_written)
        prompts = dict(base.manifest.prompts) if base else {}
        prompts.update(templates.hashes if templates else {})
        return Layers(
            layout=layout,
            all_rows=all_rows,
            insight_rows=compiled.insight_rows,
            insights=number - compiled.first_number + 1,
            mined=mined,
            mining=mining,
            changes=_changes(
                layout, all_rows, first_row, compiled.first_number, number, runs, inputs
            ),
            compiled_by="offline" if templates is None else "llm",
            prompts=prompts,
            renamed=renamed,
            pending=later,
        )
    except BaseException:
        all_rows.close()
        if later is not None:  # not yet the build's to close
            later.close()
        raise


def _add_rows(
    all_rows: RunRows, rows: Iterable[indexes.RunRow], summaries: Iterator[Summary]
) -> None:
    """The new runs' rows after the parent's, each with what its compilation says (`summaries`:
    in step order, as the rows, one for each compiled row)."""
    summary = next(summaries, None)
    for row in rows:
        if summary is not None and summary.step == row.step:
            row.compiled = True
            row.title = summary.title
            row.unverified_quotes = summary.unverified_quotes
            row.insights = summary.insights
            summary = next(summaries, None)
        all_rows.append(row)


def _write_mined(
    writer: CorpusWriter,
    layout: Layout,
    base: FrozenVersion | None,
    compiled: Compiled,
    pages: list[MinedPage],
    rows: RunRows,
    farm_map: FarmMap,
    actions: ActionHashes | None,
    made_lessons: list[tuple[InsightHeader, str]] | None = None,
) -> tuple[set[str], set[str], PagesLater | None]:
    """The mined lessons' pages, and their rows after the model's (a parent's mined lesson,
    recounted, replaces its row); the compilation pages written, naming them. Returns
    the parent's files the version does not keep, and of those the compilation pages (and
    their data) written anew only to name mined lessons; and the compilation pages still
    being written by a build's workers (`_name_mined`), if any. `actions`: the places of the
    actions of the runs the build mined, so that a divergence's page reads only the turns
    it quotes. `made_lessons`: each new divergence's lesson made already (Premined), or
    None: made here, through `farm_map`."""
    insight_rows = compiled.insight_rows
    position = {item.number: index for index, item in enumerate(base.insight_rows)} if base else {}
    rewritten = {MINED_PATTERNS, MINED_TESTS}
    cites: list[tuple[str, int, bool]] = []  # (step, row position, whether its source)
    made = iter(made_lessons) if made_lessons is not None else None
    written = itertools.chain.from_iterable(
        farm_map(
            divergence_pages,
            divergence_jobs(
                os.fspath(writer.root), layout, base, pages, task_text_of(rows), actions
            ),
        )
        if made is None
        else ()
    )
    for page in pages:
        if isinstance(page.lesson, NewDivergence) and made is not None:
            header, guideline = next(made)
            header.id = layout.insight(page.number)
            writer.write_files(insight_pages.insight_files(header, guideline))
            line = None
        elif isinstance(page.lesson, NewDivergence):  # its page written by `divergence_pages`
            header, guideline, lines, line = next(written)
            writer.listed(lines)
        else:
            line = None
            header, guideline = page.content()
            header.id = layout.insight(page.number)
            writer.write_files(insight_pages.insight_files(header, guideline))
        mined_row = indexes.insight_row(page.number, header, guideline)
        if page.new:
            at = len(insight_rows)
            insight_rows.append(mined_row)
            compiled.written_insights.add(page.number, header, guideline, line)
        else:  # a parent's mined lesson, recounted
            at = position[page.number]
            insight_rows[at] = mined_row
            rewritten |= {layout.insight_rel(page.number), layout.insight_data_rel(page.number)}
        cites += [(step, at, step == header.source_step) for step in header.rests_on]
    pages.clear()  # each page's lesson was made as it was written: none is held from here
    if made_lessons is not None:
        made_lessons.clear()
    renamed, later = _name_mined(
        writer,
        layout,
        base,
        cites,
        insight_rows,
        farm_map,
        compiled.waiting.in_order(),
        later=farm_map is not map,
    )
    return rewritten | renamed, renamed, later


def _changes(
    layout: Layout,
    all_rows: RunRows,
    first_row: int,
    first_insight: int,
    last_insight: int,
    runs: CompiledRuns,
    inputs: list[str],
) -> Changes:
    """What the version holds that its parent does not."""
    steps: list[str] = []
    task_ids: dict[str, None] = {}  # in order, once each
    for row in all_rows.iter_from(first_row):
        steps.append(layout.step(row.step))
        task_ids[row.task_id] = None
    return Changes(
        runs=len(steps),
        steps=steps,
        insights=[layout.insight(n) for n in range(first_insight, last_insight + 1)],
        task_ids=list(task_ids),
        duplicates=runs.counts.duplicates,
        inputs=inputs,
    )


def finish_layers(
    writer: CorpusWriter,
    runs: CompiledRuns,
    layers: Layers,
    report: BuildReport,
    version: VersionInfo,
    *,
    model_settings: dict[str, Any],
    base: FrozenVersion | None,
    store: Store | None,
    farm_map: FarmMap = map,
    done: Callable[[], None] | None = None,
) -> Finished:
    """The last stage: what every version ends with (versions.finish_version), the `report`
    in its manifest; the rankers' texts counted through `farm_map` (see `write_layers`).
    `done`: called once `farm_map` has nothing more to do (a build's workers let go)."""
    return finish_version(
        writer,
        layers.layout,
        layers.all_rows,
        layers.insight_rows,
        compiled_by=layers.compiled_by,
        model=report.model,
        prompts=layers.prompts,
        report=report.as_dict(),
        redactions=report.redactions,
        model_settings=model_settings,
        version=VersionInfo(name=version.name, parent=version.parent, changes=layers.changes),
        parent=base,
        store=store,
        written=_written(layers.layout, runs.rows, runs.tasks, runs.compiled.in_order()),
        written_insights=runs.compiled.written_insights,
        kept_rows=len(base.rows) if base else 0,
        farm_map=farm_map,
        same_lines=layers.renamed,
        pending=functools.partial(layers.pending.list_in, writer) if layers.pending else None,
        done=done,
    )


def _name_mined(
    writer: CorpusWriter,
    layout: Layout,
    base: FrozenVersion | None,
    cites: list[tuple[str, int, bool]],
    insight_rows: Sequence[indexes.InsightRow],
    farm_map: FarmMap,
    waiting: Iterable[tuple[int, bytes]],
    later: bool = False,
) -> tuple[set[str], PagesLater | None]:
    """The compilation pages that wait to be written (`waiting`, in step order: Compiled's),
    each naming the mined lessons that rest on its run, and each page written before of a
    run a mined lesson rests on written anew to name them (compilation_pages.with_mined, by
    `_named_pages`); the parent's pages so written, which the version does not keep. With
    `later` (a new corpus built by workers: nothing of a parent is replaced), the pages are
    handed to `farm_map` by a thread, while this process goes on (`PagesLater`)."""
    replaced: set[str] = set()
    parent_steps = len(base.rows) if base else 0
    parent_root = os.fspath(base.root) if base else None
    # Each lesson cited read once, here: the rows are on disk, read by this thread alone.
    shown: dict[int, tuple[int, str]] = {}
    for at in sorted({cite[1] for cite in cites}):
        row = insight_rows[at]
        shown[at] = (row.number, row.title)

    def named() -> Iterator[_Named]:
        pages = iter(waiting)
        page = next(pages, None)
        cites.sort(key=lambda cite: (parse_step(cite[0]), cite[1], cite[2]))
        for step_id, group in itertools.groupby(cites, key=lambda cite: cite[0]):
            step = parse_step(step_id)
            while page is not None and page[0] < step:  # named by no mined lesson
                yield _Named(layout.compilation_rel(page[0]), None, [], [], page[1])
                page = next(pages, None)
            texts = None
            if page is not None and page[0] == step:
                texts, page = page[1], next(pages, None)
            rel = layout.compilation_rel(step)
            source = None
            if base is not None and step <= parent_steps:
                if rel not in base.manifest.files:
                    continue  # its compilation failed
                source = parent_root
                replaced.update((rel, data_rel(rel)))
            source_of: list[tuple[int, str]] = []
            cited_by: list[tuple[int, str]] = []
            for _, at, is_source in group:
                (source_of if is_source else cited_by).append(shown[at])
            yield _Named(rel, source, source_of, cited_by, texts)
        while page is not None:
            yield _Named(layout.compilation_rel(page[0]), None, [], [], page[1])
            page = next(pages, None)

    jobs = ((os.fspath(writer.root), layout, chunk) for chunk in in_jobs(named()))
    if later and base is None:
        return replaced, PagesLater(farm_map, jobs, writer.root.parent)
    for lines in farm_map(_named_pages, jobs):
        writer.listed(lines)
    return replaced, None


class PagesLater:
    """Pages handed to a build's workers (`farm_map` of `_named_pages`) by a thread of this
    process, which meanwhile writes the catalog and counts the rankers' texts: a new corpus's
    catalog reads none of the compilation pages (it is made from what the build kept of each
    run). Their lines of the build's list of files wait in an unnamed file beside the staging
    folder until `list_in` (before the manifest). A build that fails stops its workers, which
    ends the thread (its pages' results are cancelled)."""

    def __init__(self, farm_map: FarmMap, jobs: Iterable[Any], folder: Path) -> None:
        self._lines = spill_file(folder, "named")
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._take, args=(farm_map, jobs), name="wikitrace-pages", daemon=True
        )
        self._thread.start()

    def _take(self, farm_map: FarmMap, jobs: Iterable[Any]) -> None:
        try:
            for lines in farm_map(_named_pages, jobs):
                self._lines.writelines(lines)
        except BaseException as error:  # raised where the build waits for the pages
            self._error = error

    def list_in(self, writer: CorpusWriter) -> None:
        """Wait for the pages to be written, and list them in `writer`."""
        self._thread.join()
        try:
            if self._error is not None:
                raise self._error
            self._lines.seek(0)
            while lines := self._lines.readlines(1 << 20):
                writer.listed(lines)
        finally:
            self._lines.close()

    def close(self) -> None:
        """Let go of the lines' file (a build that failed lists none: the thread, if still
        handing pages on, ends once the workers are stopped)."""
        self._lines.close()


@dataclass(frozen=True, slots=True)
class _Named:
    """A compilation page to write naming the mined lessons that rest on its run (none: a
    waiting page written as it is)."""

    rel: str
    source: str | None
    """The parent version's folder when the page is the parent's; None: this version's."""
    source_of: list[tuple[int, str]]
    cited_by: list[tuple[int, str]]
    texts: bytes | None = None
    """The page and its data file, rendered and waiting to be written (Compiled.waiting,
    pickled: produce.pickled_page); None: a page written before, read back."""


def _named_pages(job: tuple[str, Layout, list[_Named]]) -> list[bytes]:
    """Each page of `job` (the staging folder, the version's layout, the pages) written,
    naming its mined lessons: a waiting page once, a page written before anew (over this
    version's own page in place, beside a parent's); the lines of the build's list of files
    this changes (a page whose compilation failed has none)."""
    root, layout, named = job
    files = NewFiles(root)
    lines: list[bytes] = []
    # Each version's folder resolved once for the job's pages (read_page would for each).
    real: dict[str, Path] = {}
    for page in named:
        if page.texts is not None:
            rendered = unpickled_page(page.texts)
            if page.source_of or page.cited_by:
                (rel, text), (_, data) = rendered
                waiting = read.page_of(rel, text, data, CompilationHeader)
                rendered = compilation_pages.with_mined(
                    layout, waiting.header, waiting.body, page.source_of, page.cited_by
                )
            lines += files.write_files(rendered)
            continue
        written: set[str] = set()  # this version's own files the page replaces
        folder = page.source if page.source is not None else root
        if folder not in real:
            real[folder] = Path(os.path.realpath(folder))
        if page.source is None and not os.path.exists(os.path.join(root, page.rel)):
            continue
        found = read.read_page(real[folder], page.rel, CompilationHeader, resolved=True)
        if page.source is None:
            written |= {page.rel, found.header.data} if found.header.data else {page.rel}
        rendered = compilation_pages.with_mined(
            layout, found.header, found.body, page.source_of, page.cited_by
        )
        lines += files.rewrite(rendered, written)
    return lines


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
            origin=row.origin,
            repo=row.repo,
        )
        yield WrittenRun(run, compiled.backing if compiled else None)
