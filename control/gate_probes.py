"""Where a gate call's probes come from: the task pool, and each lesson's probes chosen from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.layout import step_id
from wikitrace.corpus_schema.tasks import TaskKey, refuse_shared
from wikitrace.versions import FrozenVersion

from .gate_inputs import Candidate, GateOptions
from .pool import PoolTask
from .probes import Budget, Lesson, Probe, choose_probes, given_probes, split_pool


class ProbeChooser:
    """Owns the task pool of one gate call and chooses each lesson's probes from it: the pool
    (the corpus's tasks, or the user's with texts filled in from the corpus), the tasks the agent
    solved before, and the halves a first test and a narrowed lesson's re-test draw from."""

    def __init__(self, base: FrozenVersion, options: GateOptions, *, split: bool) -> None:
        """`split`: a narrowed lesson is judged on probes its narrowing never saw: the pool is
        split before the first round, the first test drawing from one half, the narrowed
        lesson's from the other."""
        self.base = base
        self.options = options
        tasks: dict[TaskKey, PoolTask] = {}
        for row in base.rows:
            if row.task_key not in tasks:  # its first run's whole task
                tasks[row.task_key] = PoolTask(
                    row.task_id, base.task_text(row.step), row.task_type, row.task_key.origin
                )
        self.pool = list(tasks.values()) if options.pool is None else pool_of(options.pool, tasks)
        if not options.runner.tells_origin:
            # A runner told the id alone would run, and the tests count, two sources' task 3
            # as one.
            refuse_shared((t.key for t in self.pool), {t.task_id for t in self.pool}, "the gate")
        self.solved = list(dict.fromkeys(r.task_key for r in base.rows if r.outcome == "success"))
        self.first_pool, self.held_out = self.pool, self.pool
        if split:
            self.first_pool, self.held_out = split_pool(self.pool, options.seed)

    def first_probes(self, candidate: Candidate) -> list[Probe]:
        """The probes a lesson is first tested on; an empty pool is the user's to fix (a
        narrowed lesson's probes, chosen again, may be none)."""
        probes = self.choose(candidate)
        if not probes:
            raise InputError(
                f"no probe tasks for {candidate.ident}: the task pool is empty",
                hint="give --task-pool FILE",
            )
        return probes

    def choose(self, candidate: Candidate, *, held_out: bool = False) -> list[Probe]:
        options = self.options
        if options.given:
            return given_probes(options.given, self.pool, pool_given=options.pool is not None)
        pool = self.held_out if held_out else self.first_pool
        width = self.base.manifest.step_id_width
        source = next(
            (
                row
                for row in self.base.rows
                if step_id(row.step, width) == candidate.header.source_step
            ),
            None,
        )
        lesson = Lesson(
            text=" ".join([candidate.header.title, candidate.guideline, candidate.precondition]),
            task_type=candidate.header.task_type,
            source_task=self.base.task_text(source.step) if source else "",
            source_task_id=source.task_id if source else "",
            source_origin=source.task_key.origin if source else None,
            precondition=candidate.precondition,
        )
        budget = Budget(options.targets, options.falsify, options.regress)
        if options.rule == "sequential":
            # The task is the unit of its tests: as many distinct tasks as the budget can
            # run, so pairs are new tasks before any task runs again on a new seed.
            most = max(options.targets, options.falsify, options.regress, options.max_runs // 2)
            budget = Budget(most, most, most, similar=options.targets)
        return choose_probes(lesson, pool, self.solved, budget)


def pool_of(given: Sequence[PoolTask], corpus: Mapping[TaskKey, PoolTask]) -> list[PoolTask]:
    """The user's pool with the corpus's knowledge: a task without a text takes it (and its
    type) from the corpus when the corpus has it; one given by id alone takes the source of the
    corpus's task of that id (each of them, when two sources share it: two tasks; a task of
    that id with no source is not one more)."""
    by_id: dict[str, list[PoolTask]] = {}
    for task in corpus.values():
        by_id.setdefault(task.task_id, []).append(task)
    pool: list[PoolTask] = []
    for task in given:
        if task.origin is not None:
            known = corpus.get(task.key)
            pool.append(task if task.task or known is None else known)
        elif task.task_id in by_id:
            # A run that names no source may be of either source's task: not one more task.
            found = by_id[task.task_id]
            found = [known for known in found if known.origin is not None] or found
            pool += [
                known if not task.task else replace(task, origin=known.origin) for known in found
            ]
        else:
            pool.append(task)
    return list({task.key: task for task in pool}.values())
