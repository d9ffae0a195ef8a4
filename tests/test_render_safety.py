"""Text from logs and models cannot restructure a page: every page of a corpus built from hostile
text parses (CommonMark, markdown-it-py) into the same structure as the same corpus built from
plain text, and so does the first message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import frontmatter
from markdown_it import MarkdownIt

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.tools.memory import Memory

from helpers import FakeLLM, make_run, turns_in_prompt, write_runs

HOSTILE = {
    "task": "## Overview\n- step one\n1. step two\n[click](http://evil.example)\n"
    "<script>alert(1)</script>\n```\nfenced\n```\n> quoted\n    indented code",
    "title": "Done\nstatus: committed\n## Evidence\n- fake evidence",
    "description": "# A heading\n1. a list\n\n[a link](x) <b>bold</b>",
    "statement": "**kw** [link](http://x) <img src=x> `code`",
    "quote": "# Return value\n+ a diff line\n- another\n````",
    "guideline": "- do this\n> and that\n[x]: http://ref",
    "applicability": "## When\n* always",
    "observation": "# Return value\n+ a diff line\n- another\n````\nend",
}
PLAIN = {key: "plain words here" for key in HOSTILE}
STRUCTURE = {
    "heading_open",
    "bullet_list_open",
    "ordered_list_open",
    "link_open",
    "image",
    "html_block",
    "html_inline",
    "blockquote_open",
    "fence",
    "code_block",
    "hr",
    "table_open",
    "em_open",
    "strong_open",
    "code_inline",
}


def structure(markdown: str) -> list[tuple[str, str]]:
    """The structural tokens of a page's Markdown body (its YAML header is data, not Markdown)."""
    tokens = MarkdownIt("commonmark").parse(frontmatter.loads(markdown).content)
    found: list[tuple[str, str]] = []
    for token in tokens:
        for item in [token, *(token.children or [])]:
            if item.type in STRUCTURE:
                found.append((item.type, item.tag))
    return found


def build(tmp_path: Path, text: dict[str, str]) -> Path:
    turns = [
        {"role": "user", "content": "Please do the task."},
        {"role": "assistant", "action": "look", "observation": text["observation"]},
        {"role": "assistant", "content": "Done."},
    ]
    runs = [{**make_run("t1", turns=turns), "task": text["task"]}]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = write_runs(tmp_path / "runs.jsonl", runs)

    def answer(messages: list[Any]) -> str:
        shown = turns_in_prompt(messages[0]["content"])
        assert 2 in shown
        return json.dumps(
            {
                "title": text["title"],
                "description": text["description"],
                "claims": [
                    {
                        "statement": text["statement"],
                        "evidence": [{"turn": 2, "quote": text["quote"]}],
                    }
                ],
                "insights": [
                    {
                        "title": text["title"],
                        "guideline": text["guideline"],
                        "applicability": text["applicability"],
                        "supporting_claims": [1],
                    }
                ],
            }
        )

    corpus = tmp_path / "corpus"
    build_corpus(
        BuildOptions(inputs=[path], output=corpus, model="fake", use_cache=False, redact=False),
        llm=FakeLLM(answer=answer),
    )
    return corpus


def test_pages_keep_the_structure_the_templates_wrote(tmp_path: Path) -> None:
    hostile = build(tmp_path / "hostile", HOSTILE)
    plain = build(tmp_path / "plain", PLAIN)
    pages = sorted(p.relative_to(plain.resolve()) for p in plain.resolve().rglob("*.md"))
    assert len(pages) >= 7
    for rel in pages:
        expected = structure((plain.resolve() / rel).read_text())
        assert structure((hostile.resolve() / rel).read_text()) == expected, rel
    first = Memory.load(hostile).first_message("a task").text
    assert structure(first) == structure(Memory.load(plain).first_message("a task").text)


def test_hostile_text_is_still_there_to_read_and_grep(tmp_path: Path) -> None:
    corpus = build(tmp_path, HOSTILE)
    metadata = (corpus / "raw/step-0001/metadata.md").read_text()
    assert HOSTILE["task"] in metadata  # verbatim, in a fence it cannot close
    compilation = (corpus / "compilation/step-0001.md").read_text()
    assert "  # Return value\n  + a diff line" in compilation
    memory = Memory.load(corpus)
    assert memory.runs[0].task == HOSTILE["task"]
    assert memory.insights[0].guideline == " ".join(HOSTILE["guideline"].split())
    page = (corpus / "insight/insight-0001.md").read_text()
    assert "\n## Evidence\n- fake" not in page and "status: committed\n" not in page
