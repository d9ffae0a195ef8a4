"""What `add` does that scales with what it changes: a version made by adding runs reads its
rankers' counts back from its parent's pages (tokenizing only the new texts), saves the same
search files as one build of the same runs, and freezes its files as it writes them; a chain
of adds writes, page for page, what one build of its runs writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, add_runs, build_corpus, mine_contrast, mine_table
from wikitrace.compiler import build as build_module
from wikitrace.corpus_schema import catalog_runs, index_insights, indexes, layout
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.corpus_schema.layout import CATALOG_PAGE_RUNS, MANIFEST, MINED_TESTS
from wikitrace.corpus_schema.writing import file_digest
from wikitrace.search import rank, saved

from helpers import make_run, planted, write_runs

RUNS = [
    make_run(f"task-{i}", success=i % 3 == 0, task=f"Carry the {w} to the {p}.")
    for i, (w, p) in enumerate(
        [
            ("mug", "sink"),
            ("lamp", "desk"),
            ("book", "shelf"),
            ("kettle", "stove"),
            ("pen", "drawer"),
            ("cup", "table"),
        ]
    )
]


def _inputs(folder: Path, runs: list) -> Path:
    """The runs in a file named as the others, so that each run's source reads the same."""
    folder.mkdir()
    return write_runs(folder / "runs.jsonl", runs)


def test_a_chain_of_adds_saves_the_search_files_of_one_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(saved, "PAGE_TEXTS", 2)  # pages kept, the last rewritten, new ones
    one, chain = tmp_path / "one", tmp_path / "chain"
    build_corpus(BuildOptions([_inputs(tmp_path / "all", RUNS)], one))
    build_corpus(BuildOptions([_inputs(tmp_path / "a", RUNS[:3])], chain))
    tokenized: list[int] = []
    real = rank._tokenize

    def counting(texts, **kwargs):  # type: ignore[no-untyped-def]
        tokenized.append(len(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(rank, "_tokenize", counting)
    add_runs(BuildOptions([_inputs(tmp_path / "b", RUNS[:4])], chain))
    # The fourth run's task and its compilation alone: the third's page is rewritten from its
    # counts, the first page kept, and the insights' texts are the parent's.
    assert tokenized == [1, 1]
    # The first page is the parent's file, linked; the third's, rewritten, is not.
    versions = chain.resolve().parent
    for page, same in (("postings-0001.bin", True), ("postings-0002.bin", False)):
        before, after = (versions / v / "search" / "tasks" / page for v in ("v0001", "v0002"))
        assert before.exists() and after.samefile(before) is same
    add_runs(BuildOptions([_inputs(tmp_path / "c", RUNS)], chain))
    ours, theirs = manifest_io.load(chain.resolve()).files, manifest_io.load(one.resolve()).files
    for name in ("tasks", "compilations"):
        files = {rel: h for rel, h in theirs.items() if rel.startswith(f"search/{name}/")}
        assert any("postings-0003.bin" in rel for rel in files)
        assert files == {rel: h for rel, h in ours.items() if rel.startswith(f"search/{name}/")}
    assert manifest_io.verify(chain.resolve()).ok


def test_every_file_and_folder_of_an_added_version_is_read_only(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions([_inputs(tmp_path / "a", RUNS[:3])], corpus))
    add_runs(BuildOptions([_inputs(tmp_path / "b", RUNS)], corpus))
    root = corpus.resolve()
    assert root.name == "v0002"
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files, "."]:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            assert not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), (folder, name)
    assert os.access(root / "tools" / "actions", os.X_OK)


def _files(root: Path) -> dict[str, bytes]:
    """Every file of a version but its manifests, by path. What differs between a chain of
    adds and one build is there alone: manifest.json (the time it was made; and an added
    version's lists what changed since its parent's, on which it is written), and the
    manifests an added version is written on (`manifests/vNNNN.json`, its parent's and those
    that one is written on), which one build has none of."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    del found[MANIFEST]
    return {rel: data for rel, data in found.items() if not manifest_io.is_chained(rel)}


def _listed(root: Path) -> dict[str, str]:
    """Every file the manifest of the version at `root` lists, as `load` gives them, but the
    manifests it is written on (see `_files`)."""
    listed = manifest_io.load(root).files
    return {rel: h for rel, h in listed.items() if not manifest_io.is_chained(rel)}


@pytest.mark.parametrize(
    ("cuts", "page_rows"),
    [([29], 5000), ([29, 30, 36], 5000), ([29, 30, 36], 8)],
    ids=["one add", "three adds", "three adds, indexes in parts"],
)
def test_a_chain_of_adds_writes_the_pages_of_one_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cuts: list[int], page_rows: int
) -> None:
    # planted(): a contrast found from the first 29 runs on, recounted by each add; a
    # divergence for each task with both outcomes (0-7), and the compilation pages that name
    # them. Task 7's second trial comes first: its task is seen first, but diverges only
    # once its first trial (the 30th run, an add's) fails. In parts of 8 rows, an add links
    # the parent's full parts of the raw and compilations' indexes: they must be what one
    # build writes.
    for index in (indexes.raw_index, indexes.compilation_index, index_insights.insight_index):
        monkeypatch.setattr(index, "__defaults__", (page_rows,))
    # And the catalog's runs in pages of as many, the rankers' texts too.
    monkeypatch.setattr(catalog_runs, "CATALOG_PAGE_RUNS", min(page_rows, CATALOG_PAGE_RUNS))
    monkeypatch.setattr(saved, "PAGE_TEXTS", min(page_rows, saved.PAGE_TEXTS))
    counted: list[tuple[str, int, bool]] = []  # each ranker's pages: whether given texts
    real_page = saved._page

    def page(job):  # type: ignore[no-untyped-def]
        counted.append((job[1].name if job[1] else "", job[2], job[0] is not None))
        return real_page(job)

    monkeypatch.setattr(saved, "_page", page)
    planted_runs = planted()
    runs = [planted_runs[29], *planted_runs[:29], *planted_runs[30:]]
    one, chain = tmp_path / "one", tmp_path / "chain"
    build_corpus(BuildOptions([_inputs(tmp_path / "all", runs)], one))
    bounds = [0, *cuts, len(runs)]
    for n, stop in enumerate(bounds[1:]):
        # Each input holds the runs before it too (an add skips them): sources read alike.
        given = BuildOptions([_inputs(tmp_path / f"part-{n}", runs[:stop])], chain)
        counted.clear()
        (add_runs if n else build_corpus)(given)
    ours, theirs = chain.resolve(), one.resolve()
    assert ours.name == f"v{len(bounds) - 1:04d}"
    pages = _files(theirs)
    assert sum(rel.startswith("insight/insight-") for rel in pages) == 9  # 1 contrast, 8 tasks
    assert _files(ours) == pages
    mine, built = manifest_io.load(ours), manifest_io.load(theirs)
    assert (_listed(ours), mine.counts) == (_listed(theirs), built.counts)
    # Each add's manifest is written on its parent's, linked in with those it is written on.
    assert built.parent_manifest is None
    assert mine.parent_manifest == f"manifests/v{len(bounds) - 2:04d}.json"
    chain = [f"manifests/v{n:04d}.json" for n in range(1, len(bounds) - 1)]
    assert sorted(rel for rel in mine.files if manifest_io.is_chained(rel)) == chain
    for n, rel in enumerate(chain, start=1):
        assert (ours / rel).samefile(tmp_path / "chain.versions" / f"v{n:04d}" / MANIFEST)
    if page_rows == 8:
        part = "raw/_index/0003.md"  # steps 17-24: linked by each add
        assert (ours / part).samefile(tmp_path / "chain.versions" / "v0001" / part)
        # The catalog's full pages of runs, linked by each add, the compilation pages of their
        # runs that a mined lesson's recount names anew (their lines are the same) included.
        for number in (1, 2, 3):
            page = f"catalog/runs-{number:04d}.jsonl"
            assert (ours / page).samefile(tmp_path / "chain.versions" / "v0001" / page)
        assert not (ours / "catalog/runs-0004.jsonl").samefile(
            tmp_path / "chain.versions" / "v0001" / "catalog/runs-0004.jsonl"
        )
        # The compilations' ranker pages of the runs of the catalog's pages the last add
        # linked (1-4; 5 is new): the parent's, taken with their texts neither read nor
        # hashed (no texts given to count); the tasks' ranker's too, its common lines (none
        # here) the same as its parent's (search/tasks/lines.bin).
        parent = tmp_path / "chain.versions" / f"v{len(bounds) - 2:04d}"
        for number in (1, 2, 3, 4):
            page = f"catalog/runs-{number:04d}.jsonl"
            assert (ours / page).samefile(parent / page)
            page = f"search/compilations/postings-{number:04d}.bin"
            assert (ours / page).samefile(parent / page)
        assert [(n, texts) for name, n, texts in counted if name == "compilations"] == [
            (1, False),
            (2, False),
            (3, False),
            (4, False),
            (5, True),
        ]
        assert [(n, texts) for name, n, texts in counted if name == "tasks"] == [
            (1, False),
            (2, False),
            (3, False),
            (4, False),
            (5, True),
        ]
        # The insights' index parts (the contrast's type, then the divergences): the last add
        # shows the same rows (the contrast recounted to the same row), so both are linked.
        parts = sorted(part.name for part in (ours / "insight/_index").iterdir())
        assert parts == ["001-0001.md", "002-0001.md"]
        for name in parts:
            part = f"insight/_index/{name}"
            assert (ours / part).samefile(parent / part)
    versions = sorted((tmp_path / "chain.versions").glob("v*"))
    assert len(versions) == len(bounds) - 1
    assert all(manifest_io.verify(version).ok for version in versions)
    # Frozen through the folders its manifest's files are in, with no walk: every one.
    for version in versions:
        folders = [version, *(path for path in version.rglob("*") if path.is_dir())]
        assert not [path for path in folders if path.stat().st_mode & 0o222]


def test_an_add_writes_anew_a_parent_s_index_part_that_begins_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A parent written before parts named their ids ("# part 1 of 3"): its parts are not
    # taken, and the add's are what one build writes.
    for index in (indexes.raw_index, indexes.compilation_index, index_insights.insight_index):
        monkeypatch.setattr(index, "__defaults__", (4,))
    runs = planted()
    one, chain = tmp_path / "one", tmp_path / "chain"
    build_corpus(BuildOptions([_inputs(tmp_path / "all", runs)], one))
    build_corpus(BuildOptions([_inputs(tmp_path / "a", runs[:28])], chain))
    parent = chain.resolve()
    part = parent / "raw" / "_index" / "0001.md"
    text = part.read_text()
    assert text.startswith("# part 1: step-0001 to step-0004\n")
    old = text.replace("# part 1: step-0001 to step-0004\n", "# part 1 of 7\n", 1)
    for changed in (part.parent, part, parent / MANIFEST):
        changed.chmod(0o755 if changed.is_dir() else 0o644)
    part.write_text(old)
    manifest = manifest_io.load(parent)
    files = {**manifest.files, "raw/_index/0001.md": file_digest(part)}
    (parent / MANIFEST).write_bytes(b"".join(manifest_io.dump_chunks(manifest, files.items())))
    assert manifest_io.verify(parent).ok
    add_runs(BuildOptions([_inputs(tmp_path / "b", runs)], chain))
    ours = chain.resolve()
    assert not (ours / "raw/_index/0001.md").samefile(part)
    assert (ours / "raw/_index/0002.md").samefile(parent / "raw/_index/0002.md")
    assert _files(ours) == _files(one.resolve())


def test_an_add_of_another_task_type_keeps_the_tests_of_the_type_it_does_not_touch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # planted(): the "shop" runs' contrast and divergences; then runs of another task type,
    # of both outcomes, added. The add counts "desk" anew and takes "shop"'s tests from its
    # parent (reading its runs only to write its lesson, significant still): the version is
    # page for page what one build of every run writes, tests file included.
    desk = [
        make_run(f"desk-{i}", success=i % 2 == 0, task_type="desk", task=f"Clear desk {i}.")
        for i in range(12)
    ]
    one, chain = tmp_path / "one", tmp_path / "chain"
    build_corpus(BuildOptions([_inputs(tmp_path / "all", planted() + desk)], one))
    build_corpus(BuildOptions([_inputs(tmp_path / "a", planted())], chain))
    counted: list[str | None] = []
    real = mine_contrast._type_tests

    def counting(task_type, members, fdr, known=None):  # type: ignore[no-untyped-def]
        counted.append(task_type)
        return real(task_type, members, fdr, known)

    monkeypatch.setattr(mine_contrast, "_type_tests", counting)
    add_runs(BuildOptions([_inputs(tmp_path / "b", planted() + desk)], chain))
    assert counted == ["desk", "shop"]  # shop after the adjustment, for its lesson
    assert _files(chain.resolve()) == _files(one.resolve())
    assert MINED_TESTS in manifest_io.load(chain.resolve()).files


def test_a_chain_of_adds_links_the_full_pages_of_mined_patterns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of 2 runs: the first kept, the last rewritten, new ones; as one build writes them.
    for module in (layout, mine_table, build_module):
        monkeypatch.setattr(module, "MINED_PATTERNS_PAGE_RUNS", 2)
    one, chain = tmp_path / "one", tmp_path / "chain"
    build_corpus(BuildOptions([_inputs(tmp_path / "all", RUNS)], one))
    build_corpus(BuildOptions([_inputs(tmp_path / "a", RUNS[:3])], chain))
    add_runs(BuildOptions([_inputs(tmp_path / "b", RUNS)], chain))
    versions = chain.resolve().parent
    for page, same in ((1, True), (2, False)):
        before, after = (
            versions / v / layout.mined_patterns_page(page) for v in ("v0001", "v0002")
        )
        assert before.exists() and after.samefile(before) is same
    ours, theirs = manifest_io.load(chain.resolve()).files, manifest_io.load(one.resolve()).files
    pages = {rel: h for rel, h in theirs.items() if rel.startswith("raw/_patterns")}
    assert sorted(pages) == [layout.mined_patterns_page(n) for n in (1, 2, 3)]
    assert pages == {rel: h for rel, h in ours.items() if rel.startswith("raw/_patterns")}
    table = mine_table.read_patterns(chain.resolve(), ours)
    assert [run.step for run in table] == list(range(1, len(RUNS) + 1))


def test_the_one_file_of_mined_patterns_of_older_versions_is_read(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions([_inputs(tmp_path / "a", RUNS)], corpus))
    files = manifest_io.load(corpus.resolve()).files
    paged = mine_table.read_patterns(corpus.resolve(), files)
    old = tmp_path / "old"
    (old / "raw").mkdir(parents=True)
    (old / layout.MINED_PATTERNS).write_bytes(
        (corpus.resolve() / layout.mined_patterns_page(1)).read_bytes()
    )
    assert layout.mined_patterns_files([layout.MINED_PATTERNS, "raw/_index.md"]) == [
        layout.MINED_PATTERNS
    ]
    read_back = mine_table.read_patterns(old, [layout.MINED_PATTERNS])
    assert list(read_back) == list(paged) and len(paged) == len(RUNS)
    assert len(mine_table.read_patterns(old, [])) == 0  # built before mining
