"""Which tasks probe a candidate lesson: pure choice over the task pool, no runs.

- target: tasks it claims to help: those of the candidate's task type that its precondition
  covers (their text has each of the precondition's words that sets some tasks of the type
  apart from others), most similar (BM25) to the lesson and its source run's task first; that
  task itself is left out (a lesson replayed on its own source task almost always passes,
  which proves nothing). When no task of the type has those words, the most similar tasks;
- falsify, taken in turn from three groups, as the method describes its falsification probes:
  boundary tasks (its type, not covered, most similar to the lesson: near the edge of where it
  applies), precondition violations (its type, not covered, most alike to the precondition:
  they look as if it should apply and it should not) and decoys (another type, most similar
  to the lesson and its source task: they look alike but need another behaviour);
- regress: tasks the agent solved before (successful runs in the corpus).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.ledger import ProbeKind
from wikitrace.corpus_schema.setting_fields import default
from wikitrace.corpus_schema.tasks import TaskKey, task_key
from wikitrace.search import consolidate
from wikitrace.search.rank import Ranker

from .pool import PoolTask

KINDS: tuple[ProbeKind, ...] = ("target", "falsify", "regress")


@dataclass(frozen=True)
class Probe:
    task_id: str
    kind: ProbeKind
    why: str
    origin: str | None = None
    """The task's source; None when known by its id alone."""

    @property
    def key(self) -> TaskKey:
        return task_key(self.origin, self.task_id)


def probe_task(probe: Probe) -> TaskKey:
    """The gate's notion of "a task", the unit its tests count and draw: its source and id,
    so two sources' task 3 are two tasks."""
    return probe.key


@dataclass(frozen=True)
class Lesson:
    """What of a candidate the choice reads: its words, its type, its source run's task."""

    text: str
    """Title, guideline and precondition, as one query."""
    task_type: str | None
    source_task: str = ""
    source_task_id: str = ""
    """Left out of its targets and falsification probes."""
    source_origin: str | None = None
    """The source of that task."""
    precondition: str = ""
    """When it applies; the uncovered tasks most alike to it are its precondition-violation
    probes."""


@dataclass(frozen=True)
class Budget:
    targets: int = default("targets")
    falsify: int = default("falsify")
    regress: int = default("regress")
    similar: int = 8
    """Targets taken by similarity alone, when no task has the precondition's words."""


Task = TypeVar("Task", bound=Hashable)


@dataclass
class TaskDraws(Generic[Task]):
    """Tasks drawn at random, each once before any is drawn again: distinct tasks first,
    seeds second (`next` says how many times the task was drawn before: its seed offset). The
    task is the unit of the gate's tests, so while tasks remain each pair is a new one."""

    tasks: Sequence[Task]
    rng: random.Random
    left: list[Task] = field(default_factory=list)
    drawn: dict[Task, int] = field(default_factory=dict)

    def next(self) -> tuple[Task, int]:
        if not self.left:
            self.left = list(dict.fromkeys(self.tasks))
            self.rng.shuffle(self.left)
        task = self.left.pop()
        times = self.drawn.get(task, 0)
        self.drawn[task] = times + 1
        return task, times


def given_probes(
    given: Mapping[str, Sequence[str]], pool: Sequence[PoolTask], *, pool_given: bool
) -> list[Probe]:
    """Explicit probe lists by kind, each task by its id or its full name (`source:id`); each
    must be in the pool when a pool was given. An id that names tasks of several sources in the
    pool is each of them (as a task left out by id is left out in every source)."""
    probes: list[Probe] = []
    for kind in KINDS:
        for name in given.get(kind, []):
            found = [task for task in pool if task.key.named_in({name})]
            if pool_given and not found:
                raise InputError(
                    f"probe task {name} is not in the task pool", field=f"--{kind}-tasks"
                )
            for task in found or [PoolTask(name)]:
                probes.append(Probe(task.task_id, kind, "given", task.origin))
    return probes


_GENERIC = frozenset(
    [
        *("has", "have", "where", "which", "you", "your", "their", "they", "there", "only"),
        *("each", "every", "task", "tasks", "agent", "user"),
    ]
)
"""Words a precondition uses that say nothing of which tasks it covers, beyond the stop words
of `consolidate.words`."""


def _words(text: str) -> set[str]:
    """The words of a text that can tell tasks apart, a plural taken as its singular."""
    return {
        word[:-1] if word.endswith("s") and len(word) > 3 else word
        for word in consolidate.words(text) - _GENERIC
    }


def covered(precondition: str, tasks: Sequence[PoolTask]) -> list[PoolTask]:
    """The tasks a precondition covers, read from words: each of its words that some of the
    tasks have and others do not must be in the task's text. When none of its words sets any
    task apart, it covers them all; when no task has them all, none."""
    words = [_words(t.task or t.task_id) for t in tasks]
    telling = {w for w in _words(precondition) if 0 < sum(w in ws for ws in words) < len(tasks)}
    return [t for t, ws in zip(tasks, words, strict=True) if telling <= ws]


def choose_probes(
    lesson: Lesson, pool: Sequence[PoolTask], solved: Sequence[TaskKey], budget: Budget
) -> list[Probe]:
    """Target, falsification and regression probes for one lesson, each task once."""
    query = " ".join([lesson.text, lesson.source_task])
    texts = [t.task or t.task_id for t in pool]
    ranker = Ranker.of(texts)
    source = task_key(lesson.source_origin, lesson.source_task_id)
    candidates = [i for i, t in enumerate(pool) if t.key != source]
    ranked = [pool[i] for i in ranker.rank(query, candidates)]
    # Without types (the insight's or the pool's) similarity alone picks the targets.
    kind_of = lesson.task_type if any(t.task_type for t in pool) else None
    same = [t for t in ranked if kind_of is None or t.task_type == kind_of]
    other = [t for t in ranked if kind_of is not None and t.task_type != kind_of]
    precondition = lesson.precondition
    inside = {t.key for t in covered(precondition, same)} if precondition else set()
    target_why = "its precondition covers it (same task type), most similar to the lesson"
    if not inside:
        inside = {t.key for t in same[: min(budget.similar, budget.targets)]}
        target_why = (
            "same task type, most similar to the lesson (no task has its precondition's words)"
        )
    by_precondition = [
        pool[i]
        for i in ranker.rank(lesson.precondition or lesson.text, candidates)
        if pool[i].key not in inside and (kind_of is None or pool[i].task_type == kind_of)
    ]
    probes: list[Probe] = []
    taken: set[TaskKey] = set()

    def take(task: TaskKey, kind: ProbeKind, why: str) -> None:
        probes.append(Probe(task.id, kind, why, task.origin))
        taken.add(task)

    for task in [t for t in same if t.key in inside][: budget.targets]:
        take(task.key, "target", target_why)
    groups = [
        (
            [t for t in same if t.key not in taken and t.key not in inside],
            "boundary: same task type, outside its precondition, most similar to the lesson",
        ),
        (
            by_precondition,
            "precondition violation: same task type, outside its precondition, most alike to it",
        ),
        (list(other), "decoy: another task type, similar words"),
    ]
    count = 0
    while count < budget.falsify and any(
        any(t.key not in taken for t in group) for group, _ in groups
    ):
        for group, why in groups:
            if count >= budget.falsify:
                break
            found = next((t for t in group if t.key not in taken), None)
            if found is not None:
                take(found.key, "falsify", why)
                count += 1
    pool_keys = {t.key for t in pool}
    regress = [t for t in solved if t in pool_keys and t not in taken]
    for solved_task in regress[: budget.regress]:
        take(solved_task, "regress", "solved in the corpus before")
    return probes


def split_pool(pool: Sequence[PoolTask], seed: int) -> tuple[list[PoolTask], list[PoolTask]]:
    """Two halves of the pool, each task type split evenly (by a hash of its id and the
    seed): the first test draws its probes from one, a narrowed lesson's test from the other,
    so the narrowing never sees the probes that judge it."""
    first: list[PoolTask] = []
    held_out: list[PoolTask] = []
    by_type: dict[str | None, list[PoolTask]] = {}
    for task in pool:
        by_type.setdefault(task.task_type, []).append(task)
    for tasks in by_type.values():
        ordered = sorted(
            tasks, key=lambda t: hashlib.sha256(f"{seed}:{t.key.name}".encode()).hexdigest()
        )
        first.extend(ordered[0::2])
        held_out.extend(ordered[1::2])
    order = {t.key: i for i, t in enumerate(pool)}
    first.sort(key=lambda t: order[t.key])
    held_out.sort(key=lambda t: order[t.key])
    return first, held_out


def by_kind(probes: Sequence[Probe]) -> dict[str, list[Probe]]:
    """Probes grouped by kind, each in the order chosen."""
    found: dict[str, list[Probe]] = {kind: [] for kind in KINDS}
    for probe in probes:
        found[probe.kind].append(probe)
    return found
