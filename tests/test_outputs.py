"""Folders made from a corpus (a site, a skill, a view, a new corpus) are never written inside
a corpus version or its store, and never share a file with it: each failed before it was fixed
(the frozen corpus could be written through)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from wikitrace.corpus_schema import verify

from helpers import make_run, run, write_runs


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    runs = [make_run("t1"), make_run("t2", success=True), make_run("t1", success=True)]
    path = write_runs(tmp_path / "runs.jsonl", runs)
    root = tmp_path / "corpus"
    assert run(["-q", "build", str(path), "-o", str(root)])[0] == 0
    return root


def writes(corpus: Path, output: Path) -> list[list[str]]:
    """Every command that writes a folder, told to write `output`."""
    runs = corpus.parent / "runs.jsonl"
    return [
        ["export", "site", str(corpus), "-o", str(output)],
        ["export", "skill", str(corpus), "-o", str(output)],
        ["view", str(corpus), "--exclude-task", "t1", "-o", str(output)],
        ["build", str(runs), "-o", str(output)],
    ]


def inside_places(corpus: Path, tmp_path: Path) -> list[tuple[Path, str]]:
    """Places inside the corpus, each with where the error says to write instead."""
    store = corpus.with_name("corpus.versions")
    version = store / "v0001"
    linked = tmp_path / "linked"
    linked.symlink_to(version / "insight")  # a link into the version: followed
    return [
        (corpus / "out", "the version v0001 of the corpus"),  # through the pointer
        (corpus / "raw" / "out", "the version v0001 of the corpus"),
        (version / "insight" / "out", "the version v0001 of the corpus"),
        (linked / "out", "the version v0001 of the corpus"),
        (corpus / "insight" / ".." / "out", "the version v0001 of the corpus"),
        (store / "out", f"{store}, the store of the corpus"),
        (store / "v0002", f"{store}, the store of the corpus"),
    ]


def test_no_command_writes_inside_a_corpus_or_its_store(corpus: Path, tmp_path: Path) -> None:
    for output, where in inside_places(corpus, tmp_path):
        for args in writes(corpus, output):
            code, out, err = run(args)
            assert (code, out) == (2, ""), (args, err)
            assert err.startswith(f"error: field '--output': {output} is inside {where}"), err
            assert err.endswith(f"e.g. -o {tmp_path / 'out'}\n") or output.name == "v0002", err
            assert not os.path.lexists(output), args
    assert verify(corpus).ok
    code, _, err = run(["verify", str(corpus), "--all"])
    assert code == 0, err


def test_no_cache_dir_is_inside_a_corpus_or_its_store(corpus: Path, tmp_path: Path) -> None:
    runs = corpus.parent / "runs.jsonl"
    new = tmp_path / "new"
    for cache, where in inside_places(corpus, tmp_path):
        for args in (["build", str(runs), "-o", str(new)], ["add", str(corpus), str(runs)]):
            code, out, err = run(args, env={"WIKITRACE_CACHE_DIR": str(cache)})
            assert (code, out) == (2, ""), (args, err)
            assert err.startswith(f"error: field 'cache-dir': {cache} is inside {where}"), err
            assert 'write outside the corpus and its versions, e.g. cache-dir = "' in err
            assert not os.path.lexists(cache) and not os.path.lexists(new), args
    # The corpus a build is about to write, though it does not exist yet.
    for cache in (new / "cache", tmp_path / "new.versions" / "cache"):
        code, _, err = run(
            ["build", str(runs), "-o", str(new)], env={"WIKITRACE_CACHE_DIR": str(cache)}
        )
        assert code == 2 and err.startswith(
            f"error: field 'cache-dir': {cache} is inside {cache.parent}, which this command "
            f"writes; keep the cache outside the corpus and its versions, e.g. cache-dir = "
            f'"{tmp_path / "wikitrace-cache"}"\n'
        ), err
        assert not os.path.lexists(cache.parent)
    assert verify(corpus).ok


def test_a_view_may_replace_an_older_view_but_never_a_version(corpus: Path, tmp_path: Path) -> None:
    view = tmp_path / "view"
    assert run(["view", str(corpus), "--exclude-task", "t1", "-o", str(view)])[0] == 0
    code, _, err = run(["view", str(corpus), "--exclude-task", "t2", "-o", str(view), "--force"])
    assert code == 0, err
    version = corpus.with_name("corpus.versions") / "v0001"
    code, _, err = run(["view", str(corpus), "--exclude-task", "t2", "-o", str(version), "--force"])
    assert code == 2 and "is inside" in err
    assert verify(corpus).ok


def _exported(corpus: Path, tmp_path: Path) -> list[Path]:
    """The corpus's files as a skill and a view hold them."""
    skill = tmp_path / "skills" / "memory"
    view = tmp_path / "view"
    assert run(["-q", "export", "skill", str(corpus), "-o", str(skill)])[0] == 0
    assert run(["-q", "view", str(corpus), "--exclude-task", "t1", "-o", str(view)])[0] == 0
    return [skill / "corpus", view]


def test_exports_and_views_are_read_only_copies(corpus: Path, tmp_path: Path) -> None:
    version = corpus.resolve()
    for root in _exported(corpus, tmp_path):
        kept = 0
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = Path(dirpath, name)
                info = path.lstat()
                assert not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
                original = version / path.relative_to(root)
                if original.exists():
                    assert info.st_ino != original.stat().st_ino, path
                    kept += 1
        assert kept > 10
        assert verify(root).ok


def test_writing_to_an_export_or_a_view_leaves_the_corpus_as_it_was(
    corpus: Path, tmp_path: Path
) -> None:
    for root in _exported(corpus, tmp_path):
        for rel in ("raw/_index.md", "raw/step-0002/solver.full.jsonl", "tools/actions"):
            copy = root / rel
            copy.chmod(copy.stat().st_mode | stat.S_IWUSR)  # as its owner (or root) can
            with copy.open("a") as handle:
                handle.write("appended\n")
        assert not verify(root).ok
    assert verify(corpus).ok
    code, out, err = run(["verify", str(corpus)])
    assert code == 0 and out.startswith("ok: "), err


@pytest.mark.parametrize("kernel", ["copies", "refuses", "copies-nothing"])
def test_a_copy_is_whole_whatever_the_kernel_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel: str
) -> None:
    import errno

    from wikitrace.corpus_schema.writing import copy_file

    source = tmp_path / "source"
    source.write_bytes(os.urandom(3 << 20))
    source.chmod(0o555)

    def refuses(*args: object) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    if kernel == "refuses":
        monkeypatch.setattr(os, "copy_file_range", refuses)
    elif kernel == "copies-nothing":  # as some file systems answer
        monkeypatch.setattr(os, "copy_file_range", lambda *args: 0)
    copy_file(source, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert copy.read_bytes() == source.read_bytes()
    assert copy.stat().st_ino != source.stat().st_ino
    assert stat.S_IMODE(copy.stat().st_mode) == 0o555  # executable stays so, and read-only
