"""Which tasks probe a candidate lesson: pure choice over the task pool, no runs.

- target: tasks it claims to help: the candidate's task type, most similar (BM25) to the lesson
  and the task of the run it came from, that task itself left out (a lesson replayed on its own
  source task almost always passes, which proves nothing);
- falsify, taken in turn from three groups, as the method describes its falsification probes:
  boundary tasks (its type, the next most similar after the targets: near the edge of where it
  applies), precondition violations (its type, least like its precondition: where the
  precondition most likely does not hold) and decoys (another type, most similar to the lesson
  and its source task: they look alike but need another behaviour);
- regress: tasks the agent solved before (successful runs in the corpus).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.ledger import ProbeKind
from wikitrace.tools.memory import Ranker

from .pool import PoolTask

KINDS: tuple[ProbeKind, ...] = ("target", "falsify", "regress")


@dataclass(frozen=True)
class Probe:
    task_id: str
    kind: ProbeKind
    why: str


@dataclass(frozen=True)
class Lesson:
    """What of a candidate the choice reads: its words, its type, its source run's task."""

    text: str
    """Title, guideline and precondition, as one query."""
    task_type: str | None
    source_task: str = ""
    source_task_id: str = ""
    """Left out of its targets and falsification probes."""
    precondition: str = ""
    """When it applies; the tasks least like it are its precondition-violation probes."""


@dataclass(frozen=True)
class Budget:
    targets: int = 8
    falsify: int = 8
    regress: int = 8


def given_probes(
    given: Mapping[str, Sequence[str]], pool: Sequence[PoolTask], *, pool_given: bool
) -> list[Probe]:
    """Explicit probe lists by kind; each task must be in the pool when a pool was given."""
    known = {task.task_id for task in pool}
    probes: list[Probe] = []
    for kind in KINDS:
        for task_id in given.get(kind, []):
            if pool_given and task_id not in known:
                raise InputError(
                    f"probe task {task_id} is not in the task pool", field=f"--{kind}-tasks"
                )
            probes.append(Probe(task_id, kind, "given"))
    return probes


def choose_probes(
    lesson: Lesson, pool: Sequence[PoolTask], solved: Sequence[str], budget: Budget
) -> list[Probe]:
    """Target, falsification and regression probes for one lesson, each task once."""
    query = " ".join([lesson.text, lesson.source_task])
    texts = [t.task or t.task_id for t in pool]
    ranker = Ranker.of(texts)
    candidates = [i for i, t in enumerate(pool) if t.task_id != lesson.source_task_id]
    ranked = [pool[i] for i in ranker.rank(query, candidates)]
    # Without types (the insight's or the pool's) similarity alone picks the targets.
    kind_of = lesson.task_type if any(t.task_type for t in pool) else None
    same = [t for t in ranked if kind_of is None or t.task_type == kind_of]
    other = [t for t in ranked if kind_of is not None and t.task_type != kind_of]
    same_ids = {t.task_id for t in same}
    by_precondition = [
        pool[i]
        for i in ranker.rank(lesson.precondition or lesson.text, candidates)
        if pool[i].task_id in same_ids
    ]
    probes: list[Probe] = []
    taken: set[str] = set()

    def take(task_id: str, kind: ProbeKind, why: str) -> None:
        probes.append(Probe(task_id, kind, why))
        taken.add(task_id)

    for task in same[: budget.targets]:
        take(task.task_id, "target", "same task type, most similar to the lesson")
    groups = [
        ([t for t in same if t.task_id not in taken], "boundary: same task type, less similar"),
        (
            list(reversed(by_precondition)),
            "precondition violation: same task type, least like its precondition",
        ),
        (list(other), "decoy: another task type, similar words"),
    ]
    count = 0
    while count < budget.falsify and any(
        any(t.task_id not in taken for t in group) for group, _ in groups
    ):
        for group, why in groups:
            if count >= budget.falsify:
                break
            found = next((t for t in group if t.task_id not in taken), None)
            if found is not None:
                take(found.task_id, "falsify", why)
                count += 1
    pool_ids = {t.task_id for t in pool}
    regress = [t for t in solved if t in pool_ids and t not in taken]
    for task_id in regress[: budget.regress]:
        take(task_id, "regress", "solved in the corpus before")
    return probes
