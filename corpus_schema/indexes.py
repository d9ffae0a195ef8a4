"""The indexes: each layer's `_index.md` (in parts past INDEX_PAGE_ROWS rows), the rows they
show, and the root index of the corpus."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from .layout import (
    CATALOG,
    CATALOG_INDEX,
    CATALOG_RUNS,
    COMPILATION_DIR,
    DATA_DIR,
    INDEX_NAME,
    INSIGHT_DIR,
    MINED_PATTERNS,
    MINED_TESTS,
    RAW_DIR,
    Layout,
    link,
    parse_step,
)
from .records import READ_ONLY, InsightHeader, InsightStatus, Outcome
from .render import (
    OFFLINE_NOTE,
    TRUST_NOTE,
    bullet,
    fit_line,
    outcome_text,
    prose,
    quote_block,
    table_cell,
)
from .tasks import TaskKey, task_key


@dataclass(slots=True)
class RunRow:
    """What the indexes show of one run."""

    step: int
    task_id: str
    task_type: str | None
    outcome: Outcome
    turns: int
    task: str
    """The task, or (in a build, which holds a row per run to the end) its first
    TASK_PREVIEW characters with whitespace flattened: all an index or a lesson shows."""
    judged: bool = False
    compiled: bool = False
    title: str | None = None
    unverified_quotes: int = 0
    insights: list[int] = field(default_factory=list)
    attempt: str = ""
    """Not shown: the attempt number its log gives, if any (versions.frozen.given_attempt),
    which with its task, outcome and turns tells it from other runs across versions."""
    project: str | None = None
    kind: str | None = None
    """The kind of work it did (RunRecord.kind): the index shows it beside its type."""
    origin: str | None = None
    """Its task's source (RunRecord.origin), if known: the index shows it before its id."""
    repo: dict[str, Any] | None = None
    """Not shown: the repository as it saw it (RunRecord.repo, as JSON), for the catalog."""

    @property
    def task_key(self) -> TaskKey:
        """Its task: its source and its id."""
        return task_key(self.origin, self.task_id)


@dataclass(slots=True)  # a build holds one for every insight
class InsightRow:
    number: int
    title: str
    task_type: str | None
    source_step: int
    source_outcome: Outcome
    source_judged: bool = False
    status: InsightStatus = "ungated"
    verified: bool = True
    """False when no quote behind it was found in its run (the index says UNVERIFIED)."""
    guideline: str = ""
    alike: int | None = None
    """The insight whose near-duplicate this is (the first of its group), if any."""
    pattern: str | None = None
    """For a mined lesson (compiler/mine.py): the pattern it counts (`diverge` for a
    divergence); None for a lesson a model drew."""
    goes_with: Outcome | None = None
    """For a mined lesson: the outcome the pattern goes with."""
    holds: bool = True
    """False for a mined lesson a later version's runs no longer support."""
    read_only: bool = False
    """Its only support is content the agent read (records.READ_ONLY): the index marks it."""


@dataclass
class CorpusSummary:
    """What the root index says about the whole corpus."""

    model: str
    compiled_by: str
    runs: int
    successes: int
    compilations: int
    insights: int
    failed_steps: list[int]
    divergences: int = 0
    """Of the insights, how many are divergences between runs of one task (not lessons)."""


INDEX_PAGE_ROWS = 5000
"""Rows an index page holds: a layer with more has its index in parts (`raw/_index/...`), and
its `_index.md` lists the parts, so no page grows with the corpus past this."""
TYPE_CELL = 40
"""The most characters of a task type a raw index row shows (its kind half as many): with the
task cut to its shortest, a longer one would push the row past LINE_LIMIT."""

Row = tuple[str, Callable[[str], str]]
"""A table row of an index: the id it starts with, and the row rendered for the page it is on
(its links are relative to that page)."""


class _Rows(Sequence[Row]):
    """An index's rows made when read, a part at a time: a corpus of a million runs never
    holds a million row renderers at once."""

    def __init__(self, items: Sequence[Any], line: Callable[[Any], Row]) -> None:
        self._items = items
        self._line = line

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self._line(item) for item in self._items[index]]
        return self._line(self._items[index])


T = TypeVar("T")


class _Picked(Sequence[T]):
    """The items of `items` at the given positions (say, the compiled runs), read when asked:
    `items` may be a sequence kept on disk (spill.RunRows)."""

    def __init__(self, items: Sequence[T], positions: Iterable[int]) -> None:
        self._items = items
        self._positions = array("q", positions)

    @property
    def positions(self) -> array[int]:
        """The positions picked, in order."""
        return self._positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if not isinstance(index, slice):
            return self._items[self._positions[index]]
        positions = self._positions[index]
        if not positions:
            return []
        first, last = min(positions), max(positions)
        if last - first < 4 * len(positions):  # close together: read the stretch at once
            stretch = self._items[first : last + 1]
            return [stretch[i - first] for i in positions]
        return [self._items[i] for i in positions]


def _rendered(pages: Iterator[tuple[str, str | None]]) -> Iterator[tuple[str, str]]:
    """The pages of an index none of whose parts is taken from a parent (`_paged`)."""
    for rel, text in pages:
        if text is None:
            raise AssertionError(f"internal error: {rel} not rendered")
        yield rel, text


Reuse = Callable[[str, str], bool]
"""Whether the parent version holds the index part at a path, its first line the one given:
then the new version takes it as it is."""


PartMark = Callable[[int, int, int], str]
"""What a part's first line ends with, after the ids it holds, for a section's rows from
`start` to `stop` (section, start, stop; sections count from 0): a digest of what its rows
show, so that a parent's part that begins with the same line shows the same rows."""


def _paged(
    layout: Layout,
    layer: str,
    head: list[str],
    sections: list[tuple[str | None, str, Sequence[Row]]],
    page_rows: int,
    unchanged: int = 0,
    reuse: Reuse | None = None,
    mark: PartMark | None = None,
) -> Iterator[tuple[str, str | None]]:
    """An index: `head`, then each section (a heading or None, its table's header lines, its
    rows). When the rows are more than `page_rows`, each section's rows go into parts of up to
    `page_rows`, which `_index.md` lists with the range of ids each holds. Yields (path, text)
    a page at a time, parts first, so that only one page is held at once. Of an index of one
    section whose first `unchanged` rows are those its parent version wrote, a full part of
    those rows that `reuse` finds in the parent is yielded as (path, None): taken as it is, not
    rendered (nothing in a part depends on the rows after it). With `mark`, each part's first
    line ends with its mark, and any part whose first line `reuse` finds in the parent is
    taken as it is."""
    rel = layout.index_rel(layer)
    total = sum(len(rows) for _, _, rows in sections)
    if total <= page_rows:
        lines = list(head)
        for heading, table, rows in sections:
            if heading is not None:
                lines += [heading, ""]
            lines += [table, *(render(rel) for _, render in rows), ""]
        yield rel, "\n".join(lines).rstrip("\n") + "\n"
        return
    lines = [*head, f"This index has {total} rows: they are in parts of up to {page_rows}.", ""]
    for number, (heading, table, rows) in enumerate(sections, start=1):
        if heading is not None:
            lines += [heading, ""]
        for part, start in enumerate(range(0, len(rows), page_rows), start=1):
            name = f"{number:03d}-{part:04d}" if len(sections) > 1 else f"{part:04d}"
            part_rel = layout.index_part_rel(layer, name)
            stop = min(start + page_rows, len(rows))
            first, last = rows[start][0], rows[stop - 1][0]
            title = f"{heading.split(chr(10), 1)[0].lstrip('# ')}: " if heading else ""
            top = f"# {title}part {part}: {first} to {last}"
            if mark is not None:
                top += f" {mark(number - 1, start, stop)}"
            lines.append(f"- {link(part_rel, rel)}: {first} to {last}")
            if (
                (mark is not None or (len(sections) == 1 and start + page_rows <= unchanged))
                and reuse is not None
                and reuse(part_rel, top)
            ):
                yield part_rel, None
                continue
            yield (
                part_rel,
                "\n".join(
                    [
                        top,
                        "",
                        f"Part of {link(rel, part_rel)}.",
                        "",
                        table,
                        *(render(part_rel) for _, render in rows[start:stop]),
                        "",
                    ]
                ),
            )
        lines.append("")
    yield rel, "\n".join(lines).rstrip("\n") + "\n"


def raw_index(
    layout: Layout,
    rows: Sequence[RunRow],
    compiled_by: str,
    page_rows: int = INDEX_PAGE_ROWS,
    *,
    unchanged: int = 0,
    reuse: Reuse | None = None,
) -> Iterator[tuple[str, str | None]]:
    """The raw layer's index; its parts of the first `unchanged` runs, those of the parent
    version, taken as they are where `reuse` finds them (`_paged`)."""
    head = [
        "# Raw runs",
        "",
        "Every run as logged: `raw/step-NNNN/metadata.md` (task, outcome, source) and "
        "`raw/step-NNNN/solver.full.jsonl` (line N is turn N). These are the facts.",
        "",
    ]
    if compiled_by == "offline":
        head += [quote_block(OFFLINE_NOTE), ""]
    table = "| step | task | type | outcome | turns | compilation |\n|---|---|---|---|---|---|"

    def line(row: RunRow) -> Row:
        def at(rel: str) -> str:
            compiled = (
                link(layout.compilation_rel(row.step), rel, layout.step(row.step))
                if row.compiled
                else "failed"
            )
            return fit_line(
                f"| {link(layout.raw_metadata_rel(row.step), rel, layout.step(row.step))} | ",
                f"{row.task_key.name}: {row.task}",
                f" | {table_cell(row.task_type, TYPE_CELL)}"
                f"{f': {table_cell(row.kind, TYPE_CELL // 2)}' if row.kind else ''} "
                f"| {outcome_text(row.outcome, row.judged)} | {row.turns} | {compiled} |",
                cell=True,
            )

        return layout.step(row.step), at

    return _paged(
        layout, RAW_DIR, head, [(None, table, _Rows(rows, line))], page_rows, unchanged, reuse
    )


def compilation_index(
    layout: Layout,
    rows: Sequence[RunRow],
    compiled_by: str,
    page_rows: int = INDEX_PAGE_ROWS,
    *,
    unchanged: int = 0,
    reuse: Reuse | None = None,
    compiled: Iterable[int] | None = None,
) -> Iterator[tuple[str, str | None]]:
    """The compilations' index, a row for each compiled run (`compiled`: their positions in
    `rows`, when the caller knows them); its parts of the first `unchanged` runs' rows taken
    as they are where `reuse` finds them (`_paged`)."""
    head = ["# Compilations", ""]
    if compiled_by == "offline":
        head += [quote_block(OFFLINE_NOTE), ""]
    else:
        head += [quote_block(TRUST_NOTE), ""]
    table = "| step | outcome | title | unverified quotes | insights |\n|---|---|---|---|---|"

    def line(row: RunRow) -> Row:
        def at(rel: str) -> str:
            insights = ", ".join(
                link(layout.insight_rel(n), rel, layout.insight(n)) for n in row.insights
            )
            return fit_line(
                f"| {link(layout.compilation_rel(row.step), rel, layout.step(row.step))} "
                f"| {outcome_text(row.outcome, row.judged)} | ",
                row.title or "",
                f" | {row.unverified_quotes} | {insights} |",
                cell=True,
            )

        return layout.step(row.step), at

    if compiled is None:
        compiled = (i for i, row in enumerate(rows) if row.compiled)
    picked = _Picked(rows, compiled)
    kept = bisect.bisect_left(picked.positions, unchanged)  # compiled rows of those runs
    rendered = _Rows(picked, line)
    return _paged(layout, COMPILATION_DIR, head, [(None, table, rendered)], page_rows, kept, reuse)


DIVERGENCE = "diverge"
"""The `pattern` of a mined divergence (records.MinedFinding)."""
DIVERGENCES_HEADING = "Divergences between runs of one task"
DIVERGENCES_NOTE = (
    "Where a successful and a failed run of the same task first took different actions: a fact "
    "about that task, not a lesson for others (an agent is shown one only for its own task). "
    "They are not counted among the lessons."
)


def insight_row(number: int, header: InsightHeader, guideline: str) -> InsightRow:
    """The index row of an insight page."""
    return InsightRow(
        number=number,
        title=header.title,
        task_type=header.task_type,
        source_step=parse_step(header.source_step),
        source_outcome=header.source_outcome,
        source_judged=header.source_judged,
        status=header.status,
        verified=header.verified,
        guideline=guideline,
        pattern=header.mined.pattern if header.mined else None,
        goes_with=header.mined.goes_with if header.mined else None,
        holds=header.mined.holds if header.mined else True,
        read_only=header.support == READ_ONLY,
    )


def root_index(layout: Layout, summary: CorpusSummary) -> str:
    failures = summary.runs - summary.successes
    lines = [
        "# wikitrace corpus",
        "",
        prose(
            f"{summary.runs} runs ({summary.successes} succeeded, {failures} failed), "
            f"{summary.compilations} compilations, "
            f"{summary.insights - summary.divergences} lessons"
            + (
                f" and {summary.divergences} divergences between runs of one task"
                if summary.divergences
                else ""
            )
            + f". Compiled by `{summary.model}`."
        ),
        "",
    ]
    if summary.compiled_by == "offline":
        lines += [quote_block(OFFLINE_NOTE), ""]
    if summary.failed_steps:
        failed = ", ".join(layout.step(s) for s in summary.failed_steps)
        lines += [f"Incomplete: these runs have no compilation (it failed): {failed}.", ""]
    lines += [
        "## Layout",
        "",
        *map(bullet, _layout_rows(layout)),
        "",
        "## Trust gradient",
        "",
        prose(
            "insight (a guess drawn from one run) < compilation (an interpretation of the run) "
            "< raw turns (the facts as logged). Quotes marked UNVERIFIED were not found in the "
            "turn they cite."
        ),
        "",
        "## Drilling down",
        "",
        prose(
            "Paths are relative to this folder; reading costs no environment step. From an "
            "insight, open its compilation (`source_step` in its header), then the turns it "
            "cites; `wikitrace audit . step-0001` (here) lists every insight from or citing a run:"
        ),
        "",
        "```sh",
        "grep -l 'source_step: step-0001' insight/*.md   # insights drawn from one run",
        "cat compilation/step-0001.md                    # the claims and the turns they cite",
        "tools/actions step-0001                         # one line per turn: action => result",
        "tools/turn step-0001 12                         # turn 12 in full (or 12-14)",
        "sed -n '12p' raw/step-0001/solver.full.jsonl    # turn 12, exactly as logged",
        "```",
        "",
    ]
    return "\n".join(lines)


def _layout_rows(layout: Layout) -> list[str]:
    """The entry page's list of what the corpus holds, a row per file or folder."""
    return [
        f"{link(layout.index_rel(INSIGHT_DIR), INDEX_NAME)}: lessons by task type, then "
        "the divergences between runs of one task. `insight/insight-NNNN.md` names its "
        "`source_step`.",
        f"{link(layout.index_rel(COMPILATION_DIR), INDEX_NAME)}: why each run succeeded or"
        " failed, each claim with quotes from numbered turns. "
        "`compilation/step-NNNN.md`.",
        f"{link(layout.index_rel(RAW_DIR), INDEX_NAME)}: every run as logged. "
        "`raw/step-NNNN/metadata.md` and `raw/step-NNNN/solver.full.jsonl` (line N is "
        "turn N).",
        "`gate/` (once the admission gate or monitoring has run): each decision about "
        "an insight (`gate/gate-NNNN.md`, `gate/monitor-NNNN.md`) and the runs or "
        "reports behind it. An insight's header says its `status` and links its "
        "`decisions`.",
        "`manifest.json`: format version, how it was built, and the sha256 of every file "
        "(a version made from another lists what changed since its parent's manifest, kept "
        "in `manifests/`).",
        f"`{CATALOG}`: a JSON line per insight an agent may be shown (and per run: "
        f"`{CATALOG_RUNS}/`), written from the pages for `prompt` and `mcp` to read at "
        f"once (the pages are the record; `{CATALOG_INDEX}` says where each project's "
        "lines are), and `search/`: the BM25 indexes over its tasks, insights and "
        "compilations (each word's texts and counts, in pages, scored when a query asks), "
        "loaded at test time instead of built.",
        f"`{DATA_DIR}/`: what the tools read of each insight and compilation page but a "
        "person need not (its claims, quotes, counts, hypothesis), as JSON; the page's "
        "header names it as `data`, and its body shows the same once, as lines.",
        f"`{RAW_DIR}/_patterns-NNNN.jsonl` (`{MINED_PATTERNS}` in versions before its "
        f"pages) and `{MINED_TESTS}` (once lessons were mined): the action patterns each run "
        "shows, and every pattern tested per task type with its p-value, so that `add` "
        "mines without reading every run again.",
    ]
