"""The scope of a first message: the task's project, domain (task types) and kind of work,
given or found, and the runs it may show. A scope abstains rather than guess across domains:

- a project with runs: its runs and lessons only, whatever their kind (a session with no
  kind included);
- a project with none (a coding task): the same kind of work in other projects of the coding
  domain;
- no project: the domain of the most similar past runs when it has more than half of their
  votes, the nearer the more (said to be theirs, never "this project's"); when no domain
  has, the message says so and lists no lesson of any domain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.catalog import PastRun
from wikitrace.corpus_schema.projects import matching_projects, normal_project
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.corpus_schema.work import CODING, domain_of, infer_kind, kind_named
from wikitrace.search.score import scored

if TYPE_CHECKING:
    from .loaded_memory import LoadedMemory as Memory  # memory.py imports this module

TypeBasis = Literal["given", "project", "coding", "kind", "similar", "all"]
"""How the task's types were found: given (--task-type), its project's runs' types, the
coding domain (a project with no runs), the runs with kinds of work (--kind), the most
similar past runs' domain, or every type (a corpus of one type, or --all-types)."""


@dataclass
class Scope:
    """What the message keeps to: the task's project, types and kind of work, given or
    found, and the runs it may show."""

    task: str
    excluded: set[str]
    """The tasks nothing is shown from."""
    known_types: list[str]
    """The memory's task types."""
    types: frozenset[str] | None
    """The task types whose lessons and runs may be shown; None: every type's."""
    basis: TypeBasis
    type_unsure: dict[str, int] | None
    """When the domain could not be told: the most similar runs' domains, counted (the
    message then lists no lesson)."""
    project: str | None
    """The project as the user named it (a key: corpus_schema/projects.py)."""
    kind: str | None
    kind_inferred: bool
    kind_unsure: dict[str, int] | None
    runs: list[int]
    """The runs that may be shown: of the types kept, from tasks not excluded, and of the
    project when it has runs."""
    projects: frozenset[str] = field(default_factory=frozenset)
    """The runs' project keys that are the task's project (its remote, its folder's name,
    aliases)."""
    project_has_runs: bool = False
    """Whether the project has runs that may be shown: then only they and their lessons are."""

    @property
    def task_type(self) -> str | None:
        """The one task type kept, when one is."""
        return next(iter(self.types)) if self.types is not None and len(self.types) == 1 else None

    @property
    def type_inferred(self) -> bool:
        return self.basis in ("project", "coding", "similar") and bool(self.types)

    def tier(self, run: PastRun | None) -> int:
        """0: the project's own; 1: the same kind of work elsewhere; 2: any other."""
        if run is not None and run.project is not None and run.project in self.projects:
            return 0
        return 1 if run is not None and self.kind is not None and run.kind == self.kind else 2

    def shows(self, run: PastRun | None) -> bool:
        """Whether a run (a lesson's source run) is in scope by project and kind: the
        project's alone when it has runs; else, with a kind, that kind's."""
        if self.project_has_runs:
            return self.tier(run) == 0
        return self.kind is None or self.tier(run) < 2


def task_words(text: str) -> str:
    """A task's text as tasks are compared (`identical_task`, Memory.runs_by_task): its words,
    whitespace aside."""
    return " ".join(text.split())


def identical_task(past: str, task: str) -> bool:
    """Whether a past run's (or a divergence's) task is the very task given: the same words,
    whitespace aside. The one place that says so (a task's identity may come to be its
    source and id)."""
    return task_words(past) == task_words(task)


def task_scope(
    memory: Memory,
    task: str,
    excluded: set[str],
    task_type: str | None,
    project: str | None,
    kind: str | None,
    infer_type: bool,
    aliases: Mapping[str, str] | None = None,
    project_found: bool = False,
) -> Scope:
    """The task's scope: its project's runs, its types (given, or found), its kind of work.
    A project found from the working folder (`project_found`), not named, counts only when
    it has runs here: a task run from inside some repository may be no coding task."""
    known_types = sorted({run.task_type for run in memory.runs if run.task_type})
    if task_type is not None and task_type not in known_types:
        raise InputError(
            f"no task type {task_type!r} in this corpus; it has: "
            + (", ".join(known_types) or "none (its runs have no task type)"),
            field="--task-type",
        )
    if project is not None:  # a remote as a key, however it was spelled
        project = normal_project(project)
    known_projects = {run.project for run in memory.runs if run.project}
    projects = (
        matching_projects(project, known_projects, aliases) if project is not None else frozenset()
    )
    own = [
        i
        for i, run in enumerate(memory.runs)
        if run.project in projects and not run.task_key.named_in(excluded)
    ]
    if project_found and not own:
        project = None
    types: frozenset[str] | None
    basis: TypeBasis
    unsure: dict[str, int] | None = None
    if task_type is not None:
        types, basis = frozenset([task_type]), "given"
    elif len(known_types) <= 1 or (not infer_type and not own):
        types, basis = None, "all"
    else:
        types, basis, unsure = _types(memory, task, excluded, own, project, kind, infer_type)
    run_ok = [
        i
        for i, run in enumerate(memory.runs)
        if not run.task_key.named_in(excluded) and (types is None or run.task_type in types)
    ]
    has_runs = any(i in set(run_ok) for i in own)
    if has_runs:
        run_ok = [i for i in run_ok if memory.runs[i].project in projects]
    kind, kind_inferred, kind_unsure = _task_kind(memory, task, kind, run_ok)
    scope = Scope(
        task,
        excluded,
        known_types,
        types,
        basis,
        unsure,
        project,
        kind,
        kind_inferred,
        kind_unsure,
        run_ok,
        projects,
        has_runs,
    )
    scope.runs = [i for i in run_ok if scope.shows(memory.runs[i])]
    return scope


def _types(
    memory: Memory,
    task: str,
    excluded: set[str],
    own: list[int],
    project: str | None,
    kind: str | None,
    infer_type: bool,
) -> tuple[frozenset[str], TypeBasis, dict[str, int] | None]:
    """The types of a task given none, in a memory of several: those of its project's runs;
    the coding domain's for a project with no runs (when the memory has coding sessions);
    that of the runs with kinds of work (when `kind` is given); or the domain of the most
    similar runs when more than half of them agree. When none of these says, no type (the
    message lists no lesson) and the similar runs' domains, counted."""
    own_types = frozenset(t for i in own if (t := memory.runs[i].task_type))
    if own_types:
        return own_types, "project", None
    known = {run.task_type for run in memory.runs if run.task_type}
    if project is not None and CODING in known:
        return frozenset([CODING]), "coding", None
    if kind is not None:
        # A kind of work is a coding session's: the task is of the type such runs have.
        with_kinds = {r.task_type for r in memory.runs if r.kind and r.task_type}
        if len(with_kinds) == 1:
            return frozenset(with_kinds), "kind", None
    if not infer_type:
        return frozenset(known), "all", None
    return _by_similar(memory, task, excluded, known)


VOTE_SCORE = 0.07
"""The least score (search.score.scored) a past run's task needs against the task to vote on
its domain: a run that shares one common word with a task of another domain scores 0.02 to
0.07 (a HotpotQA question against coding, telecom and airline tasks). Lower than search's
"no match" threshold (0.15), which keeps a hit a reader is shown: a vote needs less, as two
runs must agree. Chosen on benchmarks/recall_bench.py over ../shared/data (544 tasks, each
asked with its own task left out, no project given), with the rules of `_by_similar`: at
0.05, 2 first messages showed another domain's items; at 0.07, 1 (a demo task whose domain
has no other run, against five telecom tasks at 0.148), and 374 got their task's type (the
others abstain, HotpotQA questions most); at 0.1, 2 and 211."""


LONE_SCORE = 0.3
"""The least score with which one past run, the only one near enough to vote, decides the
domain alone: most of the task's weight (an ALFWorld task against an episode of its kind
scores 0.4); a short task that matches one run of another domain by a word or two ("Describe
this image:" against a browser task) scores 0.19 and decides nothing."""


def _domain(task_type: str | None) -> str:
    """A voting run's domain, a run of no type (a session) voting as "untyped"."""
    return domain_of(task_type) or "untyped"


def _by_similar(
    memory: Memory, task: str, excluded: set[str], known: set[str], nearest: int = 5
) -> tuple[frozenset[str], TypeBasis, dict[str, int] | None]:
    """The type of a past run of this very task, when there is one. Else the domain of the
    nearest past runs: one run per task, only runs whose task scores at least `VOTE_SCORE`
    against it (a run that shares a stray word with the task is no evidence of its domain),
    the k-th nearest voting 1/k (a near run says more than a far one). A
    domain wins with more than half of the votes' weight, when two of its runs voted, or one
    scored `LONE_SCORE`, or the one run that voted is of the domain of every run that shares
    a word with the task; narrowed to one type when that type has more than half of the
    domain's weight. Else nothing, and the voting runs' domains counted (an untyped run as
    "untyped")."""
    for i in memory.runs_by_task.get(task_words(task), ()):
        run = memory.runs[i]
        if run.task_type and not run.task_key.named_in(excluded):
            # A past run of this very task says what it is, whatever else shares its words.
            return frozenset([run.task_type]), "similar", None
    allowed = [i for i, run in enumerate(memory.runs) if not run.task_key.named_in(excluded)]
    matched = scored(memory.run_ranker, task, allowed)  # every run sharing a word, best first
    voters: list[tuple[str | None, float]] = []  # each voting run's type, and its score
    seen: set[TaskKey] = set()
    for i, score in matched:
        if score < VOTE_SCORE or len(seen) == nearest:
            break  # best first: the rest score less
        run = memory.runs[i]
        if run.task_key not in seen:
            seen.add(run.task_key)
            voters.append((run.task_type or None, score))
    counted = Counter(_domain(name) for name, _ in voters)
    votes = dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))
    weight: dict[str, float] = {}
    for place, (name, _) in enumerate(voters, 1):
        domain = _domain(name)
        weight[domain] = weight.get(domain, 0.0) + 1 / place
    if not voters:
        return frozenset(), "similar", votes
    best = max(weight, key=lambda domain: weight[domain])
    agreed = (
        counted[best] >= 2
        or max(score for name, score in voters if _domain(name) == best) >= LONE_SCORE
        # one run alone, when every run that shares a word with the task is of its domain
        or (len(voters) == 1 and {_domain(memory.runs[i].task_type) for i, _ in matched} == {best})
    )
    if best == "untyped" or not agreed or weight[best] * 2 <= sum(weight.values()):
        return frozenset(), "similar", votes
    of_type: dict[str, float] = {}
    for place, (name, _) in enumerate(voters, 1):
        if name is not None and domain_of(name) == best:
            of_type[name] = of_type.get(name, 0.0) + 1 / place
    top = max(of_type, key=lambda name: of_type[name])
    if of_type[top] * 2 > weight[best]:
        return frozenset([top]), "similar", None
    return frozenset(t for t in known if domain_of(t) == best), "similar", None


def _task_kind(
    memory: Memory,
    task: str,
    kind: str | None,
    run_ok: list[int],
) -> tuple[str | None, bool, dict[str, int] | None]:
    """The task's kind of work (given or inferred from its words), whether it was inferred,
    and, when it could not be, the cue words counted by kind; (None, False, None) when
    the runs kept have no kinds (not coding sessions, or converted before kinds were) or
    the task is of no one domain."""
    one_domain = len({domain_of(memory.runs[i].task_type) for i in run_ok}) == 1
    has_kinds = one_domain and any(memory.runs[i].kind for i in run_ok)
    if kind is not None:
        try:
            kind = kind_named(kind)
        except ValueError as error:
            raise InputError(str(error), field="--kind") from None
        if not has_kinds:
            raise InputError(
                "no run of this corpus that the task may be shown has a kind of work (they "
                "are not coding sessions, or were converted before kinds were inferred): "
                "leave --kind out, or convert the sessions again",
                field="--kind",
            )
        return kind, False, None
    if not has_kinds:
        return None, False, None
    guess = infer_kind(task)
    return guess.kind, guess.kind is not None, None if guess.kind else guess.votes
