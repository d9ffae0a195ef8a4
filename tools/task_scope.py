"""The scope of a first message: the task's project, domain (task types) and kind of work,
given or found, and the runs it may show. A scope abstains rather than guess across domains:

- a project with runs: its runs and lessons only, whatever their kind (a session with no
  kind included);
- a project with none, or no project: the domain of the most similar past runs when it has a
  clear majority of their votes, the nearer the more (said to be theirs, never "this
  project's"); when no domain has, or no past run is near enough (a task of a domain the
  corpus does not hold), the message says so and lists no lesson of any domain. A project
  named with no runs here is no evidence of coding work (a letter or a training plan is kept
  in a folder too), so its name, its path and the folder it is asked from scope alike; in the
  coding domain the same kind of work in other projects is then shown.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.catalog import PastRun
from wikitrace.corpus_schema.projects import matching_projects, normal_project
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.corpus_schema.work import domain_of, infer_kind, kind_named
from wikitrace.search.score import common_words, holders, scored, words_of

if TYPE_CHECKING:
    from .loaded_memory import LoadedMemory as Memory  # memory.py imports this module

TypeBasis = Literal["given", "project", "kind", "similar", "all"]
"""How the task's types were found: given (--task-type), its project's runs' types, the runs
with kinds of work (--kind), the most similar past runs' domain, or every type (a corpus of
one type, or --all-types)."""


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
        return self.basis in ("project", "similar") and bool(self.types)

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
    known_types = list(memory.task_types)
    if task_type is not None and task_type not in known_types:
        raise InputError(
            f"no task type {task_type!r} in this corpus; it has: "
            + (", ".join(known_types) or "none (its runs have no task type)"),
            field="--task-type",
        )
    if project is not None:  # a remote as a key, however it was spelled
        project = normal_project(project)
    projects = (
        matching_projects(project, memory.project_keys, aliases)
        if project is not None
        else frozenset()
    )
    own = [
        i
        for i in memory.runs_of(projects)
        if not (excluded and memory.runs[i].task_key.named_in(excluded))
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
        types, basis, unsure = _types(memory, task, excluded, own, kind, infer_type)
    # The project's runs of the types kept, when it has any: they alone may be shown.
    run_ok = [i for i in own if types is None or memory.runs[i].task_type in types]
    has_runs = bool(run_ok)
    if not has_runs:
        run_ok = [
            i
            for i, run in enumerate(memory.runs)
            if not (excluded and run.task_key.named_in(excluded))
            and (types is None or run.task_type in types)
        ]
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
    kind: str | None,
    infer_type: bool,
) -> tuple[frozenset[str], TypeBasis, dict[str, int] | None]:
    """The types of a task given none, in a memory of several: those of its project's runs;
    that of the runs with kinds of work (when `kind` is given); or the domain of the most
    similar runs when more than half of them agree. When none of these says, no type (the
    message lists no lesson) and the similar runs' domains, counted. A project with no runs
    here decides nothing: "Plan a strength training session" asked in a new folder of that
    name is no coding task, and its type is told by its words as with no project named."""
    own_types = frozenset(t for i in own if (t := memory.runs[i].task_type))
    if own_types:
        return own_types, "project", None
    known = set(memory.task_types)
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
asked with its own task left out, no project given), with the rules of `_by_similar` as they
were then: at 0.05, 2 first messages showed another domain's items; at 0.07, 1, and 366 of
531 got their task's type (the others abstain, HotpotQA questions most); at 0.1, 2 and 211."""


LONE_SCORE = 0.3
"""The least score with which one past run, the only one of its domain near enough to vote,
decides the domain alone: most of the task's weight (an ALFWorld task against an episode of
its kind scores 0.4). A task that matches one run of another domain by a word or two scores
less ("Describe this image:" against a browser task 0.19) and decides nothing, unless two
tasks or more share a word with it and all are of that domain: the one run that says
"paragraph" (0.14) does not make "Translate this paragraph into French" a browser task."""


LIFT = 2.0
"""How many times more often a domain's task texts must hold a word than the other domains'
(a share of each one's tasks, in view) for the word to be evidence of that domain: words
that open a request in any domain ("Can you help me ..." in coding sessions, ProntoQA and
SWE-bench tasks alike) made two coding sessions decide "Help me plan a gym membership
refund" was coding ("help" is in 7% of coding tasks and 7% of the others'; "me" in 11%
and 6%). Chosen on benchmarks/recall_bench.py over ../shared/data: at 1.0 to 1.5 the
foreign tasks given a domain stay 4 of 75; at 2.0, 3 (the nurse's interview no longer
coding) and no coding type for "Help me plan a gym membership refund", for 347 right types
of 531 against 365 (four HotpotQA questions that share only "first", "from", "has" with
others, and two sessions whose only likeness was "Can you help me", now abstain); at 3.0,
more coding sessions abstain. Another domain's items stay 0 of 544."""


ASKING = frozenset(["what", "which", "who", "whom", "where", "when", "why", "how"])
"""The common English words that may still be evidence of a domain: they ask a question, and
a domain of questions (HotpotQA) is told by them. With every common word no evidence, 22 of
364 HotpotQA questions asked on benchmarks/recall_bench.py over ../shared/data abstained
whose nearest questions shared only "which", "who" or "what" with them (right task types 347
to 325 of 531); with these kept, 345 (two "Are both ... ?" questions abstain), and another
domain's items stay 0 of 544."""


MARGIN = 1.5
"""How many times the next domain's weight the winning domain's must be, besides more than
half of all: a task whose nearest runs split between two domains ("Plan a three day trip to
Rome with two museum visits": two HotpotQA questions that name Rome and a museum, 1.25,
against three airline tasks that name a day and a trip, 1.03) is of neither. Chosen on
benchmarks/recall_bench.py: it costs 1 of 366 right task types."""


def _domain(task_type: str | None) -> str:
    """A voting run's domain, a run of no type (a session) voting as "untyped"."""
    return domain_of(task_type) or "untyped"


def _by_similar(
    memory: Memory, task: str, excluded: set[str], known: set[str], nearest: int = 5
) -> tuple[frozenset[str], TypeBasis, dict[str, int] | None]:
    """The type of a past run of this very task, when there is one. Else the domain of the
    nearest past runs (`_voters`), the k-th nearest voting 1/k (a near run says more than a
    far one). A domain wins with more than half of the votes' weight and `MARGIN` times the
    next domain's, when two of its runs voted or one scored `LONE_SCORE`; narrowed to one type
    when that type has more than half of the domain's weight. Else nothing, and the voting
    runs' domains counted (an untyped run as "untyped")."""
    for i in memory.runs_by_task.get(task_words(task), ()):
        run = memory.runs[i]
        if run.task_type and not (excluded and run.task_key.named_in(excluded)):
            # A past run of this very task says what it is, whatever else shares its words.
            return frozenset([run.task_type]), "similar", None
    voters, matched, support = _voters(memory, task, excluded, nearest)
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
        # one run alone, when two or more tasks share a word with the task, all of its domain
        or (
            len(voters) == 1
            and len({memory.runs[i].task_key for i, _ in matched}) >= 2
            and {_domain(memory.runs[i].task_type) for i, _ in matched} == {best}
        )
    )
    next_best = max((w for domain, w in weight.items() if domain != best), default=0.0)
    if (
        best == "untyped"
        or not agreed
        or weight[best] * 2 <= sum(weight.values())
        or weight[best] < MARGIN * next_best
        or not (support and support.decides(best))
    ):
        return frozenset(), "similar", votes
    of_type: dict[str, float] = {}
    for place, (name, _) in enumerate(voters, 1):
        if name is not None and domain_of(name) == best:
            of_type[name] = of_type.get(name, 0.0) + 1 / place
    top = max(of_type, key=lambda name: of_type[name])
    if of_type[top] * 2 > weight[best]:
        return frozenset([top]), "similar", None
    return frozenset(t for t in known if domain_of(t) == best), "similar", None


def _voters(
    memory: Memory, task: str, excluded: set[str], nearest: int
) -> tuple[list[tuple[str | None, float]], list[tuple[int, float]], _Support | None]:
    """The type and score of each past run that votes on the task's domain, nearest first, and
    every run that shares a word with the task (search.score.scored). The voters are
    one run per task, up to `nearest` tasks, each scoring at least `VOTE_SCORE` against it (a
    run that shares a stray word with the task is no evidence of its domain), and sharing a
    word with it outside its domain's template (`_Template`) that is evidence of its domain
    (`LIFT`); and the evidence words the voters share with the task (`_Support`; None when no
    run scored enough to vote)."""
    allowed = [
        i for i, run in enumerate(memory.runs) if not (excluded and run.task_key.named_in(excluded))
    ]
    matched = scored(memory.run_ranker, task, allowed)  # every run sharing a word, best first
    template: _Template | None = None
    voters: list[tuple[str | None, float]] = []
    seen: set[TaskKey] = set()
    voting: list[int] = []
    for i, score in matched:
        if score < VOTE_SCORE or len(seen) == nearest:
            break  # best first: the rest score less
        if template is None:  # read once a run would vote
            template = _Template(memory, task, excluded)
        # Whether it is alone first: most runs are, and that needs no task key made.
        if template.alone(i):
            continue
        run = memory.runs[i]
        if run.task_key in seen:
            continue
        seen.add(run.task_key)
        voters.append((run.task_type or None, score))
        voting.append(i)
    support = None if template is None else _Support(task, template, voting)
    return voters, matched, support


def repeated_sentences(runs: Iterable[PastRun]) -> dict[tuple[str, int], int]:
    """(domain, hash of a sentence) -> how many of the runs (one a task text: Memory gives
    one run of each) of the domain hold the sentence, for the sentences two or more hold: a
    domain's template (`_Template`)."""
    counts: Counter[tuple[str, int]] = Counter()
    for run in runs:
        counts.update(_sentence_keys(run))
    return {key: count for key, count in counts.items() if count >= 2}


_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+")


def _sentences(text: str) -> list[str]:
    """A text's sentences, as templates are compared: each line split after a full stop, a
    question or an exclamation mark, a colon or a semicolon, stripped; blank ones left out (a
    template's sentence may share its line with the task's own words, as "Reason for call:"
    does in τ²-bench)."""
    return [
        part for line in text.splitlines() for part in _SENTENCE_END.split(line.strip()) if part
    ]


def _sentence_keys(run: PastRun) -> set[tuple[str, int]]:
    domain = _domain(run.task_type)
    return {(domain, hash(sentence)) for sentence in _sentences(run.task)}


class _Template:
    """A domain's template: the sentences of its tasks that two or more of its tasks (in view)
    hold word for word, as a benchmark repeats its instructions in every task ("Whenever
    the agent asks you about your device, always ground your responses on the results of
    tool calls" in each τ²-bench telecom task; mini-SWE-agent's "cat <<'EOF' > ..."). A run
    that shares words with the task only there matched the benchmark's instructions, not the
    task's subject, and does not vote ("call THREE of the available tools to get joke
    suggestions" against telecom tasks, "a thank-you note ... for looking after our cat"
    against SWE-bench ones)."""

    def __init__(self, memory: Memory, task: str, excluded: set[str]) -> None:
        self.memory = memory
        self.held = holders(memory.run_ranker, task)
        """The runs that hold each of the task's words (search.score.holders)."""
        self.evidence = _evidence(memory, self.held, excluded)
        """Each of the task's words -> the domains it is evidence of, how strongly (`LIFT`)."""
        self.own = set(_sentences(task))
        """The task's sentences: a template the task repeats is its domain's too."""
        # The tasks left out hold sentences too: a sentence is the view's template only when
        # two task texts in view hold it.
        self.left_out: Counter[tuple[str, int]] = Counter()
        texts: set[str] = set()
        for run in memory.runs:
            if not (excluded and run.task_key.named_in(excluded)):
                continue
            text = task_words(run.task)
            if text in texts:
                continue
            texts.add(text)
            if all(memory.runs[i].task_key.named_in(excluded) for i in memory.runs_by_task[text]):
                self.left_out.update(_sentence_keys(run))

    def shared(self, index: int, domain: str) -> list[str]:
        """The task's words the run `index` holds that are evidence of `domain` (`LIFT`)."""
        return [
            word
            for word, holding in self.held.items()
            if index in holding and domain in self.evidence[word]
        ]

    def alone(self, index: int) -> bool:
        """Whether every word the task shares with the run is in its template's sentences (and
        not in a sentence of the task's own)."""
        run = self.memory.runs[index]
        domain = _domain(run.task_type)
        # The words it shares with the task that are evidence of its domain, found first: a
        # run that shares none is alone without its sentences read (most runs, at 30,000).
        shared = self.shared(index, domain)
        if not shared:
            return True
        # The domains' templates (Memory.repeated_sentences), counted when a run that shares
        # an evidence word with the task is first asked about (at 34,000 runs, a tenth of a
        # message's time, which a task no run shares such a word with never needs).
        repeated = self.memory.repeated_sentences
        own = "\n".join(
            sentence
            for sentence in _sentences(run.task)
            if sentence in self.own
            or repeated.get(key := (domain, hash(sentence)), 0) - self.left_out[key] < 2
        )
        words = words_of(self.memory.run_ranker, own)
        return not any(word in words for word in shared)


def _evidence(
    memory: Memory, held: Mapping[str, frozenset[int]], excluded: set[str]
) -> dict[str, dict[str, _Strength]]:
    """Each word -> the domains whose task texts in view hold it at least `LIFT` times as
    often as the other domains' do (a share of each one's tasks); a common English word
    (search.score.common_words) but the words that ask (`ASKING`) is evidence of none, however
    its counts fall: "my" in "Write a limerick about my cat" made inspect's popularity tasks
    ("my favourite ...") its domain. Each domain with how strongly (`_Strength`)."""
    common = common_words(memory.run_ranker, but=ASKING)
    # Each run's domain and task, made once (None: left out): a word's holders are counted
    # from them, and a run holds many of the task's words.
    in_view: list[tuple[str, TaskKey] | None] = []
    tasks: dict[str, set[TaskKey]] = {}
    for run in memory.runs:
        key = run.task_key
        if excluded and key.named_in(excluded):
            in_view.append(None)
            continue
        domain = _domain(run.task_type)
        in_view.append((domain, key))
        tasks.setdefault(domain, set()).add(key)
    total = sum(len(keys) for keys in tasks.values())
    evidence: dict[str, dict[str, _Strength]] = {}
    for word, holding in held.items():
        if word in common:
            evidence[word] = {}
            continue
        holders_of: dict[str, set[TaskKey]] = {}
        for i in holding:
            if (seen := in_view[i]) is not None:
                holders_of.setdefault(seen[0], set()).add(seen[1])
        every = sum(len(keys) for keys in holders_of.values())
        evidence[word] = {}
        for domain, keys in holders_of.items():
            share = len(keys) / len(tasks[domain])
            others = (every - len(keys)) / max(total - len(tasks[domain]), 1)
            if share >= LIFT * others:
                evidence[word][domain] = _Strength(
                    len(keys), share / others if others else math.inf
                )
    return evidence


@dataclass(frozen=True)
class _Strength:
    """How strongly a word is evidence of a domain (`_evidence`)."""

    tasks: int
    """How many of the domain's tasks in view hold the word."""
    lift: float
    """How many times as often as the other domains' tasks (a share of each one's); inf when
    none of theirs holds it."""


STRONG_TASKS = 3
STRONG_LIFT = 3.0
"""When one evidence word alone may decide a domain (`_Support.decides`): the domain's tasks
hold it at least `STRONG_TASKS` times and `STRONG_LIFT` times as often as the others' ("start"
in 4 coding sessions, 17 times; "company" in 4 HotpotQA questions, none elsewhere). "year"
(in 9 of 100 HotpotQA questions, 2.6 times as often) made "Calculate the compound interest
on 10,000 euros over eight years at 3% a year" a HotpotQA question, and "love" (2 questions)
"Write a limerick about a cat who loves cheese". Chosen on benchmarks/recall_bench.py over
../shared/data with the rest of `_Support.decides`: tasks of a domain the corpus lacks given
one 3 to 1 of 75, right task types 345 to 338 of 531 (7 runs of 3 tasks now abstain, "Create
a hello world function" by "hello", 3 of 26 coding tasks, 2.5 times), another domain's items
0 of 544 before and after."""


class _Support:
    """The evidence words the runs that voted share with the task, by domain, each counted
    once however many runs share it; and the task's words that are evidence of other
    domains only."""

    def __init__(self, task: str, template: _Template, voting: list[int]) -> None:
        self.evidence = template.evidence
        self.asks = "?" in task
        """A question: its asking words (`ASKING`) are evidence; else ("a cat who loves
        cheese") they are none."""
        self.shared: dict[str, set[str]] = {}
        for i in voting:
            domain = _domain(template.memory.runs[i].task_type)
            for word in template.shared(i, domain):
                if self.asks or word not in ASKING:
                    self.shared.setdefault(domain, set()).add(word)

    def decides(self, domain: str) -> bool:
        """Whether the voters' evidence words may decide `domain`: two distinct words or
        more; or one that is strong evidence (`STRONG_TASKS`, `STRONG_LIFT`) or an asking
        word of a question; or one, where at most one of the task's words is evidence of
        other domains only. One word that the task's other words contradict is no
        decision: "year" against "calculate" (airline), "interest" (inspect's popularity
        tasks) and "10" (SWE-bench)."""
        words = self.shared.get(domain, set())
        if len(words) != 1:
            return len(words) >= 2
        (word,) = words
        strength = self.evidence[word][domain]
        against = sum(1 for domains in self.evidence.values() if domains and domain not in domains)
        return (
            (strength.tasks >= STRONG_TASKS and strength.lift >= STRONG_LIFT)
            or word in ASKING
            or against <= 1
        )


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
