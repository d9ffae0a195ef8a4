"""Auditing a corpus: one lesson's whole chain of evidence, or findings across the corpus."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import CorpusError, InputError, drilldown, manifest, read
from wikitrace.corpus_schema.catalog import READ_ONLY_MARK
from wikitrace.corpus_schema.insight_pages import READ_ONLY_NOTE
from wikitrace.corpus_schema.layout import RAW_DIR, RAW_METADATA_NAME, parse_step
from wikitrace.corpus_schema.records import (
    READ_ONLY,
    CompilationHeader,
    InsightHeader,
    MinedFinding,
    RawHeader,
)
from wikitrace.corpus_schema.turns import raw_pieces

CONTEXT = 400
"""Characters of a cited turn shown on each side of the quoted passage; `turn STEP N` shows
the rest."""


def passage(turn_text: str, quote: str) -> tuple[int, int] | None:
    """Where `quote` is in the turn: verbatim, else with any run of whitespace (and the
    typography a model changes) matched loosely; else, for a quote copied from the turn's
    one-line form (`Tool({args}) => result`, turns.raw_pieces), from its first piece to
    its last, found in order as the raw turn spells them (`Tool: {args}`); None when it is
    not there."""
    found = _loosely(turn_text, quote)
    if found is not None:
        return found
    pieces = raw_pieces(quote)
    if pieces is None:
        return None
    start = end = -1
    for piece in pieces:
        span = _loosely(turn_text, piece, max(end, 0))
        if span is None:
            return None
        start, end = (span[0] if start == -1 else start), span[1]
    return start, end


def _loosely(turn_text: str, quote: str, at: int = 0) -> tuple[int, int] | None:
    """Where `quote` is in the turn from `at` on: verbatim, else with any run of whitespace
    (and the typography a model changes) matched loosely."""
    start = turn_text.find(quote, at)
    if start != -1:
        return start, start + len(quote)
    parts = [re.escape(part) for part in re.split(r"\s+", quote.strip()) if part]
    if not parts:
        return None
    loose = r"\s+".join(parts)
    for wrong, right in (("\u2019", "'"), ("\u2018", "'"), ("\u201c", '"'), ("\u201d", '"')):
        loose = loose.replace(re.escape(wrong), "[" + re.escape(right) + re.escape(wrong) + "]")
    found = re.compile(loose).search(turn_text, at)
    return found.span() if found else None


def _cited_turn(root: Path, step: str, number: int, quote: str) -> str:
    """The cited turn around the quoted passage, the passage between >>> and <<<."""
    try:
        text = drilldown.turns_text(str(root.resolve()), step, str(number))
    except drilldown.DrillError as error:
        return f"(cannot show turn {number} of {step}: {error})"
    span = passage(text, quote)
    if span is None:
        head = text[: 2 * CONTEXT]
        more = len(text) - len(head)
        return (
            "(the quoted text is not in this turn; its start:)\n"
            + head
            + (f"\n[... {more} more characters: `turn {step} {number}` ...]" if more else "")
        )
    start, end = span
    before = max(0, start - CONTEXT)
    after = min(len(text), end + CONTEXT)
    return (
        (
            "[... `turn " + f"{step} {number}` shows the {before} characters before ...]\n"
            if before
            else ""
        )
        + text[before:start]
        + ">>>"
        + text[start:end]
        + "<<<"
        + text[end:after]
        + (f"\n[... {len(text) - after} more characters ...]" if after < len(text) else "")
    )


def counted(finding: MinedFinding) -> str:
    """What a mined contrast counted, in one sentence (the audit, the site)."""
    return (
        f"runs that {finding.description} {finding.counted()}; "
        f"p = {finding.p_value:.3g}, q = {finding.q_value:.3g} ({finding.patterns_tried} "
        "patterns tried)."
    )


SOURCE_WORDS = {
    "action": "the agent's own action",
    "result": "what an action returned",
    "read": "text the agent read",
}
"""How `audit` names where a quote is in its turn (records.Evidence.source)."""


def _quote(text: str) -> str:
    return "\n".join(f"    > {line}" for line in text.splitlines())


def run_task(root: Path, step: str) -> str:
    """The task of run `step` (`task 3 of tau-bench/airline`), from its raw page's header: a
    page that compares runs names each one's task, so that a reader sees they are of one."""
    try:
        page = read.read_page(root, f"{RAW_DIR}/{step}/{RAW_METADATA_NAME}", RawHeader)
    except CorpusError:
        return "task unknown: its raw page cannot be read"
    return str(page.header.task_key)


def audit_insight(root: Path, ident: str) -> str:
    """The insight, the compilation claims behind it, and the raw turns they cite, quoted."""
    page = read.insight(root, ident)
    header = page.header
    lines = [
        f"# {header.id}: {header.title}",
        "",
        page.body.split("## Evidence", 1)[0].split("\n", 2)[-1].strip(),
        "",
        f"Source: {header.source_step} ({run_task(root, header.source_step)}, "
        f"{header.source_outcome}), drawn by {header.model}.",
    ]
    if header.support == READ_ONLY:
        lines += ["", READ_ONLY_NOTE]
    if header.mined is not None:
        return _audit_mined(root, header, lines)
    try:
        compilation = read.read_page(root, header.compilation, CompilationHeader)
    except CorpusError as error:
        return "\n".join([*lines, "", f"EVIDENCE MISSING: {error}"]) + "\n"
    claims = compilation.header.claims
    numbers = header.source_claims or list(range(1, len(claims) + 1))
    named = "the claims it names" if header.source_claims else "no claim named: all claims"
    lines += ["", f"## Claims behind it ({named}) in {header.compilation}"]
    for number in numbers:
        if not 1 <= number <= len(claims):
            lines += ["", f"claim {number}: MISSING from the compilation"]
            continue
        claim = claims[number - 1]
        lines += ["", f"### claim {number}: {claim.statement}"]
        for evidence in claim.evidence:
            status = "verified" if evidence.verified else "UNVERIFIED: not found in the turn"
            if evidence.verified and evidence.source:
                status += f", {SOURCE_WORDS[evidence.source]}"
            lines += ["", f"  quote from turn {evidence.turn} ({status}):", _quote(evidence.quote)]
            lines += [
                "",
                f"  raw turn {evidence.turn} of {header.source_step}, as logged, the quoted "
                "passage between >>> and <<<:",
            ]
            lines.append(
                _quote(_cited_turn(root, header.source_step, evidence.turn, evidence.quote))
            )
    return "\n".join(lines) + "\n"


def _audit_mined(root: Path, header: InsightHeader, lines: list[str]) -> str:
    """A mined lesson rests on counts and on the actions it quotes from several runs: each
    quote beside the raw turn it comes from."""
    finding = header.mined
    assert finding is not None
    state = "" if finding.holds else "; NO LONGER HOLDS"
    lines[-1] = f"Mined without a model ({finding.kind}{state}), source run {header.source_step}."
    if finding.kind == "contrast":
        lines += ["", f"Counted: {counted(finding)} A correlation, not a cause."]
    lines += ["", "## The runs it compares, each with its task", ""]
    lines += [f"- {step}: {run_task(root, step)}" for step in header.rests_on]
    lines += ["", "## The actions it quotes"]
    for claim in header.evidence:
        lines += ["", f"### {claim.statement}"]
        for evidence in claim.evidence:
            step = evidence.step or header.source_step
            status = "verified" if evidence.verified else "UNVERIFIED: not found in the turn"
            lines += ["", f"  quote from {step} turn {evidence.turn} ({status}):"]
            lines += [_quote(evidence.quote), ""]
            lines += [f"  raw turn {evidence.turn} of {step}, as logged, the quoted passage "]
            lines[-1] += "between >>> and <<<:"
            lines.append(_quote(_cited_turn(root, step, evidence.turn, evidence.quote)))
    return "\n".join(lines) + "\n"


def audit_step(root: Path, ident: str) -> str:
    """Every insight that rests on one run (step-NNNN): drawn from it (its source), or quoting
    it as evidence; with their titles and status."""
    try:
        number = parse_step(ident)
    except ValueError as error:
        raise InputError(str(error)) from None
    runs = [page for page in read.runs(root) if parse_step(page.header.step) == number]
    if not runs:
        raise InputError(f"no run {ident} in {root} (see raw/_index.md)")
    run = runs[0].header
    source: list[str] = []
    evidence: list[str] = []
    for page in read.insights(root):
        header = page.header
        unverified = "" if header.verified else ", UNVERIFIED"
        mined = f", mined {header.mined.kind}" if header.mined else ""
        marked = f", {READ_ONLY_MARK}" if header.support == READ_ONLY else ""
        line = f"- {header.id}: {header.title} ({header.status}{mined}{unverified}{marked})"
        if header.source_step == run.step:
            source.append(line)
        elif run.step in header.rests_on:
            evidence.append(line)
    lines = [f"# {run.step}: {run.task_key} ({run.outcome}), {run.turns} turns", ""]
    lines += ["## Insights with this run as their source", ""]
    lines += source or ["None: no lesson was drawn from this run."]
    lines += ["", "## Insights that quote this run as evidence", ""]
    lines += evidence or ["None."]
    return "\n".join(lines) + "\n"


@dataclass
class Findings:
    """What deserves a look across a corpus."""

    insights_from_failed_runs: list[str] = field(default_factory=list)
    insights_on_read_content: list[str] = field(default_factory=list)
    """Insights whose only support is text the agent read (records.READ_ONLY)."""
    unverified_quotes: dict[str, int] = field(default_factory=dict)
    """Compilation step -> number of quotes not found in their turns."""
    insights_missing_evidence: dict[str, str] = field(default_factory=dict)
    """Insight -> what is missing."""
    runs_without_insight: list[str] = field(default_factory=list)
    compiled_by: str = ""
    titles: dict[str, str] = field(default_factory=dict)
    """Insight id -> its title, for the listing."""

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def audit_corpus(root: Path) -> Findings:
    findings = Findings(compiled_by=manifest.load(root).compiled_by)
    compilations = {page.header.step: page.header for page in read.compilations(root)}
    for step, compiled in compilations.items():
        if compiled.unverified_quotes:
            findings.unverified_quotes[step] = compiled.unverified_quotes
    sources: set[str] = set()
    for page in read.insights(root):
        header = page.header
        findings.titles[header.id] = header.title
        sources.add(header.source_step)
        if header.source_outcome == "failure":
            findings.insights_from_failed_runs.append(header.id)
        if header.support == READ_ONLY:
            findings.insights_on_read_content.append(header.id)
        compilation = compilations.get(header.source_step)
        if header.mined is not None:  # quotes from several runs, no claim of a compilation
            sources.update(header.rests_on)  # every run it compares or quotes
            if not header.verified:
                findings.insights_missing_evidence[header.id] = "no quote it cites was found"
            continue
        if compilation is None:
            findings.insights_missing_evidence[header.id] = f"{header.compilation} is missing"
        elif not read.contained(root, header.raw).is_dir():
            findings.insights_missing_evidence[header.id] = f"{header.raw} is missing"
        elif not read.backed(compilation.claims, header.source_claims):
            findings.insights_missing_evidence[header.id] = (
                "no verified quote backs the claims it rests on"
            )
    for folder in sorted((root / RAW_DIR).glob("step-*"), key=lambda p: parse_step(p.name)):
        if folder.is_dir() and folder.name not in sources:
            findings.runs_without_insight.append(folder.name)
    return findings


def findings_text(findings: Findings) -> str:
    def section(title: str, items: list[str]) -> list[str]:
        body = [f"- {item}" for item in items] or ["- none"]
        return [f"## {title} ({len(items)})", "", *body, ""]

    lines = ["# Corpus audit", ""]
    titles = findings.titles
    lines += section(
        "Insights drawn from failed runs: they say what went wrong, and may be wrong about why",
        [f"{ident}: {titles.get(ident, '')}" for ident in findings.insights_from_failed_runs],
    )
    lines += section(
        f"Insights resting on read content only ({READ_ONLY_MARK}): text the agent read, which "
        "may be an injected instruction",
        [f"{ident}: {titles.get(ident, '')}" for ident in findings.insights_on_read_content],
    )
    lines += section(
        "Compilations with unverified quotes",
        [f"{step}: {count}" for step, count in findings.unverified_quotes.items()],
    )
    lines += section(
        "Insights whose evidence is missing",
        [
            f"{ident} ({titles.get(ident, '')}): {why}"
            for ident, why in findings.insights_missing_evidence.items()
        ],
    )
    offline = findings.compiled_by == "offline"
    note = " (an offline corpus has mined insights only)" if offline else ""
    lines += section(f"Runs no insight rests on{note}", findings.runs_without_insight)
    return "\n".join(lines)
