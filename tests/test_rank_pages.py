"""A saved ranker's word counts in pages (corpus_schema/counts.py, search/saved.py's
`count_pages`): a page is the same however it was counted, and a version made from another
(its counts pages of version 1 too) reads back what its parent counted and tokenizes only
texts it has not (tests/test_rank_postings.py: the postings made from them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wikitrace.corpus_schema.counts import load_page, page_name
from wikitrace.corpus_schema.errors import CorpusError
from wikitrace.search import rank, saved
from wikitrace.search.saved import count_pages

TEXTS = [
    "open the drawer and take the letter",
    "transfer_to_human_agents when the refund fails",
    "",
    "the the the",
    "Refunded refunds refund the ticket",
    "cancel the flight, then book the hotel",
    "take the mug to the kitchen",
]


def _saved(pages: list, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for number, page in enumerate(pages, 1):
        (folder / page_name(number)).write_bytes(page.dumps())


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(saved, "PAGE_TEXTS", 3)


def test_a_page_is_the_same_however_it_was_counted(tmp_path: Path, monkeypatch) -> None:
    fresh = list(count_pages(TEXTS))
    assert [len(page.lengths) for page in fresh] == [3, 3, 1]
    # A parent that counted the first five texts, and one whose texts were others.
    _saved(list(count_pages(TEXTS[:5])), tmp_path / "five")
    _saved(list(count_pages(reversed(TEXTS))), tmp_path / "other")
    tokenized: list[int] = []
    real = rank._tokenize

    def counting(texts, **kwargs):
        tokenized.append(len(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(rank, "_tokenize", counting)
    from_five = list(count_pages(TEXTS, tmp_path / "five"))
    assert tokenized == [1, 1]  # the sixth and the seventh text alone
    tokenized.clear()
    from_other = list(count_pages(TEXTS, tmp_path / "other"))
    assert tokenized == [3, 2, 1]  # a text is read back from the same page only: "the the the"
    assert [p.dumps() for p in from_five] == [p.dumps() for p in fresh]
    assert [p.dumps() for p in from_other] == [p.dumps() for p in fresh]


def test_a_page_of_another_version_is_counted_anew_and_a_damaged_one_said(tmp_path: Path) -> None:
    assert load_page(tmp_path / page_name(1)) is None
    (tmp_path / page_name(1)).write_bytes(b'{"counts": 99}\n')
    assert load_page(tmp_path / page_name(1)) is None
    fresh = list(count_pages(TEXTS[:3]))
    broken = fresh[0].dumps().replace(b'"ends":[', b'"ends":[99,')
    (tmp_path / page_name(1)).write_bytes(broken)
    with pytest.raises(CorpusError, match=r"counts-0001.json: damaged .*wikitrace verify"):
        list(count_pages(TEXTS[:3], tmp_path))


def test_a_parent_saved_before_the_pages_has_its_texts_counted(tmp_path: Path) -> None:
    """The format 1 corpus of tests/data saved its rankers without pages: a version made from
    it counts every text, and saves what a version made from nothing saves."""
    import shutil

    from wikitrace.search.saved import search_files

    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "format1-corpus", old)
    assert not list((old / "search").rglob("counts-*"))

    def saved(parent: Path | None) -> dict[str, bytes]:
        return {rel: b"".join(chunks) for rel, chunks in search_files(old, parent)}

    from_old, from_nothing = saved(old), saved(None)
    assert from_old == from_nothing
    pages = {f"search/{name}/postings-0001.bin" for name in ("tasks", "insights")}
    assert pages | {"search/tasks/stats.json"} <= set(from_old)


def test_tasks_of_pages_left_unread_are_placed_and_read_again_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tasks held skip the full pages left unread (their places count them); with no
    parent's line counts to add to, every task is read again and stripped, none kept."""
    monkeypatch.setattr(saved, "PAGE_TEXTS", 2)
    shared = "Always check the whole house before you leave it."
    tasks = [f"{shared}\nCarry the {thing} to the sink." for thing in ["mug", "cup", "pen"]]
    tasks += ["Put the map on the shelf.", "Put the hat on the shelf."]
    read_again: list[bool] = []
    with saved._Texts(tmp_path, "held") as held, saved._Texts(tmp_path, "every") as every:
        for text in tasks[:2] + tasks[4:]:  # page 2 (tasks 3 and 4) left unread
            held.add(text)
        for text in tasks:
            every.add(text)

        def again() -> saved._Texts:
            read_again.append(True)
            return every

        texts = saved._TaskTexts(held, frozenset({2}), again)
        assert texts.count == 5
        assert list(texts.placed()) == [(0, tasks[0]), (1, tasks[1]), (4, tasks[4])]
        assert list(texts.off_pages(frozenset({1, 2}))) == [tasks[4]]
        stripped, same, counts = saved._task_texts(texts, None, frozenset({2}))
        assert read_again == [True] and same == frozenset()
        assert len(counts.texts) == 5
        # The shared line is in 3 of 5 tasks (common at 2): left out of those.
        assert list(stripped) == [t.replace(f"{shared}\n", "") for t in tasks]


def test_texts_kept_on_disk_read_back_as_added_as_often_as_asked(tmp_path: Path) -> None:
    texts = ["", "plain", "naïve café ☕", "x" * (3 << 20), "a\ud800b", "last"]
    with saved._Texts(tmp_path, "texts") as kept:
        for text in texts:
            kept.add(text)
        assert list(kept) == texts
        assert list(kept) == texts  # the tasks' texts are read twice


def test_every_ranker_s_pages_go_to_the_workers_as_one_stream(tmp_path: Path) -> None:
    """A build's workers count the next ranker's first pages while the build takes in the last
    of the one before: search_files hands every ranker's pages to its farm_map in one call,
    and saves what it saves with plain `map`."""
    import shutil

    from wikitrace.search.saved import search_files

    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "format1-corpus", old)
    calls: list[list[str]] = []

    def farm_map(function, items):  # type: ignore[no-untyped-def]
        calls.append([])
        for item in items:
            calls[-1].append(item[0])
            yield function(item)

    farmed = {rel: b"".join(chunks) for rel, chunks in search_files(old, None, farm_map)}
    assert farmed == {rel: b"".join(chunks) for rel, chunks in search_files(old, None)}
    assert len(calls) == 1
    assert list(dict.fromkeys(calls[0])) == list(saved.SAVED_SEARCHES)  # each in its turn
