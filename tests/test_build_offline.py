"""`build --model offline`: the raw layer, a mechanical compilation, indexes, manifest, freezing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import frontmatter
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema import CorpusError, InputError, read, verify
from wikitrace.corpus_schema.lock import build_lock, lock_path
from wikitrace.corpus_schema.records import CompilationHeader, RawHeader
from wikitrace.versions import Store

from helpers import broken_links, make_run, read_jsonl, write_runs


def build(inputs: list[Path], output: Path, **options: object) -> object:
    return build_corpus(BuildOptions(inputs=inputs, output=output, **options))  # type: ignore[arg-type]


RANKER_FILES = ["postings-0001.bin", "stats.json", "texts.json"]


def test_layout_links_and_hashes(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    report = build([runs_file], corpus)
    assert report.runs == 3 and report.successes == 2 and report.compiled == 3  # type: ignore[attr-defined]
    names = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    assert names == [
        "_index.md",
        "catalog-index.json",
        "catalog.jsonl",
        "catalog/runs-0001.jsonl",
        "compilation/_index.md",
        "compilation/step-0001.md",
        "compilation/step-0002.md",
        "compilation/step-0003.md",
        "data/compilation/step-0001.json",
        "data/compilation/step-0002.json",
        "data/compilation/step-0003.json",
        "insight/_index.md",
        "manifest.json",
        "raw/_contrast_tests.json",
        "raw/_index.md",
        "raw/_patterns-0001.jsonl",
        "raw/step-0001/metadata.md",
        "raw/step-0001/solver.full.jsonl",
        "raw/step-0001/solver.index.jsonl",
        "raw/step-0002/metadata.md",
        "raw/step-0002/solver.full.jsonl",
        "raw/step-0002/solver.index.jsonl",
        "raw/step-0003/metadata.md",
        "raw/step-0003/solver.full.jsonl",
        "raw/step-0003/solver.index.jsonl",
        *(f"search/compilations/{name}" for name in RANKER_FILES),
        "search/insights/stats.json",  # no insight: nothing to index, no page of postings
        "search/insights/texts.json",
        "search/tasks/lines.bin",  # how many tasks each line is in
        *(f"search/tasks/{name}" for name in RANKER_FILES),
        "tools/actions",
        "tools/layout.json",
        "tools/turn",
    ]
    assert broken_links(corpus) == []
    assert verify(corpus).ok
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert sorted(manifest["files"]) == [n for n in names if n != "manifest.json"]
    assert manifest["model"] == "offline" and manifest["counts"]["insights"] == 0


def test_raw_turns_are_the_input_exactly(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build([runs_file], corpus)
    runs = read_jsonl(runs_file)
    for step, run in enumerate(runs, start=1):
        assert read_jsonl(corpus / f"raw/step-{step:04d}/solver.full.jsonl") == run["turns"]


def test_headers_parse_into_their_models(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build([runs_file], corpus)
    raw = RawHeader.model_validate(frontmatter.load(corpus / "raw/step-0003/metadata.md").metadata)
    assert (raw.step, raw.task_id, raw.attempt, raw.outcome, raw.turns) == (
        "step-0003",
        "t1",
        2,  # the second run of task t1
        "success",
        4,
    )
    assert raw.source == f"{runs_file.name}:3"  # as the corpus names it, not the absolute path
    post = frontmatter.load(corpus / "compilation/step-0001.md")
    # The page's header keeps short fields and names its data file, which holds the claims.
    assert "claims" not in post.metadata
    assert post.metadata["data"] == "data/compilation/step-0001.json"
    data = json.loads((corpus / post.metadata["data"]).read_text())
    header = CompilationHeader.model_validate({**post.metadata, **data})
    assert header == read.read_page(corpus, "compilation/step-0001.md", CompilationHeader).header
    assert header.compiled_by == "offline" and header.insights == []
    assert header.claims[0].evidence[0].quote == "Nothing happens."
    assert "Compiled offline" in post.content
    # The mechanical compilation quotes the failed action, verified against the raw turn.
    assert "- turn 3 (verified):\n\n  ```text\n  Nothing happens.\n  ```" in post.content


def test_every_file_says_offline(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build([runs_file], corpus)
    for rel in [
        "_index.md",
        "raw/_index.md",
        "compilation/_index.md",
        "insight/_index.md",
        "compilation/step-0002.md",
    ]:
        assert "Compiled offline" in (corpus / rel).read_text(), rel


def test_corpus_is_read_only(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build([runs_file], corpus)
    for path in [corpus, *corpus.rglob("*")]:
        assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
    for tool in ("actions", "turn"):
        assert os.access(corpus / "tools" / tool, os.X_OK)


def test_existing_output_needs_force(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build([runs_file], corpus)
    with pytest.raises(CorpusError, match="already exists; use --force"):
        build([runs_file], corpus)
    write_runs(runs_file, [make_run("only")])
    build([runs_file], corpus, force=True)
    assert json.loads((corpus / "manifest.json").read_text())["counts"]["runs"] == 1
    assert verify(corpus).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "corpus.versions", "runs.jsonl"]


def test_force_never_replaces_something_that_is_not_a_corpus(
    runs_file: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(CorpusError, match="is not a wikitrace corpus"):
        build([runs_file], precious, force=True)
    assert (precious / "notes.txt").read_text() == "keep me"


def test_bad_input_stops_before_writing_anything(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "runs.jsonl", [make_run("a"), {"task_id": "b"}, {"x": 1}])
    corpus = tmp_path / "corpus"
    with pytest.raises(InputError) as caught:
        build([path], corpus)
    assert str(caught.value) == (
        f"{path}:2: field 'task': Field required (and 2 more problems in this record) "
        "(see 'Native input format' in docs/formats.md; nothing was written; 1 more bad record; "
        "fix the input, or use --on-error skip)"
    )
    assert not corpus.exists() and not Store(corpus).dir.exists()
    assert not lock_path(corpus).exists()


def test_skip_builds_the_rest_and_lists_what_it_skipped(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "runs.jsonl", [make_run("a"), {"task_id": "b"}, make_run("c")])
    corpus = tmp_path / "corpus"
    report = build([path], corpus, on_error="skip")
    assert report.runs == 2  # type: ignore[attr-defined]
    assert report.skipped == [  # type: ignore[attr-defined]
        {
            "path": str(path),
            "line": 2,
            "at": None,
            "field": "task",
            "message": "Field required (and 2 more problems in this record)",
            "hint": "see 'Native input format' in docs/formats.md",
        }
    ]
    manifest = json.loads((corpus / "manifest.json").read_text())
    # The manifest names the file as the corpus does (no builder path): the report as given.
    kept = [{**item, "path": path.name} for item in report.skipped]  # type: ignore[attr-defined]
    assert manifest["build"]["skipped"] == kept
    metadata = frontmatter.load(corpus / "raw/step-0002/metadata.md").metadata
    assert metadata["task_id"] == "c" and metadata["source"] == f"{path.name}:3"


def test_no_valid_runs_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text("\n")
    with pytest.raises(InputError, match="no runs to build"):
        build([path], tmp_path / "corpus", on_error="skip")


def test_ids_are_padded_to_sort_numerically(tmp_path: Path) -> None:
    runs = [make_run(f"t{n}", turns=[{"role": "user", "content": "hi"}]) for n in range(10_001)]
    path = write_runs(tmp_path / "runs.jsonl", runs)
    corpus = tmp_path / "corpus"
    build([path], corpus)
    steps = sorted(p.name for p in (corpus / "raw").iterdir() if p.name.startswith("step-"))
    assert steps[0] == "step-00001" and steps[-1] == "step-10001"
    # Past 5,000 rows a layer's index is in parts.
    parts = sorted(p.name for p in (corpus / "raw" / "_index").iterdir())
    assert parts == ["0001.md", "0002.md", "0003.md"]
    assert steps == sorted(steps, key=lambda name: int(name.split("-")[1]))


def test_a_second_build_into_the_same_folder_is_refused(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    with build_lock(corpus), pytest.raises(CorpusError, match="another build into"):
        build([runs_file], corpus)
    assert not corpus.exists()


def test_interrupted_build_leaves_nothing_and_the_next_one_works(
    runs_file: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"

    def interrupt(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_corpus(BuildOptions(inputs=[runs_file], output=corpus), progress=interrupt)
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]
    build([runs_file], corpus)
    assert verify(corpus).ok


def test_a_stale_staging_folder_from_a_killed_build_is_replaced(
    runs_file: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    stale = Store(corpus).staging("v0001")  # a build killed before its pointer existed
    (stale / "raw").mkdir(parents=True)
    (stale / "raw" / "junk").write_text("half-written")
    build([runs_file], corpus)
    assert not stale.exists() and verify(corpus).ok
    assert not (corpus / "raw" / "junk").exists()


def test_an_input_that_cannot_be_opened_twice_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file: its start is read to tell its"):
        build([fifo], tmp_path / "corpus")


def test_an_input_that_changes_during_the_build_changes_nothing_built(
    runs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The input is read once: a run appended once it was read is not in the corpus (what
    was checked is what is built)."""
    import wikitrace.compiler.build as build_module
    from wikitrace.compiler.stages import read_inputs as original

    def read_then_append(*args: object) -> object:
        read = original(*args)  # type: ignore[arg-type]
        with runs_file.open("a") as handle:
            handle.write(json.dumps(make_run("late")) + "\n")
        return read

    monkeypatch.setattr(build_module, "read_inputs", read_then_append)
    before = len(read_jsonl(runs_file))
    report = build([runs_file], tmp_path / "corpus")
    assert report.runs == before and verify(tmp_path / "corpus").ok  # type: ignore[attr-defined]


def test_each_input_is_read_once_and_a_damaged_line_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from helpers import DATA

    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"edge_cases.jsonl": True}))
    with caplog.at_level("WARNING", logger="wikitrace"):
        report = build(
            [DATA / "sessions/claude-code/edge_cases.jsonl"], tmp_path / "corpus", labels=[labels]
        )
    assert report.runs == 1  # type: ignore[attr-defined]
    damaged = [r.getMessage() for r in caplog.records if "a damaged record" in r.getMessage()]
    assert [message.split(": ")[0].rsplit(":", 1)[1] for message in damaged] == ["13", "15", "16"]


def test_an_index_past_a_page_is_in_parts_that_link_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past INDEX_PAGE_ROWS rows, a layer's _index.md lists parts of up to that many rows, so
    no index page grows with the corpus; every row is in one part, and every link resolves."""
    from wikitrace.corpus_schema import index_insights, indexes

    monkeypatch.setattr(indexes, "INDEX_PAGE_ROWS", 4)
    monkeypatch.setattr(indexes.raw_index, "__defaults__", (4,))
    monkeypatch.setattr(indexes.compilation_index, "__defaults__", (4,))
    monkeypatch.setattr(index_insights.insight_index, "__defaults__", (4,))
    runs = [make_run(f"t{n}", success=n % 2 == 0, task_type=f"type{n % 2}") for n in range(10)]
    corpus = tmp_path / "corpus"
    build([write_runs(tmp_path / "runs.jsonl", runs)], corpus)
    raw_index = (corpus / "raw" / "_index.md").read_text()
    assert "This index has 10 rows: they are in parts of up to 4." in raw_index
    assert "- [raw/_index/0001.md](../raw/_index/0001.md): step-0001 to step-0004" in raw_index
    assert "- [raw/_index/0003.md](../raw/_index/0003.md): step-0009 to step-0010" in raw_index
    parts = sorted((corpus / "raw" / "_index").glob("*.md"))
    assert [p.name for p in parts] == ["0001.md", "0002.md", "0003.md"]
    rows = [line for p in parts for line in p.read_text().splitlines() if line.startswith("| [")]
    assert len(rows) == 10 and "](../../raw/step-0001/metadata.md)" in rows[0]
    assert (
        parts[0]
        .read_text()
        .startswith(
            "# part 1: step-0001 to step-0004\n\nPart of [raw/_index.md](../../raw/_index.md)."
        )
    )
    assert not broken_links(corpus.resolve())
    assert verify(corpus).ok
    # An add takes the parent's full parts of its runs as they are, and writes the rest anew.
    first = corpus.resolve()
    more = write_runs(tmp_path / "more.jsonl", [make_run("t10", task_type="type0")])
    from wikitrace.compiler import add_runs

    add_runs(BuildOptions(inputs=[more], output=corpus))
    assert "step-0011" in (corpus / "raw" / "_index" / "0003.md").read_text()
    for layer in ("raw", "compilation"):
        parts = [corpus / layer / "_index" / f"000{n}.md" for n in (1, 2, 3)]
        taken = [part.samefile(first / part.relative_to(corpus)) for part in parts]
        assert taken == [True, True, False], layer
    assert verify(corpus).ok and not broken_links(corpus.resolve())


@given(
    st.lists(
        st.sampled_from(
            [
                "ERROR",
                "Error",
                "error",
                "errors",
                "Traceback",
                "can't",
                "CAN'T",
                "Unable To",
                "no such FILE",
                "timed  out",
                "<returncode> 2",
                "<RETURNCODE>0",
                "_error",
                "x",
                " ",
                "\n",
                "é",
                "İ",
                "\u017f",
                "\u212a",
                "failed.",
                "nothing happens",
                "42",
            ]
        ),
        max_size=12,
    ).map("".join)
)
@settings(max_examples=400, deadline=None)
def test_the_error_signal_is_found_where_ignoring_case_finds_it(text: str) -> None:
    """Searched in lower case for speed, it finds what the case-blind pattern finds, at the
    same place, non-ASCII text included."""
    from wikitrace.compiler.signals import _ERROR_SIGNAL, error_signal

    fast, slow = error_signal(text), _ERROR_SIGNAL.search(text)
    assert (fast and fast.span()) == (slow and slow.span())
