"""A version made from another writes its manifest as what changed since its parent's (linked
into the version's own `manifests/`): `load` gives every file and `verify` checks every file
of the folder through the chain, which the folder holds whole."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.compiler import build as build_module
from wikitrace.corpus_schema import CorpusError, verify, writing
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.corpus_schema.layout import MANIFEST
from wikitrace.corpus_schema.writing import file_digest
from wikitrace.versions import Store

from helpers import make_run, write_runs


def _chain(tmp_path: Path, adds: int) -> Path:
    """A corpus built from one run, then `adds` adds of one run each; its store's folder."""
    corpus = tmp_path / "corpus"
    runs = [make_run("t0", success=True)]
    build_corpus(BuildOptions([write_runs(tmp_path / "in-0.jsonl", runs)], corpus))
    for n in range(1, adds + 1):
        runs.append(make_run(f"t{n}", success=n % 2 == 0))
        add_runs(BuildOptions([write_runs(tmp_path / f"in-{n}.jsonl", runs)], corpus))
    return tmp_path / "corpus.versions"


def _on_disk(root: Path) -> set[str]:
    """Every file of the version at `root` but its manifest."""
    found = {p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir()}
    return found - {MANIFEST}


def _written(root: Path) -> dict[str, Any]:
    """manifest.json as written."""
    written = orjson.loads((root / MANIFEST).read_bytes())
    assert isinstance(written, dict)
    return written


def _rewrite(path: Path, written: dict[str, Any]) -> None:
    """Edit a manifest of the version (made read-only) to hold `written`, as wikitrace lays
    one out."""
    path.chmod(0o644)
    path.write_bytes(orjson.dumps(written, option=orjson.OPT_INDENT_2) + b"\n")


def test_a_chain_of_three_adds_lists_what_changed_and_verifies_every_file(
    tmp_path: Path,
) -> None:
    store = _chain(tmp_path, 3)
    built = _written(store / "v0001")
    assert "parent_manifest" not in built  # a build's manifest: every file, as before chains
    assert set(built["files"]) == _on_disk(store / "v0001")
    for n in (2, 3, 4):
        root = store / f"v{n:04d}"
        written = _written(root)
        assert written["parent_manifest"] == f"manifests/v{n - 1:04d}.json"
        listed = manifest_io.load(root).files
        assert set(listed) == _on_disk(root)
        # Written: what differs from the parent's, its manifest among them, and no more.
        before = manifest_io.load(store / f"v{n - 1:04d}").files
        assert written["files"] == {
            rel: file_hash for rel, file_hash in listed.items() if before.get(rel) != file_hash
        }
        assert any(rel.startswith("raw/step-") for rel in before)
        assert not any(rel in before for rel in written["files"] if rel.startswith("raw/step-"))
        assert written["files"][f"manifests/v{n - 1:04d}.json"] == file_digest(
            store / f"v{n - 1:04d}" / MANIFEST
        )
        # Every manifest it is written on is in the folder: it checks alone, anywhere.
        assert {rel for rel in listed if manifest_io.is_chained(rel)} == {
            f"manifests/v{k:04d}.json" for k in range(1, n)
        }
        report = verify(root)
        assert report.ok and report.checked == len(listed)
    # Moved elsewhere, the last version still checks: nothing it needs is outside it.
    moved = tmp_path / "moved"
    (store / "v0004").chmod(0o755)  # a folder moved to another parent is written to ('..')
    os.rename(store / "v0004", moved)
    assert verify(moved).ok


def test_a_changed_parent_file_is_caught_by_verify_on_the_child(tmp_path: Path) -> None:
    store = _chain(tmp_path, 2)
    parent, child = store / "v0002", store / "v0003"
    page = parent / "raw" / "step-0001" / "metadata.md"
    assert page.samefile(child / "raw" / "step-0001" / "metadata.md")
    page.chmod(0o644)
    page.write_text(page.read_text() + "edited\n")
    assert verify(child).changed == ["raw/step-0001/metadata.md"]
    assert verify(parent).changed == ["raw/step-0001/metadata.md"]


def test_an_edited_manifest_of_the_chain_is_caught_by_verify(tmp_path: Path) -> None:
    # The parent's manifest, linked into the child, edited to list a page with another hash
    # (as one would to pass an edited page off): its own hash no longer matches.
    store = _chain(tmp_path, 2)
    child = store / "v0003"
    chained = child / "manifests" / "v0002.json"
    written = orjson.loads(chained.read_bytes())
    rel = "raw/step-0002/metadata.md"  # added by v0002, kept by v0003
    assert rel in written["files"] and rel not in _written(child)["files"]
    written["files"][rel] = "sha256:" + "0" * 64
    _rewrite(chained, written)
    report = verify(child)
    assert "manifests/v0002.json" in report.changed
    assert rel in report.changed  # the file now checked against the edited hash
    # Gone altogether: the child cannot be read, and says which file is missing.
    chained.parent.chmod(0o755)
    chained.unlink()
    with pytest.raises(CorpusError, match=r"manifests/v0002\.json, is missing"):
        verify(child)


def test_a_manifest_naming_a_parent_outside_the_version_is_refused(tmp_path: Path) -> None:
    store = _chain(tmp_path, 1)
    child = store / "v0002"
    written = _written(child)
    written["parent_manifest"] = "../v0001/manifest.json"
    _rewrite(child / MANIFEST, written)
    with pytest.raises(CorpusError, match=r"field 'parent_manifest': '\.\./v0001/manifest\.json'"):
        manifest_io.load(child)


def test_a_chain_that_loops_or_leaves_the_folder_through_a_link_is_refused_at_once(
    tmp_path: Path,
) -> None:
    store = _chain(tmp_path, 2)
    child = store / "v0003"
    chained = child / "manifests" / "v0002.json"
    # Naming itself, with many entries: refused at the first repeat, not after 10,000 reads.
    written = orjson.loads(chained.read_bytes())
    written["parent_manifest"] = "manifests/v0002.json"
    written["files"].update({f"x/{n}": "sha256:" + "0" * 64 for n in range(5000)})
    chained.chmod(0o644)
    chained.write_bytes(orjson.dumps(written))
    with pytest.raises(CorpusError, match=r"v0002\.json: field 'parent_manifest'"):
        manifest_io.load(child)
    # A link out of the version, and a pipe, where the parent's manifest should be.
    outside = tmp_path / "outside.json"
    outside.write_bytes(orjson.dumps(_written(store / "v0002")))
    chained.parent.chmod(0o755)
    chained.unlink()
    chained.symlink_to(outside)
    with pytest.raises(CorpusError, match=r"v0002\.json: cannot be read as a manifest"):
        manifest_io.load(child)
    chained.unlink()
    os.mkfifo(chained)
    with pytest.raises(CorpusError, match=r"v0002\.json: not a regular file"):
        manifest_io.load(child)


def test_an_add_to_a_version_whose_manifest_was_edited_is_refused(tmp_path: Path) -> None:
    store = _chain(tmp_path, 1)
    parent = store / "v0002"
    written = _written(parent)
    written["created"] = "2000-01-01T00:00:00+00:00"
    _rewrite(parent / MANIFEST, written)
    runs = [make_run(f"t{n}") for n in range(3)]
    with pytest.raises(CorpusError, match=r"v0002 .* \(1 file, first manifest\.json\)"):
        add_runs(BuildOptions([write_runs(tmp_path / "more.jsonl", runs)], tmp_path / "corpus"))


def test_a_parent_whose_manifest_cannot_be_vouched_for_gets_a_child_of_every_file(
    tmp_path: Path,
) -> None:
    # A manifest written before checksums (none in it), sealed all the same: an add takes its
    # files through the seal, and lists every file anew rather than written on it.
    corpus = tmp_path / "corpus"
    runs = [make_run("t0", success=True)]
    build_corpus(BuildOptions([write_runs(tmp_path / "a.jsonl", runs)], corpus))
    store = Store(corpus)
    parent, seal = store.version_path("v0001"), store.seal_path("v0001")
    keys = manifest_io.read_seal(seal, parent, len(manifest_io.load(parent).files))
    assert keys is not None
    written = _written(parent)
    del written["checksum"]
    _rewrite(parent / MANIFEST, written)
    (parent / MANIFEST).chmod(0o444)
    manifest_io.write_seal(seal, parent, keys)
    assert "no checksum" in (verify(parent).manifest or "")
    runs.append(make_run("t1"))
    add_runs(BuildOptions([write_runs(tmp_path / "b.jsonl", runs)], corpus))
    child = store.version_path("v0002")
    assert "parent_manifest" not in _written(child)
    assert not (child / "manifests").exists()
    assert verify(child).ok


def test_the_chain_is_cut_at_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest_io, "CHAIN_LIMIT", 2)
    store = _chain(tmp_path, 3)
    chained = {
        name: sorted(p.name for p in (store / name / "manifests").glob("*"))
        for name in ("v0002", "v0003", "v0004")
        if (store / name / "manifests").exists()
    }
    # v0004 would hold a chain of 3: it lists every file, and holds none.
    assert chained == {"v0002": ["v0001.json"], "v0003": ["v0001.json", "v0002.json"]}
    assert "parent_manifest" not in _written(store / "v0004")
    assert all(verify(store / f"v{n:04d}").ok for n in range(1, 5))


def test_what_changed_lists_files_gone_as_null_and_load_takes_them_off(
    tmp_path: Path,
) -> None:
    parent = {"a": "sha256:1", "b": "sha256:2", "c": "sha256:3"}
    files = [("a", "sha256:1"), ("b", "sha256:9"), ("d", "sha256:4")]
    assert list(manifest_io.changes(parent, iter(files))) == [
        ("b", "sha256:9"),
        ("c", None),
        ("d", "sha256:4"),
    ]
    # Written and read back: a version made from one that lacks a file of its parent's.
    store = _chain(tmp_path, 1)
    child = store / "v0002"
    listed = manifest_io.load(child)
    dropped = next(rel for rel in listed.files if rel.startswith("raw/step-0001/"))
    written = _written(child)
    written["files"][dropped] = None
    del written["checksum"]
    manifest = manifest_io.Manifest.model_validate(
        {**written, "files": {rel: h for rel, h in written["files"].items() if h}}
    )
    entries = sorted(written["files"].items())
    (child / MANIFEST).chmod(0o644)
    (child / MANIFEST).write_bytes(b"".join(manifest_io.dump_chunks(manifest, entries)))
    assert dropped not in manifest_io.load(child).files
    assert verify(child).extra == [dropped]
    assert verify(child).manifest is None  # written as wikitrace writes it, checksum right


def test_an_add_refuses_a_parent_whose_mining_tests_were_changed_before_it_mines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The p-values an add takes from its parent (raw/_contrast_tests.json) are checked against
    # the parent's manifest before mining reads them, not only when they are linked after.
    store = _chain(tmp_path, 1)
    parent = store / "v0002"
    tests = parent / "raw" / "_contrast_tests.json"
    assert "raw/_contrast_tests.json" in manifest_io.load(parent).files
    (parent / "raw").chmod(0o755)
    tests.chmod(0o644)
    tests.write_bytes(tests.read_bytes().replace(b"{", b"{ ", 1))
    runs = [make_run(f"t{n}", success=n % 2 == 0) for n in range(3)]

    def mined(*args: object) -> None:
        raise AssertionError("the parent's tests were read before they were checked")

    monkeypatch.setattr(build_module, "load_tests", mined)
    with pytest.raises(CorpusError, match=r"v0002 .*first raw/_contrast_tests\.json"):
        add_runs(BuildOptions([write_runs(tmp_path / "more.jsonl", runs)], tmp_path / "corpus"))


def test_an_added_versions_seal_holds_each_files_own_key_in_the_manifests_order(
    tmp_path: Path,
) -> None:
    """The seal's keys of an added version (most of its files linked from the parent, their
    keys taken whole from the links made, the rest merged in path order) are each file's own
    `stat_key`, in the order of the manifest's files: a key at the wrong place would make
    the next add hash what it need not, or vouch for the wrong file."""
    store = Store(_chain(tmp_path, 2) / ".." / "corpus")
    for name in ("v0002", "v0003"):
        root = store.version_path(name)
        files = manifest_io.load(root).files
        seal, _ = store.sidecars(name)
        keys = manifest_io.read_seal(seal, root, len(files))
        assert keys is not None
        found = [writing.stat_key(os.lstat(root / rel)) for rel in files]
        assert [key for key in keys if key] == [
            own for own, key in zip(found, keys, strict=True) if key
        ]
        linked = [rel for rel in files if rel.startswith("raw/step-")]
        assert linked and all(keys[list(files).index(rel)] for rel in linked)
