"""The agent runs of one gate call: memory views, seeds, runs, and the pairs read from them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from wikitrace.corpus_schema.history import PROBES_DIR
from wikitrace.corpus_schema.layout import decision_id
from wikitrace.corpus_schema.ledger import AgentRun, GateDecision
from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.versions import FrozenVersion, Store, write_view

from .figures import Pair, Pairs
from .gate_inputs import GateOptions, RunProgress
from .probes import Probe
from .runner import RunLog, Runner, RunRequest, cited_insights

Results = dict[tuple[TaskKey, int], AgentRun]
"""(task, seed) -> its run with one memory."""


class GateRuns:
    """Owns every agent run of one gate call: the memory views it writes (under probes/), the
    probes' seeds, the runs with the base memory (the committed insights alone, shared by every
    lesson of the call), each run kept by id, and the pairs and citations read from them."""

    def __init__(
        self,
        store: Store,
        base: FrozenVersion,
        options: GateOptions,
        progress: RunProgress | None,
        first_number: int,
    ) -> None:
        self.store = store
        self.base = base
        self.options = options
        self.progress = progress
        self.views = store.dir / PROBES_DIR / decision_id("gate", first_number)
        self.by_id: dict[str, AgentRun] = {}
        self.base_results: Results = {}
        self.agent_runs = 0
        self.hidden: set[str] = set()
        """Insights no memory of this call shows (all but the committed ones), once the
        candidates are chosen."""
        self._base_view: Path | None = None

    @property
    def base_name(self) -> str:
        """The base memory's name in the runs' log."""
        return f"{self.base.name}-without-candidates"

    def view(
        self,
        name: str,
        *,
        hidden: set[str],
        replaced: dict[str, tuple[InsightHeader, str]] | None = None,
    ) -> Path:
        return write_view(self.base, self.views / name, hidden=hidden, replaced=replaced)

    def base_view(self) -> Path:
        """The base memory's view, written the first time it is needed."""
        if self._base_view is None:
            self._base_view = self.view("base", hidden=self.hidden)
        return self._base_view

    def seeds(self, fresh: bool = False) -> list[int]:
        """The probes' seeds; `fresh`: the next as many, for the re-test after narrowing."""
        first = self.options.seed + (self.options.trials if fresh else 0)
        return [first + t for t in range(self.options.trials)]

    def run(
        self,
        memory_name: str,
        memory_path: Path,
        tasks: Sequence[TaskKey],
        purpose: str,
        *,
        fresh: bool = False,
    ) -> Results:
        seeds = self.seeds(fresh)
        requests = [
            RunRequest(task.id, memory_name, memory_path, seed, task.origin)
            for task in tasks
            for seed in seeds
        ]
        results = self.run_requests(requests, purpose)
        return {(run.task_key, run.seed): run for run in results}

    def run_requests(self, requests: Sequence[RunRequest], purpose: str) -> list[AgentRun]:
        """Run them through the user's runner, with progress; every run is kept by id."""
        runner = Runner(self.options.runner, RunLog(self.store.runs_path), purpose=purpose)
        done = 0

        def tick(_: AgentRun) -> None:
            nonlocal done
            done += 1
            if self.progress is not None:
                self.progress(done, len(requests))

        results = runner.run(requests, tick)
        self.agent_runs += len(results)
        for run in results:
            self.by_id[run.id] = run
        return results

    def run_base(self, tasks: Sequence[TaskKey], purpose: str, *, fresh: bool = False) -> None:
        """Run the tasks that have no run yet with the base memory (the committed insights
        alone) at the probes' seeds (`fresh`: the re-test's): each is run once per call."""
        view = self.base_view()
        first = self.seeds(fresh)[0]
        missing = [t for t in tasks if (t, first) not in self.base_results]
        self.base_results.update(self.run(self.base_name, view, missing, purpose, fresh=fresh))

    def ids(self, results: Results, task: TaskKey, *, fresh: bool = False) -> list[str]:
        seeds = set(self.seeds(fresh))
        keys = sorted(results, key=by_task_seed)
        return [results[key].id for key in keys if key[0] == task and key[1] in seeds]

    def runs_of(self, decision: GateDecision) -> list[AgentRun]:
        probes = [*decision.probes, *decision.narrowed_probes]
        ids = {i for p in probes for i in (*p.base_runs, *p.lesson_runs, *p.narrowed_runs)}
        ids |= {i for check in decision.together for i in check.runs}
        return [self.by_id[i] for i in sorted(ids)]

    def pairs(self, probes: Sequence[Probe], results: Results, *, fresh: bool = False) -> Pairs:
        """(task, seed) -> its outcome without and with the lesson, once however many kinds."""
        found: dict[tuple[TaskKey, int], Pair | None] = {}
        for probe in probes:
            for seed in self.seeds(fresh):
                key = (probe.key, seed)
                found[key] = pair_of(self.base_results.get(key), results.get(key))
        return found

    def cited(self, ident: str, results: Results) -> dict[tuple[TaskKey, int], bool]:
        """(task, seed) -> whether its run with the lesson cited it, for the runs whose agent
        returned a citation report (`"used": {"insights": [...]}`)."""
        if self.options.p_fail == "outcomes":
            return {}
        found = {}
        for key, run in results.items():
            insights = cited_insights(run)
            if insights is not None:
                found[key] = ident in insights
        return found


def by_task_seed(key: tuple[TaskKey, int]) -> tuple[str, str, int]:
    """A stable order of (task, seed) keys: by source, id, then seed."""
    return (*key[0].sort_key(), key[1])


def pair_of(without: AgentRun | None, with_lesson: AgentRun | None) -> Pair | None:
    if with_lesson is None:
        return None
    if without is None:  # only its citation was needed (Sequential.needs_base)
        return (None, with_lesson.value, None)
    return (without.value, with_lesson.value, bool(without.success))


def undecided_on_errors(decision: GateDecision, errors: int) -> None:
    """A rejected lesson some of whose probe pairs ended as errors stays ungated: undecided."""
    if decision.verdict == "rejected" and errors:
        decision.verdict = "undecided"
        decision.reason = (
            f"Undecided: {errors} probe pairs ended as errors after their retries, and "
            "the rest did not suffice to commit; it stays ungated. " + decision.reason
        )
