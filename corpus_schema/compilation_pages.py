"""The compilation layer's pages: why a run succeeded or failed, each claim with the quotes
behind it, and the insights drawn from the run or quoting it."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from .layout import INSIGHT_DIR, Layout, link, parse_insight, parse_step
from .records import COMPILATION_DATA_FIELDS, Compilation, CompilationHeader
from .render import (
    OFFLINE_NOTE,
    TRUST_NOTE,
    PageFiles,
    bullet,
    fit_line,
    folded_quote,
    heading,
    inline,
    outcome_text,
    quote_block,
    with_data,
    wrapped,
)


def _claims_heading(record: Compilation) -> str:
    if record.compiled_by == "offline":
        return "## Error signals and final actions"
    return "## Key decisions" if record.outcome == "success" else "## Failure reasons"


def compilation(
    layout: Layout,
    record: Compilation,
    *,
    task_id: str,
    task_type: str | None,
    insight_numbers: Sequence[int],
) -> PageFiles:
    rel = layout.compilation_rel(record.step)
    step = layout.step(record.step)
    header = CompilationHeader(
        step=step,
        outcome=record.outcome,
        judged=record.judged,
        title=record.title,
        insights=[layout.insight(n) for n in insight_numbers],
        compiled_by=record.compiled_by,
        model=record.model,
        prompt=record.prompt,
        unverified_quotes=record.unverified_quotes,
        raw=layout.raw_dir_rel(record.step) + "/",
        claims=record.claims,
    )
    if record.compiled_by == "offline":
        provenance = OFFLINE_NOTE
    else:
        template = record.prompt.template if record.prompt else "?"
        provenance = f"Compiled by `{record.model}` with prompt `{template}`. {TRUST_NOTE}"
    lines = [
        *heading(f"# {step}: ", record.title),
        quote_block(provenance),
        "",
        fit_line(
            f"- outcome: **{outcome_text(record.outcome, record.judged)}**; task ",
            task_id,
            f", type {inline(task_type)}" if task_type else "",
        ),
        f"- run: {link(layout.raw_metadata_rel(record.step), rel)}",
        f"- turns: {link(layout.raw_turns_rel(record.step), rel)} (line N is turn N)",
        "",
        "## What happened",
        "",
        wrapped(record.description),
        "",
        _claims_heading(record),
        "",
    ]
    if not record.claims:
        lines += ["(none found)", ""]
    for number, claim in enumerate(record.claims, start=1):
        inferred = "(inferred: the compiler's reading, not shown as such in the log)"
        lines += heading(f"### {number}. ", claim.statement)
        if claim.basis == "inferred":
            lines += [inferred, ""]
        for evidence in claim.evidence:
            status = (
                "verified"
                if evidence.verified
                else (
                    "UNVERIFIED: this text was not found in the raw turn; do not treat it as fact"
                )
            )
            quote, folded = folded_quote(evidence.quote)
            if evidence.note:
                status += f"; {evidence.note}"
            if folded:
                status += f"; long lines broken here, `tools/turn {step} {evidence.turn}` shows it"
            lines += [bullet(f"turn {evidence.turn} ({status}):"), "", quote, ""]
    drawn = [
        fit_line(f"- {link(layout.insight_rel(number), rel)}: ", draft.title)
        for number, draft in zip(insight_numbers, record.insights, strict=True)
    ]
    lines += _insight_sections(drawn, record.compiled_by == "offline", [])
    if record.notes:
        lines += ["## Notes", ""] + [wrapped(note, "- ", "  ") for note in record.notes] + [""]
    return with_data(rel, header, "\n".join(lines), COMPILATION_DATA_FIELDS)


_DRAWN = "## Insights drawn from this run"
_CITING = "## Insights that quote this run as evidence"


def _insight_sections(drawn: list[str], offline: bool, citing: list[str]) -> list[str]:
    """The sections of a compilation page that name the insights drawn from its run (by a
    model, or mined with it as their source: `drawn`) and those that quote it as evidence
    (`citing`), each a rendered list line."""
    lines = [_DRAWN, ""]
    if not drawn:
        lines.append(
            "None: offline compilation draws no insights, and no mined lesson has this run as "
            "its source."
            if offline
            else "None."
        )
    lines += [*drawn, ""]
    if citing:
        lines += [_CITING, "", *citing, ""]
    return lines


def with_mined(
    layout: Layout,
    header: CompilationHeader,
    body: str,
    source_of: Sequence[tuple[int, str]] = (),
    cited_by: Sequence[tuple[int, str]] = (),
    dropped: AbstractSet[str] = frozenset(),
) -> PageFiles:
    """A compilation page written anew to name the mined insights that have its run as their
    source (`source_of`) or quote it as evidence (`cited_by`), each (number, title): they are
    counted once every run is compiled, after its page was written. The insights `dropped`
    (ids) are named no more (a view leaves them out). A page of format 1 comes out in format
    2."""
    rel = layout.compilation_rel(parse_step(header.step))
    named = {layout.insight(n) for n, _ in [*source_of, *cited_by]}
    start = body.find(f"\n{_DRAWN}\n")
    if start == -1:
        raise ValueError(f"internal error: {rel} has no '{_DRAWN}' section")
    middle = body.find(f"\n{_CITING}\n", start)
    end = body.find("\n## ", (start if middle == -1 else middle) + 4)
    end = len(body) if end == -1 else end
    middle = end if middle == -1 else middle
    gone = named | dropped

    def kept(part: str) -> list[tuple[int, str]]:
        return [
            (_listed(line), line)
            for line in part.split("\n")
            if line.startswith("- [") and not any(f"{INSIGHT_DIR}/{i}.md]" in line for i in gone)
        ]

    def lines(items: Sequence[tuple[int, str]], suffix: str) -> list[tuple[int, str]]:
        return [
            (n, fit_line(f"- {link(layout.insight_rel(n), rel)}: ", t, suffix)) for n, t in items
        ]

    def in_order(numbered: list[tuple[int, str]]) -> list[str]:
        # By number, however many versions named them: a chain of adds lists them as one
        # build does.
        return [line for _, line in sorted(numbered)]

    header = header.model_copy(
        update={
            # Drawn from this run: by a model, or mined with it as their source (as the body's
            # section says).
            "insights": sorted(
                {
                    *(i for i in header.insights if i not in gone),
                    *(layout.insight(n) for n, _ in source_of),
                },
                key=parse_insight,
            ),
            "cited_by": sorted(({*header.cited_by} | named) - dropped),
        }
    )
    sections = _insight_sections(
        in_order(kept(body[start:middle]) + lines(source_of, " (mined: this run is its source)")),
        header.compiled_by == "offline",
        in_order(kept(body[middle:end]) + lines(cited_by, " (mined)")),
    )
    text = body[:start].rstrip("\n") + "\n\n" + "\n".join(sections) + body[end:]
    return with_data(rel, header, text, COMPILATION_DATA_FIELDS)


def _listed(line: str) -> int:
    """The number of the insight a line of a compilation page's insight sections links."""
    start = line.index(f"{INSIGHT_DIR}/") + len(INSIGHT_DIR) + 1
    return parse_insight(line[start : line.index(".md]", start)])
