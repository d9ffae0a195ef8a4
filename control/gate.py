"""`wikitrace gate`: let a lesson in only after it survives probes that try to prove it wrong.

For each candidate insight (ungated ones by default), the agent runs through the user's runner
with the current memory without the candidate (`base`: the committed insights alone, so that no
other untested insight masks or causes the effect) and with it (`lesson`), on three kinds of
probe tasks from the task pool:

- target: tasks of its type that its precondition covers (control.probes), its source task
  left out (source replay proves nothing);
- falsify: boundary tasks (same type, outside the precondition, like the lesson),
  precondition violations (same type, outside it, most alike to it) and decoys (another type,
  similar words), taken in turn;
- regress: tasks the agent solved before (successful runs in the corpus).

Each probe runs on both sides with the same seed (a pair). Under the default rule, sequential,
pairs are drawn in rounds and anytime-valid tests (control.sequential) decide as they come: it
is committed once shown to help its targets, with D_reg below beta and P_fail below delta,
each at alpha; rejected once shown not worth it (alpha_miss) or when its run budget is spent.
Across one call's lessons e-BH decides which of those that passed are committed. Under
`bounds` and `estimates`, a fixed set of probes is run and the figures (control.figures)
decide: their exact one-sided bounds, or the estimates as the method published them.

When it fails but helped targets, and no task was both helped and hurt, the failures lie in a
sub-range a precondition can cut away: one model call narrows the precondition, and the
narrowed lesson is tested on probes the narrowing never saw (the other half of the pool under
sequential, at a quarter of alpha; new probes on fresh seeds otherwise). Anything else is
rejected. Decisions, figures and every probe run go into a new version (gate/); a rejected
insight stays there, marked, and is never shown to an agent.

A lesson whose only support is content the agent read (records.READ_ONLY: where an injected
instruction would come from) is tested on probes of its own, never as a near-duplicate of
another, and committed only when they show it helps (refuse_unshown). A gate killed after its
version was made is finished by running it again, not run a second time.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, Field

from wikitrace.compiler.ask import Asker
from wikitrace.corpus_schema import CorpusError, InputError, manifest
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.history import PROBES_DIR, now
from wikitrace.corpus_schema.layout import GATE_DIR, decision_id, step_id
from wikitrace.corpus_schema.ledger import (
    AgentRun,
    GateDecision,
    ProbeResult,
    TogetherCheck,
)
from wikitrace.corpus_schema.records import READ_ONLY, InsightHeader
from wikitrace.corpus_schema.store import build_lock, remove_tree
from wikitrace.search import consolidate
from wikitrace.transport.llm import LLM
from wikitrace.versions import (
    Derivation,
    FrozenVersion,
    Store,
    count_decisions,
    derive_version,
    open_store,
    resolve_insight,
    write_view,
)
from wikitrace.versions.store import left_unrecorded, record_left

from .figures import (
    Pair,
    Pairs,
    Rule,
    Thresholds,
    gate_figures,
    separable,
    summary,
    together_passes,
    why_not_narrowed,
)
from .figures import marks as figure_marks
from .pool import PoolTask
from .probes import Budget, Lesson, Probe, by_kind, choose_probes, given_probes, split_pool
from .runner import RunLog, Runner, RunnerSpec, RunRequest, cited_insights
from .sequential import Pair as SeqPair
from .sequential import Rates, Schedule, Sequential, decide, e_bh

log = logging.getLogger(__name__)


@dataclass
class GateOptions:
    runner: RunnerSpec
    pool: list[PoolTask] | None = None
    """The tasks the runner can run; None: the tasks of the corpus's runs."""
    targets: int = 8
    falsify: int = 8
    regress: int = 8
    given: dict[str, list[str]] = field(default_factory=dict)
    """Explicit probe lists by kind (target, falsify, regress), instead of choosing."""
    trials: int = 1
    seed: int = 0
    confidence: float = 0.9
    """Of the bounds rule's exact binomial bounds."""
    alpha: float = 0.1
    """Sequential rule: chance, at most, that a lesson with D_reg >= beta, P_fail >= delta
    or no help on its targets is committed (over one call's lessons, the expected share of
    such lessons among those committed: e-BH)."""
    alpha_miss: float = 0.1
    """Sequential rule: chance, at most, that a lesson worth committing is stopped early."""
    max_runs: int = 128
    """Sequential rule: agent runs a lesson may take (both sides of each pair), then it is
    rejected if not shown to pass."""
    per_round: int = 2
    """Sequential rule: target and falsification pairs still needed, run together in one round
    (regression pairs half as many, at least one)."""
    eta: float = 0.1
    """Least transfer gain G (its lower bound) to commit."""
    delta: float = 0.3
    """Most falsification failure rate P_fail (its upper bound) to commit."""
    beta: float = 0.3
    """Most regression damage D_reg (its upper bound) to commit."""
    rule: Rule = "sequential"
    """How the figures decide: sequential tests (ours), exact bounds on fixed probes, or the
    estimates (the method's)."""
    p_fail: Literal["citations", "outcomes"] = "citations"
    """citations: a falsification probe fails when the run with the lesson cited it (used it
    where it should not apply), for runs whose agent returned a citation report, outcome
    harm otherwise; outcomes: outcome harm always."""
    narrow: bool = True
    prompts_dir: Path | None = None
    """Templates that override ours (narrow.j2), as `build --prompts-dir`."""


@dataclass
class GateReport:
    decisions: list[GateDecision] = field(default_factory=list)
    tested_on: str | None = None
    version: str | None = None
    """The version holding the decisions."""
    agent_runs: int = 0


@dataclass
class _Candidate:
    ident: str
    header: InsightHeader
    guideline: str
    alike: list[str] = field(default_factory=list)
    """Ungated near-duplicates (the same lesson drawn from other runs): they take its
    decision, and are not tested again."""

    @property
    def precondition(self) -> str:
        return self.header.precondition


RunProgress = Callable[[int, int], None]


def gate_insights(
    pointer: Path,
    insight_ids: Sequence[str],
    options: GateOptions,
    *,
    llm: LLM | None = None,
    deploy: bool = True,
    progress: RunProgress | None = None,
) -> GateReport:
    """Test each candidate, then write one new version with every decision."""
    with build_lock(pointer):
        store = open_store(pointer)
        finished = _finish_interrupted(store, deploy=deploy)
        if finished is not None and _decides(finished, insight_ids):
            return finished
        base = FrozenVersion.current(store)
        current = base.name
        gate = _Gate(store, base, options, llm, progress)
        candidates = gate.candidates(insight_ids)
        report = GateReport(tested_on=current)
        if not candidates:
            return report
        try:
            for candidate in candidates:
                decision = gate.decide(candidate)
                refuse_unshown(candidate.header, decision)
                report.decisions.append(decision)
            if gate.sequential:
                gate.multiplicity(report.decisions)
            gate.together(candidates, report.decisions)
        finally:
            remove_tree(gate.views)
            with contextlib.suppress(OSError):
                gate.views.parent.rmdir()  # probes/, when no other gate is using it
        report.agent_runs = gate.agent_runs
        change = Derivation(
            reason="gate: " + ", ".join(f"{d.insight} {d.verdict}" for d in report.decisions),
            report={
                "gate": [d.id for d in report.decisions],
                "agent_runs": gate.agent_runs,
                "tested_on": current,
            },
            prompts=dict(gate.asker.used) if gate.asker else {},
        )
        for decision, candidate in zip(report.decisions, candidates, strict=True):
            header = candidate.header
            if decision.verdict == "committed" and candidate.ident in gate.narrowed:
                header = gate.narrowed[candidate.ident]
            runs = gate.runs_of(decision)
            evidence = b"".join(orjson.dumps(run.model_dump(mode="json")) + b"\n" for run in runs)
            change.record(decision, header, candidate.guideline, evidence)
            for ident in candidate.alike:
                page = gate.pages[ident]
                change.follow(decision, page.header, corpus_read.guideline(page))
        report.version = derive_version(store, base, change, deploy=deploy)
        return report


def _finish_interrupted(store: Store, *, deploy: bool) -> GateReport | None:
    """A gate call killed once its version was made, before the history said so: that
    version is placed as it would have been (`left_unrecorded`, as `add` does) and its
    decisions are the report, rather than the same lessons tested again into a second
    version. None when there is none."""
    name = left_unrecorded(store, decided_by="gate")
    if name is None:
        return None
    root = store.version_path(name)
    made = manifest.load(root).build
    decisions = [
        corpus_read.read_page(root, f"{GATE_DIR}/{ident}.md", GateDecision).header
        for ident in made.get("gate", [])
    ]
    reason = "gate: " + ", ".join(f"{d.insight} {d.verdict}" for d in decisions)
    record_left(
        store,
        name,
        deploy=deploy,
        reason=f"{reason} (an interrupted gate, finished)",
        event="gated",
    )
    log.warning("%s was made by a gate call that was interrupted: finished it", name)
    return GateReport(
        decisions=decisions,
        tested_on=made.get("tested_on"),
        version=name,
        agent_runs=int(made.get("agent_runs", 0)),
    )


def _decides(report: GateReport, insight_ids: Sequence[str]) -> bool:
    """Whether the decisions of a finished gate call answer a call for `insight_ids` (every
    ungated insight when none is named)."""
    decided = [decision.insight for decision in report.decisions]
    for given in insight_ids:
        try:
            resolve_insight(given, decided)
        except InputError:
            return False
    return True


class _Gate:
    def __init__(
        self,
        store: Store,
        base: FrozenVersion,
        options: GateOptions,
        llm: LLM | None,
        progress: RunProgress | None,
    ) -> None:
        self.store = store
        self.base = base
        self.options = options
        self.thresholds = Thresholds(
            options.eta, options.delta, options.beta, options.confidence, options.rule
        )
        self.rates = Rates(
            eta=options.eta,
            delta=options.delta,
            beta=options.beta,
            alpha=options.alpha,
            alpha_miss=options.alpha_miss,
        )
        self.schedule = Schedule(per_round=options.per_round, max_runs=options.max_runs)
        self.asker = None if llm is None else Asker(llm, options.prompts_dir)
        self.streams: dict[str, _Stream] = {}
        """Candidate -> its last sequential stream (the narrowed lesson's, once narrowed),
        kept to go on (e-BH)."""
        self.progress = progress
        self.pages = dict(base.insights.items())  # read once: the gate looks at them often
        self.first_number = count_decisions(base) + 1
        self.number = self.first_number
        self.views = store.dir / PROBES_DIR / decision_id("gate", self.first_number)
        self.runs: dict[str, AgentRun] = {}
        self.base_results: dict[tuple[str, int], AgentRun] = {}
        self.agent_runs = 0
        self._hidden: set[str] = set()
        self._base_view: Path | None = None
        self.narrowed: dict[str, InsightHeader] = {}
        """Candidate -> its header with the narrowed precondition, once narrowed."""
        self._narrowed_results: dict[tuple[str, int], AgentRun] = {}
        self._narrowed_probes: list[Probe] = []
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
        self.solved = list(dict.fromkeys(r.task_id for r in base.rows if r.outcome == "success"))
        # A narrowed lesson is judged on probes its narrowing never saw: the pool is split
        # before the first round, the first test drawing from one half, the narrowed
        # lesson's from the other.
        self.first_pool, self.held_out = self.pool, self.pool
        if self.sequential and options.narrow and llm is not None and not options.given:
            self.first_pool, self.held_out = split_pool(self.pool, options.seed)

    @property
    def sequential(self) -> bool:
        return self.options.rule == "sequential"

    # --- candidates ------------------------------------------------------------------------

    def candidates(self, ids: Sequence[str]) -> list[_Candidate]:
        chosen = []
        if ids:
            for given in ids:
                ident = resolve_insight(given, self.pages)
                status = self.pages[ident].header.status
                if status != "ungated":
                    raise InputError(
                        f"{ident} is already {status}; the gate tests ungated insights",
                        field="INSIGHT",
                    )
                chosen.append(ident)
        alike: dict[str, list[str]] = {}
        if not ids:
            # One test per lesson: near-duplicates drawn from other runs take its decision.
            idents = list(self.pages)
            leaders = consolidate.of_pages(
                [(p.header, corpus_read.guideline(p)) for p in self.pages.values()]
            )
            first_ungated: dict[int, str] = {}
            for index, ident in enumerate(idents):
                if self.pages[ident].header.status != "ungated":
                    continue
                if self.pages[ident].header.support == READ_ONLY:
                    chosen.append(ident)  # never committed on another lesson's probes
                    continue
                lead = first_ungated.setdefault(leaders[index], ident)
                if lead == ident:
                    chosen.append(ident)
                else:
                    alike.setdefault(lead, []).append(ident)
        # The base memory is the committed insights alone: an untested insight could mask or
        # cause the effect being measured.
        self._hidden = {i for i, p in self.pages.items() if p.header.status != "committed"}
        return [
            _Candidate(
                i,
                self.pages[i].header,
                corpus_read.guideline(self.pages[i]),
                alike=alike.get(i, []),
            )
            for i in chosen
        ]

    # --- probes --------------------------------------------------------------------------

    def choose(self, candidate: _Candidate, *, held_out: bool = False) -> list[Probe]:
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
        return choose_probes(lesson, pool, self.solved, budget)

    # --- runs ----------------------------------------------------------------------------

    def _view(
        self,
        name: str,
        *,
        hidden: set[str],
        replaced: dict[str, tuple[InsightHeader, str]] | None = None,
    ) -> Path:
        return write_view(self.base, self.views / name, hidden=hidden, replaced=replaced)

    def seeds(self, fresh: bool = False) -> list[int]:
        """The probes' seeds; `fresh`: the next as many, for the re-test after narrowing."""
        first = self.options.seed + (self.options.trials if fresh else 0)
        return [first + t for t in range(self.options.trials)]

    def run(
        self,
        memory_name: str,
        memory_path: Path,
        tasks: Sequence[str],
        purpose: str,
        *,
        fresh: bool = False,
    ) -> dict[tuple[str, int], AgentRun]:
        seeds = self.seeds(fresh)
        requests = [
            RunRequest(task_id, memory_name, memory_path, seed)
            for task_id in tasks
            for seed in seeds
        ]
        results = self._run_requests(requests, purpose)
        return {(run.task_id, run.seed): run for run in results}

    def _run_requests(self, requests: Sequence[RunRequest], purpose: str) -> list[AgentRun]:
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
            self.runs[run.id] = run
        return results

    def run_base(self, tasks: Sequence[str], purpose: str, *, fresh: bool = False) -> None:
        """Run the tasks that have no run yet with the base memory (the committed insights
        alone) at the probes' seeds (`fresh`: the re-test's): each is run once per call."""
        if self._base_view is None:
            self._base_view = self._view("base", hidden=self._hidden)
        first = self.seeds(fresh)[0]
        missing = [t for t in tasks if (t, first) not in self.base_results]
        name = f"{self.base.name}-without-candidates"
        self.base_results.update(self.run(name, self._base_view, missing, purpose, fresh=fresh))

    def decide(self, candidate: _Candidate) -> GateDecision:
        if self.sequential:
            return self.decide_sequential(candidate)
        options = self.options
        ident = decision_id("gate", self.number)
        self.number += 1
        self._narrowed_results = {}
        self._narrowed_probes = []
        probes = self.choose(candidate)
        if not probes:
            raise InputError(
                f"no probe tasks for {candidate.ident}: the task pool is empty",
                hint="give --task-pool FILE",
            )
        tasks = list(dict.fromkeys(p.task_id for p in probes))
        tested_on = self.base.name
        self.run_base(tasks, ident)
        with_view = self._view(candidate.ident, hidden=self._hidden - {candidate.ident})
        lesson = self.run(f"{tested_on}+{candidate.ident}", with_view, tasks, ident)
        figures = gate_figures(
            probes, self.pairs(probes, lesson), self.thresholds, self.cited(candidate.ident, lesson)
        )
        decision = GateDecision(
            id=ident,
            insight=candidate.ident,
            tested_on=tested_on,
            time=now(),
            verdict="rejected",
            reason="",
            confidence=options.confidence,
            thresholds={"eta": options.eta, "delta": options.delta, "beta": options.beta},
            precondition=candidate.precondition,
            figures=figures,
            seeds=self.seeds(),
            evidence=f"{ident}.runs.jsonl",
        )
        if figures.passes:
            decision.verdict = "committed"
            decision.reason = "It passed: " + summary(figures, self.thresholds)
        elif options.narrow and separable(self.pairs(probes, lesson), figures, self.thresholds):
            decision = self._narrow(candidate, decision, probes, tasks, lesson)
        else:
            decision.reason = (
                "Rejected: "
                + summary(figures, self.thresholds)
                + "; "
                + why_not_narrowed(figures, self.thresholds, narrow=options.narrow)
            )
        last = decision.narrowed_figures or decision.figures
        if decision.verdict == "rejected" and last is not None and last.errors:
            decision.verdict = "undecided"
            decision.reason = (
                f"Undecided: {last.errors} probe pairs ended as errors after their retries, and "
                "the rest did not suffice to commit; it stays ungated. " + decision.reason
            )
        decision.probes = [
            ProbeResult(
                task_id=p.task_id,
                kind=p.kind,
                why=p.why,
                base_runs=self._ids(self.base_results, p.task_id),
                lesson_runs=self._ids(lesson, p.task_id),
            )
            for p in probes
        ]
        if decision.narrowed_precondition:
            decision.narrowed_seeds = self.seeds(fresh=True)
            decision.narrowed_probes = [
                ProbeResult(
                    task_id=p.task_id,
                    kind=p.kind,
                    why=p.why,
                    base_runs=self._ids(self.base_results, p.task_id, fresh=True),
                    lesson_runs=self._ids(self._narrowed_results, p.task_id, fresh=True),
                )
                for p in self._narrowed_probes
            ]
        decision.agent_runs = len(self.runs_of(decision))
        return decision

    def _ids(
        self, results: dict[tuple[str, int], AgentRun], task_id: str, *, fresh: bool = False
    ) -> list[str]:
        seeds = set(self.seeds(fresh))
        return [results[key].id for key in sorted(results) if key[0] == task_id and key[1] in seeds]

    def runs_of(self, decision: GateDecision) -> list[AgentRun]:
        probes = [*decision.probes, *decision.narrowed_probes]
        ids = {i for p in probes for i in (*p.base_runs, *p.lesson_runs, *p.narrowed_runs)}
        ids |= {i for check in decision.together for i in check.runs}
        return [self.runs[i] for i in sorted(ids)]

    # --- the sequential rule --------------------------------------------------------------

    def decide_sequential(self, candidate: _Candidate) -> GateDecision:
        """Probe pairs in rounds until the anytime-valid tests decide (control.sequential)."""
        ident = decision_id("gate", self.number)
        self.number += 1
        probes = self.choose(candidate)
        if not probes:
            raise InputError(
                f"no probe tasks for {candidate.ident}: the task pool is empty",
                hint="give --task-pool FILE",
            )
        view = self._view(candidate.ident, hidden=self._hidden - {candidate.ident})
        stream = _Stream(
            name=f"{self.base.name}+{candidate.ident}",
            view=view,
            probes=by_kind(probes),
            tests=Sequential(self.rates, citations=self.options.p_fail == "citations"),
            rng=random.Random(f"{self.options.seed}:{candidate.ident}"),
            ident=candidate.ident,
            base=self.base_results,
        )
        self.streams[candidate.ident] = stream
        decision = GateDecision(
            id=ident,
            insight=candidate.ident,
            tested_on=self.base.name,
            time=now(),
            verdict="rejected",
            reason="",
            confidence=1 - self.options.alpha,
            thresholds=self._thresholds(),
            precondition=candidate.precondition,
            evidence=f"{ident}.runs.jsonl",
        )
        outcome = self._go_on(stream, ident)
        decision.verdict = "committed" if outcome == "committed" else "rejected"
        self._settle(decision, stream)
        if decision.verdict == "rejected" and self.options.narrow:
            assert decision.figures is not None
            if separable(stream.figure_pairs(), decision.figures, self.thresholds):
                self._narrow_sequential(candidate, decision, stream)
            else:
                decision.reason += "; " + why_not_narrowed(
                    decision.figures, self.thresholds, narrow=True
                )
        elif decision.verdict == "rejected":
            decision.reason += "; narrowing is off (--no-narrow)"
        last = self.streams[candidate.ident]
        if decision.verdict == "rejected" and last.errors:
            decision.verdict = "undecided"
            decision.reason = (
                f"Undecided: {last.errors} probe pairs ended as errors after their retries, and "
                "the rest did not suffice to commit; it stays ungated. " + decision.reason
            )
        decision.agent_runs = len(self.runs_of(decision))
        return decision

    def _thresholds(self) -> dict[str, float]:
        o = self.options
        found = {"eta": o.eta, "delta": o.delta, "beta": o.beta}
        if self.sequential:
            found.update(alpha=o.alpha, alpha_miss=o.alpha_miss, max_runs=float(o.max_runs))
        return found

    def _go_on(self, stream: _Stream, purpose: str) -> str:
        """Run the stream's rounds until its tests decide or its budget is spent."""
        needs = stream.tests.needs()
        if not stream.probes["regress"]:  # falsification pairs count for D_reg too
            needs["regress"] = needs["regress"] and not stream.probes["falsify"]
        missing = [k for k, needed in needs.items() if needed and not stream.probes[k]]
        if missing:
            stream.tests.reason = (
                f"no {' or '.join(missing)} probe in the task pool, so what they test cannot be "
                "shown"
            )
            return "rejected"
        outcome = decide(
            stream.tests,
            lambda wanted: self._sample(stream, wanted, purpose),
            self.schedule,
            spent=stream.runs,
        )
        stream.runs = outcome.runs
        return outcome.verdict

    def _sample(self, stream: _Stream, wanted: dict[str, int], purpose: str) -> list[SeqPair]:
        """Draw `wanted` pairs of each kind (tasks at random from the kind's probes, each
        task's next seed), run what is not run yet on both sides (without the lesson only
        where the tests still need that side), and return the pairs."""
        base_needed = {kind: stream.tests.needs_base(kind) for kind in ("falsify", "regress")}
        drawn: list[tuple[Probe, int]] = []
        for kind, count in wanted.items():
            for _ in range(count):
                # Without regression probes, D_reg is shown on falsification pairs alone.
                probe = stream.draw(kind) or (stream.draw("falsify") if kind == "regress" else None)
                if probe is None:
                    break
                seed = self.options.seed + stream.used.get(probe.task_id, 0)
                stream.used[probe.task_id] = stream.used.get(probe.task_id, 0) + 1
                drawn.append((probe, seed))
        if self._base_view is None:
            self._base_view = self._view("base", hidden=self._hidden)
        base_name = f"{self.base.name}-without-candidates"
        requests = [
            RunRequest(p.task_id, base_name, self._base_view, seed)
            for p, seed in drawn
            if (p.task_id, seed) not in self.base_results and base_needed.get(p.kind, True)
        ]
        requests += [RunRequest(p.task_id, stream.name, stream.view, seed) for p, seed in drawn]
        results = self._run_requests(requests, purpose)
        for request, run in zip(requests, results, strict=True):
            if request.memory == base_name:
                self.base_results[(run.task_id, run.seed)] = run
            else:
                stream.results[(run.task_id, run.seed)] = run
        pairs = []
        for probe, seed in drawn:
            key = (probe.task_id, seed)
            stream.kinds[key] = probe
            without, with_lesson = self.base_results.get(key), stream.results[key]
            if with_lesson.success is None or (without is not None and without.success is None):
                stream.errors += 1
                continue
            insights = cited_insights(with_lesson)
            cited = None if insights is None else stream.ident in insights
            solved = None if without is None else without.success
            pairs.append(SeqPair(probe.kind, solved, with_lesson.success, cited))
        return pairs

    def _settle(self, decision: GateDecision, stream: _Stream, *, narrowed: bool = False) -> None:
        """The decision's figures, probes and reason from the stream as it stands."""
        tests = stream.tests
        probes = [p for kind in stream.probes.values() for p in kind]
        cited = self.cited(stream.ident, stream.results)
        figures = gate_figures(probes, stream.figure_pairs(), self.thresholds, cited)
        figures = figures.model_copy(
            update={
                "passes": tests.verdict() == "committed",
                "runs": stream.runs,
                "tests": {
                    "help": round(tests.help.wealth, 6),
                    "damage": round(tests.damage.wealth, 6),
                    "failure": round(tests.failure.wealth, 6),
                    "needed": round(1 / (self.rates.alpha * tests.scale), 6),
                },
            }
        )
        keys = sorted(stream.kinds)
        results = [
            ProbeResult(
                task_id=p.task_id,
                kind=p.kind,
                why=p.why,
                base_runs=[
                    self.base_results[k].id
                    for k in keys
                    if k[0] == p.task_id and k in self.base_results
                ],
                lesson_runs=[stream.results[k].id for k in keys if k[0] == p.task_id],
            )
            for p in dict.fromkeys(stream.kinds.values())
        ]
        seeds = sorted({seed for _, seed in stream.kinds})
        if figures.passes:
            words = "It passed: "
        else:
            words = f"{'Still rejected' if narrowed else 'Rejected'} ({tests.reason}): "
        text = words + summary(figures, self.thresholds)
        if narrowed:
            decision.narrowed_figures = figures
            decision.narrowed_probes = results
            decision.narrowed_seeds = seeds
            decision.reason += ". After narrowing, on held-out probes: " + text
        else:
            decision.figures = figures
            decision.probes = results
            decision.seeds = seeds
            decision.reason = text

    def _narrow_sequential(
        self, candidate: _Candidate, decision: GateDecision, stream: _Stream
    ) -> None:
        if self.asker is None:
            decision.reason += (
                "; it could be narrowed (it helped and hurt on separate tasks) but there is no "
                "model to do it (an offline corpus)"
            )
            return
        seen = list(dict.fromkeys(p.task_id for p in stream.kinds.values()))
        try:
            precondition, narrowed, view = self._narrowing(candidate, seen, stream.figure_pairs())
        except (ValueError, CorpusError) as error:
            decision.reason += f"; narrowing failed: {error}"
            return
        probes = self.choose(
            _Candidate(candidate.ident, narrowed, candidate.guideline, candidate.alike),
            held_out=True,
        )
        # Its own share of alpha: a lesson that fails, is narrowed and is tested again gets
        # two chances to pass, so the second test asks for four times the evidence.
        second = _Stream(
            name=f"{self.base.name}+{candidate.ident}-narrowed",
            view=view,
            probes=by_kind(probes),
            tests=Sequential(
                self.rates, citations=self.options.p_fail == "citations", scale=NARROWED_SHARE
            ),
            rng=random.Random(f"{self.options.seed}:{candidate.ident}:narrowed"),
            ident=candidate.ident,
            base=self.base_results,
            narrowed=True,
        )
        self.streams[candidate.ident] = second
        decision.narrowed_precondition = precondition
        outcome = self._go_on(second, decision.id) if probes else "rejected"
        if not probes:
            second.tests.reason = "no held-out probe task"
        self._settle(decision, second, narrowed=True)
        if outcome == "committed":
            decision.verdict = "committed"
            decision.reason = "Narrowed, then committed. First test: " + decision.reason

    def multiplicity(self, decisions: Sequence[GateDecision]) -> None:
        """Across one call's lessons: commit only a set e-BH admits, so that the expected share
        of harmful or useless lessons among those committed is at most alpha. A committed
        lesson e-BH does not admit yet goes on (its tests ask for m / (alpha k) evidence, k the
        lessons committed, m those tested) until it does or its budget is spent."""
        streams = [self.streams.get(d.insight) for d in decisions]
        m = len(decisions)
        if m < 2:
            return
        while True:
            committed = [i for i, d in enumerate(decisions) if d.verdict == "committed"]
            admitted = e_bh([s.tests.e_value() if s else 0.0 for s in streams], self.rates.alpha)
            short = [i for i in committed if i not in admitted]
            if not short:
                return
            for i in short:
                stream, decision = streams[i], decisions[i]
                assert stream is not None
                stream.tests.scale = min(stream.tests.scale, len(committed) / m)
                outcome = self._go_on(stream, decision.id)
                if outcome != "committed":
                    decision.verdict = "rejected"
                    self.narrowed.pop(decision.insight, None)
                note = (
                    f". With {m} lessons in this call, e-BH asked it for evidence "
                    f"{1 / (self.rates.alpha * stream.tests.scale):.3g}"
                    + (": reached." if outcome == "committed" else ": not reached, rejected.")
                )
                self._settle(decision, stream, narrowed=stream.narrowed)
                decision.reason += note
                decision.agent_runs = len(self.runs_of(decision))

    # --- lessons together ----------------------------------------------------------------

    def together(self, candidates: Sequence[_Candidate], decisions: Sequence[GateDecision]) -> None:
        """Run the lessons this call committed side by side on every probe task of theirs: two
        lessons that each passed alone may break together what the agent solved (D_reg over
        the pairs solved without them). While the set fails, its last lesson is rejected and
        the rest are tested again."""
        committed = [
            (d, c) for d, c in zip(decisions, candidates, strict=True) if d.verdict == "committed"
        ]
        while len(committed) > 1:
            tasks = list(dict.fromkeys(p.task_id for d, _ in committed for p in d.probes))
            if not tasks:
                return
            ids = [c.ident for _, c in committed]
            replaced = {
                c.ident: (self.narrowed[c.ident], c.guideline)
                for _, c in committed
                if c.ident in self.narrowed
            }
            view = self._view(
                "together-" + "-".join(ids), hidden=self._hidden - set(ids), replaced=replaced
            )
            purpose = committed[-1][0].id
            self.run_base(tasks, purpose)
            results = self.run(f"{self.base.name}+" + "+".join(ids), view, tasks, purpose)
            probes = [Probe(t, "regress", "") for t in tasks]
            figures = gate_figures(probes, self.pairs(probes, results), self.thresholds)
            passes = together_passes(figures, self.thresholds)
            check = TogetherCheck(
                insights=ids,
                figures=figures,
                passes=passes,
                runs=[results[key].id for key in sorted(results)],
            )
            for decision, _ in committed:
                decision.together.append(check)
                decision.agent_runs = len(self.runs_of(decision))
            if passes:
                return
            index, why = self._breaker(committed, results)
            out, _ = committed.pop(index)
            out.verdict = "rejected"
            self.narrowed.pop(out.insight, None)
            out.reason = (
                f"Committed alone, then rejected: run with {', '.join(ids)}, the set broke "
                f"{figures.damaged} of the {figures.n_regress} pairs the agent solved without "
                f"them (D_reg {figures.d_reg:.3f}, needs <= {self.thresholds.beta:g}); it is "
                f"left out, {why}. Alone: " + out.reason
            )

    def _breaker(
        self,
        committed: Sequence[tuple[GateDecision, _Candidate]],
        results: dict[tuple[str, int], AgentRun],
    ) -> tuple[int, str]:
        """Which lesson of a set that broke solved pairs to leave out: the one the agent cited
        most in the pairs the set broke, when its runs report citations; else the one whose
        own test showed the most regression damage."""
        broken = [
            run
            for key, run in results.items()
            if (base := self.base_results.get(key)) is not None
            and base.success
            and run.success is False
        ]
        counts = [0] * len(committed)
        for run in broken:
            insights = cited_insights(run) or []
            for index, (decision, _) in enumerate(committed):
                counts[index] += decision.insight in insights
        if any(counts):
            index = max(range(len(committed)), key=lambda i: (counts[i], i))
            return index, f"cited in {counts[index]} of the {len(broken)} pairs the set broke"

        def own_damage(i: int) -> float:
            d = committed[i][0]
            figures = d.narrowed_figures or d.figures
            return figures.d_reg if figures is not None else 0.0

        index = max(range(len(committed)), key=lambda i: (own_damage(i), i))
        return index, (
            f"its own test showed the most regression damage (D_reg {own_damage(index):.3f}); "
            "the set's runs report no citations"
        )

    # --- figures -------------------------------------------------------------------------

    def pairs(
        self,
        probes: Sequence[Probe],
        results: dict[tuple[str, int], AgentRun],
        *,
        fresh: bool = False,
    ) -> Pairs:
        """(task, seed) -> its outcome without and with the lesson, once however many kinds."""
        found: dict[tuple[str, int], Pair | None] = {}
        for probe in probes:
            for seed in self.seeds(fresh):
                key = (probe.task_id, seed)
                found[key] = _pair(self.base_results.get(key), results.get(key))
        return found

    def cited(
        self, ident: str, results: dict[tuple[str, int], AgentRun]
    ) -> dict[tuple[str, int], bool]:
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

    # --- narrowing -----------------------------------------------------------------------

    def _narrowing(
        self, candidate: _Candidate, tasks: Sequence[str], pairs: Pairs
    ) -> tuple[str, InsightHeader, Path]:
        """One model call narrows the precondition from what the lesson did to each task
        (HELPED, HURT or SAME); the narrowed precondition, header and memory view. Raises
        ValueError or CorpusError when the answer cannot be used."""
        assert self.asker is not None
        marks = figure_marks(pairs)
        texts = {t.task_id: t.task or t.task_id for t in self.pool}
        listed = [
            {
                "mark": "HURT"
                if "HURT" in marks.get(t, set())
                else "HELPED"
                if "HELPED" in marks.get(t, set())
                else "SAME",
                "task_id": t,
                "task": texts.get(t, t),
            }
            for t in tasks
        ]
        precondition, applicability = narrow_precondition(self.asker, candidate, listed)
        header = candidate.header
        hypothesis = (
            header.hypothesis.model_copy(update={"precondition": precondition})
            if header.hypothesis
            else None
        )
        narrowed = header.model_copy(
            update={"applicability": applicability, "hypothesis": hypothesis}
        )
        self.narrowed[candidate.ident] = narrowed
        view = self._view(
            f"{candidate.ident}-narrowed",
            hidden=self._hidden - {candidate.ident},
            replaced={candidate.ident: (narrowed, candidate.guideline)},
        )
        return precondition, narrowed, view

    def _narrow(
        self,
        candidate: _Candidate,
        decision: GateDecision,
        probes: Sequence[Probe],
        tasks: list[str],
        lesson: dict[tuple[str, int], AgentRun],
    ) -> GateDecision:
        first = decision.figures
        assert first is not None
        if self.asker is None:
            decision.reason = (
                "Rejected: "
                + summary(first, self.thresholds)
                + "; it could be narrowed (it helped "
                "and hurt on separate tasks) but there is no model to do it (an offline corpus)"
            )
            return decision
        try:
            precondition, narrowed, view = self._narrowing(
                candidate, tasks, self.pairs(probes, lesson)
            )
        except (ValueError, CorpusError) as error:
            decision.reason = (
                "Rejected: " + summary(first, self.thresholds) + f"; narrowing failed: {error}"
            )
            return decision
        # Not on the runs that shaped it: probes chosen anew for the narrowed precondition (or
        # the given ones), every one run again, without and with it, on fresh seeds.
        fresh_probes = self.choose(
            _Candidate(candidate.ident, narrowed, candidate.guideline, candidate.alike)
        )
        fresh_tasks = list(dict.fromkeys(p.task_id for p in fresh_probes))
        self._narrowed_probes = fresh_probes
        self.run_base(fresh_tasks, decision.id, fresh=True)
        results = self.run(
            f"{self.base.name}+{candidate.ident}-narrowed",
            view,
            fresh_tasks,
            decision.id,
            fresh=True,
        )
        self._narrowed_results = results
        second = gate_figures(
            fresh_probes,
            self.pairs(fresh_probes, results, fresh=True),
            self.thresholds,
            self.cited(candidate.ident, results),
        )
        decision.narrowed_precondition = precondition
        decision.narrowed_figures = second
        if second.passes:
            decision.verdict = "committed"
            decision.reason = (
                "Narrowed, then committed. Before: "
                + summary(first, self.thresholds)
                + ". After narrowing: "
                + summary(second, self.thresholds)
            )
        else:
            decision.reason = (
                "Narrowed, still failing, rejected. Before: "
                + summary(first, self.thresholds)
                + ". After narrowing: "
                + summary(second, self.thresholds)
            )
        return decision


def refuse_unshown(header: InsightHeader, decision: GateDecision) -> None:
    """A lesson whose only support is content the agent read (records.READ_ONLY: a tool
    result, a page, a file, where an injected instruction would be) is committed only when a
    probe shows it: a target pair its lesson made better, more such pairs than worse, in the
    figures that decided (the narrowed lesson's, when narrowed). Its evidence alone, or a rule
    that passes it without a gain (`--rule estimates` with `--eta 0`), never commits it: it is
    rejected, saying why."""
    if header.support != READ_ONLY or decision.verdict != "committed":
        return
    figures = decision.narrowed_figures or decision.figures
    if figures is not None and figures.gains > figures.losses:
        decision.reason += (
            f" Its only support is content the agent read; probes showed it helps "
            f"({figures.gains} of {figures.n_target} target pairs better with it)."
        )
        return
    shown = (
        f"{figures.gains} of {figures.n_target} target pairs better with it, {figures.losses} worse"
        if figures is not None
        else "no figures"
    )
    decision.verdict = "rejected"
    decision.reason = (
        "Rejected: its only support is content the agent read (a tool result, a page, a file), "
        f"which may be an injected instruction, and no probe showed it helps ({shown}); such a "
        "lesson is never committed on its evidence alone. The test said: " + decision.reason
    )


NARROWED_SHARE = 0.25
"""The share of alpha a narrowed lesson's second test uses."""


@dataclass
class _Stream:
    """One lesson's sequential tests, where its probe pairs come from, and what they gave."""

    name: str
    """The memory's name in the runs' log."""
    view: Path
    probes: dict[str, list[Probe]]
    tests: Sequential
    rng: random.Random
    ident: str = ""
    used: dict[str, int] = field(default_factory=dict)
    """Task -> times drawn (its next seed is --seed plus that)."""
    results: dict[tuple[str, int], AgentRun] = field(default_factory=dict)
    kinds: dict[tuple[str, int], Probe] = field(default_factory=dict)
    """(task, seed) -> the probe it was drawn as."""
    runs: int = 0
    errors: int = 0
    base: dict[tuple[str, int], AgentRun] = field(default_factory=dict)
    """The gate's runs without the lesson, shared by every stream of one call."""
    narrowed: bool = False
    """The narrowed lesson's stream (its test asks for NARROWED_SHARE of alpha)."""
    turn: int = 0
    """Falsification draws so far: their groups are taken in turn."""

    def draw(self, kind: str) -> Probe | None:
        """A probe of `kind` at random; falsification probes from their groups in turn."""
        probes = self.probes.get(kind, [])
        if not probes:
            return None
        if kind == "falsify":
            groups: dict[str, list[Probe]] = {}
            for probe in probes:
                groups.setdefault(probe.why.split(":")[0], []).append(probe)
            group = list(groups.values())[self.turn % len(groups)]
            self.turn += 1
            return self.rng.choice(group)
        return self.rng.choice(probes)

    def figure_pairs(self) -> dict[tuple[str, int], Pair | None]:
        return {key: _pair(self.base.get(key), self.results.get(key)) for key in self.kinds}


def _pair(without: AgentRun | None, with_lesson: AgentRun | None) -> Pair | None:
    if with_lesson is None:
        return None
    if without is None:  # only its citation was needed (Sequential.needs_base)
        return (None, with_lesson.value, None)
    return (without.value, with_lesson.value, bool(without.success))


class NarrowAnswer(BaseModel):
    """The model's answer to narrow.j2."""

    precondition: str = Field(min_length=1)
    """The narrower precondition."""
    applicability: str = ""
    """When the lesson applies now; the precondition when left empty."""


def narrow_precondition(
    asker: Asker, candidate: _Candidate, probes: list[dict[str, str]]
) -> tuple[str, str]:
    """One model call: a narrower precondition (and applicability) from the probes' outcomes."""
    from wikitrace import prompts

    answer = asker.ask(
        prompts.NARROW,
        NarrowAnswer,
        data=probes,
        id=candidate.ident,
        title=candidate.header.title,
        guideline=candidate.guideline,
        precondition=candidate.precondition,
        probes=probes,
    )
    precondition = answer.precondition.strip()
    if not precondition:
        raise ValueError("field 'precondition': it is empty")
    return precondition, answer.applicability.strip() or precondition
