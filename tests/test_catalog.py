"""catalog.jsonl: what test-time readers load instead of every page, the same as the pages."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.corpus_schema import catalog
from wikitrace.corpus_schema.catalog import (
    LazyCatalog,
    PastRun,
    catalog_lines,
    read_catalog,
    records_in,
    tasks_and_records,
)
from wikitrace.corpus_schema.catalog_build import from_pages
from wikitrace.corpus_schema.layout import (
    CATALOG,
    CATALOG_INDEX,
    CATALOG_PAGE_RUNS,
    catalog_page_rel,
)
from wikitrace.corpus_schema.writing import remove_tree
from wikitrace.search import consolidate
from wikitrace.tools.memory import Memory

from helpers import run


@contextlib.contextmanager
def _pages_read() -> Iterator[list[str]]:
    """The pages read (read.read_page) while inside, by path."""
    from wikitrace.corpus_schema import read

    seen: list[str] = []
    real = read.read_page

    def spy(root_: Path, rel: str, model: type, **options: bool) -> object:
        seen.append(rel)
        return real(root_, rel, model, **options)

    read.read_page = spy  # type: ignore[assignment]
    try:
        yield seen
    finally:
        read.read_page = real  # type: ignore[assignment]


def _from_pages(root: Path) -> Memory:
    from wikitrace.corpus_schema import manifest

    runs, insights, withheld = from_pages(root)
    offline = manifest.load(root).compiled_by == "offline"
    return Memory(root, runs, insights, offline, withheld)


@pytest.mark.parametrize("which", ["example", "toy"])
def test_the_catalog_holds_what_the_pages_say(which: str, toy_corpus: Path, tmp_path: Path) -> None:
    if which == "example":
        root = tmp_path / "example"
        example = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
        assert run(["-q", "build", str(example), "-o", str(root)])[0] == 0
    else:
        root = toy_corpus
    runs, insights, offline, withheld, leaders = read_catalog(root.resolve())
    pages = _from_pages(root.resolve())
    assert runs == pages.runs and insights == pages.insights
    assert (offline, withheld) == (pages.offline, pages.withheld)
    assert leaders == consolidate.of_lessons(pages.insights)
    task = "Fetch the letter from the drawer" if which == "toy" else "Cancel my reservation"
    assert Memory.load(root).first_message(task).text == pages.first_message(task).text


def test_a_gate_decision_and_a_view_write_their_own_catalog(
    toy_corpus: Path, tmp_path: Path
) -> None:
    view = tmp_path / "view"
    code, _, err = run(["view", str(toy_corpus), "--exclude-task", "drawer-1", "-o", str(view)])
    assert code == 0, err
    runs, insights, *_ = read_catalog(view)
    assert runs == _from_pages(view).runs and insights == _from_pages(view).insights
    assert all(r.task_id != "drawer-1" for r in runs)


def test_a_damaged_catalog_is_a_one_line_error(tmp_path: Path) -> None:
    root = tmp_path / "c"
    example = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
    assert run(["-q", "build", str(example), "-o", str(root)])[0] == 0
    path = root.resolve() / CATALOG
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-40] + b"\n")
    code, _, err = run(["prompt", str(root), "Cancel my reservation"])
    assert code == 1 and "c/catalog.jsonl: damaged (JSONDecodeError" in err
    assert "wikitrace verify" in err and len(err.splitlines()) == 1
    assert run(["verify", str(root)])[0] == 1


def test_a_probe_memory_shows_only_its_own_insights(toy_corpus: Path, tmp_path: Path) -> None:
    """The gate hands the agent a view with some insights hidden: its catalog says so."""
    from wikitrace.versions import FrozenVersion, Store
    from wikitrace.versions.derive import write_view

    base = FrozenVersion.current(Store(toy_corpus))
    shown = Memory.load(toy_corpus).insights
    hidden = shown[0].id
    view = write_view(base, tmp_path / "probe", hidden={hidden})
    assert [i.id for i in Memory.load(view).insights] == [i.id for i in shown[1:]]
    assert hidden not in Memory.load(view).first_message("Fetch the letter").text


def test_a_version_made_by_adding_runs_takes_the_parent_s_lines_and_says_the_same(
    tmp_path: Path,
) -> None:
    """`add` reads only the pages it adds; its catalog is what reading every page gives."""
    import json

    from wikitrace.compiler import BuildOptions, add_runs, build_corpus

    from helpers import FakeLLM, good_answer, make_run, write_runs

    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        return good_answer(prompt, wrong_quote="kettle" in prompt)

    llm = FakeLLM(answer=answer)
    first = write_runs(
        tmp_path / "a.jsonl",
        [make_run("mug"), make_run("mug", success=True), make_run("kettle", success=True)],
    )
    more = write_runs(tmp_path / "b.jsonl", [make_run("lamp"), make_run("kettle")])
    corpus = tmp_path / "corpus"
    options = BuildOptions(inputs=[first], output=corpus, model=llm.model, use_cache=False)
    build_corpus(options, llm=llm)
    add_runs(BuildOptions(inputs=[more], output=corpus, model=llm.model, use_cache=False), llm=llm)
    root = corpus.resolve()
    assert root.name == "v0002"
    runs, insights, *_ = read_catalog(root)
    pages = _from_pages(root)
    assert runs == pages.runs and insights == pages.insights
    assert [i.verified for i in insights].count(False) >= 1  # the kettle's wrong quotes
    assert len(runs) == 5 and json.loads((root / CATALOG).read_text().splitlines()[0])
    # What the catalog of v0002 reads: the pages of the runs it adds, nothing of the parent's.
    from wikitrace.corpus_schema import manifest
    from wikitrace.corpus_schema.catalog_build import catalog_of

    parent_files = manifest.load(root.parent / "v0001").files
    with _pages_read() as seen:
        files = {
            rel: b"".join(chunks or [])
            for rel, chunks in catalog_of(
                root,
                offline=False,
                leaders_of=consolidate.of_lessons,
                parent=root.parent / "v0001",
                parent_files=parent_files,
                changed={
                    rel
                    for rel, file_hash in manifest.load(root).files.items()
                    if parent_files.get(rel) != file_hash
                },
            )
        }
    assert files == {rel: (root / rel).read_bytes() for rel in files}
    assert list(files) == [catalog_page_rel(1), CATALOG, CATALOG_INDEX]
    assert not any("step-0001" in rel or "step-0002" in rel for rel in seen), seen
    assert any("step-0004" in rel for rel in seen)


def test_a_corpus_made_before_catalogs_is_read_page_by_page(
    toy_corpus: Path, tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "old"
    shutil.copytree(toy_corpus.resolve(), copy)
    copy.chmod(0o755)
    (copy / CATALOG).unlink()
    loaded = Memory.load(copy)
    assert loaded.runs == _from_pages(copy).runs and loaded.insights == _from_pages(copy).insights
    task = "Fetch the letter from the drawer"
    assert loaded.first_message(task).text == Memory.load(toy_corpus).first_message(task).text


# --- the rankers saved with the catalog -------------------------------------------------------


def _queries(memory: Memory) -> list[str]:
    """Each task, title, guideline and applicability, a few of their words, and queries that
    share no word with the corpus or hold none at all."""
    texts = [run.task for run in memory.runs] + [run.explanation for run in memory.runs]
    for item in memory.insights:
        texts += [item.title, item.guideline, item.applicability]
    words = sorted({word for text in texts for word in text.split()})
    return [*texts, *(" ".join(words[i::7]) for i in range(7)), "zzyzx qwv", "", "the of a"]


@pytest.mark.parametrize("which", ["toy", "view", "added"])
def test_the_saved_rankers_rank_as_rankers_built_from_the_catalog(
    which: str, toy_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.search.rank import SAVED_SEARCHES, Ranker, search_texts

    root = toy_corpus.resolve()
    if which == "view":
        root = tmp_path / "view"
        code, _, err = run(["view", str(toy_corpus), "--exclude-task", "drawer-1", "-o", str(root)])
        assert code == 0, err
    elif which == "added":  # a version whose rankers hold the runs it adds
        from wikitrace.compiler import BuildOptions, add_runs, build_corpus

        from helpers import FakeLLM, make_run, write_runs

        llm = FakeLLM()
        corpus = tmp_path / "corpus"
        first = write_runs(
            tmp_path / "a.jsonl", [make_run("mug"), make_run("kettle", success=True)]
        )
        more = write_runs(tmp_path / "b.jsonl", [make_run("lamp"), make_run("desk", success=True)])
        for source, act in ((first, build_corpus), (more, add_runs)):
            act(BuildOptions([source], corpus, model=llm.model, use_cache=False), llm=llm)  # type: ignore[operator]
        root = corpus.resolve()
        assert root.name == "v0002" and len(Memory.load(root).runs) == 4
    loaded = Memory.load(root)
    assert loaded.runs and loaded.insights
    assert sorted(p.name for p in (root / "search").iterdir()) == sorted(SAVED_SEARCHES)
    for name in SAVED_SEARCHES:
        size = len(loaded.insights if name == "insights" else loaded.runs)
        saved = Ranker.load(root / "search" / name, size)
        built = Ranker.of(search_texts(name, lambda: loaded.runs, lambda: loaded.insights))
        for query in _queries(loaded):
            for matched_only in (False, True):
                everything = range(size)
                assert saved.rank(query, everything, matched_only=matched_only) == built.rank(
                    query, everything, matched_only=matched_only
                ), (name, query)
    # The first message and every kind of search load them: nothing is built.
    monkeypatch.setattr(Ranker, "of", None)
    fresh = Memory.load(root)
    task = "Fetch the letter from the drawer"
    assert fresh.first_message(task, max_tokens=300).text
    for memory in (fresh, Memory.load(root, lazy=True)):
        found = memory.search(loaded.runs[-1].task, limit=3, min_score=0.0)
        found += memory.search(loaded.insights[0].title, ["insights"], limit=3)
        assert {hit.kind for hit in found} == {"insights", "compilations", "tasks"}


def test_a_damaged_saved_ranker_is_a_one_line_error(tmp_path: Path) -> None:
    root = tmp_path / "c"
    example = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
    assert run(["-q", "build", str(example), "-o", str(root)])[0] == 0
    count = root.resolve() / "search" / "tasks" / "texts.json"
    count.chmod(0o644)
    written = count.read_bytes()
    count.write_bytes(b'{"texts":11,"indexed":true}')
    code, _, err = run(["prompt", str(root), "Cancel my reservation"])
    assert code == 1 and "search/tasks: damaged (ValueError: it ranks 11 texts" in err
    assert "wikitrace verify" in err and len(err.splitlines()) == 1
    assert run(["verify", str(root)])[0] == 1
    # A page that loads, of the right size, whose texts are past its own: found when ranked.
    from array import array

    from wikitrace.corpus_schema.counts import MappedPostings, PostingsPage

    count.write_bytes(written)
    page = count.parent / "postings-0001.bin"
    read = MappedPostings(page)
    fields = {
        name: array(part.format, part)
        for name, part in vars(read).items()
        if isinstance(part, memoryview)
    }
    fields["texts"] = array("H", [60000] * len(read.texts))
    page.chmod(0o644)
    page.write_bytes(PostingsPage(**fields, digests=read.digests).dumps())
    del read
    code, _, err = run(["prompt", str(root), "Cancel my reservation"])
    assert code == 1 and "tasks/postings-0001.bin: damaged (IndexError: text 60000 is past" in err
    assert len(err.splitlines()) == 1


def test_a_corpus_made_before_saved_rankers_builds_them(toy_corpus: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "old"
    shutil.copytree(toy_corpus.resolve(), copy)
    copy.chmod(0o755)
    remove_tree(copy / "search")
    task = "Fetch the letter from the drawer"
    for budget in (None, 300):
        assert (
            Memory.load(copy).first_message(task, max_tokens=budget).text
            == Memory.load(toy_corpus).first_message(task, max_tokens=budget).text
        )


def test_a_catalog_of_version_1_is_read_as_it_was_written(toy_corpus: Path, tmp_path: Path) -> None:
    """Corpora made by earlier builds wrote a JSON object a line; they load the same memory."""
    import json
    import shutil

    copy = tmp_path / "old"
    shutil.copytree(toy_corpus.resolve(), copy)
    copy.chmod(0o755)
    head, *lines = [line.decode() for line in catalog_lines(copy)]
    names = json.loads(head)
    old = [json.dumps({"catalog": 1, "offline": names["offline"], "withheld": names["withheld"]})]
    for line in lines:
        kind, *values = json.loads(line)
        if kind == "run":
            old.append(json.dumps({"run": dict(zip(names["run"], values, strict=True))}))
        else:
            item = dict(zip(names["insight"], values, strict=True))
            old.append(json.dumps({"insight": item, "leader": item.pop("leader")}))
    (copy / CATALOG).chmod(0o644)
    (copy / CATALOG).write_text("\n".join(old) + "\n")
    assert read_catalog(copy) == read_catalog(toy_corpus.resolve())
    task = "Fetch the letter from the drawer"
    assert (
        Memory.load(copy).first_message(task).text
        == Memory.load(toy_corpus).first_message(task).text
    )
    # A catalog whose lines hold other values than this wikitrace's is not read by position.
    (copy / CATALOG).write_text(
        "\n".join([head.replace('"explanation"', '"summary"'), *lines]) + "\n"
    )
    code, _, err = run(["prompt", str(copy), task])
    assert code == 1 and "damaged (ValueError: its lines hold other values" in err


WORDS = ["mug", "Mug", "mugs", "the", "a", "of", "drawer", "key", "keys", "ключ", "x", "42"]
WORDS += ["don't", "", "!!", "open_drawers", "os.path"]


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join), max_size=14),
    chunk=st.integers(1, 5),
    block=st.integers(1, 6),
)
def test_a_ranker_tokenized_a_part_at_a_time_is_the_one_bm25s_makes_at_once(
    texts: list[str], chunk: int, block: int
) -> None:
    """Its saved files are byte for byte those of bm25s's index of all the texts at once,
    tokenized (and stemmed) as wikitrace does (texts empty, of stop words only, or repeating
    words included), its scores computed
    `block` (text, word) pairs at a time or all at once (the form a version saved before its
    rankers' postings, which tests/test_rank_postings.py compares with)."""
    import tempfile

    import bm25s

    from wikitrace.search.rank import Ranker, _tokenize

    with tempfile.TemporaryDirectory() as scratch:
        ours = Path(scratch) / "ours"
        made = Ranker.of(iter(texts), chunk=chunk, block=block, folder=Path(scratch))
        made.save(ours)
        tokens = _tokenize(texts)
        theirs = Path(scratch) / "theirs"
        theirs.mkdir()
        if tokens.vocab:
            index = bm25s.BM25()
            index.index(tokens, show_progress=False)
            index.save(theirs, show_progress=False)
        files = sorted(p.name for p in ours.iterdir())
        assert files == sorted([*(p.name for p in theirs.iterdir()), "texts.json"])
        for name in files:
            if name != "texts.json":
                assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
        assert Ranker.load(ours, len(texts)).size == len(texts)
        # Nothing is left behind but what was saved, and the ranker made ranks as bm25s's.
        assert sorted(p.name for p in Path(scratch).iterdir()) == ["ours", "theirs"]
        if tokens.vocab:
            query = " ".join(texts[:2]) or "mug"
            assert made.rank(query, range(len(texts))) == Ranker(len(texts), index).rank(
                query, range(len(texts))
            )


def test_a_catalog_of_version_2_is_read_as_it_was_written(toy_corpus: Path, tmp_path: Path) -> None:
    """Corpora made before the catalog's runs were paged hold every line in catalog.jsonl;
    they load the same memory, whole and line by line."""
    import json
    import shutil

    copy = tmp_path / "old"
    shutil.copytree(toy_corpus.resolve(), copy)
    copy.chmod(0o755)
    head, *lines = catalog_lines(copy)
    names = json.loads(head)
    assert names.pop("runs") == len(read_catalog(copy)[0]) and names["catalog"] == 3
    assert names.pop("page_runs") == CATALOG_PAGE_RUNS
    old = [json.dumps({**names, "catalog": 2}).encode(), *lines]
    (copy / CATALOG).chmod(0o644)
    (copy / CATALOG).write_bytes(b"\n".join(old) + b"\n")
    (copy / "catalog").chmod(0o755)
    shutil.rmtree(copy / "catalog")
    assert read_catalog(copy) == read_catalog(toy_corpus.resolve())
    assert list(records_in(copy / CATALOG)) == list(records_in(toy_corpus.resolve() / CATALOG))
    lazy, whole = LazyCatalog.read(copy), read_catalog(copy)
    assert lazy is not None and list(lazy.runs) == whole[0] and list(lazy.insights) == whole[1]


def _boilerplate_as_it_was(texts: list[str], share: float = 0.3) -> list[str]:
    """without_boilerplate before it counted lines by their hashes, reading the texts twice."""
    counts: dict[str, int] = {}
    for text in set(texts):
        for line in {line.strip() for line in text.splitlines() if line.strip()}:
            counts[line] = counts.get(line, 0) + 1
    limit = max(2, int(len(set(texts)) * share))
    common = {line for line, n in counts.items() if n >= limit and len(line) > 20}
    if not common:
        return list(texts)
    return [
        "\n".join(line for line in text.splitlines() if line.strip() not in common) or text
        for text in texts
    ]


LINES = [
    "Solve the task below, step by step.",
    "  Solve the task below, step by step. ",
    "",
    "Fix the bug in parser.py",
    "short",
    "You are a helpful assistant for airline customers",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(LINES), max_size=5).map("\n".join), max_size=12))
def test_boilerplate_counted_by_hashes_is_the_boilerplate_counted_by_text(texts: list[str]) -> None:
    from wikitrace.search.rank import without_boilerplate

    assert list(without_boilerplate(lambda: iter(texts))) == _boilerplate_as_it_was(texts)


def test_a_build_s_catalog_is_what_it_wrote_and_what_its_pages_say(tmp_path: Path) -> None:
    """A build and an add take their new runs' and insights' catalog lines from what they
    wrote, reading none of those pages back; the lines are what the pages say, for tasks,
    ids and guidelines that a page's header and body must carry as they are, for a run whose
    compilation failed, for judged runs, and for a model's lesson whose quotes were not
    found."""
    import json

    from wikitrace.compiler import BuildOptions, add_runs, build_corpus

    from helpers import FakeLLM, good_answer, make_run, write_runs

    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        if "lamp" in prompt:
            return "not an answer"  # never valid: the run is not compiled
        answer = json.loads(good_answer(prompt, insights=2, wrong_quote="kettle" in prompt))
        for insight in answer["insights"]:  # what a page folds and escapes, read back
            insight["guideline"] = "Check   the *cabinet*\n# first, `then` [act](x) \\ done  "
            insight["title"] = 'yes: #1 -- "quoted" \u00e9'
        return json.dumps(answer)

    tasks = [
        "  indented first line\n\ttab, trailing spaces   \n\n",
        "```text\na fence inside\n```\n````",
        "line\r\nwith CRLF\rand CR",
        "unicode: é 中文 🙂 \u2028 separator",
        "--- not a header ---\n## Turns\n## Task\n",
        "x",
    ]
    ids = ["yes", "1e3", "null", "007", "a: b", "#hash"]
    runs = []
    for number, (task, task_id) in enumerate(zip(tasks, ids, strict=True)):
        item = make_run(task_id, success=number % 2 == 0)
        item["task"] = task
        runs.append(item)
    runs[1]["metadata"] = {"outcome_source": "judged"}
    runs.append(make_run("lamp"))
    runs.append(make_run("kettle", success=True))
    first = write_runs(tmp_path / "a.jsonl", runs[:5])
    more = write_runs(tmp_path / "b.jsonl", runs[5:])
    llm = FakeLLM(answer=answer)
    corpus = tmp_path / "corpus"
    with _pages_read() as seen:
        options = BuildOptions(inputs=[first], output=corpus, model=llm.model, use_cache=False)
        build_corpus(options, llm=llm)
        v1 = corpus.resolve()
        add_runs(
            BuildOptions(inputs=[more], output=corpus, model=llm.model, use_cache=False), llm=llm
        )
    assert not [rel for rel in seen if rel.startswith(("raw/", "compilation/", "insight/"))], seen
    for root in (v1, corpus.resolve()):
        runs_read, insights, *_ = read_catalog(root)
        pages = _from_pages(root)
        assert runs_read == pages.runs and insights == pages.insights
    shown = [t.replace("\r\n", "\n").replace("\r", "\n").rstrip() for t in tasks]
    assert [r.task for r in pages.runs][:6] == shown
    assert [r.task_id for r in pages.runs][:6] == ids
    assert [r.judged for r in pages.runs][:2] == [False, True]
    assert [r.title is None for r in pages.runs] == [False] * 6 + [True, False]
    assert [i.verified for i in pages.insights].count(False) == 2  # the kettle's two lessons


@pytest.mark.parametrize("scipy_first", [False, True])
def test_bm25s_is_imported_without_scipy_numba_or_jax_and_they_are_put_back(
    tmp_path: Path, scipy_first: bool
) -> None:
    """Whatever else is installed (scipy is, for the tests; a jax that bm25s would import and
    run is made here), ranking imports bm25s alone, and leaves a module imported before as
    it was."""
    fake = tmp_path / "site" / "jax"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "lax.py").write_text("def top_k(scores, k):\n    return scores[:k], list(range(k))\n")
    code = textwrap.dedent(
        f"""
        import sys
        if {scipy_first}:
            import scipy.sparse
        before = sys.modules.get("scipy.sparse")
        from wikitrace.search.rank import Ranker, _bm25s
        bm25s = _bm25s()
        assert not bm25s.SCIPY_AVAILABLE and not bm25s.NUMBA_AVAILABLE
        assert not bm25s.selection.JAX_IS_AVAILABLE
        assert sys.modules.get("scipy.sparse") is before and "jax" not in sys.modules
        assert ("scipy" in sys.modules) is {scipy_first}
        ranker = Ranker.of(iter(["open the drawer", "take the mug", "open the safe"]))
        print(ranker.rank("open the drawer", range(3)))
        import jax.lax  # the fake, still importable
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "[0, 2, 1]"


def test_a_lazy_catalog_reads_a_line_once_and_a_pass_makes_the_rest_at_once(
    toy_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An insight's line holds its group's first too: reading either keeps both. A pass over
    the records (a first message's over every run) makes those not made yet, the same."""
    runs, insights, _, _, leaders = read_catalog(toy_corpus)
    lines = LazyCatalog.read(toy_corpus)
    assert lines is not None
    read: list[int] = []
    real = LazyCatalog._line
    monkeypatch.setattr(LazyCatalog, "_line", lambda self, n: read.append(n) or real(self, n))
    assert lines.leaders[1] == leaders[1] and lines.insights[1] == insights[1]
    assert lines.insights[-1] == insights[-1] and lines.leaders[-1] == leaders[-1]
    assert read == [1 + len(runs) + 1, 1 + len(runs) + len(insights) - 1]
    assert lines.runs[2] == runs[2]
    assert list(lines.runs) == runs and list(lines.insights) == insights
    assert list(lines.leaders) == leaders
    assert sorted(read) == list(range(1, 1 + len(runs) + len(insights)))  # each line once


def test_a_message_that_lists_no_lesson_reads_none(toy_corpus: Path) -> None:
    """When the task's domain cannot be told, the message lists no lesson: a memory that reads
    its records when first asked for (as `prompt` loads one) then reads no lesson's line."""
    task = "Write a limerick about my cat"
    memory = Memory.load(toy_corpus, indexed=True)
    message = memory.first_message(task, max_tokens=6000)
    assert message.type_unsure is not None and not message.insights
    assert message == Memory.load(toy_corpus).first_message(task, max_tokens=6000)
    assert memory.insights.made == 0  # type: ignore[attr-defined]


def test_a_message_makes_the_records_of_its_type_s_lessons_alone(toy_corpus: Path) -> None:
    """A message for a task of one type reads every lesson's line, but makes a record of those
    of its type alone: the same message as a memory read whole."""
    task = "Fetch the ring from the safe in the study."
    _, insights, _, _, _ = read_catalog(toy_corpus)
    of_type = [i for i, item in enumerate(insights) if item.task_type == "safe"]
    assert 0 < len(of_type) < len(insights)
    memory = Memory.load(toy_corpus, indexed=True)
    message = memory.first_message(task, task_type="safe")
    assert message == Memory.load(toy_corpus).first_message(task, task_type="safe")
    assert message.insights
    assert memory.insights.made == len(of_type)  # type: ignore[attr-defined]
    assert list(memory.insights_of_types({"safe"})) == [(i, insights[i]) for i in of_type]


def test_a_damaged_lesson_line_read_for_its_type_is_a_one_line_error(
    toy_corpus: Path, tmp_path: Path
) -> None:
    """A line written over with garbage of its length (the index still matches the catalog's
    size) is found when `prompt` reads it for its lesson's type."""
    root = tmp_path / "damaged"
    shutil.copytree(toy_corpus, root)
    path = root / CATALOG
    path.chmod(0o644)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[-1] = b"x" * (len(lines[-1]) - 1) + b"\n"
    path.write_bytes(b"".join(lines))
    code, _, err = run(["prompt", str(root), "Fetch the ring", "--task-type", "safe"])
    assert code == 1 and "damaged/catalog.jsonl: damaged (JSONDecodeError" in err
    assert "wikitrace verify" in err and len(err.splitlines()) == 1


def _paged_catalog(folder: Path, runs: list[PastRun], page_runs: int) -> Path:
    """A version 3 catalog of `runs` (no insights), its runs in pages of `page_runs`, written
    as catalog_build writes its lines."""
    from wikitrace.corpus_schema.catalog import CATALOG_VERSION, INSIGHT_FIELDS, RUN_FIELDS

    head = {
        "catalog": CATALOG_VERSION,
        "offline": True,
        "withheld": 0,
        "runs": len(runs),
        "page_runs": page_runs,
        "run": RUN_FIELDS,
        "insight": ["leader", *INSIGHT_FIELDS],
    }
    (folder / "catalog").mkdir(parents=True, exist_ok=True)
    for start in range(0, len(runs), page_runs):
        lines = [
            orjson.dumps(["run", *(getattr(run, n) for n in RUN_FIELDS)]) + b"\n"
            for run in runs[start : start + page_runs]
        ]
        (folder / catalog_page_rel(start // page_runs + 1)).write_bytes(b"".join(lines))
    (folder / "catalog.jsonl").write_bytes(orjson.dumps(head) + b"\n")
    return folder / "catalog.jsonl"


@settings(max_examples=30, deadline=None)
@given(
    tasks=st.lists(st.text(), min_size=1, max_size=7),
    types=st.lists(st.one_of(st.none(), st.text(max_size=5)), min_size=7, max_size=7),
)
def test_the_tasks_of_a_page_read_alone_are_its_records(
    tmp_path_factory: pytest.TempPathFactory, tasks: list[str], types: list[str | None]
) -> None:
    runs = [
        PastRun(
            step=f"step-{i + 1:05d}",
            task_id=f'"t\\{i}"',
            task_type=types[i],
            outcome="failure",
            task=task,
            explanation=f'said "{task}" \\ {i}',
        )
        for i, task in enumerate(tasks)
    ]
    path = _paged_catalog(tmp_path_factory.mktemp("catalog"), runs, 3)
    # Pages 1 and 3 (runs 1-3 and 7): their tasks alone; page 2 (runs 4-6) its records.
    expected = [run.task if i // 3 + 1 in (1, 3) else run for i, run in enumerate(runs)]
    assert list(tasks_and_records(path, {1, 3})) == expected
    assert list(tasks_and_records(path, ())) == list(records_in(path)) == runs


def test_a_page_read_for_its_tasks_that_is_not_as_written_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [PastRun(f"step-{i:05d}", "t", None, "success", f"task {i}") for i in (1, 2)]
    path = _paged_catalog(tmp_path, runs, 2)
    # A line the match does not find the task in is read whole: the same tasks.
    with monkeypatch.context() as patch:
        patch.setattr(catalog, "_TASK", re.compile(b"(?!)"))
        assert list(tasks_and_records(path, {1})) == ["task 1", "task 2"]
    # A line cut short before its task ends: read whole, it is the line's error.
    page = tmp_path / catalog_page_rel(1)
    first, second = page.read_bytes().splitlines(keepends=True)
    page.write_bytes(first + second[:20] + b"\n")
    with pytest.raises(ValueError):
        list(tasks_and_records(path, {1}))
