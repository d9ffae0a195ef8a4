"""`wikitrace update`: add runs as a candidate version, and deploy it only when it does better.

1. The new runs are compiled into a candidate version (wikitrace add, not deployed).
2. A momentum trigger decides whether a comparison is needed. The update's direction is the
   embedding of what it adds minus what it removes (control.embed), kind by kind: lessons,
   runs, and their task types. The controller keeps an exponential moving average of the
   directions of deployed updates; an update that points the way memory has been growing in
   every kind it changes (the lowest cosine with the average, over those kinds, at or above
   the threshold: it only repeats what the memory knows) is accepted without a comparison, one
   that turns away in any kind (a new room, a new task type, a new lesson) is compared. The
   first update, with no average yet, is compared; one that changes nothing is accepted.
3. A comparison runs the agent with the old and with the candidate memory, through the user's
   runner, on a compact mixed set of tasks: fresh tasks (of runs deployed since the last
   comparison, this update's included), boundary tasks (whose outcome changed with memory in
   an earlier comparison) and coverage tasks (standing for the tasks seen so far, spread over
   task types). Each task runs `trials` times with the same seeds on both sides, and (the rerun
   band) once more per trial with the old memory on the same seeds: how much outcomes move when
   nothing changes (nothing, where the harness fixes an outcome by its seed). The candidate is
   deployed only when its gain over the old memory (the sum, over the tasks both sides gave
   results for, of new minus old, paired by task and seed) is larger than the band
   (1.645 times the root of the sum of (rerun - old)^2, so a candidate that changes nothing
   passes about 5% of the time): better beyond noise. A tie keeps the old. With a band of 0
   (the seed fixes outcomes) and some task done worse, the gain must pass the candidate's own
   band (1.645 times the root of the sum of (new - old)^2) instead.
4. The decision, its trigger figures, the tasks and why each was chosen, the seeds and the ids
   of every agent run go into updates/update-NNNN.json; the history says deployed or refused.

A comparison costs 3 x trials x (tasks chosen) agent runs (2 x without the rerun band), plus
retries of runs that error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from wikitrace.compiler import BuildOptions, BuildReport, add_version, supersede_added
from wikitrace.compiler.importers import InputPlan
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.history import PROBES_DIR, HistoryEntry, now
from wikitrace.corpus_schema.ledger import (
    AgentRun,
    Group,
    TaskResult,
    Trigger,
    UpdateRecord,
    UpdateState,
    load_model,
)
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.setting_fields import default
from wikitrace.corpus_schema.tasks import TaskKey, refuse_shared, task_key
from wikitrace.corpus_schema.writing import remove_tree
from wikitrace.transport.llm import LLM
from wikitrace.versions import FrozenVersion, Store, leave_out, write_json

from .embed import Embedder, Encoded, HashingEmbedder, memory_texts, turning, update_parts
from .runner import RunLog, Runner, RunnerSpec, RunRequest

log = logging.getLogger(__name__)

Side = Literal["old", "new", "rerun"]
"""Which side of a comparison a run is on: the old memory, the candidate, the old run again."""

MAX_BOUNDARY_KEPT = 200
"""Boundary tasks remembered between updates (newest first)."""


@dataclass
class UpdateOptions:
    runner: RunnerSpec
    momentum: float = default("momentum")
    """Weight of the past in the average of update directions."""
    threshold: float = default("threshold")
    """Compare when the cosine between this update's direction and the average is below it."""
    coverage: int = default("coverage")
    boundary: int = default("boundary")
    fresh: int = default("fresh")
    trials: int = default("trials")
    seed: int = default("seed")
    """First seed; trial t of every task runs with seed + t on both sides."""
    always_compare: bool = False
    rerun_band: bool = default("rerun-band")
    """Run the old memory again (seeds after the trials') and deploy only beyond that noise."""
    task_pool: list[str] | None = None
    """Tasks the runner can run, by name (`source:id`) or id (that id in every source); chosen
    tasks outside it are left out (None: any)."""
    embedder: Embedder = field(default_factory=HashingEmbedder)
    encoded: Encoded = default("encode")  # noqa: RUF009 (a string, declared once)
    """What the update's direction encodes: the corpus (insights and runs: the method's memory
    state), or the insight set alone."""


@dataclass
class UpdateResult:
    """What an update did: the add report and, when a version was made, the decision."""

    add: BuildReport
    record: UpdateRecord | None = None
    record_path: Path | None = None


RunProgress = Callable[[int, int], None]


def update_corpus(
    build: BuildOptions,
    options: UpdateOptions,
    *,
    llm: LLM | None = None,
    progress: RunProgress | None = None,
    compile_progress: Callable[[int, int], None] | None = None,
    notice: Callable[[InputPlan], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> UpdateResult:
    """Add build.inputs to the corpus build.output as a candidate, then decide whether to deploy."""
    store = Store(build.output)
    with build_lock(store.pointer):
        added = add_version(
            build,
            deploy=False,
            llm=llm,
            progress=compile_progress,
            notice=notice,
            say=say,
            supersede=False,  # once deployed: the comparison is of the lessons added
        )
        if added.version is None:
            return UpdateResult(add=added)
        assert added.parent is not None
        controller = _Controller(store, options, added)
        record = controller.decide(progress)
        path = store.updates_dir / f"{record.id}.json"
        write_json(path, record.model_dump(mode="json"))
        if record.deployed == record.candidate:
            store.deploy(record.candidate, reason=record.reason, update=record.id)
            review = supersede_added(store, record.candidate, build, llm=llm)
            added = dataclasses.replace(added, supersede=review)
        else:
            store.record(
                HistoryEntry(
                    time=now(),
                    event="refused",
                    version=record.candidate,
                    previous=record.current,
                    reason=record.reason,
                    update=record.id,
                )
            )
        write_json(store.update_state_path, controller.state.model_dump(mode="json"))
        return UpdateResult(add=added, record=record, record_path=path)


class _Momentum:
    """Owns the momentum trigger: this update's direction (the embedding of what it adds minus
    what it removes), the average of deployed updates' directions kept in the update state, and
    whether the update is compared or accepted without a comparison."""

    def __init__(self, options: UpdateOptions, state: UpdateState) -> None:
        self.options = options
        self.state = state

    @property
    def space(self) -> str:
        """Where directions live: the embedder, and what it encodes (averages kept in another
        space are never compared with)."""
        identity = self.options.embedder.identity
        encoded = "insights" if self.options.encoded == "insights" else "corpus"
        return f"{identity} ({encoded}, by kind)"

    def trigger(self, old_root: Path, new_root: Path) -> tuple[Trigger, np.ndarray | None]:
        options, state = self.options, self.state
        embedder = options.embedder
        direction, added, removed = update_parts(
            memory_texts(old_root, options.encoded),
            memory_texts(new_root, options.encoded),
            embedder,
        )
        if state.embedder is not None and state.embedder != self.space:
            log.warning(
                "the update average was kept in %s, not %s: starting it afresh",
                state.embedder,
                self.space,
            )
            state.average, state.embedder = None, None
        average = np.asarray(state.average) if state.average is not None else None
        if average is not None and direction is not None and average.shape != direction.shape:
            log.warning("the update average has another shape: starting it afresh")
            state.average, state.embedder, average = None, None, None
        cos = None
        if direction is not None and average is not None:
            cos = round(turning(direction, average), 6)
        if options.always_compare:
            why = "always-compare"
            compared = True
        elif direction is None:
            what = "memory" if options.encoded == "corpus" else "insight set"
            why, compared = f"the {what} did not change", False
        elif average is None:
            why, compared = "no deployed update to compare its direction with yet", True
        elif cos is not None and cos < options.threshold:
            why = f"it turns away from past updates (cosine {cos:.3f} < {options.threshold:g})"
            compared = True
        else:
            why = f"it goes the way of past updates (cosine {cos:.3f} >= {options.threshold:g})"
            compared = False
        trigger = Trigger(
            compared=compared,
            why=why,
            cosine=cos,
            embedder=self.space,
            threshold=options.threshold,
            momentum=options.momentum,
            always_compare=options.always_compare,
            encoded=options.encoded,
            insights_added=[i for i in added if i.startswith("insight-")],
            insights_removed=[i for i in removed if i.startswith("insight-")],
            runs_added=[i for i in added if i.startswith("step-")],
        )
        return trigger, direction

    def remember(self, direction: np.ndarray | None) -> None:
        """A deployed update's direction joins the average."""
        if direction is None:
            return
        state, momentum = self.state, self.options.momentum
        if state.average is None:
            average = direction
        else:
            average = momentum * np.asarray(state.average) + (1 - momentum) * direction
        state.average = [round(float(x), 8) for x in average]
        state.embedder = self.space


def mixed_set(
    options: UpdateOptions,
    state: UpdateState,
    new_tasks: Sequence[TaskKey],
    coverage: list[TaskKey],
    known: Collection[TaskKey] = (),
) -> list[tuple[TaskKey, Group]]:
    """The comparison's mixed set: fresh tasks (newest first), boundary tasks, then coverage
    tasks (`coverage`, in order), each group up to its number, none twice, within the pool.
    The state names tasks by name (`source:id`, or the id of a task with no source): each is
    the task of `known` (the candidate's tasks) it names."""
    pool = options.task_pool
    chosen: dict[TaskKey, Group] = {}

    def take(candidates: Sequence[TaskKey], group: Group, limit: int) -> None:
        taken = 0
        for task in candidates:
            if taken >= limit:
                break
            if task in chosen or (pool is not None and not task.named_in(pool)):
                continue
            chosen[task] = group
            taken += 1

    fresh = list(dict.fromkeys([*named(state.fresh_tasks, known), *new_tasks]))
    take(list(reversed(fresh)), "fresh", options.fresh)  # newest first
    take(named(state.boundary_tasks, known), "boundary", options.boundary)
    take(coverage, "coverage", options.coverage)
    return list(chosen.items())


def named(names: Sequence[str], known: Collection[TaskKey]) -> list[TaskKey]:
    """The tasks `names` name among `known`: by full name, or (as an update state written
    before sources were kept names them) by id, every source's task of it; a name that names
    none of them is a task of no source."""
    by_name: dict[str, list[TaskKey]] = {}
    for task in sorted(known, key=TaskKey.sort_key):
        by_name.setdefault(task.name, []).append(task)
        if task.origin is not None:
            by_name.setdefault(task.id, []).append(task)
    found: list[TaskKey] = []
    for name in names:
        found += by_name.get(name) or [task_key(None, name)]
    return list(dict.fromkeys(found))


def coverage_order(root: Path, seed: str) -> list[TaskKey]:
    """Tasks seen so far (the runs in `root`), by task type in turn, each type's tasks in an
    order `seed` shuffles."""
    by_type: dict[str, list[TaskKey]] = {}
    for page in corpus_read.runs(root):
        tasks = by_type.setdefault(page.header.task_type or "", [])
        if page.header.task_key not in tasks:
            tasks.append(page.header.task_key)
    shuffle = random.Random(seed)
    for tasks in by_type.values():
        shuffle.shuffle(tasks)
    order: list[TaskKey] = []
    for row in range(max((len(t) for t in by_type.values()), default=0)):
        for task_type in sorted(by_type):
            if row < len(by_type[task_type]):
                order.append(by_type[task_type][row])
    return order


class _Controller:
    """One update's decision: the trigger (_Momentum), the comparison's tasks and memories,
    its runs, and the record scored from them; the update state it carries on."""

    def __init__(self, store: Store, options: UpdateOptions, added: BuildReport) -> None:
        assert added.version is not None and added.parent is not None
        self.store = store
        self.options = options
        self.added = added
        self.old, self.new = added.parent, added.version
        self.old_root = store.version_path(self.old)
        self.new_root = store.version_path(self.new)
        self.state: UpdateState = load_model(
            store.update_state_path, UpdateState, default=UpdateState()
        )
        self.momentum = _Momentum(options, self.state)
        self.id = f"update-{count_records(store.updates_dir) + 1:04d}"
        manifest = manifest_io.load(self.new_root)
        changes = manifest.version.changes if manifest.version else None
        self.new_steps = set(changes.steps) if changes else set()
        self.added_summary = changes.model_dump(mode="json") if changes else {}
        self._versions: dict[str, FrozenVersion] = {}

    def tasks(self) -> tuple[list[TaskKey], list[TaskKey]]:
        """The candidate's tasks, and those of the runs this update added (in step order)."""
        known: dict[TaskKey, None] = {}
        added: dict[TaskKey, None] = {}
        for page in corpus_read.runs(self.new_root):
            known[page.header.task_key] = None
            if page.header.step in self.new_steps:
                added[page.header.task_key] = None
        return list(known), list(added)

    def choose_tasks(self) -> list[tuple[TaskKey, Group]]:
        coverage = coverage_order(self.old_root, f"{self.options.seed}:{self.id}")
        known, added = self.tasks()
        chosen = mixed_set(self.options, self.state, added, coverage, known)
        if not self.options.runner.tells_origin:
            # A runner told the id alone would run, and score, two sources' task 3 as one
            # (unless the pool names one of them: the task the runner knows by that id).
            pool = self.options.task_pool
            runnable = [task for task in known if pool is None or task.named_in(pool)]
            refuse_shared(runnable, {task.id for task, _ in chosen}, "update")
        return chosen

    # --- the comparison -------------------------------------------------------------------

    def decide(self, progress: RunProgress | None) -> UpdateRecord:
        trigger, direction = self.momentum.trigger(self.old_root, self.new_root)
        record = UpdateRecord(
            id=self.id,
            time=now(),
            current=self.old,
            candidate=self.new,
            deployed=self.old,
            decision="kept",
            reason="",
            trigger=trigger,
            added=self.added_summary,
        )
        state = self.state
        state.updates += 1
        if not trigger.compared:
            record.decision, record.deployed = "accepted", self.new
            record.reason = f"not compared: {trigger.why}"
            self.momentum.remember(direction)
            added = [task.name for task in self.tasks()[1]]
            state.fresh_tasks = list(dict.fromkeys([*state.fresh_tasks, *added]))
            return record
        tasks = self.choose_tasks()
        trials, first = self.options.trials, self.options.seed
        seeds = [first + trial for trial in range(trials)]
        record.seeds = seeds
        if self.options.rerun_band:
            # The same seeds: where the harness fixes an outcome by its seed, a rerun on other
            # seeds would measure noise the paired comparison does not have.
            record.rerun_seeds = list(seeds)
        views = self.store.dir / PROBES_DIR / self.id
        try:
            requests: list[RunRequest] = []
            sides: list[Side] = []
            for task, group in tasks:
                (old, old_root), (new, new_root) = self._memories(task, group, views)
                plan: list[tuple[Side, str, Path, list[int]]] = [
                    ("old", old, old_root, seeds),
                    ("new", new, new_root, seeds),
                    ("rerun", old, old_root, record.rerun_seeds),
                ]
                for side, name, root, on in plan:
                    requests += [RunRequest(task.id, name, root, seed, task.origin) for seed in on]
                    sides += [side] * len(on)
            runs = self._run(requests, progress)
        finally:
            remove_tree(views)
            with contextlib.suppress(OSError):
                views.parent.rmdir()  # probes/, when nothing else is using it
        return self._score(record, tasks, list(zip(sides, runs, strict=True)), trigger, direction)

    def _memories(self, task: TaskKey, group: Group, views: Path) -> list[tuple[str, Path]]:
        """The old and the candidate memory for one task. A fresh task's own runs are in the
        candidate (this update added them) and maybe in the old memory: each is given as a
        leave-one-task-out view, so that no memory shows the agent the task it is solving."""
        memories = [(self.old, self.old_root), (self.new, self.new_root)]
        if group != "fresh":
            return memories
        found = []
        for name, root in memories:
            if name not in self._versions:  # read (and verified) once, for every fresh task
                self._versions[name] = FrozenVersion.load(name, root)
            version = self._versions[name]
            if not any(row.task_key == task for row in version.rows):
                found.append((name, root))
                continue
            dest = views / f"{name}-{len(list(views.glob(f'{name}-*'))) + 1:04d}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            leave_out(version, dest, [task.name], force=False, probe=True)
            found.append((name, dest))
        return found

    def _run(self, requests: list[RunRequest], progress: RunProgress | None) -> list[AgentRun]:
        done = 0

        def tick(_: AgentRun) -> None:
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, len(requests))

        runner = Runner(self.options.runner, RunLog(self.store.runs_path), purpose=self.id)
        return runner.run(requests, tick)

    def _score(
        self,
        record: UpdateRecord,
        tasks: list[tuple[TaskKey, Group]],
        runs: list[tuple[Side, AgentRun]],
        trigger: Trigger,
        direction: np.ndarray | None,
    ) -> UpdateRecord:
        state = self.state
        record.agent_runs = len(runs)
        record.errors = sum(run.status == "error" for _, run in runs)
        for task, group in tasks:
            mine = [(side, r) for side, r in runs if r.task_key == task]
            old_runs = [r for side, r in mine if side == "old"]
            new_runs = [r for side, r in mine if side == "new"]
            rerun_runs = [r for side, r in mine if side == "rerun"]
            old, new = _mean(old_runs), _mean(new_runs)
            record.tasks.append(
                TaskResult(
                    task_id=task.id,
                    origin=task.origin,
                    group=group,
                    old_runs=[r.id for r in old_runs],
                    new_runs=[r.id for r in new_runs],
                    old=old,
                    new=new,
                    compared=old is not None and new is not None,
                    rerun_runs=[r.id for r in rerun_runs],
                    rerun=_mean(rerun_runs),
                )
            )
        compared = [t for t in record.tasks if t.compared]
        state.fresh_tasks = []
        state.last_comparison = self.id
        changed = [task_key(t.origin, t.task_id).name for t in compared if t.old != t.new]
        state.boundary_tasks = list(dict.fromkeys([*changed, *state.boundary_tasks]))[
            :MAX_BOUNDARY_KEPT
        ]
        if not compared:
            record.decision = "undecided"
            record.reason = (
                f"compared because {trigger.why}, but no task gave results with both memories "
                f"({record.errors} of {record.agent_runs} agent runs errored): kept {self.old}"
            )
            return record
        record.score_old = round(sum(t.old or 0.0 for t in compared) / len(compared), 6)
        record.score_new = round(sum(t.new or 0.0 for t in compared) / len(compared), 6)
        gain, band = net_gain(compared), rerun_band(compared) if self.options.rerun_band else None
        record.gain, record.band = gain, band
        noise = f" against a rerun band of {band:g}" if band is not None else ""
        scores = (
            f"{record.score_new:.3f} vs {record.score_old:.3f} over {len(compared)} tasks, "
            f"gain {gain:+g}{noise} ({record.agent_runs} agent runs, {record.errors} errors)"
        )
        own = own_band(compared)
        if deploys(gain, band, own):
            record.decision, record.deployed = "deployed", self.new
            better = "did better beyond noise" if band is not None else "did better"
            record.reason = f"compared because {trigger.why}; {self.new} {better}: {scores}"
            self.momentum.remember(direction)
        else:
            record.decision = "kept"
            if gain > 0 and band == 0.0 and own is not None:
                worse = (
                    "the rerun moved no outcome (the seed fixes them), but it did some tasks "
                    f"worse and its gain is within its own band of {own:g}"
                )
            elif gain > 0:
                worse = "its gain is within the rerun band"
            else:
                worse = "a tie keeps the old" if gain == 0 else "it did worse"
            record.reason = f"compared because {trigger.why}; {self.new} refused, {worse}: {scores}"
        return record


def net_gain(tasks: Sequence[TaskResult]) -> float:
    """Tasks' worth the candidate gained: the sum of new minus old over compared tasks."""
    return round(sum((t.new or 0.0) - (t.old or 0.0) for t in tasks if t.compared), 6)


def deploys(gain: float, band: float | None, own: float | None = None) -> bool:
    """The candidate goes live when its gain is above the rerun band (above 0 with none).

    A band of 0 means running the old memory again on the same seeds moved no outcome: the
    harness fixes outcomes by seed, and any gain is beyond run-to-run noise. But a changed
    memory may still move outcomes both ways without being better (a changed word alters a
    trajectory at temperature 0): when it did some task worse, its gain must pass its own band
    (`own_band`) instead (benchmarks/deploy_bench.py, the `seeded, text` harness)."""
    if band == 0.0 and own is not None:
        return gain > own
    return gain > (band or 0.0)


def own_band(tasks: Sequence[TaskResult]) -> float | None:
    """When the candidate did some compared task worse than the old memory: Z_BAND times the
    root of the sum of (new - old)^2, how far a candidate that only reshuffles outcomes would
    gain by chance (the sign test's spread); None when it did no task worse."""
    changes = [(t.new or 0.0) - (t.old or 0.0) for t in tasks if t.compared]
    if not any(change < 0 for change in changes):
        return None
    return round(Z_BAND * math.sqrt(sum(change**2 for change in changes)), 6)


def rerun_band(tasks: Sequence[TaskResult]) -> float:
    """How far a candidate that changes nothing would gain by chance: Z_BAND times the spread
    of the old memory's per-task scores when it was simply run again (the square root of the
    sum of (rerun - old)^2 over tasks whose rerun gave a result). A candidate that changes
    nothing gains new - old, distributed as rerun - old is, so its gain passes this about 5%
    of the time."""
    spread = sum((t.rerun - t.old) ** 2 for t in tasks if t.rerun is not None and t.old is not None)
    return round(Z_BAND * math.sqrt(spread), 6)


Z_BAND = 1.645
"""The one-sided 95% point of a normal: how many spreads of rerun noise a gain must pass."""


def _mean(runs: Sequence[AgentRun]) -> float | None:
    values = [v for v in (run.value for run in runs) if v is not None]
    return sum(values) / len(values) if values else None


def count_records(folder: Path) -> int:
    """Update records made so far (one file each)."""
    return len(list(folder.glob("update-*.json"))) if folder.is_dir() else 0
