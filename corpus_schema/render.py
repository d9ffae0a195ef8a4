"""The text of every corpus file: frontmatter headers, markdown bodies, turn logs, indexes."""

from __future__ import annotations

import re
import textwrap
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import frontmatter
import orjson
from frontmatter.default_handlers import YAMLHandler
from pydantic import BaseModel

from .layout import (
    CATALOG,
    COMPILATION_DIR,
    DATA_DIR,
    FORMAT_NAME,
    FORMAT_VERSION,
    GATE_DIR,
    INDEX_NAME,
    INSIGHT_DIR,
    RAW_DIR,
    RAW_METADATA_NAME,
    RAW_TURN_INDEX_NAME,
    RAW_TURNS_NAME,
    Layout,
    data_rel,
    link,
    parse_step,
)
from .ledger import GateDecision
from .records import (
    COMPILATION_DATA_FIELDS,
    INSIGHT_DATA_FIELDS,
    READ_ONLY,
    Compilation,
    CompilationHeader,
    Evidence,
    InsightDraft,
    InsightHeader,
    InsightStatus,
    MinedFinding,
    Outcome,
    RawHeader,
    is_judged,
    support_of,
)

TRUST_NOTE = (
    "A compilation is an interpretation; only raw turns are facts. "
    "Check a lesson against the raw turns it cites before relying on it."
)
OFFLINE_NOTE = (
    "Compiled offline: a mechanical summary made without an LLM "
    "(outcome, turns that failed, final actions). "
    "Its only insights are mined ones: counted from how runs with and without a pattern of "
    "action ended, not drawn by a model."
)
MINED_NOTE = (
    "Mined, not drawn by a model: a correlation in past runs, counted, not a cause. The runs "
    "that show the pattern may differ in other ways; read the runs it cites before acting on it."
)


# Characters JSON leaves unescaped that YAML refuses, or reads as line breaks (NEL, LS, PS).
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
# A JSON string, or a number in exponent form: YAML 1.1 reads `1e-7` as text, `1.0e-7` as a
# number, so such numbers get a fraction and a signed exponent (strings are left alone).
_JSON_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+)(\.\d+)?[eE]([-+]?)(\d+)')
_DIGIT_EXPONENT = re.compile(r"\d[eE][-+]?\d")


def _yaml_number(match: re.Match[str]) -> str:
    whole, fraction, sign, exponent = match.groups()
    if whole is None:
        return match.group()
    return f"{whole}{fraction or '.0'}e{sign or '+'}{exponent}"


def _json_flow(value: object) -> str:
    """A nested value as JSON, which YAML reads back as the same value."""
    flow = orjson.dumps(value).decode()
    flow = _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", flow)
    if _DIGIT_EXPONENT.search(flow):  # rare: skip the slower, string-aware pass otherwise
        flow = _JSON_EXPONENT.sub(_yaml_number, flow)
    return flow


# Text YAML 1.1 reads back as the same string when written bare: no quoting, no number, no
# date, no yes/no/on/off/null. Anything else is written as a JSON string, which YAML reads too.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _yaml_scalar(value: object) -> str:
    if isinstance(value, str) and _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return _json_flow(value)


class _HeaderHandler(YAMLHandler):
    """One `key: value` line per field: scalars bare when YAML reads them back unchanged
    (`source_step: step-0003`, easy to grep), anything else as JSON, which is YAML too.
    Many times faster than a YAML dumper, and round-trip tested."""

    def export(self, metadata: dict[str, object], **kwargs: object) -> str:
        return "\n".join(f"{key}: {_yaml_scalar(value)}" for key, value in metadata.items())


_HEADER_HANDLER = _HeaderHandler()


_UNSET_LEFT_OUT = ("project", "kind", "kind_basis", "support")
"""Optional header fields written only when set: a run with no project, kind or taint mark
carries no `project: null` line (read back, an absent field is None)."""


def _header_fields(header: BaseModel) -> dict[str, Any]:
    fields = header.model_dump(mode="json")
    for name in _UNSET_LEFT_OUT:
        if name in fields and fields[name] is None:
            del fields[name]
    return fields


def with_frontmatter(header: BaseModel, body: str) -> str:
    """A markdown file with a YAML header, scalar fields first, ending in a newline."""
    return _page(_header_fields(header), body)


def _page(fields: dict[str, Any], body: str) -> str:
    post = frontmatter.Post(body.rstrip("\n"), **fields)
    return frontmatter.dumps(post, handler=_HEADER_HANDLER) + "\n"


PageFiles = list[tuple[str, str]]
"""A page and its data file, each as (path under the corpus root, text): write both."""


def _with_data(rel: str, header: BaseModel, body: str, kept: Sequence[str]) -> PageFiles:
    """The page at `rel` with a header of short fields that names its data file (`data`),
    which holds the fields `kept` as JSON for the tools: the body shows them once."""
    fields = _header_fields(header)
    data = {name: fields.pop(name) for name in kept}
    fields["data"] = data_rel(rel)
    text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    return [(rel, _page(fields, body)), (fields["data"], text)]


def turn_log(turns: Iterable[Mapping[str, Any]]) -> tuple[bytes, list[int]]:
    """solver.full.jsonl (one JSON object per turn, exactly as logged; line N is turn N) and
    the byte offset where each line starts, plus the end."""
    lines = [orjson.dumps(turn) + b"\n" for turn in turns]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return b"".join(lines), offsets


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


# --- text from logs and models, made safe to render --------------------------------------

_INLINE_SPECIAL = re.compile(r"([\\\[\]<>*`])")
_LINE_START = re.compile(r"^(?:([#+=|-])|(\d{1,9})([.)]))")
_UNESCAPE = re.compile(r"\\([\\\[\]<>*`#+=|.)-])")


def inline(text: str) -> str:
    """One line of Markdown that shows `text` and nothing else: no heading, list, link, tag,
    emphasis or code span that the text could open, whatever it holds (whitespace folded).

    `unescape` gives the folded text back.
    """
    flat = " ".join(text.split())
    escaped = _INLINE_SPECIAL.sub(r"\\\1", flat)
    start = _LINE_START.match(escaped)
    if start and start.group(1):  # `# x`, `- x`: a heading or a list if it starts a line
        escaped = "\\" + escaped
    elif start:  # `1. x`
        escaped = start.group(2) + "\\" + escaped[len(start.group(2)) :]
    return escaped


def unescape(text: str) -> str:
    """The (folded) text `inline` was given."""
    return _UNESCAPE.sub(r"\1", text)


LINE_LIMIT = 200
"""No line of an insight page, a compilation page or an index is longer (but a header line
of a page from format 1, or a word a fenced quote cannot break): grep shows whole lines."""
WRAP = 150
"""Where prose is wrapped on a page: most paragraphs stay one line, whole in a grep's hit."""


def wrapped(text: str, first: str = "", indent: str = "", width: int = WRAP) -> str:
    """`first` then `text` as `inline` shows it, wrapped at `width` on lines that start with
    `indent` (each line escaped on its own, so that none starts a list or a heading); a word
    too long for a line is cut. `page_line` gives the text back as a reader takes it."""
    lines: list[str] = []
    line: list[str] = []
    size = len(first)
    limit = max(width, len(indent) + 20)
    for word in _words(text, LINE_LIMIT - len(indent) - 4):
        shown = len(inline(word))
        if line and size + 1 + shown > limit:
            lines.append(inline(" ".join(line)))
            line, size = [], len(indent)
        line.append(word)
        size += shown + (len(line) > 1)
    lines.append(inline(" ".join(line)))
    return first + f"\n{indent}".join(lines)


def _words(text: str, longest: int) -> Iterator[str]:
    for word in text.split():
        if len(inline(word)) <= longest:
            yield word
            continue
        # Escaping at most doubles a word: cut it so that each piece fits a line escaped.
        step = max(longest // 2, 1)
        yield from (word[i : i + step] for i in range(0, len(word), step))


def _fit(prefix: str, text: str, suffix: str = "", cell: bool = False) -> str:
    """`prefix`, `text` shortened as far as it must be for the line to fit LINE_LIMIT (a table
    cell when `cell`), then `suffix`."""
    shown = _cell if cell else lambda t, n: inline(shortened(t, n))
    limit = max(len(text), 1)
    line = f"{prefix}{shown(text, limit)}{suffix}"
    while len(line) > LINE_LIMIT and limit > 16:
        limit = max(16, limit - (len(line) - LINE_LIMIT))
        line = f"{prefix}{shown(text, limit)}{suffix}"
    return line


def page_line(text: str) -> str:
    """`text` as a reader takes it back from the lines `wrapped` makes of it (whitespace
    folded)."""
    return " ".join(unescape(wrapped(text)).split())


def verbatim(text: str, indent: str = "") -> str:
    """A fenced code block holding `text` exactly: nothing in it is Markdown. The fence is
    longer than any run of backticks in the text, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    lines = [f"{indent}{fence}text"]
    lines += [f"{indent}{line}" if line else "" for line in text.split("\n")]
    lines.append(f"{indent}{fence}")
    return "\n".join(lines)


def folded_quote(text: str, indent: str = "  ", width: int = LINE_LIMIT - 20) -> tuple[str, bool]:
    """A quote as a page shows it (`verbatim`), its lines longer than `width` broken (at a
    space where there is one); and whether any was. The data file keeps it whole."""
    lines: list[str] = []
    for line in text.split("\n"):
        while len(line) > width:
            cut = line.rfind(" ", width // 2, width)
            cut = cut + 1 if cut != -1 else width
            lines.append(line[:cut].rstrip(" "))
            line = line[cut:]
        lines.append(line)
    folded = "\n".join(lines)
    return verbatim(folded, indent), folded != text


def _heading(prefix: str, text: str) -> list[str]:
    """A heading `prefix` + `text`, or when it would be too long a line, `prefix` as the
    heading and the text wrapped under it."""
    line = f"{prefix}{inline(text)}"
    if len(line) <= LINE_LIMIT:
        return [line, ""]
    return [prefix.rstrip(": "), "", wrapped(text), ""]


def _quote_block(text: str, indent: str = "") -> str:
    """A block quote of our own text (a note; no Markdown but code spans), wrapped."""
    lines = [
        wrap or [""]
        for line in text.splitlines()
        for wrap in [textwrap.wrap(line, WRAP, break_long_words=False, break_on_hyphens=False)]
    ]
    return "\n".join(
        f"{indent}> {part}" if part else f"{indent}>" for group in lines for part in group
    )


TASK_PREVIEW = 400


def shortened(text: str, limit: int) -> str:
    """`text` on one line (whitespace flattened), cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def task_preview(text: str) -> str:
    """The start of a task, whitespace flattened: what a row keeps (RunRow.task)."""
    return " ".join(text[: 4 * TASK_PREVIEW].split())[:TASK_PREVIEW]


def _cell(text: str | None, limit: int = 0) -> str:
    """Text fit for one markdown table cell."""
    if text is None:
        return ""
    flat = " ".join(text.split())
    if limit and len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return inline(flat).replace("|", "\\|")


# --- raw layer ----------------------------------------------------------------------------


def outcome_text(outcome: str, judged: bool) -> str:
    """An outcome as pages show it: a judged one says so, so no reader takes it for a
    verifier's."""
    return f"{outcome} (judged by a model)" if judged else outcome


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
        f"# {header.step}: task {inline(header.task_id)} "
        f"({outcome_text(header.outcome, judged)})\n\n"
        f"{verdict}"
        f"## Task\n\n{verbatim(page_task(task))}\n\n"
        f"## Turns\n\n{header.turns} turns in `{header.turns_file}`, one JSON object per line "
        f"as logged: line N is turn N.\n"
    )
    return with_frontmatter(header, body)


# --- compilation layer -----------------------------------------------------------------------


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
        *_heading(f"# {step}: ", record.title),
        _quote_block(provenance),
        "",
        _fit(
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
        lines += _heading(f"### {number}. ", claim.statement)
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
            lines += [_bullet(f"turn {evidence.turn} ({status}):"), "", quote, ""]
    drawn = [
        _fit(f"- {link(layout.insight_rel(number), rel)}: ", draft.title)
        for number, draft in zip(insight_numbers, record.insights, strict=True)
    ]
    lines += _insight_sections(drawn, record.compiled_by == "offline", [])
    if record.notes:
        lines += ["## Notes", ""] + [wrapped(note, "- ", "  ") for note in record.notes] + [""]
    return _with_data(rel, header, "\n".join(lines), COMPILATION_DATA_FIELDS)


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

    def kept(part: str) -> list[str]:
        return [
            line
            for line in part.split("\n")
            if line.startswith("- [") and not any(f"{INSIGHT_DIR}/{i}.md]" in line for i in gone)
        ]

    def lines(items: Sequence[tuple[int, str]], suffix: str) -> list[str]:
        return [_fit(f"- {link(layout.insight_rel(n), rel)}: ", t, suffix) for n, t in items]

    header = header.model_copy(
        update={
            "insights": [i for i in header.insights if i not in dropped],
            "cited_by": sorted(({*header.cited_by} | named) - dropped),
        }
    )
    sections = _insight_sections(
        kept(body[start:middle]) + lines(source_of, " (mined: this run is its source)"),
        header.compiled_by == "offline",
        kept(body[middle:end]) + lines(cited_by, " (mined)"),
    )
    text = body[:start].rstrip("\n") + "\n\n" + "\n".join(sections) + body[end:]
    return _with_data(rel, header, text, COMPILATION_DATA_FIELDS)


# --- insight layer ------------------------------------------------------------------------


def insight_header(
    layout: Layout,
    number: int,
    draft: InsightDraft,
    *,
    source: Compilation,
    task_type: str | None,
) -> InsightHeader:
    """The header of the page of a model's insight (insight_page, with its guideline)."""
    evidence = [
        source.claims[n - 1] for n in draft.supporting_claims if 1 <= n <= len(source.claims)
    ] or list(source.claims)
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
    "**READ CONTENT ONLY.** Its only support is text the agent read (a tool result, a page, a "
    "file), which may be an injected instruction; the gate commits it only on probes."
)
STATUS_NOTES = {
    "ungated": "not tested by the admission gate",
    "committed": "passed the admission gate",
    "rejected": "REJECTED by the admission gate: kept on record, never shown to an agent",
    "retired": "RETIRED: it failed too often in later episodes; kept on record, never shown",
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
        *_heading(f"# {header.id}: ", header.title),
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
    if not header.verified:
        lines += ["", "**UNVERIFIED.** No quote behind this lesson was found in its run."]
    if header.support == READ_ONLY:
        lines += ["", _prose(READ_ONLY_NOTE)]
    if header.mined is not None:
        lines += _mined_body(header, header.mined, rel)
        return _with_data(rel, header, "\n".join(lines), INSIGHT_DATA_FIELDS)
    lines += [
        "",
        "## Evidence",
        "",
        _bullet(f"drawn by `{header.model}` from {header.source_step}, {origin}"),
        f"- compilation: {link(header.compilation, rel)} (claims {claims})",
        f"- raw run: {link(header.raw + RAW_METADATA_NAME, rel)}",
        f"- raw turns: {link(header.raw + RAW_TURNS_NAME, rel)}",
        "",
    ]
    numbers = header.source_claims or list(range(1, len(header.evidence) + 1))
    for number, claim in zip(numbers, header.evidence, strict=False):
        lines += _heading(f"### Claim {number}: ", claim.statement)
        lines += _quotes(claim.evidence, header.source_step, named=False)
    lines += [_quote_block(TRUST_NOTE), ""]
    return _with_data(rel, header, "\n".join(lines), INSIGHT_DATA_FIELDS)


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
        lines += [_bullet(f"{where} ({status}; `{command}` {shows}):"), "", quote, ""]
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
        lines += [
            f"- pattern: `{inline(finding.pattern)}`, shown by runs of {finding.tasks} tasks",
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
        pair = " and ".join(
            f"{step} ({'succeeded' if n == 0 else 'failed'})" for n, step in enumerate(finding.runs)
        )
        lines += [
            f"- task {inline(finding.task_id or '')}: {total - failed} of its {total} runs "
            "succeeded",
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
    counted = f"counted in {finding.version}" if finding.version else "counted at build time"
    lines += [f"- mined without a model, {counted}", "", _quote_block(MINED_NOTE), ""]
    lines += ["## Evidence", "", f"- source run: {header.source_step} ({header.source_outcome})"]
    lines += [f"- compilation: {link(header.compilation, rel)}", ""]
    for claim in header.evidence:
        lines += _heading("### ", claim.statement)
        lines += _quotes(claim.evidence, header.source_step, named=True)
    lines += [_quote_block(TRUST_NOTE), ""]
    return lines


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "n/a"


def insight_row(number: int, header: InsightHeader, guideline: str) -> InsightRow:
    """The index row of an insight page."""
    return InsightRow(
        number=number,
        title=header.title,
        task_type=header.task_type,
        source_step=parse_step(header.source_step),
        source_outcome=header.source_outcome,
        source_judged=header.source_judged,
        status=header.status,
        verified=header.verified,
        guideline=guideline,
        pattern=header.mined.pattern if header.mined else None,
        goes_with=header.mined.goes_with if header.mined else None,
        holds=header.mined.holds if header.mined else True,
    )


# --- indexes --------------------------------------------------------------------------------


@dataclass(slots=True)
class RunRow:
    """What the indexes show of one run."""

    step: int
    task_id: str
    task_type: str | None
    outcome: Outcome
    turns: int
    task: str
    """The task, or (in a build, which holds a row per run to the end) its first
    TASK_PREVIEW characters with whitespace flattened: all an index or a lesson shows."""
    judged: bool = False
    compiled: bool = False
    title: str | None = None
    unverified_quotes: int = 0
    insights: list[int] = field(default_factory=list)
    attempt: str = ""
    """Not shown: the attempt number its log gives, if any (versions.frozen.given_attempt),
    which with its task, outcome and turns tells it from other runs across versions."""
    project: str | None = None
    kind: str | None = None
    """The kind of work it did (RunRecord.kind): the index shows it beside its type."""


@dataclass(slots=True)  # a build holds one for every insight
class InsightRow:
    number: int
    title: str
    task_type: str | None
    source_step: int
    source_outcome: Outcome
    source_judged: bool = False
    status: InsightStatus = "ungated"
    verified: bool = True
    """False when no quote behind it was found in its run (the index says UNVERIFIED)."""
    guideline: str = ""
    alike: int | None = None
    """The insight whose near-duplicate this is (the first of its group), if any."""
    pattern: str | None = None
    """For a mined lesson (compiler/mine.py): the pattern it counts (`diverge` for a
    divergence); None for a lesson a model drew."""
    goes_with: Outcome | None = None
    """For a mined lesson: the outcome the pattern goes with."""
    holds: bool = True
    """False for a mined lesson a later version's runs no longer support."""


@dataclass
class CorpusSummary:
    """What the root index says about the whole corpus."""

    model: str
    compiled_by: str
    runs: int
    successes: int
    compilations: int
    insights: int
    failed_steps: list[int]
    divergences: int = 0
    """Of the insights, how many are divergences between runs of one task (not lessons)."""


INDEX_PAGE_ROWS = 5000
"""Rows an index page holds: a layer with more has its index in parts (`raw/_index/...`), and
its `_index.md` lists the parts, so no page grows with the corpus past this."""

Row = tuple[str, Callable[[str], str]]
"""A table row of an index: the id it starts with, and the row rendered for the page it is on
(its links are relative to that page)."""


class _Rows(Sequence[Row]):
    """An index's rows made when read, a part at a time: a corpus of a million runs never
    holds a million row renderers at once."""

    def __init__(self, items: Sequence[Any], line: Callable[[Any], Row]) -> None:
        self._items = items
        self._line = line

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self._line(item) for item in self._items[index]]
        return self._line(self._items[index])


T = TypeVar("T")


class _Picked(Sequence[T]):
    """The items of `items` at the given positions (say, the compiled runs), read when asked:
    `items` may be a sequence kept on disk (spill.RunRows)."""

    def __init__(self, items: Sequence[T], positions: Iterable[int]) -> None:
        self._items = items
        self._positions = array("q", positions)

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if not isinstance(index, slice):
            return self._items[self._positions[index]]
        positions = self._positions[index]
        if not positions:
            return []
        first, last = min(positions), max(positions)
        if last - first < 4 * len(positions):  # close together: read the stretch at once
            stretch = self._items[first : last + 1]
            return [stretch[i - first] for i in positions]
        return [self._items[i] for i in positions]


def _paged(
    layout: Layout,
    layer: str,
    head: list[str],
    sections: list[tuple[str | None, str, Sequence[Row]]],
    page_rows: int,
) -> Iterator[tuple[str, str]]:
    """An index: `head`, then each section (a heading or None, its table's header lines, its
    rows). When the rows are more than `page_rows`, each section's rows go into parts of up to
    `page_rows`, which `_index.md` lists with the range of ids each holds. Yields (path, text)
    a page at a time, parts first, so that only one page is held at once."""
    rel = layout.index_rel(layer)
    total = sum(len(rows) for _, _, rows in sections)
    if total <= page_rows:
        lines = list(head)
        for heading, table, rows in sections:
            if heading is not None:
                lines += [heading, ""]
            lines += [table, *(render(rel) for _, render in rows), ""]
        yield rel, "\n".join(lines).rstrip("\n") + "\n"
        return
    lines = [*head, f"This index has {total} rows: they are in parts of up to {page_rows}.", ""]
    for number, (heading, table, rows) in enumerate(sections, start=1):
        if heading is not None:
            lines += [heading, ""]
        parts = range(0, len(rows), page_rows)
        for part, start in enumerate(parts, start=1):
            name = f"{number:03d}-{part:04d}" if len(sections) > 1 else f"{part:04d}"
            part_rel = layout.index_part_rel(layer, name)
            chunk = rows[start : start + page_rows]
            title = f"{heading.split(chr(10), 1)[0].lstrip('# ')}: " if heading else ""
            yield (
                part_rel,
                "\n".join(
                    [
                        f"# {title}part {part} of {len(parts)}",
                        "",
                        f"Part of {link(rel, part_rel)}.",
                        "",
                        table,
                        *(render(part_rel) for _, render in chunk),
                        "",
                    ]
                ),
            )
            lines.append(f"- {link(part_rel, rel)}: {chunk[0][0]} to {chunk[-1][0]}")
        lines.append("")
    yield rel, "\n".join(lines).rstrip("\n") + "\n"


def raw_index(
    layout: Layout,
    rows: Sequence[RunRow],
    compiled_by: str,
    page_rows: int = INDEX_PAGE_ROWS,
) -> Iterator[tuple[str, str]]:
    head = [
        "# Raw runs",
        "",
        "Every run as logged: `raw/step-NNNN/metadata.md` (task, outcome, source) and "
        "`raw/step-NNNN/solver.full.jsonl` (line N is turn N). These are the facts.",
        "",
    ]
    if compiled_by == "offline":
        head += [_quote_block(OFFLINE_NOTE), ""]
    table = "| step | task | type | outcome | turns | compilation |\n|---|---|---|---|---|---|"

    def line(row: RunRow) -> Row:
        def at(rel: str) -> str:
            compiled = (
                link(layout.compilation_rel(row.step), rel, layout.step(row.step))
                if row.compiled
                else "failed"
            )
            return _fit(
                f"| {link(layout.raw_metadata_rel(row.step), rel, layout.step(row.step))} | ",
                f"{row.task_id}: {row.task}",
                f" | {_cell(row.task_type)}{f': {_cell(row.kind)}' if row.kind else ''} "
                f"| {outcome_text(row.outcome, row.judged)} | {row.turns} | {compiled} |",
                cell=True,
            )

        return layout.step(row.step), at

    return _paged(layout, RAW_DIR, head, [(None, table, _Rows(rows, line))], page_rows)


def compilation_index(
    layout: Layout,
    rows: Sequence[RunRow],
    compiled_by: str,
    page_rows: int = INDEX_PAGE_ROWS,
) -> Iterator[tuple[str, str]]:
    head = ["# Compilations", ""]
    if compiled_by == "offline":
        head += [_quote_block(OFFLINE_NOTE), ""]
    else:
        head += [_quote_block(TRUST_NOTE), ""]
    table = "| step | outcome | title | unverified quotes | insights |\n|---|---|---|---|---|"

    def line(row: RunRow) -> Row:
        def at(rel: str) -> str:
            insights = ", ".join(
                link(layout.insight_rel(n), rel, layout.insight(n)) for n in row.insights
            )
            return _fit(
                f"| {link(layout.compilation_rel(row.step), rel, layout.step(row.step))} "
                f"| {outcome_text(row.outcome, row.judged)} | ",
                row.title or "",
                f" | {row.unverified_quotes} | {insights} |",
                cell=True,
            )

        return layout.step(row.step), at

    compiled = _Rows(_Picked(rows, (i for i, row in enumerate(rows) if row.compiled)), line)
    return _paged(layout, COMPILATION_DIR, head, [(None, table, compiled)], page_rows)


def insight_index(
    layout: Layout,
    rows: Sequence[InsightRow],
    compiled_by: str,
    page_rows: int = INDEX_PAGE_ROWS,
) -> Iterator[tuple[str, str]]:
    rel = layout.index_rel(INSIGHT_DIR)
    head = ["# Insights by task type", ""]
    if compiled_by == "offline":
        head += [_quote_block(OFFLINE_NOTE), ""]
        if not rows:
            return iter([(rel, "\n".join([*head, "This corpus has no insights.", ""]))])
    head += [_quote_block(TRUST_NOTE), ""]
    head += [
        _prose(
            "Status: ungated (never tested), committed (passed the admission gate), rejected and "
            "retired (kept on record, never shown to an agent). Same lesson as: a near-duplicate "
            "of an insight drawn from another run (the first message lists the first of each). "
            "Mined: counted from how many runs with and without a pattern ended, without a model "
            "(a correlation, not a cause); the source is its most typical run."
        ),
        "",
    ]
    if not rows:
        head += ["No insights were drawn.", ""]
    # Positions by task type, and the near-duplicates of each group's first: the rows
    # themselves are read again a part at a time (they may be on disk). A divergence is a
    # fact about one task, not a lesson of its type: they have a section of their own.
    by_type: dict[str, array[int]] = {}
    diverged = array("q")
    copies: dict[int, int] = {}
    for position, row in enumerate(rows):
        if row.pattern == DIVERGENCE:
            diverged.append(position)
        else:
            by_type.setdefault(row.task_type or "(no task type)", array("q")).append(position)
        if row.alike is not None:
            copies[row.alike] = copies.get(row.alike, 1) + 1
    table = (
        "| insight | title | source | source outcome | status | same lesson as |\n"
        "|---|---|---|---|---|---|"
    )

    def line(row: InsightRow) -> Row:
        def at(rel: str) -> str:
            insight_link = link(layout.insight_rel(row.number), rel, layout.insight(row.number))
            source = layout.step(row.source_step)
            source_link = link(layout.compilation_rel(row.source_step), rel, source)
            status = row.status if row.verified else f"{row.status}, UNVERIFIED"
            if row.pattern is not None:
                status += ", mined" if row.holds else ", mined, NO LONGER HOLDS"
            alike = (
                link(layout.insight_rel(row.alike), rel, layout.insight(row.alike))
                if row.alike is not None
                else f"(first of {copies[row.number]})"
                if copies.get(row.number, 1) > 1
                else ""
            )
            return _fit(
                f"| {insight_link} | ",
                row.title,
                f" | {source_link} "
                f"| {outcome_text(row.source_outcome, row.source_judged)} | {status} | {alike} |",
                cell=True,
            )

        return layout.insight(row.number), at

    sections: list[tuple[str | None, str, Sequence[Row]]] = [
        (f"## {inline(task_type)}", table, _Rows(_Picked(rows, by_type[task_type]), line))
        for task_type in sorted(by_type)
    ]
    if diverged:
        heading = f"## {DIVERGENCES_HEADING}\n\n" + _prose(DIVERGENCES_NOTE)
        sections.append((heading, table, _Rows(_Picked(rows, diverged), line)))
    return _paged(layout, INSIGHT_DIR, head, sections, page_rows)


DIVERGENCE = "diverge"
"""The `pattern` of a mined divergence (records.MinedFinding)."""
DIVERGENCES_HEADING = "Divergences between runs of one task"
DIVERGENCES_NOTE = (
    "Where a successful and a failed run of the same task first took different actions: a fact "
    "about that task, not a lesson for others (an agent is shown one only for its own task). "
    "They are not counted among the lessons."
)


def _bullet(text: str) -> str:
    """A list item of our own text (no Markdown but code spans and links), wrapped."""
    return textwrap.fill(
        text,
        WRAP,
        initial_indent="- ",
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _prose(text: str) -> str:
    """A paragraph of our own text (no Markdown but code spans), wrapped."""
    return "\n".join(textwrap.wrap(text, WRAP, break_long_words=False, break_on_hyphens=False))


def root_index(layout: Layout, summary: CorpusSummary) -> str:
    failures = summary.runs - summary.successes
    lines = [
        "# wikitrace corpus",
        "",
        _prose(
            f"{summary.runs} runs ({summary.successes} succeeded, {failures} failed), "
            f"{summary.compilations} compilations, "
            f"{summary.insights - summary.divergences} lessons"
            + (
                f" and {summary.divergences} divergences between runs of one task"
                if summary.divergences
                else ""
            )
            + f". Compiled by `{summary.model}`."
        ),
        "",
    ]
    if summary.compiled_by == "offline":
        lines += [_quote_block(OFFLINE_NOTE), ""]
    if summary.failed_steps:
        failed = ", ".join(layout.step(s) for s in summary.failed_steps)
        lines += [f"Incomplete: these runs have no compilation (it failed): {failed}.", ""]
    lines += [
        "## Layout",
        "",
        *map(
            _bullet,
            [
                f"{link(layout.index_rel(INSIGHT_DIR), INDEX_NAME)}: lessons by task type, then "
                "the divergences between runs of one task. `insight/insight-NNNN.md` names its "
                "`source_step`.",
                f"{link(layout.index_rel(COMPILATION_DIR), INDEX_NAME)}: why each run succeeded or"
                " failed, each claim with quotes from numbered turns. "
                "`compilation/step-NNNN.md`.",
                f"{link(layout.index_rel(RAW_DIR), INDEX_NAME)}: every run as logged. "
                "`raw/step-NNNN/metadata.md` and `raw/step-NNNN/solver.full.jsonl` (line N is "
                "turn N).",
                "`gate/` (once the admission gate or monitoring has run): each decision about "
                "an insight (`gate/gate-NNNN.md`, `gate/monitor-NNNN.md`) and the runs or "
                "reports behind it. An insight's header says its `status` and links its "
                "`decisions`.",
                "`manifest.json`: format version, how it was built, and the sha256 of every file.",
                f"`{CATALOG}`: a JSON line per run and per insight an agent may be shown, "
                "written from the pages for `wikitrace prompt` and `wikitrace mcp` to read at "
                "once (the pages are the record), and `search/`: the BM25 indexes over its "
                "tasks and insights (bm25s's saved format), loaded at test time instead of "
                "built.",
                f"`{DATA_DIR}/`: what the tools read of each insight and compilation page but a "
                "person need not (its claims, quotes, counts, hypothesis), as JSON; the page's "
                "header names it as `data`, and its body shows the same once, as lines.",
            ],
        ),
        "",
        "## Trust gradient",
        "",
        _prose(
            "insight (a guess drawn from one run) < compilation (an interpretation of the run) "
            "< raw turns (the facts as logged). Quotes marked UNVERIFIED were not found in the "
            "turn they cite."
        ),
        "",
        "## Drilling down",
        "",
        _prose(
            "Paths are relative to this folder; reading costs no environment step. From an "
            "insight, open its compilation (`source_step` in its header), then the turns it "
            "cites; `wikitrace audit step-0001` lists every insight drawn from a run or quoting it:"
        ),
        "",
        "```sh",
        "grep -l 'source_step: step-0001' insight/*.md   # insights drawn from one run",
        "cat compilation/step-0001.md                    # the claims and the turns they cite",
        "tools/actions step-0001                         # one line per turn: action => result",
        "tools/turn step-0001 12                         # turn 12 in full (or 12-14)",
        "sed -n '12p' raw/step-0001/solver.full.jsonl    # turn 12, exactly as logged",
        "```",
        "",
    ]
    return "\n".join(lines)


# --- gate and monitoring decisions ------------------------------------------------------------


def gate_page(decision: GateDecision) -> str:
    """gate/gate-NNNN.md (or monitor-NNNN.md): the decision, its figures, the probes behind it."""
    rel = f"{GATE_DIR}/{decision.id}.md"
    insight_rel = f"{INSIGHT_DIR}/{decision.insight}.md"
    lines = [
        f"# {decision.id}: {decision.insight} {decision.verdict}",
        "",
        f"{link(insight_rel, rel, decision.insight)} was tested on {decision.tested_on}. "
        f"{decision.reason}",
        "",
        f"- precondition tested: {decision.precondition}",
    ]
    if decision.narrowed_precondition:
        lines.append(f"- narrowed to: {decision.narrowed_precondition}")
    lines += [
        "- thresholds: "
        + ", ".join(f"{k} {v:g}" for k, v in decision.thresholds.items())
        + f" (confidence {decision.confidence:g})",
        f"- every run or report behind it: `{GATE_DIR}/{decision.evidence}`",
        "",
    ]
    for title, figures in (
        ("Figures", decision.figures),
        ("After narrowing", decision.narrowed_figures),
    ):
        if figures is None:
            continue
        lines += [
            f"## {title}",
            "",
            "| estimate | value | bound | pairs |",
            "|---|---|---|---|",
            f"| G, transfer gain | {figures.gain:.3f} | >= {figures.gain_lower:.3f} | "
            f"{figures.n_target} ({figures.gains} better, {figures.losses} worse) |",
            f"| P_fail, falsification failures | {figures.p_fail:.3f} "
            f"| <= {figures.p_fail_upper:.3f} | {figures.n_falsify} ({figures.failures} "
            + (
                "cited it where it should not apply"
                if figures.p_fail_basis == "citations"
                else "worse"
            )
            + ") |",
            f"| D_reg, regression damage | {figures.d_reg:.3f} | <= {figures.d_reg_upper:.3f} | "
            f"{figures.n_regress} solved without it ({figures.damaged} broken) |",
            "",
            f"{figures.errors} pairs were left out because a run errored.",
            "",
        ]
    for check in decision.together:
        figures = check.figures
        lines += [
            "## Run together with the other lessons committed in this call",
            "",
            "- the set: "
            + ", ".join(link(f"{INSIGHT_DIR}/{i}.md", rel, i) for i in check.insights),
            f"- {figures.n_regress} pairs solved without them; {figures.damaged} broken with "
            f"them all (D_reg {figures.d_reg:.3f}): "
            + ("passed" if check.passes else "FAILED: the last lesson of the set was left out"),
            f"- runs with the set: {' '.join(check.runs)}",
            "",
        ]
    seeds = ", ".join(str(seed) for seed in decision.narrowed_seeds)
    for title, probes in (
        ("Probes", decision.probes),
        (f"Probes of the narrowed lesson (chosen anew; seeds {seeds})", decision.narrowed_probes),
    ):
        if not probes:
            continue
        # `narrowed` runs on the first probes: decisions written before narrowed lessons had
        # probes of their own.
        old = any(probe.narrowed_runs for probe in probes)
        lines += [
            f"## {title}",
            "",
            "| task | kind | why | without | with |" + (" narrowed |" if old else ""),
            "|---|---|---|---|---|" + ("---|" if old else ""),
        ]
        for probe in probes:
            lines.append(
                f"| {_cell(probe.task_id)} | {probe.kind} | {_cell(probe.why)} | "
                f"{' '.join(probe.base_runs)} | {' '.join(probe.lesson_runs)} |"
                + (f" {' '.join(probe.narrowed_runs)} |" if old else "")
            )
        lines.append("")
    if decision.monitoring:
        lines += [
            "## Monitoring",
            "",
            "```json",
            orjson.dumps(decision.monitoring, option=orjson.OPT_INDENT_2).decode(),
            "```",
            "",
        ]
    return with_frontmatter(decision, "\n".join(lines))
