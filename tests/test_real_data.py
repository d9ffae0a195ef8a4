"""Real tau-bench logs (tests/data): convert, build, and find the input again in the corpus."""

from __future__ import annotations

from pathlib import Path

import frontmatter

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema import verify

from helpers import DATA, broken_links, read_jsonl


def test_real_runs_build_into_a_sound_corpus(tmp_path: Path) -> None:
    source = DATA / "tau-bench-airline-3runs.jsonl"
    corpus = tmp_path / "corpus"
    report = build_corpus(BuildOptions(inputs=[source], output=corpus, redact=False))
    assert (report.runs, report.successes, report.failures) == (3, 2, 1)
    assert verify(corpus).ok and broken_links(corpus) == []
    for step, run in enumerate(read_jsonl(source), start=1):
        assert read_jsonl(corpus / f"raw/step-{step:04d}/solver.full.jsonl") == run["turns"]
        metadata = frontmatter.load(corpus / f"raw/step-{step:04d}/metadata.md")
        assert metadata["metadata"] == run["metadata"] and run["task"] in metadata.content
    diagnosis = (corpus / "compilation/step-0001.md").read_text()
    # The failed booking: the payment error the tool returned, quoted from its turn.
    error = "Error: payment amount does not add up, total price is 305, but paid 255"
    assert f"\n  {error}" in diagnosis


def test_redaction_leaves_real_logs_unchanged(tmp_path: Path) -> None:
    source = DATA / "tau-bench-airline-3runs.jsonl"
    report = build_corpus(BuildOptions(inputs=[source], output=tmp_path / "corpus"))
    assert report.redactions == {}
    for step, run in enumerate(read_jsonl(source), start=1):
        raw = tmp_path / f"corpus/raw/step-{step:04d}/solver.full.jsonl"
        assert read_jsonl(raw) == run["turns"]
