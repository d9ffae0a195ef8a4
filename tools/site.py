"""`wikitrace export site`: a corpus as static HTML a reviewer clicks through, from any browser.

index.html (insights by task type: status, source run, support; a filter that searches their
guidelines too), search.html (the corpus searched as `wikitrace search` does, reached from
every page's search box; search.js over search-index.js), runs.html (every run),
task/TASK.html (a task's runs and its divergences), insight/insight-NNNN.html (a lesson, its
claims, each quote linked to the words it cites) and run/step-NNNN.html (the compilation's
claims, then every turn as logged, each quoted span highlighted where it stands; a long run's
turns folded to their action lines, each opened on demand or by its #anchor). No server and no
framework: relative links, one small script, so it opens from file://. Every text from a log
or a model is escaped.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from markupsafe import Markup

from wikitrace.corpus_schema import CorpusError, manifest, read
from wikitrace.corpus_schema.drilldown import format_turn
from wikitrace.corpus_schema.export import EXPORT_MARKER, staged_export
from wikitrace.corpus_schema.records import (
    READ_ONLY,
    Claim,
    CompilationHeader,
    InsightHeader,
    RawHeader,
    is_judged,
)
from wikitrace.corpus_schema.render import shortened
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.corpus_schema.turns import summarize
from wikitrace.search import consolidate

from .audit import counted, passage

if TYPE_CHECKING:
    import jinja2

FILES = Path(__file__).parent / "site_files"
STATIC = ("style.css", "filter.js", "search.js")
ACTING = frozenset(("assistant", "agent", "ai", "model"))
FOLD_TURNS = 20
"""A run of more turns shows them folded: its action lines, each turn opened on demand."""


def task_page(task_id: str) -> str:
    """The file name of a task's page: its id made safe for a path, and a short hash of the id
    (two ids that read alike once made safe stay apart)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", task_id).strip("-.")[:60] or "task"
    return f"{safe}-{hashlib.sha256(task_id.encode()).hexdigest()[:8]}.html"


@dataclass
class Quote:
    step: str
    turn: int
    quote: str
    verified: bool
    anchor: str
    """The id of the highlighted span on the run's page."""


@dataclass
class ShownClaim:
    statement: str
    quotes: list[Quote]
    number: int | None = None


@dataclass
class SiteReport:
    path: str
    version: str | None
    insights: int
    runs: int
    quotes: int
    """Quotes linked to a highlighted span."""
    not_found: int
    """Quotes whose words are not in the turn they cite (shown, marked, not highlighted)."""
    pages: int = 0


@dataclass
class _Marks:
    """The quoted spans to highlight in one run: turn -> [(quote, anchor)]."""

    by_turn: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    def add(self, turn: int, quote: str, anchor: str) -> None:
        self.by_turn.setdefault(turn, []).append((quote, anchor))


def _claims(
    claims: Iterable[Claim], step: str, prefix: str, marks: dict[str, _Marks]
) -> list[ShownClaim]:
    shown = []
    for number, claim in enumerate(claims, start=1):
        quotes = []
        for k, evidence in enumerate(claim.evidence, start=1):
            where = evidence.step or step
            anchor = f"{prefix}{number}-{k}"
            quotes.append(Quote(where, evidence.turn, evidence.quote, evidence.verified, anchor))
            marks.setdefault(where, _Marks()).add(evidence.turn, evidence.quote, anchor)
        shown.append(ShownClaim(claim.statement, quotes, number if prefix == "c" else None))
    return shown


def highlight(text: str, quotes: list[tuple[str, str]]) -> tuple[Markup, set[str]]:
    """`text` escaped, each quote's exact span inside <mark id=anchor>; the anchors found.

    Overlapping spans join into one mark; every anchor stays reachable (the second and later
    as empty spans at the start of the mark)."""
    spans = []
    for quote, anchor in quotes:
        found = passage(text, quote)
        if found is not None and found[1] > found[0]:
            spans.append((found[0], found[1], anchor))
    spans.sort()
    merged: list[list[Any]] = []
    for start, end, anchor in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            merged[-1][2].append(anchor)
        else:
            merged.append([start, end, [anchor]])
    parts, at = [], 0
    for start, end, anchors in merged:
        first, *others = anchors
        parts.append(html.escape(text[at:start], quote=False))
        extra = "".join(f'<span id="{a}"></span>' for a in others)
        inner = html.escape(text[start:end], quote=False)
        parts.append(f'<mark id="{first}">{extra}{inner}</mark>')
        at = end
    parts.append(html.escape(text[at:], quote=False))
    return Markup("".join(parts)), {a for _, _, anchors in merged for a in anchors}


def _turns(root: Path, header: RawHeader) -> Iterator[dict[str, Any]]:
    path = read.contained(root, header.turns_file)
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                turn = orjson.loads(line)
                if not isinstance(turn, dict):
                    raise TypeError
            except (orjson.JSONDecodeError, TypeError):
                raise CorpusError(
                    f"{header.turns_file}:{number}: not a turn; run `wikitrace verify`"
                ) from None
            yield turn


def _source_key(header: InsightHeader, claims: list[ShownClaim]) -> str:
    """What a lesson rests on, to count copies once: for one resting on read content only, the
    text it quotes (five runs that read one planted README are one source); else its run."""
    if header.support != READ_ONLY:
        return header.source_step
    quoted = {" ".join(q.quote.split()) for c in claims for q in c.quotes if q.verified}
    return "read:" + "\n".join(sorted(quoted))


def _support(
    header: InsightHeader, group: list[tuple[InsightHeader, str]], sources: int = 0
) -> str:
    finding = header.mined
    if finding is not None:
        if finding.kind == "divergence":
            failed, total = finding.task_outcomes or [0, 0]
            return f"its task: {total - failed} of {total} runs succeeded"
        if finding.tasks_compared and len(finding.within_with) == 2:
            (a, n1), (c, n0) = finding.within_with, finding.within_without or [0, 0]
            where = f" within {finding.tasks_compared} tasks"
        else:
            (a, n1), (c, n0) = finding.with_pattern, finding.without_pattern
            where = ""
        return (
            f"failed {a} of {n1} with the pattern, {c} of {n0} without{where}; "
            f"q = {finding.q_value:.2g}"
        )
    if len(group) <= 1:
        return "1 run"
    failed = sum(member.source_outcome == "failure" for member, _ in group)
    if 0 < sources < len(group):
        return (
            f"{sources} distinct source{'s' * (sources != 1)}: {len(group)} runs ({failed} "
            "failed), whose read content it rests on is the same text (copies count once)"
        )
    return f"{len(group)} runs ({failed} failed)"


@dataclass
class _Shown:
    """What the site shows of a corpus version, read before any page is written."""

    runs: list[RawHeader]
    tasks: dict[str, str]
    """Each run's task, by step."""
    compiled: dict[str, CompilationHeader]
    compilation_claims: dict[str, list[ShownClaim]]
    insights: list[tuple[dict[str, Any], list[ShownClaim]]]
    """Each insight as its templates show it, and its claims."""
    marks: dict[str, _Marks]
    """The quoted spans to highlight in each run, by step."""


def _read_shown(root: Path) -> _Shown:
    """The runs, compilations and insights of the version at `root`, each claim's quotes
    marked in the run they cite."""
    run_pages = list(read.runs(root))
    runs = [page.header for page in run_pages]
    tasks = {page.header.step: read.task_text(page) for page in run_pages}
    del run_pages
    compiled = {page.header.step: page.header for page in read.compilations(root)}
    insight_pages = [(page.header, read.guideline(page)) for page in read.insights(root)]
    leaders = consolidate.of_pages(insight_pages)
    groups: dict[int, list[tuple[InsightHeader, str]]] = {}
    members: dict[int, list[int]] = {}
    for index, leader in enumerate(leaders):
        groups.setdefault(leader, []).append(insight_pages[index])
        members.setdefault(leader, []).append(index)
    marks: dict[str, _Marks] = {}
    compilation_claims: dict[str, list[ShownClaim]] = {
        step: _claims(header.claims, step, "c", marks) for step, header in compiled.items()
    }
    found = [_insight_claims(header, compilation_claims, marks) for header, _ in insight_pages]
    pairs = zip(insight_pages, found, strict=True)
    keys = [_source_key(header, claims) for (header, _), (claims, _) in pairs]
    insights = []
    for index, (header, guideline) in enumerate(insight_pages):
        claims, missing = found[index]
        sources = len({keys[i] for i in members[leaders[index]]})
        support = _support(header, groups.get(leaders[index], []), sources)
        insights.append((_insight_view(header, guideline, support, missing), claims))
    return _Shown(runs, tasks, compiled, compilation_claims, insights, marks)


def _insight_claims(
    header: InsightHeader, compilation_claims: dict[str, list[ShownClaim]], marks: dict[str, _Marks]
) -> tuple[list[ShownClaim], str]:
    """An insight's claims (a mined one's own; a model's, those of its compilation it names),
    and what is missing of them."""
    if header.mined is not None:
        return _claims(header.evidence, header.source_step, f"{header.id}-", marks), ""
    source = compilation_claims.get(header.source_step)
    if source is None:
        return [], f"EVIDENCE MISSING: no compilation {header.compilation}"
    numbers = header.source_claims or list(range(1, len(source) + 1))
    claims = [source[n - 1] for n in numbers if 1 <= n <= len(source)]
    if len(claims) < len(numbers):
        return claims, "Some claims it names are missing from the compilation."
    return claims, ""


def _insight_view(
    header: InsightHeader, guideline: str, support: str, missing: str
) -> dict[str, Any]:
    """An insight as the templates show it."""
    return {
        "id": header.id,
        "title": header.title,
        "task_type": header.task_type,
        "status": "no longer holds"
        if header.mined is not None and not header.mined.holds
        else header.status,
        "withheld": header.status in ("rejected", "retired")
        or (header.mined is not None and not header.mined.holds),
        "source_step": header.source_step,
        "source_outcome": header.source_outcome,
        "source_judged": header.source_judged,
        "drawn_by": "mined without a model (a correlation)" if header.mined else header.model,
        "guideline": guideline,
        "applicability": header.applicability,
        "precondition": header.hypothesis.precondition if header.hypothesis else None,
        "support": support,
        "numbers": counted(header.mined)
        if header.mined is not None and header.mined.kind == "contrast"
        else "",
        "mined": header.mined is not None,
        "divergence": header.mined is not None and header.mined.kind == "divergence",
        "verified": header.verified,
        "read_only": header.support == READ_ONLY,
        "missing": missing,
    }


@dataclass
class _Pages:
    """Writes the pages of one site into its staging folder, counting them."""

    env: jinja2.Environment
    common: dict[str, Any]
    """What every template is given: the corpus, its version and counts."""
    stage: Path
    report: SiteReport

    def write(self, rel: str, template: str, **values: Any) -> None:
        up = "../" * rel.count("/")
        text = self.env.get_template(template).render(**self.common, **values, up=up)
        (self.stage / rel).write_text(text, encoding="utf-8")
        self.report.pages += 1


def build_site(corpus: Path, dest: Path, *, force: bool = False) -> SiteReport:
    """Write the site of the corpus version `corpus` names into `dest`, whole or not at all."""
    import jinja2

    root = corpus.resolve()
    frozen = manifest.load(root)
    version = frozen.version.name if frozen.version else None
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(FILES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    common = {
        "builder": manifest.builder_version(),
        "corpus_name": corpus.name,
        "version": version,
        "counts": {
            "runs": frozen.counts.get("runs", 0),
            "insights": frozen.counts.get("insights", 0),
        },
        "offline": frozen.compiled_by == "offline",
        "model": frozen.model,
    }
    shown = _read_shown(root)
    report = SiteReport(str(dest), version, len(shown.insights), len(shown.runs), 0, 0)
    with staged_export(dest, "site", force=force) as stage:
        for folder in ("insight", "run", "task"):
            (stage / folder).mkdir()
        pages = _Pages(env, common, stage, report)
        _write_lists(pages, shown)
        _write_task_pages(pages, shown)
        found = _write_run_pages(pages, root, shown)
        for view, claims in shown.insights:
            pages.write(
                f"insight/{view['id']}.html",
                "insight.html.j2",
                title=view["id"],
                insight=view,
                claims=[_linked(claim, found) for claim in claims],
                filter=False,
            )
        every = [
            q for mark in shown.marks.values() for quotes in mark.by_turn.values() for q in quotes
        ]
        report.quotes = len({anchor for _, anchor in every} & found)
        report.not_found = len({anchor for _, anchor in every} - found)
        _write_search(pages, root)
        for name in STATIC:
            shutil.copyfile(FILES / name, stage / name)
        marker = {"kind": "site", "corpus": str(root), "version": version}
        (stage / EXPORT_MARKER).write_bytes(orjson.dumps(marker))
    return report


def _write_lists(pages: _Pages, shown: _Shown) -> None:
    """index.html (the insights by task type) and runs.html (every run)."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for view, _ in shown.insights:
        by_type.setdefault(view["task_type"] or "any task", []).append(view)
    pages.write(
        "index.html",
        "index.html.j2",
        title="Insights",
        groups=sorted(by_type.items()),
        filter=True,
    )
    compiled = shown.compiled
    pages.write(
        "runs.html",
        "runs.html.j2",
        title="Runs",
        filter=True,
        runs=[
            {
                "step": r.step,
                "task_id": r.task_key.name,
                "task": shortened(shown.tasks[r.step], 200),
                "task_type": r.task_type,
                "outcome": r.outcome,
                "turns": r.turns,
                "title": compiled[r.step].title if r.step in compiled else None,
                "task_page": task_page(r.task_key.name),
            }
            for r in shown.runs
        ],
    )


def _write_search(pages: _Pages, root: Path) -> None:
    """search.html, and search-index.js: what its script needs to answer a query as
    `wikitrace search` does (tools/find.py), as a script, since a page opened from file://
    may not fetch a JSON file."""
    from wikitrace.search import MIN_SCORE

    from .find import site_index
    from .memory import Memory

    pages.write("search.html", "search.html.j2", title="Search", filter=False, min_score=MIN_SCORE)
    data = orjson.dumps(site_index(Memory.load(root)))
    (pages.stage / "search-index.js").write_bytes(b"window.WIKITRACE_SEARCH = " + data + b";\n")


def _write_task_pages(pages: _Pages, shown: _Shown) -> None:
    """task/TASK.html: a task, its runs and the divergences between them."""
    compiled = shown.compiled
    task_of = {r.step: r.task_key for r in shown.runs}
    by_task: dict[TaskKey, list[RawHeader]] = {}
    for r in shown.runs:
        by_task.setdefault(r.task_key, []).append(r)  # one task of one source
    for key, task_runs in by_task.items():
        pages.write(
            f"task/{task_page(key.name)}",
            "task.html.j2",
            title=str(key),
            task_id=key.name,
            task=shown.tasks[task_runs[0].step],
            runs=[
                {
                    "step": r.step,
                    "outcome": r.outcome,
                    "turns": r.turns,
                    "title": compiled[r.step].title if r.step in compiled else None,
                }
                for r in task_runs
            ],
            divergences=[
                view
                for view, _ in shown.insights
                if view["divergence"] and task_of.get(view["source_step"]) == key
            ],
        )


def _write_run_pages(pages: _Pages, root: Path, shown: _Shown) -> set[str]:
    """run/step-NNNN.html: a run's compilation and every turn, its quoted spans highlighted;
    returns the anchors placed (the quotes whose words were found)."""
    lessons: dict[str, list[dict[str, Any]]] = {}
    for view, _ in shown.insights:
        lessons.setdefault(view["source_step"], []).append(view)
    found: set[str] = set()
    for raw in shown.runs:
        turns, anchors = _turn_views(root, raw, shown.marks.get(raw.step, _Marks()))
        found |= anchors
        compilation = shown.compiled.get(raw.step)
        pages.write(
            f"run/{raw.step}.html",
            "run.html.j2",
            title=raw.step,
            filter=False,
            run={
                **raw.model_dump(),
                "task": shown.tasks[raw.step],
                "judged": is_judged(raw.metadata),
                "task_id": raw.task_key.name,
                "task_page": task_page(raw.task_key.name),
            },
            folded=len(turns) > FOLD_TURNS,
            compilation=None
            if compilation is None
            else {
                "title": compilation.title,
                "compiled_by": compilation.compiled_by,
                "model": compilation.model,
                "claims": [_linked(c, found) for c in shown.compilation_claims[raw.step]],
            },
            lessons=lessons.get(raw.step, []),
            turns=turns,
        )
    return found


def _turn_views(root: Path, raw: RawHeader, marks: _Marks) -> tuple[list[dict[str, Any]], set[str]]:
    """Every turn of a run as logged, its quoted spans highlighted; the anchors placed."""
    views, placed = [], set()
    for number, turn in enumerate(_turns(root, raw), start=1):
        text, anchors = highlight(format_turn(turn), marks.by_turn.get(number, []))
        placed |= anchors
        role = str(turn.get("role") or "")
        css = "acting" if role in ACTING else re.sub(r"\W", "", role) or "none"
        _, action, came_back = summarize(turn)
        line = (action or "-") + (f"  => {came_back}" if came_back else "")
        views.append(
            {"number": number, "role": role, "role_class": css, "html": text, "line": line}
        )
    return views, placed


def _linked(claim: ShownClaim, found: set[str]) -> ShownClaim:
    """A quote whose words were not found links to its turn, not to a span."""
    quotes = [
        q if q.anchor in found else Quote(q.step, q.turn, q.quote, False, f"turn-{q.turn}")
        for q in claim.quotes
    ]
    return ShownClaim(claim.statement, quotes, claim.number)
