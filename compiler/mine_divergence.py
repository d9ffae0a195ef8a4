"""Divergence within a task (compiler/mine.py): for a task with both a failed and a
successful run, the first action where the two that agree longest went different ways."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from wikitrace.corpus_schema.tasks import TaskKey, task_key

from .mine_contrast import MiningReport
from .mine_patterns import Action
from .mine_table import ActionHashes, RunPatterns, action_hashes, task_of


@dataclass
class Divergence:
    """Where the successful and failed runs of a task that agree longest went different ways.
    The actions it names are read again from the runs' logs when asked (`load`), so that a
    build holds none of them for its thousands of tasks."""

    task_id: str
    task_type: str | None
    success: RunPatterns
    failure: RunPatterns
    shared: int
    """How many actions the two runs took alike before they diverged."""
    load: Callable[[int], Sequence[Action]]
    """A run's actions, by step."""
    runs: int = 0
    successes: int = 0
    origin: str | None = None
    """The task's source (RunRecord.origin), if known."""
    found: int = 0
    """The step at which its task first had a pair of runs of both outcomes that took
    different actions: where a chain of adds in step order first finds it."""

    @property
    def task(self) -> TaskKey:
        """The one task (source and id) both runs are of."""
        return task_key(self.origin, self.task_id)

    def _action(self, run: RunPatterns, last: bool = False) -> Action | None:
        actions = self.load(run.step)
        if last:
            return actions[-1] if actions else None
        return actions[self.shared] if self.shared < len(actions) else None

    @property
    def success_action(self) -> Action | None:
        """The successful run's first differing action (None: it had stopped)."""
        return self._action(self.success)

    @property
    def failure_action(self) -> Action | None:
        """The failed run's first differing action (None: it had stopped)."""
        return self._action(self.failure)

    @property
    def last_success(self) -> Action | None:
        return self._action(self.success, last=True)

    @property
    def last_failure(self) -> Action | None:
        return self._action(self.failure, last=True)


def divergence_key(task: TaskKey) -> str:
    """What identifies a divergence across versions: its task (its id alone when the task has
    no source, as in a corpus made before sources were kept)."""
    return f"divergence {task.name}"


def divergences(
    runs: Sequence[RunPatterns],
    load: Callable[[int], Sequence[Action]],
    report: MiningReport,
    only_tasks: set[TaskKey] | None = None,
    kept: ActionHashes | None = None,
) -> list[Divergence]:
    """For each task with both outcomes, where the failed and successful runs that agree
    longest first went different ways, in the order they were `found` (by a version that
    added runs in step order: ids so given do not depend on where a chain of adds cut them).
    `load(step)` gives a run's actions; `kept` holds those of the runs it saw stream past, as
    hashes, so that their logs are not read back."""

    def compared(step: int) -> Sequence[int]:
        held = kept.get(step) if kept is not None else None
        return held if held is not None else action_hashes(load(step))

    # Runs of one task of one source: τ-bench's task 3 and τ²-bench's are two tasks.
    by_task: dict[TaskKey, list[RunPatterns]] = defaultdict(list)
    for run in runs:
        by_task[task_of(run)].append(run)
    found: list[Divergence] = []
    for task, members in by_task.items():
        if only_tasks is not None and task not in only_tasks:
            continue
        wins = [run for run in members if run.success]
        losses = [run for run in members if not run.success]
        if not wins or not losses:
            continue
        actions = {run.step: compared(run.step) for run in members}
        best: tuple[int, int, int] | None = None
        first = 0  # the step of the first pair that diverged: where it was found
        for win in wins:
            for loss in losses:
                shared = _shared_prefix(actions[win.step], actions[loss.step])
                if shared is None:
                    continue
                key = (-shared, win.step, loss.step)
                if best is None or key < best:
                    best = key
                completed = max(win.step, loss.step)
                first = completed if not first else min(first, completed)
        if best is None:
            report.same_actions += 1
            continue
        shared, win_step, loss_step = -best[0], best[1], best[2]
        found.append(
            Divergence(
                task_id=task.id,
                task_type=members[0].task_type,
                # Its runs less their patterns, which it never reads: a build may hold a
                # divergence for every fourth run while its pages wait to be written.
                success=replace(next(r for r in wins if r.step == win_step), patterns={}),
                failure=replace(next(r for r in losses if r.step == loss_step), patterns={}),
                shared=shared,
                load=load,
                runs=len(members),
                successes=len(wins),
                origin=task.origin,
                found=first,
            )
        )
    report.divergences = len(found)
    found.sort(key=lambda divergence: divergence.found)  # one step completes one task
    return found


def _shared_prefix(first: Sequence[int], second: Sequence[int]) -> int | None:
    """How many actions the two runs share from the start (each action's signature hashed);
    None when they are the same."""
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return index
    if len(first) == len(second):
        return None
    return min(len(first), len(second))
