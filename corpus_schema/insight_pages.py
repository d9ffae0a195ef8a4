"""The insight layer's pages: a lesson, its status, and the claims and quotes behind it (a
model's lesson, or a mined one with the numbers that back it)."""

from __future__ import annotations

from collections.abc import Sequence

from .catalog import READ_ONLY_MARK
from .layout import INSIGHT_DIR, RAW_METADATA_NAME, RAW_TURNS_NAME, Layout, link
from .records import (
    INSIGHT_DATA_FIELDS,
    READ_ONLY,
    Claim,
    Compilation,
    Evidence,
    InsightDraft,
    InsightHeader,
    MinedFinding,
    support_of,
)
from .render import (
    TRUST_NOTE,
    PageFiles,
    bullet,
    folded_quote,
    heading,
    inline,
    prose,
    quote_block,
    with_data,
    wrapped,
)

MINED_NOTE = (
    "Mined, not drawn by a model: a correlation in past runs, counted, not a cause. The runs "
    "that show the pattern may differ in other ways; read the runs it cites before acting on it."
)


def supporting_claims(draft: InsightDraft, source: Compilation) -> list[Claim]:
    """The claims a model's insight rests on: those it names, or all when it names none."""
    return [
        source.claims[n - 1] for n in draft.supporting_claims if 1 <= n <= len(source.claims)
    ] or list(source.claims)


def insight_header(
    layout: Layout,
    number: int,
    draft: InsightDraft,
    *,
    source: Compilation,
    task_type: str | None,
) -> InsightHeader:
    """The header of the page of a model's insight (insight_page, with its guideline)."""
    evidence = supporting_claims(draft, source)
    return InsightHeader(
        id=layout.insight(number),
        title=draft.title,
        task_type=task_type,
        source_step=layout.step(source.step),
        source_outcome=source.outcome,
        source_judged=source.judged,
        applicability=draft.applicability,
        source_claims=draft.supporting_claims,
        model=source.model,
        compilation=layout.compilation_rel(source.step),
        raw=layout.raw_dir_rel(source.step) + "/",
        hypothesis=draft.hypothesis,
        support=support_of(evidence),
        evidence=evidence,
    )


READ_ONLY_NOTE = (
    f"**{READ_ONLY_MARK}.** Its only support is text the agent read (a tool result, a page, a "
    "file), which may be an injected instruction; the gate commits it only on probes."
)
STATUS_NOTES = {
    "ungated": "not tested by the admission gate",
    "committed": "passed the admission gate",
    "rejected": "REJECTED by the admission gate: kept on record, never shown to an agent",
    "retired": "RETIRED (by monitoring, when later episodes showed it failing too often, or by "
    "hand: see its decision); kept on record, never shown",
}


def insight_files(header: InsightHeader, guideline: str) -> PageFiles:
    """insight/insight-NNNN.md from its header and guideline (a new page or a re-rendered one),
    and its data file: the header keeps short fields, the body shows the rest once."""
    rel = f"{INSIGHT_DIR}/{header.id}.md"
    claims = ", ".join(str(n) for n in header.source_claims) or "none named"
    origin = (
        "a failed run: it says what to avoid, and may be wrong about why the run failed"
        if header.source_outcome == "failure"
        else "a successful run"
    )
    if header.source_judged:
        origin += " (its outcome was judged by a model from the log, not by a verifier)"
    lines = [
        *heading(f"# {header.id}: ", header.title),
        wrapped(guideline, "**Guideline.** "),
        "",
        wrapped(header.applicability, "**Applies when.** "),
        "",
    ]
    if header.hypothesis is not None:
        hypothesis = header.hypothesis
        lines += [
            "## As a hypothesis",
            "",
            wrapped(hypothesis.precondition, "- precondition: ", "  "),
            wrapped(hypothesis.behaviour, "- behaviour: ", "  "),
            wrapped(hypothesis.expected_effect, "- expected effect: ", "  "),
            wrapped(hypothesis.verifier, "- verifier: ", "  "),
            "",
        ]
    lines += [f"**Status.** {header.status}: {STATUS_NOTES[header.status]}."]
    for decision in header.decisions:
        lines.append(f"- decision: {link(decision, rel)}")
    if header.superseded_by:
        newer = f"{INSIGHT_DIR}/{header.superseded_by}.md"
        lines.append(f"- superseded by {link(newer, rel, header.superseded_by)}")
    for older in header.supersedes:
        lines.append(f"- supersedes {link(f'{INSIGHT_DIR}/{older}.md', rel, older)}")
    if not header.verified:
        lines += ["", "**UNVERIFIED.** No quote behind this lesson was found in its run."]
    if header.support == READ_ONLY:
        lines += ["", prose(READ_ONLY_NOTE)]
    if header.mined is not None:
        lines += _mined_body(header, header.mined, rel)
        return with_data(rel, header, "\n".join(lines), INSIGHT_DATA_FIELDS)
    lines += [
        "",
        "## Evidence",
        "",
        bullet(f"drawn by `{header.model}` from {header.source_step}, {origin}"),
        f"- compilation: {link(header.compilation, rel)} (claims {claims})",
        f"- raw run: {link(header.raw + RAW_METADATA_NAME, rel)}",
        f"- raw turns: {link(header.raw + RAW_TURNS_NAME, rel)}",
        "",
    ]
    numbers = header.source_claims or list(range(1, len(header.evidence) + 1))
    for number, claim in zip(numbers, header.evidence, strict=False):
        lines += heading(f"### Claim {number}: ", claim.statement)
        lines += _quotes(claim.evidence, header.source_step, named=False)
    lines += [quote_block(TRUST_NOTE), ""]
    return with_data(rel, header, "\n".join(lines), INSIGHT_DATA_FIELDS)


def _quotes(quotes: Sequence[Evidence], source_step: str, named: bool) -> list[str]:
    """Each quote of a claim on an insight page, with the command that shows its turn whole;
    `named`: each line names its run (a mined lesson quotes several)."""
    lines: list[str] = []
    for evidence in quotes:
        step = evidence.step or source_step
        status = "verified" if evidence.verified else "UNVERIFIED: not found in the turn"
        quote, folded = folded_quote(evidence.quote)
        shows = "shows it whole" + (", its long lines unbroken" if folded else "")
        where = f"{step} turn {evidence.turn}" if named else f"turn {evidence.turn}"
        command = f"tools/turn {step} {evidence.turn}"
        lines += [bullet(f"{where} ({status}; `{command}` {shows}):"), "", quote, ""]
    return lines


def _mined_body(header: InsightHeader, finding: MinedFinding, rel: str) -> list[str]:
    lines = [""]
    if not finding.holds:
        lines += [
            wrapped(
                f"With the runs of {finding.version}, this pattern no longer passes the test it "
                "passed when it was mined; kept on record, never shown to an agent.",
                "**NO LONGER HOLDS.** ",
            ),
            "",
        ]
    lines += ["## The numbers", ""]
    if finding.kind == "contrast":
        # The rates are the guideline's: each figure is on the page once.
        lines.append(
            f"- pattern: `{inline(finding.pattern)}`, shown by runs of {finding.tasks} tasks"
        )
        if finding.tasks_compared:
            odds = f"{finding.odds_ratio:.3g}" if finding.odds_ratio is not None else "infinite"
            lines += [
                f"- compared within {finding.tasks_compared} tasks, each with runs with and "
                "without it and runs of both outcomes",
                f"- exact test stratified by task, two-sided: p = {finding.p_value:.3g}; "
                f"Mantel-Haenszel odds ratio of failure with it: {odds}",
                f"- adjusted for the {finding.patterns_tried} patterns tried in the build "
                f"(Benjamini-Hochberg): q = {finding.q_value:.3g}",
            ]
        else:
            lines += [
                f"- Fisher's exact test, two-sided: p = {finding.p_value:.3g}; adjusted for the "
                f"{finding.patterns_tried} patterns tried in the build",
                f"  (Benjamini-Hochberg): q = {finding.q_value:.3g}",
            ]
        if finding.judged_runs:
            lines.append(
                f"- {finding.judged_runs} of these runs have an outcome judged by a model from "
                "the log, not by a verifier"
            )
    else:
        failed, total = finding.task_outcomes or [0, 0]
        shared = finding.shared_actions or 0
        task = inline(str(finding.task or ""))
        pair = " and ".join(
            f"{step} ({task}, {'succeeded' if n == 0 else 'failed'})"
            for n, step in enumerate(finding.runs)
        )
        lines += [
            f"- {task}: {total - failed} of its {total} runs succeeded",
            wrapped(
                f"runs compared: {pair}, the pair of its runs that agree longest; "
                + (
                    f"they took the same first {shared} action" + ("s" if shared != 1 else "")
                    if shared
                    else "they differed from the first action"
                ),
                "- ",
                "  ",
            ),
        ]
    # A page is written anew whenever its numbers change: they are its version's runs'.
    counted = (
        f"counted in {finding.version}" if finding.version else "counted over this corpus's runs"
    )
    lines += [f"- mined without a model, {counted}", "", quote_block(MINED_NOTE), ""]
    lines += ["## Evidence", "", f"- source run: {header.source_step} ({header.source_outcome})"]
    lines += [f"- compilation: {link(header.compilation, rel)}", ""]
    for claim in header.evidence:
        lines += heading("### ", claim.statement)
        lines += _quotes(claim.evidence, header.source_step, named=True)
    lines += [quote_block(TRUST_NOTE), ""]
    return lines
