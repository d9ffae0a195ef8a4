"""The insights' index in parts: each part's first line names the ids it holds and a digest
of what its rows show, so that a version made from another takes every part of its parent
that shows the same rows, and writes the rest."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from wikitrace.corpus_schema.index_insights import insight_index
from wikitrace.corpus_schema.indexes import InsightRow
from wikitrace.corpus_schema.layout import Layout

LAYOUT = Layout(Path("corpus"))


def _rows() -> list[InsightRow]:
    """Five lessons of type `a`, three of type `b` (insight 6 a near-duplicate of 2)."""
    types = ["a", "a", "b", "a", "a", "b", "a", "b"]
    return [
        InsightRow(
            number=number,
            title=f"lesson {number}",
            task_type=task_type,
            source_step=number,
            source_outcome="failure",
        )
        for number, task_type in enumerate(types, start=1)
    ]


def _rendered(rows: list[InsightRow]) -> dict[str, str]:
    return dict(insight_index(LAYOUT, rows, "offline", 2))


def _taken(rows: list[InsightRow], parent: dict[str, str]) -> dict[str, str | None]:
    """The index of `rows`, what it takes of `parent`'s parts None."""

    def reuse(rel: str, first_line: str) -> bool:
        return rel in parent and parent[rel].split("\n", 1)[0] == first_line

    return dict(insight_index(LAYOUT, rows, "offline", 2, reuse=reuse))


def _check(rows: list[InsightRow], parent: dict[str, str]) -> set[str]:
    """The parts taken from `parent` for `rows`; each one taken is what rendering gives, and
    so is each one written."""
    taken = _taken(rows, parent)
    fresh = _rendered(rows)
    assert taken.keys() == fresh.keys()
    for rel, text in taken.items():
        assert (parent[rel] if text is None else text) == fresh[rel], rel
    return {rel for rel, text in taken.items() if text is None}


def test_a_part_s_first_line_names_its_ids_and_a_digest_of_its_rows() -> None:
    pages = _rendered(_rows())
    assert sorted(pages) == [
        "insight/_index.md",
        *(f"insight/_index/001-000{n}.md" for n in (1, 2, 3)),
        *(f"insight/_index/002-000{n}.md" for n in (1, 2)),
    ]
    top = pages["insight/_index/001-0002.md"].split("\n", 1)[0]
    assert top.startswith("# a: part 2: insight-0004 to insight-0005 <!-- blake2b:")
    assert top.endswith(" -->") and len(top.split("blake2b:")[1]) == 32 + 4
    assert (
        "- [insight/_index/001-0002.md](../insight/_index/001-0002.md): insight-0004 to "
        "insight-0005" in pages["insight/_index.md"]
    )


def test_a_version_takes_the_parts_whose_rows_show_the_same() -> None:
    parent = _rendered(_rows())
    # The same rows: every part taken.
    assert _check(_rows(), parent) == {rel for rel in parent if "/_index/" in rel}
    # A new lesson of type b (in b's last part), one of a's committed (its last part), and a
    # field no row shows (a guideline, in a's first part) changed: the other parts taken.
    rows = _rows()
    rows[6] = dataclasses.replace(rows[6], status="committed")
    rows[0] = dataclasses.replace(rows[0], guideline="something else")
    rows.append(dataclasses.replace(rows[7], number=9, title="lesson 9"))
    assert _check(rows, parent) == {
        "insight/_index/001-0001.md",
        "insight/_index/001-0002.md",
        "insight/_index/002-0001.md",
    }


def test_a_part_whose_lesson_gains_a_near_duplicate_is_written_anew() -> None:
    parent = _rendered(_rows())
    # Lesson 9 (type a) is a near-duplicate of lesson 3 (type b's first part): that part now
    # says "(first of 2)" and is written; a's last part holds lesson 9.
    rows = _rows()
    rows.append(
        dataclasses.replace(rows[0], number=9, title="lesson 3, again", source_step=9, alike=3)
    )
    assert _check(rows, parent) == {
        "insight/_index/001-0001.md",
        "insight/_index/001-0002.md",
        "insight/_index/002-0002.md",
    }
    assert "(first of 2)" in _rendered(rows)["insight/_index/002-0001.md"]


def test_a_part_of_another_layout_or_of_no_parent_is_never_taken() -> None:
    parent = _rendered(_rows())
    wider = dict(insight_index(Layout(Path("corpus"), insight_width=5), _rows(), "offline", 2))
    assert {rel.split("/")[-1] for rel in wider} == {rel.split("/")[-1] for rel in parent}
    for rel, text in wider.items():
        if "/_index/" in rel:
            assert text.split("\n", 1)[0] != parent[rel].split("\n", 1)[0]
    assert _check(_rows(), {}) == set()


def test_a_part_whose_lesson_joins_a_later_group_is_written_anew() -> None:
    # A mined contrast joins the group of the first model lesson that says the same, which
    # may be one an add brought: lesson 5 (a's second part) now names lesson 9 (b's last).
    parent = _rendered(_rows())
    rows = _rows()
    rows[4] = dataclasses.replace(rows[4], alike=9)
    rows.append(dataclasses.replace(rows[7], number=9, title="lesson 9"))
    assert _check(rows, parent) == {
        "insight/_index/001-0001.md",
        "insight/_index/001-0003.md",
        "insight/_index/002-0001.md",
    }
