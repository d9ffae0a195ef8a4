"""The agent's first message: the lessons for its task, similar past runs, how to drill down.

Rendered from a loaded memory (tools/memory.py) in steps: the task's scope (its type and kind
of work, given or inferred: tools/task_scope.py), what may be listed (one lesson per group of
near-duplicates, one run per task), the page (prompts/first-message.j2), then the most
relevant lessons that fit a budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wikitrace.corpus_schema.catalog import InsightEntry, PastRun
from wikitrace.corpus_schema.projects import matching_projects, repository_at
from wikitrace.corpus_schema.render import inline, shortened
from wikitrace.search import consolidate

from .bearing import brief
from .first_message_drift import CodeCheck, check_code
from .message_options import MessageOptions
from .similar_runs import most_similar_runs
from .task_scope import Scope, identical_task, task_scope

if TYPE_CHECKING:
    from jinja2 import Template

    from .loaded_memory import LoadedMemory as Memory  # memory.py imports this module

TEMPLATE = "first-message.j2"
CHARS_PER_TOKEN = 4
"""A budget in tokens is checked as characters / 4: close for English text, and no tokenizer
(or model name) is needed to render a message."""
TASK_PREVIEW = 300
CONFLICT_OVERLAP = 0.5
"""Two lessons apply to the same situations when the words of their applicability overlap this
much (Jaccard, as search/consolidate.py counts words)."""
ALIKE_SHOWN = 5


@dataclass
class FirstMessage:
    text: str
    insights: list[str]
    """Ids of the insights the message lists."""
    similar: list[str]
    """Steps of the past runs it lists as similar."""
    truncated: bool
    """True when some insights were left out to fit the budget."""
    alike: dict[str, list[str]] = field(default_factory=dict)
    """A listed insight -> the near-duplicates it stands for (drawn from other runs)."""
    total_insights: int = 0
    tokens_estimate: int = 0
    excluded_tasks: list[str] = field(default_factory=list)
    task_type: str | None = None
    """The task type the message keeps to: given, or inferred from the most similar runs."""
    task_type_inferred: bool = False
    type_unsure: dict[str, int] | None = None
    """When the memory holds several domains and the task's was neither given nor found: the
    domains of the most similar past runs, counted (the message then lists no lesson)."""
    project: str | None = None
    """The task's project, when given (or found from the working folder)."""
    project_has_runs: bool = False
    """Whether the project has runs here: the message then lists its lessons and runs only."""
    kind: str | None = None
    """The task's kind of work (corpus_schema/work.py), given or inferred: the project's
    lessons come first, then this kind's from other projects, and no other kind's."""
    kind_inferred: bool = False
    kind_unsure: dict[str, int] | None = None
    """When the runs have kinds of work and the task's could not be inferred: its cue words
    counted by kind (empty: none); every kind's lessons are then listed."""
    other_kinds: int = 0
    """Lessons (groups of near-duplicates) of other kinds of work from other projects, left
    out."""
    unlisted: int = 0
    """The project's own lessons that bear less on the task than those listed (or, when
    `none_bear`, all of them but those that apply to any change): counted in the message, with
    how to list them, not listed."""
    none_bear: bool = False
    """True when no lesson of the project shares more than its common words with the task:
    none is listed but those that apply to any change in it, and the message says so."""
    ages: dict[str, str] = field(default_factory=dict)
    """A listed insight -> its source run's age (`3 days ago`), when the run's start is known."""
    code: dict[str, str] = field(default_factory=dict)
    """A listed insight of the project the agent works in -> what today's code says of the
    files and symbols it names (tools/first_message_drift.py); none when nothing changed."""
    stale: list[str] = field(default_factory=list)
    """The listed insights a file or symbol they name has gone from since their run."""
    left_out_gone: dict[str, str] = field(default_factory=dict)
    """Insights left out because every file they name is gone from the checkout -> why."""
    code_unchecked: str | None = None
    """Why the lessons were not checked against the checkout given (no git, too slow, ...)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_BLANK_LINES = re.compile(r"\n{3,}")


def report_request(*, insights_only: bool = False, prompts_dir: Path | None = None) -> str:
    """What to send the agent when the episode ends, to get its citation report."""
    from wikitrace import prompts

    template = prompts.environment(prompts_dir).get_template("report-request.j2")
    return template.render(report_at="end", insights_only=insights_only)


def render_first_message(memory: Memory, task: str, options: MessageOptions) -> FirstMessage:
    """Render the first message for `task` as `options` say (tools/message_options.py);
    nothing from `options.exclude_tasks` is shown.

    Its scope (tools/task_scope.py) is the task's project (`project_found` from the working
    folder counts only when it has runs here), type and kind of work: a project with runs
    gets its own lessons and runs alone; else (a project with none, or none named) the
    domain of the most similar past runs when most agree, or no lesson, said; in the coding
    domain, the same kind's in other coding projects, those that bear on the task. Each
    lesson shows its source run's age; the project's own are checked against the git
    `checkout` the agent works in (tools/first_message_drift.py): marked stale when a file
    or symbol they name has gone since their run, left out when every file they name has.
    """
    from wikitrace import prompts

    scope = task_scope(
        memory,
        task,
        set(options.exclude_tasks),
        options.task_type,
        options.project,
        options.kind,
        options.infer_type,
        options.project_aliases,
        options.project_found,
    )
    listing = _listing(memory, scope, options.similar, options.insights_only)
    own = [i for i in listing.insights if scope.tier(memory.run_of(i)) == 0]
    checkout = options.checkout
    if checkout is not None and not _checkout_of(checkout, scope, options.project_aliases):
        checkout = None  # another repository's checkout says nothing of these lessons
    code = check_code(
        memory, listing.insights, own, checkout, now=options.now, budget=options.code_seconds
    )
    if code.gone:
        gone = set(code.gone)
        listing.insights = [i for i in listing.insights if i not in gone]
    # The project's lessons that bear less on the task are counted, not listed (tools/bearing.py).
    listing.unlisted, listing.none_bear = brief(memory, scope, listing.insights)
    listing.insights = [i for i in listing.insights if i not in listing.unlisted]
    environment = prompts.environment(options.prompts_dir, options.compiled_templates)
    template = environment.get_template(TEMPLATE)
    page = _Page(memory, scope, listing, template, options, code)
    chosen, text = _fitted(memory, scope, listing, page, options.max_tokens)
    return _message(memory, scope, listing, code, sorted(chosen), text)


def _message(
    memory: Memory, scope: Scope, listing: _Listing, code: CodeCheck, chosen: list[int], text: str
) -> FirstMessage:
    """The message rendered, with what it lists (the `chosen` insights) and why."""
    ids = _Ids(memory)
    alike_of = listing.alike_of
    return FirstMessage(
        text=text,
        insights=[ids[i] for i in chosen],
        alike={ids[i]: [ids[m] for m in alike_of[i][1:]] for i in chosen if len(alike_of[i]) > 1},
        similar=[run.step for run in listing.similar_runs],
        truncated=len(chosen) < len(listing.insights),
        total_insights=len(listing.insights),
        tokens_estimate=len(text) // CHARS_PER_TOKEN,
        excluded_tasks=sorted(scope.excluded),
        task_type=scope.task_type,
        task_type_inferred=scope.type_inferred,
        type_unsure=scope.type_unsure,
        project=scope.project,
        project_has_runs=scope.project_has_runs,
        kind=scope.kind,
        kind_inferred=scope.kind_inferred,
        kind_unsure=scope.kind_unsure,
        other_kinds=listing.other_kinds,
        unlisted=len(listing.unlisted),
        none_bear=listing.none_bear,
        ages={ids[i]: code.ages[i] for i in chosen if i in code.ages},
        code={ids[i]: code.notes[i].text for i in chosen if i in code.notes},
        stale=[ids[i] for i in chosen if i in code.notes and code.notes[i].stale],
        left_out_gone={ids[i]: code.notes[i].text for i in code.gone},
        code_unchecked=code.unchecked,
    )


class _Ids:
    """Each insight's id, read when asked for (an indexed memory reads only the lines it is
    asked for)."""

    def __init__(self, memory: Memory) -> None:
        self._insights = memory.insights

    def __getitem__(self, index: int) -> str:
        return self._insights[index].id


def _checkout_of(checkout: Path, scope: Scope, aliases: Mapping[str, str] | None) -> bool:
    """Whether `checkout` is a checkout of the task's project (its runs' keys)."""
    here = repository_at(checkout)
    return here is not None and bool(matching_projects(here, scope.projects, aliases))


# --- what may be listed --------------------------------------------------------------------


@dataclass
class _Listing:
    """What the message may list, in the order it lists them."""

    alike_of: dict[int, list[int]]
    """The first visible insight of each group of near-duplicates -> the group's visible
    members, itself first."""
    insights: list[int]
    """The insights it may list: one a group, in corpus order."""
    similar_runs: list[PastRun]
    other_kinds: int
    """Groups of lessons of other kinds of work, left out."""
    unlisted: frozenset[int] = frozenset()
    """The project's own lessons that bear less on the task (bearing.brief): counted, not listed."""
    none_bear: bool = False
    """No lesson of the project bears on the task by its words: every one is in `unlisted`
    but those that apply to any change (`applies_to_any_change`)."""


def _listing(memory: Memory, scope: Scope, similar: int, insights_only: bool) -> _Listing:
    """The insights the message may list (one per group of near-duplicates) and its similar
    runs (one per task), the project's own first, then the same kind's."""
    # The project's alone when it has runs; else the same kind's; no other kind's.
    own = memory.insights_of(scope.projects) if scope.project_has_runs else None
    if own is not None:  # the catalog's index names them: no other lesson is read
        visible = kept = _visible(memory, scope, own)
    else:
        visible = _visible(memory, scope, None)
        # Decided once a run (Memory.run_of's run by step), not once a lesson.
        run_shown = {run.step: scope.shows(run) for run in memory.runs}
        unknown_shown = scope.shows(None)
        insights = memory.insights
        kept = [i for i in visible if run_shown.get(insights[i].source_step, unknown_shown)]
    other_kinds = 0
    if scope.kind is not None and not scope.project_has_runs:
        other_kinds = len({memory.groups[i] for i in visible}) - len(
            {memory.groups[i] for i in kept}
        )
    visible = kept
    # One entry per group of near-duplicates: its first visible member, with the others.
    members: dict[int, list[int]] = {}
    for i in visible:
        members.setdefault(memory.groups[i], []).append(i)
    alike_of = {group[0]: group for group in members.values()}
    similar_runs = most_similar_runs(memory, scope, scope.runs, similar)
    if insights_only:  # the control shows no run and mounts nothing
        similar_runs = []
    return _Listing(alike_of, sorted(alike_of), similar_runs, other_kinds)


def _visible(memory: Memory, scope: Scope, among: Iterable[int] | None) -> list[int]:
    """The insights `among` those given (None: every one) that may be shown for the task: of
    its type, drawn from no excluded task."""
    excluded = scope.excluded
    types = scope.types
    if types is not None and not types:
        return []  # no domain could be told: no lesson is read (a lazy memory reads none)
    insights = memory.insights
    # Every one of its types (a lazy memory makes theirs alone), else by place.
    items = memory.insights_of_types(types) if among is None else ((i, insights[i]) for i in among)
    if not excluded:
        # No task left out (a hook, a plain `prompt`): `_mined_applies` less what can only
        # leave out, with no task key made an item (a tenth of a hook's time at 30,000).
        shown = []
        for i, item in items:
            if (types is None or item.task_type in types) and (
                item.pattern is None
                or item.only_task is None
                or identical_task(item.only_task, scope.task)
            ):
                shown.append(i)
        return shown
    # A mined contrast counts every run of its task type: with one of them left out, it
    # would still rest on that task's outcomes, so it is left out too.
    excluded_types = {run.task_type for run in memory.runs if run.task_key.named_in(excluded)}
    return [
        i
        for i, item in items
        if not item.source_task.named_in(excluded)
        and (types is None or item.task_type in types)
        and _mined_applies(memory, item, scope.task, excluded, excluded_types)
    ]


def _mined_applies(
    memory: Memory,
    item: InsightEntry,
    task: str,
    excluded: set[str],
    excluded_types: set[str | None],
) -> bool:
    """Whether a mined lesson may be shown for `task` (a model's lesson: always)."""
    if item.pattern is None:
        return True
    if memory.drawn_from(item, excluded):
        return False
    if item.only_task is not None:  # a divergence: about one task, shown for it alone
        return identical_task(item.only_task, task)
    return item.task_type not in excluded_types


# --- the page --------------------------------------------------------------------------------


class _Page:
    """The message for a choice of the listed insights, rendered from its template."""

    def __init__(
        self,
        memory: Memory,
        scope: Scope,
        listing: _Listing,
        template: Template,
        options: MessageOptions,
        code: CodeCheck,
    ) -> None:
        self._memory = memory
        self._scope = scope
        self._listing = listing
        self._template = template
        self._options = options
        ids = _Ids(memory)
        self._ages = {ids[i]: age for i, age in code.ages.items()}
        self._notes = {
            ids[i]: {"text": inline(note.text), "stale": note.stale}
            for i, note in code.notes.items()
            if not note.gone
        }
        self._gone = [(ids[i], inline(code.notes[i].text)) for i in code.gone]
        self._gated = memory.gated
        self._similar = [
            {
                **asdict(run),
                "task": inline(shortened(run.task, TASK_PREVIEW)),
                "task_id": inline(run.task_key.name),  # with its source: `tau-bench/airline:3`
                "title": inline(run.title) if run.title else None,
            }
            for run in listing.similar_runs
        ]

    def __call__(self, chosen: list[int]) -> str:
        # The template keeps its blocks readable; the message needs no run of blank lines.
        return _BLANK_LINES.sub("\n\n", self._rendered(chosen))

    def _rendered(self, chosen: list[int]) -> str:
        # Text from logs and models goes in so that it cannot restructure the message.
        memory, scope, options = self._memory, self._scope, self._options
        types, unsure, kind_unsure = scope.types, scope.type_unsure, scope.kind_unsure
        return self._template.render(
            task=scope.task.strip(),
            kept_type=(
                ", ".join(inline(name) for name in sorted(types))
                if types and len(scope.known_types) > 1
                else None
            ),
            type_basis=scope.basis,
            project_has_runs=scope.project_has_runs,
            type_unsure=(
                None
                if unsure is None
                else ", ".join(f"{count} {inline(name)}" for name, count in unsure.items())
            ),
            project=inline(scope.project) if scope.project is not None else None,
            kind=scope.kind,
            kind_inferred=scope.kind_inferred,
            kind_unsure=(
                None
                if kind_unsure is None
                else ", ".join(f"{count} {name}" for name, count in kind_unsure.items())
            ),
            other_kinds=self._listing.other_kinds,
            corpus=options.mount.rstrip("/"),
            mcp=options.access == "mcp",
            offline=memory.offline,
            insights_only=options.insights_only,
            report_at=options.report_at,
            conflicts=(
                self._conflicts(chosen)
                if options.flag_conflicts and not options.insights_only
                else []
            ),
            any_insights=bool(memory.insights) or memory.withheld > 0,
            any_mined=any(memory.insights[i].pattern is not None for i in chosen),
            withheld=memory.withheld,
            gated=self._gated,
            insight_groups=self._insight_groups(chosen),
            truncated=len(chosen) < len(self._listing.insights),
            shown=len(chosen),
            total=len(self._listing.insights),
            similar=self._similar,
            unlisted=len(self._listing.unlisted),
            none_bear=self._listing.none_bear,
            ages=self._ages,
            code=self._notes,
            gone=self._gone,
        )

    def _insight_groups(self, chosen: list[int]) -> list[tuple[str, list[InsightEntry]]]:
        """The chosen insights under their headings (task type; the project's or the same
        kind's), each made safe to show and with its support counted."""
        memory, scope = self._memory, self._scope
        groups: dict[tuple[int, str], list[InsightEntry]] = {}
        for i in sorted(chosen):
            item = memory.insights[i]
            shown = replace(
                item,
                title=inline(item.title),
                guideline=inline(item.guideline),
                applicability=inline(item.applicability),
                precondition=inline(item.precondition) if item.precondition else None,
                mined=inline(item.mined),
                support=_support([memory.insights[m] for m in self._listing.alike_of[i]]),
            )
            heading = inline(item.task_type or "any task")
            rank = scope.tier(memory.run_of(i))
            if rank == 1:
                heading += f": {scope.kind}"
            if scope.project is not None:
                heading += f" in {inline(scope.project)}" if rank == 0 else ", other projects"
            groups.setdefault((rank, heading), []).append(shown)
        return [(heading, items) for (_, heading), items in sorted(groups.items())]

    def _conflicts(self, chosen: list[int]) -> list[dict[str, str]]:
        """The chosen pairs whose applicability overlaps and whose source runs ended
        differently."""
        insights = self._memory.insights
        found = []
        listed = sorted(chosen)
        for a_pos, a in enumerate(listed):
            for b in listed[a_pos + 1 :]:
                first, second = insights[a], insights[b]
                if first.source_outcome == second.source_outcome:
                    continue
                overlap = consolidate.overlap(first.applicability, second.applicability)
                if overlap >= CONFLICT_OVERLAP:
                    success, failure = (
                        (first, second) if first.source_outcome == "success" else (second, first)
                    )
                    found.append({"success": success.id, "failure": failure.id})
        return found


def _support(group: list[InsightEntry]) -> str:
    """`seen in 13 runs: 9 failed, 4 succeeded; also insight-0007, ...` for a lesson drawn
    from several runs; empty for one drawn once."""
    if len(group) < 2:
        return ""
    runs = {item.source_step: item.source_outcome for item in group}
    failed = sum(outcome == "failure" for outcome in runs.values())
    others = [item.id for item in group[1:]]
    listed = ", ".join(others[:ALIKE_SHOWN]) + (
        f" and {len(others) - ALIKE_SHOWN} more" if len(others) > ALIKE_SHOWN else ""
    )
    copies = (
        "; every one rests on read content only, so these may be copies of one planted text"
        if all(item.read_only for item in group)
        else ""
    )
    return (
        f"seen in {len(runs)} run{'s' * (len(runs) != 1)}: {failed} failed, "
        f"{len(runs) - failed} succeeded{copies}; the same lesson: {listed}"
    )


# --- the budget ------------------------------------------------------------------------------


def _fitted(
    memory: Memory,
    scope: Scope,
    listing: _Listing,
    page: Callable[[list[int]], str],
    max_tokens: int | None,
) -> tuple[list[int], str]:
    """The insights the message lists and its text: every one it may list, or, when they do
    not fit `max_tokens`, the most relevant that do."""
    chosen = list(listing.insights)
    # Their texts alone: a message that cannot hold them all is not rendered whole.
    least = sum(len(memory.insights[i].title) + len(memory.insights[i].guideline) for i in chosen)
    budget = None if max_tokens is None else max_tokens * CHARS_PER_TOKEN
    text = "" if budget is not None and least > budget else page(chosen)
    if budget is None or (text and len(text) <= budget):
        return chosen, text
    # No task (a session just started): no word to rank by, nor a ranker to load.
    has_words = bool(scope.task.strip())
    ranked = (
        memory.insight_ranker.rank(scope.task, listing.insights)
        if has_words
        else list(listing.insights)
    )
    # The project's own lessons are kept first, then the same kind's.
    ranked.sort(key=lambda i: scope.tier(memory.run_of(i)))
    count, text = _most_that_fit(ranked, page, budget)
    return ranked[:count], text


def _most_that_fit(
    ranked: list[int], page: Callable[[list[int]], str], budget: int
) -> tuple[int, str]:
    """How many of the `ranked` insights, most relevant first, the longest message that fits
    `budget` (in characters) lists, and its text. A message only grows with each insight
    added, so the count is found by doubling it while it fits, then halving the gap: renders
    that grow with log(insights shown), none of more than twice those shown."""

    def fits(count: int) -> str | None:
        candidate = page(ranked[:count])
        return candidate if len(candidate) <= budget else None

    low, text = 0, page([])
    high = 1
    while high <= len(ranked) and (candidate := fits(high)) is not None:
        low, text = high, candidate
        high *= 2
    high = min(high - 1, len(ranked))
    while low < high:
        middle = (low + high + 1) // 2
        candidate = fits(middle)
        if candidate is None:
            high = middle - 1
        else:
            low, text = middle, candidate
    return low, text
