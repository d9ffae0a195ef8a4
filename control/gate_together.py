"""The gate's test of lessons together: those one call committed, run side by side."""

from __future__ import annotations

from collections.abc import Sequence

from wikitrace.corpus_schema.ledger import GateDecision, TogetherCheck
from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.tasks import task_key

from .figures import Thresholds, gate_figures, together_passes
from .gate_inputs import Candidate
from .gate_runs import GateRuns, Results, by_task_seed
from .probes import Probe
from .runner import cited_insights


class TogetherTest:
    """Owns the test of the lessons one call committed, together: two lessons that each passed
    alone may break together what the agent solved. It runs the set on every probe task of
    theirs, records the check on each decision, and leaves out one lesson at a time (the one
    that most likely broke it) while the set fails."""

    def __init__(
        self, thresholds: Thresholds, runs: GateRuns, narrowed: dict[str, InsightHeader]
    ) -> None:
        """`narrowed`: candidate -> its narrowed header (the narrower's, shared)."""
        self.thresholds = thresholds
        self.runs = runs
        self.narrowed = narrowed

    def run(self, candidates: Sequence[Candidate], decisions: Sequence[GateDecision]) -> None:
        """Run the lessons this call committed side by side on every probe task of theirs: two
        lessons that each passed alone may break together what the agent solved (D_reg over
        the pairs solved without them). While the set fails, the lesson that most likely broke
        it is rejected (`_breaker`: the one the agent cited most in the pairs the set broke,
        else the one whose own test showed the most regression damage; of lessons tied, the
        later) and the rest are tested again."""
        runs = self.runs
        committed = [
            (d, c) for d, c in zip(decisions, candidates, strict=True) if d.verdict == "committed"
        ]
        while len(committed) > 1:
            tasks = list(
                dict.fromkeys(task_key(p.origin, p.task_id) for d, _ in committed for p in d.probes)
            )
            if not tasks:
                return
            ids = [c.ident for _, c in committed]
            replaced = {
                c.ident: (self.narrowed[c.ident], c.guideline)
                for _, c in committed
                if c.ident in self.narrowed
            }
            view = runs.view(
                "together-" + "-".join(ids), hidden=runs.hidden - set(ids), replaced=replaced
            )
            purpose = committed[-1][0].id
            runs.run_base(tasks, purpose)
            results = runs.run(f"{runs.base.name}+" + "+".join(ids), view, tasks, purpose)
            probes = [Probe(t.id, "regress", "", t.origin) for t in tasks]
            figures = gate_figures(probes, runs.pairs(probes, results), self.thresholds)
            passes = together_passes(figures, self.thresholds)
            check = TogetherCheck(
                insights=ids,
                figures=figures,
                passes=passes,
                runs=[results[key].id for key in sorted(results, key=by_task_seed)],
            )
            for decision, _ in committed:
                decision.together.append(check)
                decision.agent_runs = len(runs.runs_of(decision))
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
        self, committed: Sequence[tuple[GateDecision, Candidate]], results: Results
    ) -> tuple[int, str]:
        """Which lesson of a set that broke solved pairs to leave out: the one the agent cited
        most in the pairs the set broke, when its runs report citations; else the one whose
        own test showed the most regression damage. Of lessons tied, the later one."""
        broken = [
            run
            for key, run in results.items()
            if (base := self.runs.base_results.get(key)) is not None
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
