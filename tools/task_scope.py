"""The scope of a first message: the task's type and kind of work, given or inferred from the
most similar past runs and from the task's words, and the runs it may show."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.catalog import PastRun
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.corpus_schema.work import infer_kind, kind_named

if TYPE_CHECKING:
    from .memory import Memory


@dataclass
class Scope:
    """What the message keeps to: the task's type and kind of work, given or inferred, and
    the runs it may show."""

    task: str
    excluded: set[str]
    """The tasks nothing is shown from."""
    known_types: list[str]
    """The memory's task types."""
    task_type: str | None
    type_inferred: bool
    type_unsure: dict[str, int] | None
    project: str | None
    kind: str | None
    kind_inferred: bool
    kind_unsure: dict[str, int] | None
    runs: list[int]
    """The runs of the task's type from tasks not excluded."""

    def tier(self, run: PastRun | None) -> int:
        """0: the project's own; 1: the same kind of work elsewhere; 2: any other."""
        if run is not None and self.project is not None and run.project == self.project:
            return 0
        return 1 if run is not None and self.kind is not None and run.kind == self.kind else 2


def task_scope(
    memory: Memory,
    task: str,
    excluded: set[str],
    task_type: str | None,
    project: str | None,
    kind: str | None,
    infer_type: bool,
) -> Scope:
    """The task's scope: its type (given, or inferred), then its kind of work."""
    known_types = sorted({run.task_type for run in memory.runs if run.task_type})
    if task_type is not None and task_type not in known_types:
        raise InputError(
            f"no task type {task_type!r} in this corpus; it has: "
            + (", ".join(known_types) or "none (its runs have no task type)"),
            field="--task-type",
        )
    inferred = False
    unsure: dict[str, int] | None = None
    if task_type is None and len(known_types) > 1:
        task_type, inferred, unsure = _task_type(memory, task, excluded, project, kind, infer_type)
    run_ok = [
        i
        for i, run in enumerate(memory.runs)
        if not run.task_key.named_in(excluded) and (task_type is None or run.task_type == task_type)
    ]
    kind, kind_inferred, kind_unsure = _task_kind(memory, task, kind, run_ok)
    return Scope(
        task,
        excluded,
        known_types,
        task_type,
        inferred,
        unsure,
        project,
        kind,
        kind_inferred,
        kind_unsure,
        run_ok,
    )


def _task_type(
    memory: Memory,
    task: str,
    excluded: set[str],
    project: str | None,
    kind: str | None,
    infer_type: bool,
) -> tuple[str | None, bool, dict[str, int] | None]:
    """The type of a task given none, in a memory of several types: that of the project's
    runs (when they have one), of the runs with kinds of work (when `kind` is given and they
    have one), or of the most similar runs (when `infer_type` and they agree); whether it was
    inferred; and, when it could not be, the types of the most similar runs, counted."""
    if project is not None:
        own = {r.task_type for r in memory.runs if r.project == project and r.task_type}
        if len(own) == 1:
            return own.pop(), True, None
    if kind is not None:
        # A kind of work is a coding session's: the task is of the type such runs have.
        with_kinds = {r.task_type for r in memory.runs if r.kind and r.task_type}
        if len(with_kinds) == 1:
            return with_kinds.pop(), False, None
    if not infer_type:
        return None, False, None
    task_type, votes = _infer_type(memory, task, excluded)
    inferred = task_type is not None
    return task_type, inferred, None if inferred else votes


def _infer_type(
    memory: Memory, task: str, excluded: set[str], nearest: int = 5
) -> tuple[str | None, dict[str, int]]:
    """The task type more than half of the nearest past runs have (one run per task, only
    runs that share a word with the task); and their types, counted (an untyped run as
    "untyped"). One run alone decides when it is the only one that shares a word: a
    coding task that matches one coding session and no airline task is a coding task."""
    allowed = [i for i, run in enumerate(memory.runs) if not run.task_key.named_in(excluded)]
    types: list[str | None] = []  # an untyped run (a session) is a vote against any type
    seen: set[TaskKey] = set()
    for i in memory.run_ranker.rank(task, allowed, matched_only=True):
        run = memory.runs[i]
        if run.task_key in seen:
            continue
        seen.add(run.task_key)
        types.append(run.task_type or None)
        if len(seen) == nearest:
            break
    counted = Counter(t or "untyped" for t in types)
    votes = dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))
    typed = [t for t in types if t is not None]
    if not typed:
        return None, votes
    best = max(set(typed), key=typed.count)
    agree = types.count(best)
    return (best if agree * 2 > len(types) else None), votes


def _task_kind(
    memory: Memory, task: str, kind: str | None, run_ok: list[int]
) -> tuple[str | None, bool, dict[str, int] | None]:
    """The task's kind of work (given or inferred from its words), whether it was inferred,
    and, when it could not be, the cue words counted by kind; (None, False, None) when
    the runs kept have no kinds (not coding sessions, or converted before kinds were) or
    are of several task types (a task whose type is unsure is not scoped by kind)."""
    one_type = len({memory.runs[i].task_type for i in run_ok}) == 1
    has_kinds = one_type and any(memory.runs[i].kind for i in run_ok)
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
