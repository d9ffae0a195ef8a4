"""A task's identity: the source its runs came from (the log family and dataset) and its id
there. Two sources never share a task: τ-bench's task "3" and τ²-bench's task "3" are two tasks.

Every place that groups or leaves out the runs "of the same task" asks this one record: mining's
divergences, the raw index's "k of its m runs", leave-one-task-out views, the first message's
excluded tasks, the catalog. A run of a corpus made before sources were recorded (or a native
run that names none) has no source: its task is known by its id alone, as before.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from .errors import InputError

SEPARATOR = ":"
"""Between a source and an id in a task's name (`tau-bench/airline:3`)."""


@dataclass(frozen=True, slots=True)
class TaskKey:
    """One task: where it comes from and its id there."""

    origin: str | None
    """The source: the log family and dataset its runs came from (`tau-bench/airline`,
    `tau2-bench/airline`, `swe-bench`, `inspect/popularity`, `claude-code`, ...); None when the
    log says none (a native run without one, or a corpus made before sources were kept)."""
    id: str
    """The task's id in its source."""

    @property
    def name(self) -> str:
        """How a user names it: `source:id`, or the id alone when it has no source."""
        return f"{self.origin}{SEPARATOR}{self.id}" if self.origin else self.id

    def __str__(self) -> str:
        """In a sentence: `task 3 of tau-bench/airline`, or `task 3`."""
        return f"task {self.id} of {self.origin}" if self.origin else f"task {self.id}"

    def named_in(self, names: Collection[str]) -> bool:
        """Whether `names` (tasks to leave out, as a user or a harness gives them) names this
        task: by its full name, or by its id alone, which names the task of that id in every
        source (leaving out more than asked never lets a task's own runs through)."""
        return self.id in names or (self.origin is not None and self.name in names)

    def sort_key(self) -> tuple[str, str]:
        """For a stable order: by source (none first), then id."""
        return (self.origin or "", self.id)


def task_key(origin: str | None, task_id: str) -> TaskKey:
    """The task of a run that came from `origin` (None: not known) with id `task_id`."""
    return TaskKey(origin or None, task_id)


def shared_ids(tasks: Iterable[TaskKey]) -> dict[str, list[str]]:
    """Ids that name tasks of two or more sources -> those sources, sorted: where a tool that
    knows a task by its id alone (a runner given `{task_id}`) cannot tell them apart. A task
    that names no source is not counted as one more (it may be either)."""
    sources: dict[str, set[str]] = {}
    for task in tasks:
        if task.origin is not None:
            sources.setdefault(task.id, set()).add(task.origin)
    return {task_id: sorted(found) for task_id, found in sorted(sources.items()) if len(found) > 1}


def refuse_shared(tasks: Iterable[TaskKey], ids: Collection[str], what: str) -> None:
    """Raise InputError when one of `ids` (the tasks `what` would run through a runner that
    knows a task by its id alone) names tasks of two sources among `tasks`: the runner would
    run, and the tests count, two tasks as one."""
    clash = {task_id: found for task_id, found in shared_ids(tasks).items() if task_id in ids}
    if clash:
        named = "; ".join(f"task {i} of {', '.join(found)}" for i, found in clash.items())
        raise InputError(
            f"the runner is told a task's id but not its source, and {len(clash)} id(s) "
            f"{what} would run name tasks of two or more sources: {named}",
            field="--runner",
            hint="add {origin} to the runner command (or read $WIKITRACE_TASK_ORIGIN and name "
            "{origin} in it) so each run is told its task's source; or give --task-pool with "
            "ids that name one task each",
        )
