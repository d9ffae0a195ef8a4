"""The lines many tasks share, counted and kept with the tasks' ranker (`search/tasks/lines.bin`):
counts made a batch at a time are those made at once, a damaged file is the corpus's error
naming it, and an add whose common lines stay the same takes its parent's tasks' pages of the
runs whose catalog page it links without reading their texts."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.corpus_schema import CorpusError
from wikitrace.corpus_schema.common_lines import LINES, LineCounts, load_line_counts
from wikitrace.search.boilerplate import LineCounter, common_lines

SHARED = [
    "Solve the task below, step by step, and say when done.",
    "You are a helpful assistant for airline customers today",
    "Fix the bug in parser.py so that the tests pass again",
    "short",
    "",
]


def _same(a: LineCounts, b: LineCounts) -> bool:
    return all(
        np.array_equal(getattr(a, name), getattr(b, name)) for name in ("texts", "lines", "counts")
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(SHARED), max_size=4).map("\n".join), max_size=10),
    st.integers(min_value=0, max_value=10),
)
def test_counts_kept_and_added_to_are_the_counts_made_at_once(texts: list[str], cut: int) -> None:
    at_once = LineCounter().extend(texts).counts()
    kept = LineCounter().extend(texts[:cut]).counts()
    read_back = _reread(kept)
    added = LineCounter(read_back).extend(texts[cut:]).counts()
    assert _same(added, at_once)
    assert common_lines(added) == common_lines(at_once)
    assert len(at_once.texts) == len(set(texts))


def _reread(counts: LineCounts, folder: Path | None = None) -> LineCounts:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / LINES
        path.write_bytes(counts.dumps())
        loaded = load_line_counts(path)
        assert loaded is not None
        return LineCounts(loaded.texts.copy(), loaded.lines.copy(), loaded.counts.copy())


def _file(tmp_path: Path) -> tuple[Path, bytes]:
    counts = LineCounter().extend(["\n".join(SHARED[:3]), "\n".join(SHARED[1:3])]).counts()
    path = tmp_path / LINES
    path.write_bytes(counts.dumps())
    return path, path.read_bytes()


def test_a_file_of_another_version_or_none_is_counted_anew(tmp_path: Path) -> None:
    path, data = _file(tmp_path)
    assert load_line_counts(tmp_path / "none.bin") is None
    path.write_bytes(data[:8] + struct.pack("<I", 99) + data[12:])
    assert load_line_counts(path) is None


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda data: data[:-3], "bytes, where its header says"),
        (lambda data: data[:5], "shorter than its header"),
        (lambda data: b"X" + data[1:], "not a file of line counts"),
        # The two texts' digests swapped: no longer ascending.
        (lambda data: data[:20] + data[28:36] + data[20:28] + data[36:], "ascending"),
        (lambda data: data[:-4] + struct.pack("<I", 3), "count is not one of its 2 texts"),
        (lambda data: data[:-4] + struct.pack("<I", 0), "count is not one of its 2 texts"),
    ],
    ids=["cut", "header cut", "magic", "order", "count past texts", "count 0"],
)
def test_a_damaged_file_is_the_corpus_s_error_naming_it(tmp_path: Path, edit, says: str) -> None:  # type: ignore[no-untyped-def]
    path, data = _file(tmp_path)
    path.write_bytes(edit(data))
    with pytest.raises(CorpusError, match=rf"{LINES}: damaged .*{says}.*wikitrace verify"):
        load_line_counts(path)


def test_an_add_takes_its_parent_s_task_pages_unread_while_the_common_lines_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.compiler import BuildOptions, add_runs, build_corpus
    from wikitrace.corpus_schema import catalog_runs
    from wikitrace.corpus_schema import manifest as manifest_io
    from wikitrace.search import saved

    from helpers import make_run, write_runs

    monkeypatch.setattr(catalog_runs, "CATALOG_PAGE_RUNS", 2)
    monkeypatch.setattr(saved, "PAGE_TEXTS", 2)
    shared = "Always check the whole house before you leave it."
    carried = ["mug", "cup", "pen", "jar", "box", "can", "lid", "pot"]
    tasks = [f"Carry the {thing} to the sink." for thing in carried]
    tasks += [f"{shared}\nPut the {thing} on the shelf." for thing in ["map", "hat", "toy", "rug"]]
    runs = [make_run(f"task-{i}", success=i % 2 == 0, task=task) for i, task in enumerate(tasks)]
    counted: list[tuple[str, int, bool]] = []
    real_page = saved._page

    def page(job):  # type: ignore[no-untyped-def]
        counted.append((job[1].name if job[1] else "", job[2], job[0] is not None))
        return real_page(job)

    monkeypatch.setattr(saved, "_page", page)
    real_tasks = saved.tasks_and_records
    opened: list[list[int]] = []  # the catalog's pages of runs each read opens

    def tasks_and_records(path, tasks_of, unread=()):  # type: ignore[no-untyped-def]
        opened.append([])
        real_open = Path.open

        def open_page(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if self.parent.name == "catalog" and self.name.startswith("runs-"):
                opened[-1].append(int(self.stem.removeprefix("runs-")))
            return real_open(self, *args, **kwargs)

        with monkeypatch.context() as patched:
            patched.setattr(Path, "open", open_page)
            yield from real_tasks(path, tasks_of, unread)

    monkeypatch.setattr(saved, "tasks_and_records", tasks_and_records)

    def inputs(name: str, stop: int) -> list[Path]:
        (tmp_path / name).mkdir()
        return [write_runs(tmp_path / name / "runs.jsonl", runs[:stop])]

    chain = tmp_path / "chain"
    build_corpus(BuildOptions(inputs("a", 8), chain))
    # 2 of 10 distinct tasks share a line (common at 3): the common lines stay none, and the
    # 4 full pages linked are unread, their catalog pages not opened; then 4 of 12 (common at
    # 3): every task is read again, from every page of runs.
    for name, stop, unread, reads in (
        ("b", 10, [1, 2, 3, 4], [[5]]),
        ("c", 12, [], [[6], [1, 2, 3, 4, 5, 6]]),
    ):
        counted.clear()
        opened.clear()
        add_runs(BuildOptions(inputs(name, stop), chain))
        tasks_pages = [(n, texts) for ranker, n, texts in counted if ranker == "tasks"]
        assert [n for n, texts in tasks_pages if not texts] == unread, name
        assert opened == reads, name
        one = tmp_path / f"one-{name}"
        build_corpus(BuildOptions(inputs(f"all-{name}", stop), one))
        ours, theirs = (
            manifest_io.load(chain.resolve()).files,
            manifest_io.load(one.resolve()).files,
        )
        assert "search/tasks/lines.bin" in theirs
        searched = {rel: h for rel, h in theirs.items() if rel.startswith("search/")}
        assert searched == {rel: h for rel, h in ours.items() if rel.startswith("search/")}
    assert manifest_io.verify(chain.resolve()).ok


def test_a_view_that_leaves_a_task_out_counts_its_lines_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view keeps its parent's full pages of runs but not all its tasks: the parent's
    counts hold a task that is gone, so they are not added to (search/saved.py,
    `_holds_parent_s`)."""
    from wikitrace.compiler import BuildOptions, build_corpus
    from wikitrace.corpus_schema import catalog_runs
    from wikitrace.corpus_schema import manifest as manifest_io
    from wikitrace.search import saved
    from wikitrace.versions import FrozenVersion, Store, leave_out

    from helpers import make_run, write_runs

    monkeypatch.setattr(catalog_runs, "CATALOG_PAGE_RUNS", 2)
    monkeypatch.setattr(saved, "PAGE_TEXTS", 2)
    runs = [
        make_run(f"task-{i}", success=i % 2 == 0, task=f"Sort the {i} files.") for i in range(7)
    ]
    (tmp_path / "in").mkdir()
    build_corpus(BuildOptions([write_runs(tmp_path / "in" / "runs.jsonl", runs)], tmp_path / "c"))
    leave_out(
        FrozenVersion.current(Store(tmp_path / "c")), tmp_path / "view", ["task-6"], force=False
    )
    (tmp_path / "in6").mkdir()
    build_corpus(
        BuildOptions([write_runs(tmp_path / "in6" / "runs.jsonl", runs[:6])], tmp_path / "d")
    )
    ours = manifest_io.load(tmp_path / "view").files
    theirs = manifest_io.load((tmp_path / "d").resolve()).files
    tasks = {rel: h for rel, h in theirs.items() if rel.startswith("search/tasks/")}
    assert "search/tasks/lines.bin" in tasks
    assert tasks == {rel: h for rel, h in ours.items() if rel.startswith("search/tasks/")}
