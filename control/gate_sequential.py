"""The gate's `sequential` rule: probe pairs in rounds until anytime-valid tests decide.

A lesson's stream draws pairs round by round (control.sequential decides after each); one that
fails but could be narrowed is narrowed and tested again on held-out probes at NARROWED_SHARE
of alpha; across one call's lessons e-BH decides which of those that passed are committed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from wikitrace.corpus_schema import CorpusError
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.ledger import AgentRun, GateDecision, ProbeResult
from wikitrace.corpus_schema.tasks import TaskKey

from .figures import Pair, Thresholds, gate_figures, separable, summary, why_not_narrowed
from .gate_inputs import Candidate, GateOptions
from .gate_narrowing import Narrower
from .gate_probes import ProbeChooser
from .gate_runs import GateRuns, by_task_seed, pair_of, undecided_on_errors
from .probes import KINDS, Probe, TaskDraws, by_kind, probe_task
from .runner import RunRequest, cited_insights
from .sequential import NARROWED_SHARE, Rates, Schedule, Sequential, decide, together
from .sequential import Pair as SeqPair


@dataclass
class Stream:
    """One lesson's sequential tests, where its probe pairs come from, and what they gave."""

    name: str
    """The memory's name in the runs' log."""
    view: Path
    probes: dict[str, list[Probe]]
    tests: Sequential
    rng: random.Random
    ident: str = ""
    draws: dict[str, TaskDraws[TaskKey]] = field(default_factory=dict)
    """Kind (falsification: each group) -> its tasks, each drawn once before any again; a
    task's n-th draw runs at seed --seed plus n."""
    results: dict[tuple[TaskKey, int], AgentRun] = field(default_factory=dict)
    kinds: dict[tuple[TaskKey, int], Probe] = field(default_factory=dict)
    """(task, seed) -> the probe it was drawn as; the task is its source and id."""
    singles: list[tuple[TaskKey, int]] = field(default_factory=list)
    """Falsification runs with the lesson alone (P_fail read from their citations), not yet
    run without it: D_reg on falsification probes completes them first."""
    runs: int = 0
    errors: int = 0
    base: dict[tuple[TaskKey, int], AgentRun] = field(default_factory=dict)
    """The gate's runs without the lesson, shared by every stream of one call."""
    narrowed: bool = False
    """The narrowed lesson's stream (its test asks for NARROWED_SHARE of alpha)."""
    turn: int = 0
    """Falsification draws so far: their groups are taken in turn."""

    def draw(self, kind: str) -> tuple[Probe, int] | None:
        """A probe of `kind` and its seed offset: every task of the kind (falsification: of
        its groups, taken in turn) once before any again."""
        probes = self.probes.get(kind, [])
        if not probes:
            return None
        key = kind
        if kind == "falsify":
            groups = list(dict.fromkeys(p.why.split(":")[0] for p in probes))
            key = f"falsify:{groups[self.turn % len(groups)]}"
            self.turn += 1
            probes = [p for p in probes if p.why.split(":")[0] == key[8:]]
        by_task = {probe_task(p): p for p in probes}
        if key not in self.draws:
            self.draws[key] = TaskDraws(list(by_task), self.rng)
        task, times = self.draws[key].next()
        return by_task[task], times

    def figure_pairs(self) -> dict[tuple[TaskKey, int], Pair | None]:
        return {key: pair_of(self.base.get(key), self.results.get(key)) for key in self.kinds}


def tasks_text(tests: Sequential) -> str:
    """How many distinct tasks and pairs of each kind the tests read (the unit is the task)."""
    parts = []
    for kind in ("target", "falsify", "regress"):
        if tests.pairs.get(kind):
            tasks = len(tests.tasks.get(kind, ()))
            parts.append(f"{tasks} {kind} tasks ({tests.pairs[kind]} pairs)")
    return ", ".join(parts) or "no pair"


class Rounds:
    """Owns running a stream's rounds: drawing each round's probe pairs (every task of a kind
    before any again, at that task's next seed), running on both sides what is not run yet,
    and handing the pairs to the stream's tests until they decide or its budget is spent."""

    def __init__(self, options: GateOptions, schedule: Schedule, runs: GateRuns) -> None:
        self.options = options
        self.schedule = schedule
        self.runs = runs

    def go_on(self, stream: Stream, purpose: str, schedule: Schedule | None = None) -> str:
        """Run the stream's rounds until its tests decide or its budget is spent."""
        tests = stream.tests
        tests.regress_probes = bool(stream.probes["regress"])
        needs = {
            "target": not tests.helps,
            "falsify": True,
            "regress": not tests.safe_on("regress"),
        }
        missing = [k for k, needed in needs.items() if needed and not stream.probes[k]]
        if missing:
            tests.reason = (
                f"no {' or '.join(missing)} probe in the task pool, so what they test cannot be "
                "shown"
            )
            return "rejected"
        outcome = decide(
            tests,
            lambda wanted: self._sample(stream, wanted, purpose),
            schedule or self.schedule,
            spent=stream.runs,
        )
        stream.runs = outcome.runs
        return outcome.verdict

    def look(self, stream: Stream, purpose: str) -> None:
        """A lesson rejected before it read a few target pairs (P_fail or D_reg shown too high
        first, or the first round's two) is given a look for narrowing: target pairs up to
        four, and up to four of its falsification runs with the lesson alone completed by
        their runs without it, so that where it helped and where it hurt can be told apart.
        Its decision stands whatever they show."""
        tests = stream.tests
        n = 2 * self.schedule.per_round
        wanted = {
            "target": max(0, n - tests.pairs.get("target", 0)),
            "falsify": min(n, len(stream.singles)),
        }
        if not wanted["target"] or not stream.probes["target"] or not tests.pairs:
            return  # enough targets seen, none to see, or nothing ran (agent errors)
        pairs = self._sample(stream, wanted, purpose, complete=True)
        stream.runs += sum(pair.runs for pair in pairs)
        for pair in pairs:
            stream.tests.observe(pair)

    def _draw(
        self, stream: Stream, wanted: dict[str, int], complete: bool = False
    ) -> list[tuple[Probe, int, bool]]:
        """`wanted` probes of each kind, each at its task's next seed (a falsification probe
        run with the lesson alone before is completed first); whether each is a completion."""
        drawn: list[tuple[Probe, int, bool]] = []
        base = complete or stream.tests.needs_base("falsify")
        for kind, count in wanted.items():
            for _ in range(count):
                if kind == "falsify" and base and stream.singles:
                    key = stream.singles.pop(0)
                    drawn.append((stream.kinds[key], key[1], True))
                    continue
                found = stream.draw(kind)
                if found is None:
                    break
                probe, times = found
                drawn.append((probe, self.options.seed + times, False))
        return drawn

    def _sample(
        self, stream: Stream, wanted: dict[str, int], purpose: str, *, complete: bool = False
    ) -> list[SeqPair]:
        """Draw `wanted` pairs of each kind, run what is not run yet on both sides (without
        the lesson only where the tests still need that side, or everywhere: `complete`), and
        return the pairs."""
        runs = self.runs
        base_needed = {kind: complete or stream.tests.needs_base(kind) for kind in KINDS}
        drawn = self._draw(stream, wanted, complete)
        base_view = runs.base_view()
        base_name = runs.base_name
        requests = [
            RunRequest(p.task_id, base_name, base_view, seed, p.origin)
            for p, seed, _ in drawn
            if (p.key, seed) not in runs.base_results and base_needed.get(p.kind, True)
        ]
        requests += [
            RunRequest(p.task_id, stream.name, stream.view, seed, p.origin)
            for p, seed, completed in drawn
            if not completed
        ]
        results = runs.run_requests(requests, purpose)
        for request, run in zip(requests, results, strict=True):
            if request.memory == base_name:
                runs.base_results[(run.task_key, run.seed)] = run
            else:
                stream.results[(run.task_key, run.seed)] = run
        pairs = []
        for probe, seed, completed in drawn:
            key = (probe.key, seed)
            stream.kinds[key] = probe
            without, with_lesson = runs.base_results.get(key), stream.results[key]
            if with_lesson.success is None or (without is not None and without.success is None):
                stream.errors += 1
                continue
            if probe.kind == "falsify" and without is None:
                stream.singles.append(key)
            insights = cited_insights(with_lesson)
            cited = None if insights is None else stream.ident in insights
            solved = None if without is None else without.success
            task = probe_task(probe)
            pairs.append(SeqPair(probe.kind, solved, with_lesson.success, cited, task, completed))
        return pairs


class SequentialRule:
    """Owns the decisions under `sequential`: each lesson's stream (the narrowed lesson's, once
    narrowed), the decision's figures, probes and reason as a stream stands, narrowing onto
    held-out probes, and e-BH across the call's lessons."""

    def __init__(
        self,
        options: GateOptions,
        thresholds: Thresholds,
        rates: Rates,
        runs: GateRuns,
        chooser: ProbeChooser,
        narrower: Narrower,
    ) -> None:
        self.options = options
        self.thresholds = thresholds
        self.rates = rates
        self.runs = runs
        self.chooser = chooser
        self.narrower = narrower
        schedule = Schedule(per_round=options.per_round, max_runs=options.max_runs)
        self.rounds = Rounds(options, schedule.through_noise(rates.flip_rate), runs)
        self.lessons = 1
        """The lessons this call tests (e-BH may ask each for up to lessons / alpha evidence)."""
        self.streams: dict[str, Stream] = {}
        """Candidate -> its last sequential stream (the narrowed lesson's, once narrowed),
        kept to go on (e-BH)."""

    def decide(self, candidate: Candidate, ident: str) -> GateDecision:
        """Probe pairs in rounds until the anytime-valid tests decide (control.sequential)."""
        runs = self.runs
        probes = self.chooser.first_probes(candidate)
        view = runs.view(candidate.ident, hidden=runs.hidden - {candidate.ident})
        stream = Stream(
            name=f"{runs.base.name}+{candidate.ident}",
            view=view,
            probes=by_kind(probes),
            tests=Sequential(self.rates, citations=self.options.p_fail == "citations"),
            rng=random.Random(f"{self.options.seed}:{candidate.ident}"),
            ident=candidate.ident,
            base=runs.base_results,
        )
        self.streams[candidate.ident] = stream
        decision = GateDecision(
            id=ident,
            insight=candidate.ident,
            tested_on=runs.base.name,
            time=now(),
            verdict="rejected",
            reason="",
            confidence=1 - self.options.alpha,
            thresholds=self._thresholds(),
            precondition=candidate.precondition,
            evidence=f"{ident}.runs.jsonl",
        )
        outcome = self.rounds.go_on(stream, ident, self.budget())
        decision.verdict = "committed" if outcome == "committed" else "rejected"
        self._settle(decision, stream)
        if decision.verdict == "rejected" and self.options.narrow:
            self.rounds.look(stream, ident)
            self._settle(decision, stream)
            assert decision.figures is not None
            if separable(stream.figure_pairs(), decision.figures, self.thresholds):
                self._narrow(candidate, decision, stream)
            else:
                decision.reason += "; " + why_not_narrowed(
                    decision.figures, self.thresholds, narrow=True
                )
        elif decision.verdict == "rejected":
            decision.reason += "; narrowing is off (--no-narrow)"
        undecided_on_errors(decision, self.streams[candidate.ident].errors)
        decision.agent_runs = len(runs.runs_of(decision))
        return decision

    def budget(self) -> Schedule:
        """Each lesson's budget in this call: what reaching the most evidence e-BH may ask of
        it (lessons / alpha) takes, `Schedule.for_evidence`; --max-runs for a lesson alone."""
        return self.rounds.schedule.for_evidence(1 / self.lessons, self.rates.alpha)

    def _thresholds(self) -> dict[str, float]:
        o = self.options
        found = {"eta": o.eta, "delta": o.delta, "beta": o.beta}
        found.update(alpha=o.alpha, alpha_miss=o.alpha_miss, max_runs=float(o.max_runs))
        if o.flip_rate:
            found["flip_rate"] = o.flip_rate
        return found

    def _settle(self, decision: GateDecision, stream: Stream, *, narrowed: bool = False) -> None:
        """The decision's figures, probes and reason from the stream as it stands."""
        runs = self.runs
        tests = stream.tests
        probes = [p for kind in stream.probes.values() for p in kind]
        cited = runs.cited(stream.ident, stream.results)
        figures = gate_figures(probes, stream.figure_pairs(), self.thresholds, cited)
        figures = figures.model_copy(
            update={
                "passes": tests.verdict() == "committed",
                "runs": stream.runs,
                "tests": {
                    "help": round(tests.help.wealth, 6),
                    "damage": round(min(t.wealth for t in tests.damage.values()), 6),
                    "damage_falsify": round(tests.damage["falsify"].wealth, 6),
                    "damage_regress": round(tests.damage["regress"].wealth, 6),
                    "failure": round(tests.failure.wealth, 6),
                    "needed": round(1 / (self.rates.alpha * tests.scale), 6),
                },
            }
        )
        keys = sorted(stream.kinds, key=by_task_seed)
        results = [
            ProbeResult(
                task_id=p.task_id,
                origin=p.origin,
                kind=p.kind,
                why=p.why,
                base_runs=[
                    runs.base_results[k].id
                    for k in keys
                    if k[0] == p.key and k in runs.base_results
                ],
                lesson_runs=[stream.results[k].id for k in keys if k[0] == p.key],
            )
            for p in dict.fromkeys(stream.kinds.values())
        ]
        seeds = sorted({seed for _, seed in stream.kinds})
        if figures.passes:
            words = "It passed: "
        else:
            words = f"{'Still rejected' if narrowed else 'Rejected'} ({tests.reason}): "
        text = f"{words}{summary(figures, self.thresholds)}; tests read {tasks_text(tests)}"
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

    def _narrow(self, candidate: Candidate, decision: GateDecision, stream: Stream) -> None:
        if self.narrower.asker is None:
            decision.reason += (
                "; it could be narrowed (it helped and hurt on separate tasks) but there is no "
                "model to do it (an offline corpus)"
            )
            return
        seen = list(dict.fromkeys(p.key for p in stream.kinds.values()))
        try:
            precondition, narrowed, view = self.narrower.narrow(
                candidate, seen, stream.figure_pairs()
            )
        except (ValueError, CorpusError) as error:
            decision.reason += f"; narrowing failed: {error}"
            return
        probes = self.chooser.choose(
            Candidate(candidate.ident, narrowed, candidate.guideline, candidate.alike),
            held_out=True,
        )
        # Its own share of alpha: a lesson that fails, is narrowed and is tested again gets
        # two chances to pass, so the second test asks for four times the evidence.
        second = Stream(
            name=f"{self.runs.base.name}+{candidate.ident}-narrowed",
            view=view,
            probes=by_kind(probes),
            tests=Sequential(
                self.rates, citations=self.options.p_fail == "citations", scale=NARROWED_SHARE
            ),
            rng=random.Random(f"{self.options.seed}:{candidate.ident}:narrowed"),
            ident=candidate.ident,
            base=self.runs.base_results,
            narrowed=True,
        )
        self.streams[candidate.ident] = second
        decision.narrowed_precondition = precondition
        outcome = self.rounds.go_on(second, decision.id, self.budget()) if probes else "rejected"
        if not probes:
            second.tests.reason = "no held-out probe task"
        self._settle(decision, second, narrowed=True)
        if outcome == "committed":
            decision.verdict = "committed"
            decision.reason = "Narrowed, then committed. First test: " + decision.reason

    def multiplicity(self, decisions: Sequence[GateDecision]) -> None:
        """Across one call's lessons: commit only a set e-BH admits (`together`), so that the
        expected share of harmful or not-helping lessons among those committed is at most
        alpha. A committed lesson e-BH does not admit yet goes on, its tests asking for m /
        (alpha k) evidence (k the lessons committed, m those tested) with the larger budget
        `Schedule.for_evidence` gives, until it reaches it or is rejected."""
        streams = [self.streams.get(d.insight) for d in decisions]
        committed = [d.verdict == "committed" for d in decisions]

        def go_on(i: int) -> bool:
            stream, decision = streams[i], decisions[i]
            assert stream is not None
            budget = self.budget()
            outcome = self.rounds.go_on(stream, decision.id, budget)
            if outcome != "committed":
                decision.verdict = "rejected"
                self.narrower.narrowed.pop(decision.insight, None)
            note = (
                f". With {len(decisions)} lessons in this call, e-BH asked it for evidence "
                f"{1 / (self.rates.alpha * stream.tests.scale):.3g} within {budget.max_runs} "
                "agent runs"
                + (": reached." if outcome == "committed" else ": not reached, rejected.")
            )
            self._settle(decision, stream, narrowed=stream.narrowed)
            decision.reason += note
            decision.agent_runs = len(self.runs.runs_of(decision))
            return outcome == "committed"

        together([s.tests if s else None for s in streams], committed, go_on, self.rates.alpha)
