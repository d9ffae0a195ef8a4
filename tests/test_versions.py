"""Corpus versions: build makes v0001, add compiles only new runs into a new frozen version."""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
from array import array
from pathlib import Path
from typing import Any

import frontmatter
import pytest

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.corpus_schema import CorpusError, verify
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema import writing as writing_module
from wikitrace.corpus_schema.layout import MINED_TESTS, mined_patterns_page
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.manifest import load, manifest_key, read_seal
from wikitrace.corpus_schema.read import read_page
from wikitrace.corpus_schema.records import RawHeader
from wikitrace.corpus_schema.spill import read_version_rows
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    Store,
    derive_version,
    list_versions,
)
from wikitrace.versions import (
    frozen as frozen_module,
)

from helpers import FakeLLM, broken_links, good_answer, make_run, run, write_runs


def options(inputs: list[Path], corpus: Path, **extra: Any) -> BuildOptions:
    return BuildOptions(inputs=inputs, output=corpus, cache_dir=corpus.parent / "cache", **extra)


@pytest.fixture
def grown(tmp_path: Path) -> tuple[Path, FakeLLM]:
    """A corpus compiled by a (fake) model from 3 runs, then 2 new runs added (one repeated)."""
    llm = FakeLLM(answer=lambda m: good_answer(m[0]["content"], insights=2))
    first = write_runs(tmp_path / "first.jsonl", [make_run("t1"), make_run("t2", success=True)])
    corpus = tmp_path / "mem"
    build_corpus(options([first], corpus, model=llm.model), llm=llm)
    again = write_runs(
        tmp_path / "again.jsonl",
        [make_run("t2", success=True), make_run("t3"), make_run("t1", success=True)],
    )
    report = add_runs(options([again], corpus), llm=llm)
    assert (report.version, report.parent, report.runs, report.duplicates) == (
        "v0002",
        "v0001",
        2,
        1,
    )
    return corpus, llm


def test_build_makes_a_pointer_to_the_first_version(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "mem"
    report = build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    assert report.version == "v0001"
    assert os.readlink(corpus) == "mem.versions/v0001"
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["version"]["name"] == "v0001" and manifest["version"]["parent"] is None
    assert [e.event for e in Store(corpus).history()] == ["built"]


def test_add_keeps_ids_and_compiles_only_new_runs(grown: tuple[Path, FakeLLM]) -> None:
    corpus, llm = grown
    store = Store(corpus)
    assert store.versions() == ["v0001", "v0002"] and store.current() == "v0002"
    assert len(llm.calls) == 4  # 2 for the build, 2 for the new runs; the repeat is not sent
    old, new = store.version_path("v0001"), store.version_path("v0002")
    assert verify(old).ok and verify(new).ok and broken_links(new) == []
    manifest = json.loads((new / "manifest.json").read_text())
    assert manifest["version"] == {
        "name": "v0002",
        "parent": "v0001",
        "changes": {
            "runs": 2,
            "steps": ["step-0003", "step-0004"],
            "insights": ["insight-0005", "insight-0006", "insight-0007", "insight-0008"],
            "task_ids": ["t3", "t1"],
            "duplicates": 1,
            "inputs": ["reading 1 file as native (detected from content)"],
            "changed_insights": [],
            "records": [],
            "reason": "",
        },
    }
    assert manifest["counts"] == {
        "runs": 4,
        "successes": 2,
        "failures": 2,
        "compilations": 4,
        "insights": 8,
    }
    # The parent's files are the same files, not rewritten; their ids did not move.
    for rel in (
        "raw/step-0001/solver.full.jsonl",
        "compilation/step-0002.md",
        "insight/insight-0004.md",
    ):
        assert (old / rel).stat().st_ino == (new / rel).stat().st_ino
    assert not (old / "raw/step-0003").exists()
    header = frontmatter.load(new / "insight/insight-0007.md")
    assert header["source_step"] == "step-0004" and header["source_outcome"] == "success"
    # The attempt count goes on from the parent's runs of the same task.
    assert frontmatter.load(new / "raw/step-0004/metadata.md")["attempt"] == 2
    index = (new / "insight/_index.md").read_text()
    assert "insight-0001" in index and "insight-0008" in index
    assert "4 runs (2 succeeded, 2 failed), 4 compilations, 8 lessons" in " ".join(
        (new / "_index.md").read_text().split()
    )


def test_add_reuses_cached_replies(grown: tuple[Path, FakeLLM], tmp_path: Path) -> None:
    corpus, llm = grown
    Store(corpus).deploy("v0001", reason="test")
    calls = len(llm.calls)
    report = add_runs(options([tmp_path / "again.jsonl"], corpus), llm=llm)
    assert report.version == "v0003" and report.cache_hits == 2 and len(llm.calls) == calls


def test_nothing_new_makes_no_version(grown: tuple[Path, FakeLLM], tmp_path: Path) -> None:
    corpus, llm = grown
    report = add_runs(options([tmp_path / "again.jsonl"], corpus), llm=llm)
    assert report.version is None and report.duplicates == 3
    assert Store(corpus).versions() == ["v0001", "v0002"]
    assert sorted(p.name for p in Store(corpus).dir.iterdir()) == [
        ".v0001.rows",
        ".v0001.seal",
        ".v0002.rows",
        ".v0002.seal",
        "history.jsonl",
        "v0001",
        "v0002",
    ]


def test_a_candidate_waits_and_deploy_moves_the_pointer(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9")])
    report = add_runs(options([more], corpus), deploy=False)
    store = Store(corpus)
    assert report.version == "v0002" and store.current() == "v0001"
    assert [(r.name, r.status) for r in list_versions(store)] == [
        ("v0001", "current"),
        ("v0002", "candidate"),
    ]
    assert run(["versions", str(corpus), "--deploy", "2"]) == (
        0,
        f"{store.dir}/v0002\n",
        f"{corpus} -> v0002 (was v0001)\n",
    )
    assert (corpus / "raw/step-0004").is_dir()
    assert [(r.name, r.status) for r in list_versions(store)] == [
        ("v0001", "previous"),
        ("v0002", "current"),
    ]
    code, _, err = run(["versions", str(corpus), "--deploy", "v0007"])
    assert code == 2 and "no version v0007" in err


def test_a_changed_parent_is_refused(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    target = corpus / "compilation/step-0001.md"
    target.chmod(0o644)
    target.write_text("tampered\n")
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9")])
    with pytest.raises(CorpusError, match=r"v0001 .* does not match its manifest"):
        add_runs(options([more], corpus))
    assert Store(corpus).versions() == ["v0001"]


def test_a_copied_corpus_folder_is_no_pointer_to_add_to(runs_file: Path, tmp_path: Path) -> None:
    built = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=built))
    copy = tmp_path / "copy"
    shutil.copytree(built, copy, symlinks=False)  # what `cp -rL` makes
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9")])
    with pytest.raises(CorpusError, match="is a corpus folder, not the link"):
        add_runs(options([more], copy))
    assert not Store(copy).dir.exists() and verify(copy).ok


def test_cli_add_versions_and_verify_all(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "mem"
    assert run(["-q", "build", str(runs_file), "-o", str(corpus)])[0] == 0
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9"), make_run("t1")])
    code, out, err = run(["-q", "add", str(corpus), str(more), str(runs_file)])
    assert (code, out, err) == (0, f"{Store(corpus).dir}/v0002\n", "")
    code, out, _ = run(["versions", str(corpus), "--json"])
    rows = json.loads(out)
    assert [(r["name"], r["status"], r["parent"], r["runs"], r["added_runs"]) for r in rows] == [
        ("v0001", "previous", None, 3, 3),
        ("v0002", "current", "v0001", 4, 1),
    ]
    code, out, err = run(["verify", str(corpus), "--all"])
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "v0001: ok: 36 files match the manifest",
        "v0002: ok: 42 files match the manifest",  # v0001's manifest, linked in, among them
    ]
    code, out, err = run(["-q", "add", str(corpus), str(more)])
    assert (code, out) == (0, "")
    assert err == "nothing to add: all 2 runs are already in v0002\n"
    code, out, _ = run(["versions", str(corpus), "--history"])
    assert [line.split()[1:3] for line in out.splitlines()] == [
        ["built", "v0001:"],
        ["added", "v0002"],
    ]


def test_compilation_summaries_match_the_full_headers(grown: tuple[Path, FakeLLM]) -> None:
    from wikitrace.corpus_schema import read

    corpus, _ = grown
    full = [page.header.model_dump(exclude={"claims"}) for page in read.compilations(corpus)]
    quick = [page.header.model_dump() for page in read.compilation_summaries(corpus)]
    assert len(full) == 4 and quick == full


def test_a_title_that_looks_like_the_claims_key_is_read_whole(tmp_path: Path) -> None:
    from wikitrace.corpus_schema import read

    title = 'A title\nclaims: [] --- with "quotes" and: colons'
    llm = FakeLLM(
        answer=lambda m: json.dumps({**json.loads(good_answer(m[0]["content"])), "title": title})
    )
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1")])
    build_corpus(options([runs], tmp_path / "mem", model=llm.model), llm=llm)
    (page,) = read.compilation_summaries(tmp_path / "mem")
    assert page.header.title == title


def test_one_writer_at_a_time(runs_file: Path, tmp_path: Path) -> None:
    from wikitrace.corpus_schema.lock import build_lock

    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9")])
    with build_lock(corpus):
        with pytest.raises(CorpusError, match="or an add, update or deploy"):
            add_runs(options([more], corpus))
        code, _, err = run(["versions", str(corpus), "--deploy", "v0001"])
        assert code == 1 and "another build into" in err
    assert Store(corpus).versions() == ["v0001"]


def test_versions_current_prints_the_folder(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    assert run(["versions", str(corpus), "--current"]) == (0, f"{corpus}.versions/v0001\n", "")
    code, _, err = run(["versions", str(tmp_path / "nothing"), "--current"])
    missing = tmp_path / "nothing"
    assert (code, err) == (
        1,
        f"error: {missing} does not exist (make a corpus with `wikitrace build -o`)\n",
    )
    (tmp_path / "folder").mkdir()
    code, _, err = run(["versions", str(tmp_path / "folder"), "--current"])
    assert code == 1 and "is not a wikitrace corpus pointer" in err


def test_an_attempt_with_the_same_turns_as_another_is_a_run_of_its_own(tmp_path: Path) -> None:
    # Two trials of a deterministic agent log the very same turns; the attempt tells them apart.
    first = [make_run("t1", metadata={"attempt": 1}), make_run("t2", metadata={"attempt": 1})]
    second = [make_run("t1", metadata={"attempt": 2}), make_run("t2", metadata={"attempt": 2})]
    a = write_runs(tmp_path / "a.jsonl", first)
    b = write_runs(tmp_path / "b.jsonl", second)
    both = tmp_path / "both"
    assert build_corpus(options([a, b], both)).runs == 4
    corpus = tmp_path / "corpus"
    build_corpus(options([a], corpus))
    report = add_runs(options([b], corpus))
    assert (report.runs, report.duplicates) == (2, 0)
    again = add_runs(options([a, b], corpus))
    assert (again.runs, again.duplicates, again.version) == (0, 4, None)


def _hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files of finished versions hashed from here on (by `verify`, or by an add
    checking its parent), not those of a version being made."""
    hashed: list[str] = []
    real = writing_module.file_digest

    def counting(path: str | Path) -> str:
        if ".partial/" not in os.fspath(path):
            hashed.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(writing_module, "file_digest", counting)
    return hashed


def _age(root: Path, seconds: int) -> None:
    """Every file of `root` last changed `seconds` ago (as a version looks a while after its
    build): a file changed within manifest.RACY_NS of being hashed is never sealed."""
    when = time.time_ns() - seconds * 10**9
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path, ns=(when, when))


def test_an_add_hashes_only_the_files_no_seal_vouches_for(
    runs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    store = Store(corpus)
    v1 = store.version_path("v0001")
    files = len(load(v1).files)
    sealed = read_seal(store.seal_path("v0001"), v1, files)
    assert sealed is not None and len(sealed) == files and 0 not in sealed
    hashed = _hashed(monkeypatch)
    add_runs(options([write_runs(tmp_path / "a.jsonl", [make_run("t8")])], corpus))
    assert hashed == []  # every file of v0001 was sealed as it was written
    v2 = store.version_path("v0002")
    assert 0 not in (read_seal(store.seal_path("v0002"), v2, len(load(v2).files)) or [0])
    # A page changed after the build, to as many bytes: hashed, and the add refused.
    page = v2 / "compilation/step-0001.md"
    text = page.read_bytes()
    before = page.stat().st_mtime_ns
    page.chmod(0o644)
    page.write_bytes(text[:-1] + (b"x" if text[-1:] != b"x" else b"y"))
    os.utime(page, ns=(before + 10**9, before + 10**9))
    assert page.stat().st_size == len(text)
    more = write_runs(tmp_path / "b.jsonl", [make_run("t9")])
    with pytest.raises(CorpusError, match=r"v0002 .* does not match its manifest"):
        add_runs(options([more], corpus))
    assert hashed == [str(page)]
    # `wikitrace verify` never takes a seal's word: it hashes every file.
    hashed.clear()
    page.write_bytes(text)
    os.utime(page, ns=(before, before))
    assert verify(v2).ok and len(hashed) == len(load(v2).files)


def test_an_add_keeps_each_file_of_its_parent_as_a_link_listed_as_before(
    runs_file: Path, tmp_path: Path
) -> None:
    """Every file of the parent the add does not write anew (runs, compilations, insights)
    is the parent's own file (one inode), listed with the parent's hash and sealed; only
    the indexes, catalog, rankers, tools and mined lessons are written anew."""
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    store = Store(corpus)
    v1 = store.version_path("v0001")
    _age(v1, 60)
    parent = FrozenVersion.current(store)
    kept = {rel: file_hash for rel, file_hash, _ in parent.kept_files()}
    add_runs(options([write_runs(tmp_path / "a.jsonl", [make_run("t8")])], corpus))
    v2 = store.version_path("v0002")
    listed = load(v2).files
    linked = {rel for rel in kept if (v2 / rel).stat().st_ino == (v1 / rel).stat().st_ino}
    assert any(rel.startswith("raw/") for rel in linked)
    assert {rel: listed[rel] for rel in linked} == {rel: kept[rel] for rel in linked}
    for rel in set(kept) - linked:  # written anew: a mined lesson recounted, or its pages
        assert rel in (mined_patterns_page(1), MINED_TESTS) or rel.startswith(
            ("insight/", "compilation/")
        ), rel
    keys = read_seal(store.seal_path("v0002"), v2, len(listed))
    assert keys is not None and 0 not in keys
    assert verify(v2).ok


def test_a_version_without_a_seal_is_sealed_by_the_first_check(
    runs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    store = Store(corpus)
    root, seal = store.version_path("v0001"), store.seal_path("v0001")
    seal.unlink()
    files = len(load(root).files)
    hashed = _hashed(monkeypatch)
    # Files changed just now are hashed, and not sealed: they are hashed again next time.
    assert verify(root, seal).ok and len(hashed) == files
    assert read_seal(seal, root, files) == array("q", [0] * files)
    assert verify(root, seal).ok and len(hashed) == 2 * files
    _age(root, 60)
    assert verify(root, seal).ok and len(hashed) == 3 * files
    assert verify(root, seal).ok and len(hashed) == 3 * files  # sealed now
    # A seal is for the manifest it was made with: a manifest written again drops it.
    manifest = root / "manifest.json"
    data = manifest.read_bytes()
    root.chmod(0o755)
    manifest.unlink()
    manifest.write_bytes(data)
    assert read_seal(seal, root, files) is None
    assert read_seal(seal, root, files + 1) is None
    assert verify(root, seal).ok and len(hashed) == 4 * files


def _read_both(store: Store, name: str) -> tuple[FrozenVersion, FrozenVersion]:
    """Version `name` read from the rows kept beside it, and from its pages."""
    kept = FrozenVersion.load(name, store.version_path(name), rows=store.rows_path(name))
    return kept, FrozenVersion.load(name, store.version_path(name))


def _same(kept: FrozenVersion, paged: FrozenVersion) -> None:
    assert kept.rows == paged.rows
    assert kept.insight_rows == paged.insight_rows
    assert kept.fingerprints == paged.fingerprints and kept.attempts == paged.attempts
    assert list(kept.insights) == list(paged.insights)


def test_the_rows_kept_beside_a_version_are_what_its_pages_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built offline with mined lessons and runs with attempt numbers, then added to by a
    model, then an insight rejected by a gate's derivation (a withheld insight)."""
    example = Path(__file__).resolve().parents[1] / "examples" / "tau-bench-airline.jsonl"
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[example], output=corpus))
    store = Store(corpus)
    llm = FakeLLM(answer=lambda m: good_answer(m[0]["content"], insights=2))
    runs = [
        make_run("t1", metadata={"attempt": 1}),
        make_run("t1", metadata={"attempt": 2}),
        make_run("t2", success=True),
    ]
    add_runs(options([write_runs(tmp_path / "a.jsonl", runs)], corpus, model="fake"), llm=llm)
    base = FrozenVersion.current(store)
    rejected = base.insights[list(base.insights)[-1]]
    change = Derivation(reason="test")
    change.insights[rejected.header.id] = (
        rejected.header.model_copy(update={"status": "rejected"}),
        corpus_read.guideline(rejected),
    )
    with build_lock(corpus):
        derive_version(store, base, change, deploy=True)
    assert store.versions() == ["v0001", "v0002", "v0003"]
    for name in store.versions():
        kept, paged = _read_both(store, name)
        _same(kept, paged)
    kept, _ = _read_both(store, "v0003")
    assert {row.attempt for row in kept.rows} == {"", "1", "2"}
    assert any(row.pattern for row in kept.insight_rows)
    assert any(row.status == "rejected" for row in kept.insight_rows)
    assert (
        kept.task_text(1)
        == read_page(kept.root, "raw/step-0001/metadata.md", RawHeader)
        .body.split("```text\n")[1]
        .split("\n```")[0]
    )
    # Read from the kept rows: no page header is read for them.
    monkeypatch.setattr(frozen_module, "_from_pages", _never)
    assert FrozenVersion.current(store).rows == kept.rows


def test_a_version_held_for_an_add_is_out_of_the_collector_s_passes_until_the_block_ends(
    runs_file: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    store = Store(corpus)
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    with FrozenVersion.held(store) as base:
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        assert base.rows == FrozenVersion.current(store).rows
    assert gc.get_freeze_count() == 0
    gc.disable()
    try:  # a caller that paused collection finds it paused
        with FrozenVersion.held(store):
            assert not gc.isenabled()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()


def _never(root: Path) -> Any:
    raise AssertionError(f"{root}: read from its pages")


def test_rows_kept_for_another_manifest_or_damaged_are_not_used(
    runs_file: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    add_runs(options([write_runs(tmp_path / "a.jsonl", [make_run("t8")])], corpus))
    store = Store(corpus)
    v1, v2 = store.rows_path("v0001"), store.rows_path("v0002")
    bound = manifest_key(store.version_path("v0002"))
    assert read_version_rows(v2, bound) is not None
    assert read_version_rows(v1, bound) is None  # v0001's rows name v0001's manifest
    shutil.copyfile(v1, v2)
    _same(*_read_both(store, "v0002"))
    v2.write_bytes(b'{"rows": 1}\nnot json\n')
    assert read_version_rows(v2, bound) is None
    _same(*_read_both(store, "v0002"))


@pytest.mark.parametrize("how", ["linked gone", "linked changed", "never linked", "rewritten"])
def test_an_add_checks_each_parent_file_it_takes_without_a_walk(
    runs_file: Path, tmp_path: Path, how: str
) -> None:
    """With a seal, an add checks the parent through the links it makes (a link whose key
    is not the sealed one is hashed), the files it never links (catalog, rankers, indexes,
    tools) and those it writes anew from the parent's (mining's table, read and written
    again with the new runs' rows): a change in any is refused, and no version is made."""
    more = write_runs(tmp_path / "more.jsonl", [make_run("t9")])
    corpus = tmp_path / "mem"
    build_corpus(BuildOptions(inputs=[runs_file], output=corpus))
    v1 = Store(corpus).version_path("v0001")
    target = {
        "linked gone": "raw/step-0002/solver.full.jsonl",
        "linked changed": "raw/step-0001/metadata.md",
        "never linked": "catalog.jsonl",
        "rewritten": mined_patterns_page(1),
    }[how]
    (v1 / target).parent.chmod(0o755)
    if how == "linked gone":
        (v1 / target).unlink()
    else:
        (v1 / target).chmod(0o644)
        (v1 / target).write_bytes((v1 / target).read_bytes() + b" ")
    with pytest.raises(CorpusError, match=rf"v0001 .* does not match its manifest .*{target}"):
        add_runs(options([more], corpus))
    assert Store(corpus).versions() == ["v0001"]
    assert not verify(v1).ok
