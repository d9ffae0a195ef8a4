"""`wikitrace hypothesize`: state existing insights as falsifiable hypotheses, in a new version.

One model call per insight that has no hypothesis yet (the corpus's own model): the lesson and
the claims of its source compilation in, precondition, behaviour, expected effect and verifier
out. The insight pages are re-rendered with them; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wikitrace import prompts
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.records import CompilationHeader, Hypothesis
from wikitrace.transport.llm import LLM
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    derive_version,
    open_store,
    resolve_insight,
)

from .ask import Asker


@dataclass
class HypothesizeReport:
    stated: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Insight id -> why the model's answer was not used."""
    version: str | None = None


def hypothesize(
    pointer: Path,
    insight_ids: Sequence[str],
    llm: LLM,
    *,
    deploy: bool = True,
    prompts_dir: Path | None = None,
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
        asker = Asker(llm, prompts_dir)
        for ident in wanted:
            page = pages[ident]
            header = page.header
            compilation = corpus_read.read_page(base.root, header.compilation, CompilationHeader)
            guideline = corpus_read.guideline(page)
            claims = [claim.statement for claim in compilation.header.claims]
            try:
                hypothesis = asker.ask(
                    prompts.HYPOTHESIZE,
                    Hypothesis,
                    data=[header.title, guideline, header.applicability, claims],
                    title=header.title,
                    guideline=guideline,
                    applicability=header.applicability,
                    claims=claims,
                    source_outcome=header.source_outcome,
                )
            except ValueError as error:
                report.failed[ident] = str(error)
                continue
            change.insights[ident] = (
                header.model_copy(update={"hypothesis": hypothesis}),
                guideline,
            )
            report.stated.append(ident)
        if change.insights:
            change.reason = "hypotheses for " + ", ".join(sorted(change.insights))
            change.report = {"hypothesized": report.stated, "failed": report.failed}
            change.prompts = dict(asker.used)
            report.version = derive_version(store, base, change, deploy=deploy, event="added")
        return report
