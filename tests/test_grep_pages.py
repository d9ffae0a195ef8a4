"""Pages that grep well (format 2): short header fields that name a data file, every fact once
in the body, no line over render.LINE_LIMIT; divergences apart from lessons; audit from either
end; and a corpus of format 1 still read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import frontmatter
import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema import compilation_pages, indexes, insight_pages, read, render, verify
from wikitrace.corpus_schema.layout import Layout
from wikitrace.corpus_schema.records import CompilationHeader, InsightHeader
from wikitrace.tools.audit import audit_insight, audit_step
from wikitrace.tools.memory import Memory

from helpers import planted, write_runs

EXAMPLE = Path(__file__).parent.parent / "examples" / "tau-bench-airline.jsonl"
TELECOM = Path(__file__).parent / "data" / "tau2-telecom-20runs.jsonl"
FORMAT1 = Path(__file__).parent / "data" / "format1-corpus"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled example, the telecom runs and runs with a lesson planted within their tasks
    (helpers.planted), built offline: divergences and a contrast."""
    root = tmp_path_factory.mktemp("grep") / "corpus"
    shop = write_runs(root.parent / "shop.jsonl", planted())
    build_corpus(BuildOptions(inputs=[EXAMPLE, TELECOM, shop], output=root))
    return root


def grepped(root: Path) -> list[Path]:
    """The files a person greps: insight and compilation pages, and every index."""
    return sorted(
        [
            *root.glob("insight/*.md"),
            *root.glob("compilation/*.md"),
            *root.glob("*/_index/*.md"),
            *root.glob("_index.md"),
        ]
    )


def long_lines(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{number}: {len(line)}"
        for path in grepped(root)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if len(line) > render.LINE_LIMIT
    ]


def test_no_line_a_person_greps_is_over_the_limit(corpus: Path, toy_corpus: Path) -> None:
    assert len(list(corpus.glob("insight/insight-*.md"))) >= 3
    assert long_lines(corpus) == []
    assert long_lines(toy_corpus) == []  # a model's insights and compilations too
    assert verify(corpus).ok


def test_headers_keep_short_fields_and_name_their_data(corpus: Path, toy_corpus: Path) -> None:
    for root in (corpus, toy_corpus):
        for path in [*root.glob("insight/insight-*.md"), *root.glob("compilation/step-*.md")]:
            post = frontmatter.load(path)
            assert not {"evidence", "mined", "claims", "hypothesis"} & set(post.metadata)
            rel = path.relative_to(root).as_posix()
            assert post["data"] == f"data/{rel.removesuffix('.md')}.json"
            model = InsightHeader if rel.startswith("insight/") else CompilationHeader
            data = json.loads((root / str(post["data"])).read_text())
            # What the tools read is the header joined with its data file.
            assert read.read_page(root, rel, model).header == model.model_validate(
                {**post.metadata, **data}
            )


def test_each_fact_is_one_grep_hit(corpus: Path) -> None:
    """A tool a mined lesson quotes is named in its title (the header's and the heading's)
    and in its quotes, each once: never again as JSON in the header."""
    for page in read.insights(corpus):
        text = (corpus / page.rel).read_text()
        header_text = text.split("\n---\n", 1)[0]
        body_lines = [
            line
            for line in page.body.splitlines()
            if line.strip(" >-|").lstrip("`") not in ("", "text")
        ]
        assert len(body_lines) == len(set(body_lines)), page.rel
        for claim in page.header.evidence:
            for evidence in claim.evidence:
                tool = evidence.quote.split(":", 1)[0]
                hits = [line for line in text.splitlines() if tool in line]
                assert all(not line.startswith(("evidence", "mined")) for line in hits)
                assert [line for line in header_text.splitlines() if tool in line] in (
                    [],
                    [line for line in header_text.splitlines() if line.startswith("title: ")],
                )
                first = evidence.quote.splitlines()[0][:120]
                assert sum(first in line for line in page.body.splitlines()) == 1, first


def test_divergences_are_titled_in_words_and_listed_apart(corpus: Path) -> None:
    divergences = [p for p in read.insights(corpus) if p.header.mined.kind == "divergence"]  # type: ignore[union-attr]
    lessons = [p for p in read.insights(corpus) if p.header.mined.kind != "divergence"]  # type: ignore[union-attr]
    assert divergences and lessons
    for page in divergences:
        title = page.header.title
        assert title.startswith(f"On task {page.header.mined.task_id}, ")  # type: ignore[union-attr]
        assert "the successful run " in title and "; the failed one " in title
        assert "{" not in title and '":' not in title  # no raw JSON
    index = (corpus / "insight" / "_index.md").read_text()
    head, divergence_section = index.split(f"## {indexes.DIVERGENCES_HEADING}\n", 1)
    for page in divergences:
        assert f"[{page.header.id}]" in divergence_section and f"[{page.header.id}]" not in head
    for page in lessons:
        assert f"[{page.header.id}]" in head and f"[{page.header.id}]" not in divergence_section
    root_index = (corpus / "_index.md").read_text()
    assert f"{len(lessons)} lessons and {len(divergences)} divergences" in " ".join(
        root_index.split()
    )
    # A divergence is shown for its own task alone, never as a lesson for another.
    memory = Memory.load(corpus)
    other = memory.first_message("Book me a flight from Boston to Denver.", task_type="airline")
    assert not {p.header.id for p in divergences} & set(other.insights)


def test_audit_answers_from_either_end(corpus: Path) -> None:
    page = next(p for p in read.insights(corpus) if p.header.mined.kind == "divergence")  # type: ignore[union-attr]
    header = page.header
    source, other = header.rests_on[0], header.rests_on[1]
    assert source == header.source_step
    from_source = audit_step(corpus, source)
    drawn, quoting = from_source.split("## Insights that quote this run as evidence")
    assert header.id in drawn and header.id not in quoting
    from_other = audit_step(corpus, other)
    drawn, quoting = from_other.split("## Insights that quote this run as evidence")
    assert header.id in quoting and header.id not in drawn
    assert "None: no lesson was drawn from this run." in drawn
    # The compilation pages name it too: as drawn from the source, as quoting the other.
    for step, section in ((source, "## Insights drawn from this run"), (other, "quote this")):
        compiled = read.read_page(corpus, f"compilation/{step}.md", CompilationHeader)
        assert header.id in compiled.header.cited_by
        part = compiled.body.split(section, 1)[1].split("\n## ", 1)[0]
        assert f"insight/{header.id}.md" in part
    assert "Mined without a model (divergence" in audit_insight(corpus, header.id)


def test_a_corpus_of_format_1_is_read(tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(FORMAT1, old)
    assert json.loads((old / "manifest.json").read_text())["format_version"] == 1
    assert verify(old).ok
    (insight,) = list(read.insights(old))
    assert insight.header.data is None and insight.header.mined is not None
    assert insight.header.mined.runs == ["step-0002", "step-0001"]
    assert insight.header.evidence[0].evidence[0].quote.startswith("get_user_details")
    (first, _) = list(read.compilations(old))
    assert first.header.claims and first.header.data is None
    assert [p.header.step for p in read.compilation_summaries(old)] == ["step-0001", "step-0002"]
    assert "insight-0001" in audit_step(old, "step-0002").split("quote this run")[0]
    assert "insight-0001" in audit_step(old, "step-0001").split("quote this run")[1]
    assert Memory.load(old).first_message(read.task_text(next(read.runs(old)))).insights == [
        "insight-0001"
    ]
    # A page of format 1 written anew comes out in format 2, saying the same.
    files = dict(insight_pages.insight_files(insight.header, read.guideline(insight)))
    assert set(files) == {"insight/insight-0001.md", "data/insight/insight-0001.json"}
    new = tmp_path / "new"
    for rel, text in files.items():
        (new / rel).parent.mkdir(parents=True, exist_ok=True)
        (new / rel).write_text(text)
    again = read.read_page(new, "insight/insight-0001.md", InsightHeader)
    assert again.header.model_copy(update={"data": None}) == insight.header
    assert read.guideline(again) == read.guideline(insight)
    layout = Layout(new)
    files = dict(
        compilation_pages.with_mined(layout, first.header, first.body, cited_by=[(1, "A lesson")])
    )
    post = frontmatter.loads(files["compilation/step-0001.md"])
    assert "claims" not in post.metadata and post["cited_by"] == ["insight-0001"]
    assert json.loads(files["data/compilation/step-0001.json"])["claims"] == [
        claim.model_dump(mode="json") for claim in first.header.claims
    ]
    assert "## Insights that quote this run as evidence" in post.content
