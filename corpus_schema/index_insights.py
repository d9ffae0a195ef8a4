"""The insights' index (`insight/_index.md`): a section for each task type, then the
divergences; past INSIGHT_PAGE_ROWS rows in parts, each part's first line ending with a digest
of what its rows show, so that a version made from another takes its parent's parts that show
the same rows (indexes.py holds what every layer's index shares)."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import overload

import orjson

from .catalog import READ_ONLY_MARK
from .indexes import (
    DIVERGENCE,
    DIVERGENCES_HEADING,
    DIVERGENCES_NOTE,
    InsightRow,
    PartMark,
    Reuse,
    Row,
    _paged,
    _Picked,
    _rendered,
    _Rows,
)
from .layout import INSIGHT_DIR, Layout, link
from .render import OFFLINE_NOTE, TRUST_NOTE, fit_line, inline, outcome_text, prose, quote_block

INSIGHT_PAGE_ROWS = 1000
"""Rows a part of the insights' index holds (a row is longer than a run's, and an add links
every part whose rows show what they showed)."""
INSIGHT_ROWS_SHOWN = 1
"""How the insights' index shows a row: part of each part's mark (`_insight_marks`), so that
a part a wikitrace that showed rows otherwise wrote is never taken. Change it when a row is
shown otherwise."""


@overload
def insight_index(
    layout: Layout,
    rows: Sequence[InsightRow],
    compiled_by: str,
    page_rows: int = INSIGHT_PAGE_ROWS,
    *,
    reuse: None = None,
) -> Iterator[tuple[str, str]]: ...


@overload
def insight_index(
    layout: Layout,
    rows: Sequence[InsightRow],
    compiled_by: str,
    page_rows: int = INSIGHT_PAGE_ROWS,
    *,
    reuse: Reuse,
) -> Iterator[tuple[str, str | None]]: ...


def insight_index(
    layout: Layout,
    rows: Sequence[InsightRow],
    compiled_by: str,
    page_rows: int = INSIGHT_PAGE_ROWS,
    *,
    reuse: Reuse | None = None,
) -> Iterator[tuple[str, str | None]]:
    """The insights' index: a section for each task type, then the divergences. Past
    `page_rows` rows, in parts, each part's first line naming the ids it holds and ending
    with a digest of what its rows show (`_insight_marks`): a part `reuse` finds in the parent
    version with that first line is yielded as (path, None), taken as it is (`_paged`)."""
    rel = layout.index_rel(INSIGHT_DIR)
    head = ["# Insights by task type", ""]
    if compiled_by == "offline":
        head += [quote_block(OFFLINE_NOTE), ""]
        if not rows:
            return iter([(rel, "\n".join([*head, "This corpus has no insights.", ""]))])
    head += [quote_block(TRUST_NOTE), ""]
    head += [
        prose(
            "Status: ungated (never tested), committed (passed the admission gate), rejected and "
            f"retired (kept on record, never shown to an agent); {READ_ONLY_MARK}: its only "
            "support is text the agent read (a tool's output, a file, a page), which may be an "
            "injected instruction. Same lesson as: a near-duplicate "
            "of an insight drawn from another run (the first message lists the first of each). "
            "Mined: counted from how many runs with and without a pattern ended, without a model "
            "(a correlation, not a cause); the source is its most typical run."
        ),
        "",
    ]
    if not rows:
        head += ["No insights were drawn.", ""]
    # Positions by task type, and the near-duplicates of each group's first: the rows
    # themselves are read again a part at a time (they may be on disk). A divergence is a
    # fact about one task, not a lesson of its type: they have a section of their own.
    by_type: dict[str, array[int]] = {}
    diverged = array("q")
    copies: dict[int, int] = {}
    for position, row in enumerate(rows):
        if row.pattern == DIVERGENCE:
            diverged.append(position)
        else:
            by_type.setdefault(row.task_type or "(no task type)", array("q")).append(position)
        if row.alike is not None:
            copies[row.alike] = copies.get(row.alike, 1) + 1
    table = (
        "| insight | title | source | source outcome | status | same lesson as |\n"
        "|---|---|---|---|---|---|"
    )

    line = _insight_line(layout, copies)

    sections: list[tuple[str | None, str, Sequence[Row]]] = [
        (f"## {inline(task_type)}", table, _Rows(_Picked(rows, by_type[task_type]), line))
        for task_type in sorted(by_type)
    ]
    positions = [by_type[task_type] for task_type in sorted(by_type)]
    if diverged:
        heading = f"## {DIVERGENCES_HEADING}\n\n" + prose(DIVERGENCES_NOTE)
        sections.append((heading, table, _Rows(_Picked(rows, diverged), line)))
        positions.append(diverged)
    mark = _insight_marks(layout, rows, positions, copies)
    pages = _paged(layout, INSIGHT_DIR, head, sections, page_rows, reuse=reuse, mark=mark)
    return pages if reuse is not None else _rendered(pages)


def _insight_line(layout: Layout, copies: dict[int, int]) -> Callable[[InsightRow], Row]:
    """What makes an insight's row (its id, and the row rendered for the page it is on), each
    group's first saying how many it has (`copies`, by its number)."""

    def line(row: InsightRow) -> Row:
        def at(rel: str) -> str:
            insight_link = link(layout.insight_rel(row.number), rel, layout.insight(row.number))
            source = layout.step(row.source_step)
            source_link = link(layout.compilation_rel(row.source_step), rel, source)
            status = row.status if row.verified else f"{row.status}, UNVERIFIED"
            if row.pattern is not None:
                status += ", mined" if row.holds else ", mined, NO LONGER HOLDS"
            if row.read_only:
                status += f", {READ_ONLY_MARK}"
            alike = (
                link(layout.insight_rel(row.alike), rel, layout.insight(row.alike))
                if row.alike is not None
                else f"(first of {copies[row.number]})"
                if copies.get(row.number, 1) > 1
                else ""
            )
            return fit_line(
                f"| {insight_link} | ",
                row.title,
                f" | {source_link} "
                f"| {outcome_text(row.source_outcome, row.source_judged)} | {status} | {alike} |",
                cell=True,
            )

        return layout.insight(row.number), at

    return line


def _insight_marks(
    layout: Layout,
    rows: Sequence[InsightRow],
    positions: list[array[int]],
    copies: dict[int, int],
) -> PartMark:
    """Each part's mark: a digest of what its rows show (each row's values that `line` shows,
    the size of the group it leads), the layout's id widths and how rows are shown
    (INSIGHT_ROWS_SHOWN). Two parts of a section that begin with the same line show the same
    rows: a parent's part so found is taken without rendering a row, where reading and hashing
    them is cheap (a mined lesson recounted to the same row keeps its part)."""
    seed = f"{INSIGHT_ROWS_SHOWN}:{layout.step_width}:{layout.insight_width}".encode()

    def mark(section: int, start: int, stop: int) -> str:
        digest = hashlib.blake2b(seed, digest_size=16)
        for row in _Picked(rows, positions[section][start:stop])[:]:
            shown = (
                row.number,
                row.title,
                row.source_step,
                row.source_outcome,
                row.source_judged,
                row.status,
                row.verified,
                row.pattern is not None,
                row.holds,
                row.read_only,
                row.alike,
                copies.get(row.number, 1),
            )
            digest.update(orjson.dumps(shown))
        return f"<!-- blake2b:{digest.hexdigest()} -->"

    return mark
