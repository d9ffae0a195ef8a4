"""`wikitrace hypothesize`: state existing insights as falsifiable hypotheses, in a new version.

One model call per insight that has no hypothesis yet (the corpus's own model): the lesson and
the claims of its source compilation in, precondition, behaviour, expected effect and verifier
out. The insight pages are re-rendered with them; nothing else changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import ValidationError

from wikitrace import prompts
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.errors import first_problem
from wikitrace.corpus_schema.records import CompilationHeader, Hypothesis
from wikitrace.corpus_schema.store import build_lock
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    derive_version,
    open_store,
    resolve_insight,
)

from .compile import data_fence, reply_json
from .llm import LLM


@dataclass
class HypothesizeReport:
    stated: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Insight id -> why the model's answer was not used."""
    version: str | None = None


def hypothesize(
    pointer: Path, insight_ids: Sequence[str], llm: LLM, *, deploy: bool = True
) -> HypothesizeReport:
    with build_lock(pointer):
        store = open_store(pointer)
        base = FrozenVersion.current(store)
        pages = base.insights
        wanted = [resolve_insight(given, pages) for given in insight_ids] or [
            ident for ident, page in pages.items() if page.header.hypothesis is None
        ]
        report = HypothesizeReport()
        change = Derivation()
        env = prompts.environment()
        for ident in wanted:
            page = pages[ident]
            header = page.header
            compilation = corpus_read.read_page(base.root, header.compilation, CompilationHeader)
            guideline = corpus_read.guideline(page)
            claims = [claim.statement for claim in compilation.header.claims]
            content = orjson.dumps([header.title, guideline, header.applicability, claims])
            text = env.get_template(prompts.HYPOTHESIZE).render(
                title=header.title,
                guideline=guideline,
                applicability=header.applicability,
                claims=claims,
                source_outcome=header.source_outcome,
                fence=data_fence(content),
            )
            reply = asyncio.run(llm.complete([{"role": "user", "content": text}]))
            try:
                hypothesis = Hypothesis.model_validate(reply_json(reply.text))
            except ValidationError as error:  # a ValueError too: caught first
                where, message = first_problem(error)
                report.failed[ident] = f"field '{where}': {message}"
                continue
            except ValueError as error:
                report.failed[ident] = f"the answer: {error}"
                continue
            change.insights[ident] = (
                header.model_copy(update={"hypothesis": hypothesis}),
                guideline,
            )
            report.stated.append(ident)
        if change.insights:
            change.reason = "hypotheses for " + ", ".join(sorted(change.insights))
            change.report = {"hypothesized": report.stated, "failed": report.failed}
            report.version = derive_version(store, base, change, deploy=deploy, event="added")
        return report
