"""The raw layer's files: a run's metadata page, its turn log and turn index, and the
layout the standalone drill-down tools read (tools/layout.json)."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from .layout import (
    FORMAT_NAME,
    FORMAT_VERSION,
    RAW_DIR,
    RAW_TURN_INDEX_NAME,
    RAW_TURNS_NAME,
    Layout,
)
from .records import RawHeader, is_judged
from .render import inline, outcome_text, verbatim, with_frontmatter


def page_task(task: str) -> str:
    """A run's task as its raw page holds it (and read.task_text gives it back): its line
    ends as a text file is read (universal newlines), without the trailing blanks."""
    return task.replace("\r\n", "\n").replace("\r", "\n").rstrip()


def raw_metadata(header: RawHeader, task: str) -> str:
    judged = is_judged(header.metadata)
    judge = header.metadata.get("judge") if judged else None
    verdict = ""
    if isinstance(judge, dict):
        verdict = (
            f"## Outcome\n\n{header.outcome}, judged by `{inline(str(judge.get('model')))}` "
            f"from this log (no verifier labelled it): {inline(str(judge.get('reason', '')))} "
            "The quotes behind the verdict are in the frontmatter (metadata.judge.evidence).\n\n"
        )
    body = (
        f"# {header.step}: {inline(str(header.task_key))} "
        f"({outcome_text(header.outcome, judged)})\n\n"
        f"{verdict}"
        f"## Task\n\n{verbatim(page_task(task))}\n\n"
        f"## Turns\n\n{header.turns} turns in `{header.turns_file}`, one JSON object per line "
        f"as logged: line N is turn N.\n"
    )
    return with_frontmatter(header, body)


def turn_index(offsets: Sequence[int], summaries: Sequence[Sequence[str]]) -> bytes:
    """solver.index.jsonl, so the drill-down tools never read a whole log. Line 1: the number
    of turns and the byte offset where each starts in the log (and where the last ends);
    line N + 1: turn N's summary, [role, action, start of what came back]."""
    head = orjson.dumps({"turns": len(summaries), "offsets": list(offsets)}) + b"\n"
    return head + b"".join(orjson.dumps(list(summary)) + b"\n" for summary in summaries)


def tools_layout(layout: Layout) -> bytes:
    """tools/layout.json: what the standalone drill-down tools need to know of the layout."""
    data = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "step_id_width": layout.step_width,
        "raw_dir": RAW_DIR,
        "turns_file": RAW_TURNS_NAME,
        "index_file": RAW_TURN_INDEX_NAME,
    }
    return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"
