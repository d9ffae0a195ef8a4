"""The gate's `bounds` and `estimates` rules: a fixed set of probes per lesson, figures decide."""

from __future__ import annotations

from collections.abc import Sequence

from wikitrace.corpus_schema import CorpusError
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.ledger import GateDecision, ProbeResult
from wikitrace.corpus_schema.tasks import TaskKey

from .figures import Thresholds, gate_figures, separable, summary, why_not_narrowed
from .gate_inputs import Candidate, GateOptions
from .gate_narrowing import Narrower
from .gate_probes import ProbeChooser
from .gate_runs import GateRuns, Results, undecided_on_errors
from .probes import Probe


class FixedProbeRule:
    """Owns the decisions under `bounds` and `estimates`: each lesson's probes, chosen once, run
    without and with it, and its figures deciding; a lesson that fails but could be narrowed is
    narrowed once and tested again on probes chosen anew, on fresh seeds."""

    def __init__(
        self,
        options: GateOptions,
        thresholds: Thresholds,
        runs: GateRuns,
        chooser: ProbeChooser,
        narrower: Narrower,
    ) -> None:
        self.options = options
        self.thresholds = thresholds
        self.runs = runs
        self.chooser = chooser
        self.narrower = narrower

    def decide(self, candidate: Candidate, ident: str) -> GateDecision:
        options, runs = self.options, self.runs
        probes = self.chooser.first_probes(candidate)
        tasks = list(dict.fromkeys(p.key for p in probes))
        tested_on = runs.base.name
        runs.run_base(tasks, ident)
        with_view = runs.view(candidate.ident, hidden=runs.hidden - {candidate.ident})
        lesson = runs.run(f"{tested_on}+{candidate.ident}", with_view, tasks, ident)
        figures = gate_figures(
            probes, runs.pairs(probes, lesson), self.thresholds, runs.cited(candidate.ident, lesson)
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
            seeds=runs.seeds(),
            evidence=f"{ident}.runs.jsonl",
        )
        retest: tuple[list[Probe], Results] = ([], {})
        if figures.passes:
            decision.verdict = "committed"
            decision.reason = "It passed: " + summary(figures, self.thresholds)
        elif options.narrow and separable(runs.pairs(probes, lesson), figures, self.thresholds):
            retest = self._narrow(candidate, decision, probes, tasks, lesson)
        else:
            decision.reason = (
                "Rejected: "
                + summary(figures, self.thresholds)
                + "; "
                + why_not_narrowed(figures, self.thresholds, narrow=options.narrow)
            )
        last = decision.narrowed_figures or decision.figures
        undecided_on_errors(decision, last.errors if last is not None else 0)
        self._record_probes(decision, probes, lesson, retest)
        decision.agent_runs = len(runs.runs_of(decision))
        return decision

    def _record_probes(
        self,
        decision: GateDecision,
        probes: Sequence[Probe],
        lesson: Results,
        retest: tuple[list[Probe], Results],
    ) -> None:
        """Each probe and the ids of its runs, without and with the lesson (and the narrowed
        lesson's, when it was narrowed)."""
        runs = self.runs
        decision.probes = [
            ProbeResult(
                task_id=p.task_id,
                origin=p.origin,
                kind=p.kind,
                why=p.why,
                base_runs=runs.ids(runs.base_results, p.key),
                lesson_runs=runs.ids(lesson, p.key),
            )
            for p in probes
        ]
        if decision.narrowed_precondition:
            fresh_probes, results = retest
            decision.narrowed_seeds = runs.seeds(fresh=True)
            decision.narrowed_probes = [
                ProbeResult(
                    task_id=p.task_id,
                    origin=p.origin,
                    kind=p.kind,
                    why=p.why,
                    base_runs=runs.ids(runs.base_results, p.key, fresh=True),
                    lesson_runs=runs.ids(results, p.key, fresh=True),
                )
                for p in fresh_probes
            ]

    def _narrow(
        self,
        candidate: Candidate,
        decision: GateDecision,
        probes: Sequence[Probe],
        tasks: list[TaskKey],
        lesson: Results,
    ) -> tuple[list[Probe], Results]:
        """Narrow the lesson and test it again; the re-test's probes and runs with the narrowed
        lesson (none when it could not be narrowed). The decision says what came of it."""
        runs = self.runs
        first = decision.figures
        assert first is not None
        if self.narrower.asker is None:
            decision.reason = (
                "Rejected: "
                + summary(first, self.thresholds)
                + "; it could be narrowed (it helped "
                "and hurt on separate tasks) but there is no model to do it (an offline corpus)"
            )
            return [], {}
        try:
            precondition, narrowed, view = self.narrower.narrow(
                candidate, tasks, runs.pairs(probes, lesson)
            )
        except (ValueError, CorpusError) as error:
            decision.reason = (
                "Rejected: " + summary(first, self.thresholds) + f"; narrowing failed: {error}"
            )
            return [], {}
        # Not on the runs that shaped it: probes chosen anew for the narrowed precondition (or
        # the given ones), every one run again, without and with it, on fresh seeds.
        fresh_probes = self.chooser.choose(
            Candidate(candidate.ident, narrowed, candidate.guideline, candidate.alike)
        )
        fresh_tasks = list(dict.fromkeys(p.key for p in fresh_probes))
        runs.run_base(fresh_tasks, decision.id, fresh=True)
        results = runs.run(
            f"{runs.base.name}+{candidate.ident}-narrowed",
            view,
            fresh_tasks,
            decision.id,
            fresh=True,
        )
        second = gate_figures(
            fresh_probes,
            runs.pairs(fresh_probes, results, fresh=True),
            self.thresholds,
            runs.cited(candidate.ident, results),
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
        return fresh_probes, results
