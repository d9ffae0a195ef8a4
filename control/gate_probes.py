"""Where a gate call's probes come from: the task pool, and each lesson's probes chosen from it."""

from __future__ import annotations

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.layout import step_id
from wikitrace.corpus_schema.tasks import refuse_shared
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
        tasks: dict[str, PoolTask] = {}
        for row in base.rows:
            if row.task_id not in tasks:  # its first run's whole task
                tasks[row.task_id] = PoolTask(row.task_id, base.task_text(row.step), row.task_type)
        if options.pool is None:
            self.pool = list(tasks.values())
        else:
            # Ids without a text take it (and the type) from the corpus when it has the task.
            self.pool = [
                task if task.task or task.task_id not in tasks else tasks[task.task_id]
                for task in options.pool
            ]
        # The runner knows a task by its id: two sources' task 3 would be run, and counted, as one.
        refuse_shared((row.task_key for row in base.rows), {t.task_id for t in self.pool}, "gate")
        self.solved = list(dict.fromkeys(r.task_id for r in base.rows if r.outcome == "success"))
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
            precondition=candidate.precondition,
        )
        budget = Budget(options.targets, options.falsify, options.regress)
        if options.rule == "sequential":
            # The task is the unit of its tests: as many distinct tasks as the budget can
            # run, so pairs are new tasks before any task runs again on a new seed.
            most = max(options.targets, options.falsify, options.regress, options.max_runs // 2)
            budget = Budget(most, most, most, similar=options.targets)
        return choose_probes(lesson, pool, self.solved, budget)
