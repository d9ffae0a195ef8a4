"""`verify`: recompute every hash; report missing, changed and extra files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema import CorpusError, verify


@pytest.fixture
def corpus(runs_file: Path, tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[runs_file], output=root))
    # Root ignores file modes; so can an attacker with write access. Hashes must catch it.
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return root


def test_a_fresh_corpus_verifies(corpus: Path) -> None:
    report = verify(corpus)
    assert report.ok and report.checked == 36  # with each compilation's data file and ranker,
    # each ranker's page of postings and its stats, the tasks' ranker's line counts, the
    # catalog's index and its page of runs, and mining's tests of each task type


def test_changed_missing_and_extra_files_are_reported(corpus: Path) -> None:
    turns = corpus / "raw/step-0002/solver.full.jsonl"
    turns.write_text(turns.read_text().replace("mug", "cup"))
    (corpus / "insight/_index.md").unlink()
    (corpus / "insight/insight-0001.md").write_text("planted lesson\n")
    report = verify(corpus)
    assert not report.ok
    assert report.changed == ["raw/step-0002/solver.full.jsonl"]
    assert report.missing == ["insight/_index.md"]
    assert report.extra == ["insight/insight-0001.md"]


def test_a_link_is_never_followed(corpus: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    target = corpus / "compilation/step-0001.md"
    outside.write_bytes(target.read_bytes())  # same bytes, so only the link gives it away
    target.unlink()
    os.symlink(outside, target)
    assert verify(corpus).changed == ["compilation/step-0001.md"]


def test_not_a_corpus(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"has no manifest\.json"):
        verify(tmp_path)
    with pytest.raises(CorpusError, match="is not a folder"):
        verify(tmp_path / "nope")
    (tmp_path / "manifest.json").write_text('{"format": "wikitrace-corpus", "format_version": 99}')
    with pytest.raises(CorpusError, match="format version 99 is not supported"):
        verify(tmp_path)


def test_an_empty_folder_slipped_in_is_reported_as_extra(corpus: Path) -> None:
    (corpus / "site").mkdir()
    (corpus / "raw" / "step-0001" / "notes" / "deeper").mkdir(parents=True)
    report = verify(corpus)
    assert not report.ok
    assert report.extra == ["raw/step-0001/notes/deeper/", "site/"]
    (corpus / "site").rmdir()
    (corpus / "raw" / "step-0001" / "notes" / "deeper").rmdir()
    (corpus / "raw" / "step-0001" / "notes").rmdir()
    assert verify(corpus).ok
