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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from wikitrace.compiler.ask import Asker
from wikitrace.compiler.supersede import PairJudge, Superseding, review_new_lessons
from wikitrace.corpus_schema import InputError, manifest
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.layout import GATE_DIR, decision_id
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.records import READ_ONLY, InsightHeader
from wikitrace.corpus_schema.writing import remove_tree
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
)
from wikitrace.versions.store import left_unrecorded, record_left

from .figures import Thresholds
from .gate_fixed import FixedProbeRule
from .gate_inputs import Candidate, GateOptions, RunProgress
from .gate_narrowing import Narrower
from .gate_probes import ProbeChooser
from .gate_runs import GateRuns
from .gate_sequential import SequentialRule
from .gate_together import TogetherTest
from .sequential import Rates

__all__ = ["GateReport", "gate_insights", "refuse_unshown"]

log = logging.getLogger(__name__)


@dataclass
class GateReport:
    decisions: list[GateDecision] = field(default_factory=list)
    tested_on: str | None = None
    version: str | None = None
    """The version holding the decisions."""
    agent_runs: int = 0


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
        if isinstance(gate.rule, SequentialRule):
            gate.rule.lessons = len(candidates)
        try:
            for candidate in candidates:
                decision = gate.decide(candidate)
                refuse_unshown(candidate.header, decision)
                report.decisions.append(decision)
            if isinstance(gate.rule, SequentialRule):
                gate.rule.multiplicity(report.decisions)
            gate.together.run(candidates, report.decisions)
        finally:
            remove_tree(gate.runs.views)
            with contextlib.suppress(OSError):
                gate.runs.views.parent.rmdir()  # probes/, when no other gate is using it
        report.agent_runs = gate.runs.agent_runs
        change = _change(gate, report, candidates)
        report.version = derive_version(store, base, change, deploy=deploy)
        return report


def _change(gate: _Gate, report: GateReport, candidates: Sequence[Candidate]) -> Derivation:
    """The new version's change: every decision, with the header it is recorded with (the
    narrowed one, when a narrowed lesson is committed) and the runs behind it; near-duplicates
    take their lesson's decision, but those of a lesson committed narrowed are superseded by
    it: they are the same lesson with the broad precondition the gate cut, and shown
    committed they would carry it back into the first message."""
    change = Derivation(
        reason="gate: " + ", ".join(f"{d.insight} {d.verdict}" for d in report.decisions),
        report={
            "gate": [d.id for d in report.decisions],
            "agent_runs": gate.runs.agent_runs,
            "tested_on": report.tested_on,
        },
        prompts=dict(gate.asker.used) if gate.asker else {},
    )
    narrowed = gate.narrower.narrowed
    for decision, candidate in zip(report.decisions, candidates, strict=True):
        header = candidate.header
        superseding = decision.verdict == "committed" and candidate.ident in narrowed
        if superseding:
            header = narrowed[candidate.ident]
            if candidate.alike:
                header = header.model_copy(
                    update={"supersedes": [*header.supersedes, *candidate.alike]}
                )
                decision.reason += (
                    f" Its near-duplicates ({', '.join(candidate.alike)}) keep the broad "
                    "precondition: they are retired, superseded by it."
                )
        superseded = (
            gate.superseded(candidate, candidates) if decision.verdict == "committed" else []
        )
        if superseded:
            header = header.model_copy(
                update={"supersedes": [*header.supersedes, *(s.flag.older for s in superseded)]}
            )
            decision.reason += (
                " It supersedes "
                + "; ".join(
                    f"{item.flag.older} (it {item.relation} it: {item.reason})"
                    for item in superseded
                )
                + ": retired, superseded by it."
            )
        runs = gate.runs.runs_of(decision)
        evidence = b"".join(orjson.dumps(run.model_dump(mode="json")) + b"\n" for run in runs)
        change.record(decision, header, candidate.guideline, evidence)
        for item in superseded:
            page = gate.pages[item.flag.older]
            change.follow(
                decision.model_copy(update={"verdict": "retired"}),
                page.header.model_copy(update={"superseded_by": candidate.ident}),
                corpus_read.guideline(page),
            )
        for ident in candidate.alike:
            page = gate.pages[ident]
            followed, alike_header = decision, page.header
            if superseding:
                followed = decision.model_copy(update={"verdict": "retired"})
                alike_header = alike_header.model_copy(update={"superseded_by": candidate.ident})
            change.follow(followed, alike_header, corpus_read.guideline(page))
    return change


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
    """One gate call: its collaborators (the runs, the probe chooser, the narrower, the rule
    that decides, the together test), the candidates it tests, and each decision's number."""

    def __init__(
        self,
        store: Store,
        base: FrozenVersion,
        options: GateOptions,
        llm: LLM | None,
        progress: RunProgress | None,
    ) -> None:
        self.base = base
        self.options = options
        thresholds = Thresholds(
            options.eta, options.delta, options.beta, options.confidence, options.rule
        )
        rates = Rates(
            eta=options.eta,
            delta=options.delta,
            beta=options.beta,
            alpha=options.alpha,
            alpha_miss=options.alpha_miss,
            flip_rate=options.flip_rate,
        )
        self.asker = None if llm is None else Asker(llm, options.prompts_dir)
        self.pages = dict(base.insights.items())  # read once: the gate looks at them often
        self.number = count_decisions(base) + 1
        self.runs = GateRuns(store, base, options, progress, self.number)
        sequential = options.rule == "sequential"
        self.chooser = ProbeChooser(
            base,
            options,
            split=sequential and options.narrow and llm is not None and not options.given,
        )
        self.narrower = Narrower(self.asker, self.chooser.pool, self.runs)
        self.rule: SequentialRule | FixedProbeRule = (
            SequentialRule(options, thresholds, rates, self.runs, self.chooser, self.narrower)
            if sequential
            else FixedProbeRule(options, thresholds, self.runs, self.chooser, self.narrower)
        )
        self.together = TogetherTest(thresholds, self.runs, self.narrower.narrowed)

    def candidates(self, ids: Sequence[str]) -> list[Candidate]:
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
        self.runs.hidden = {i for i, p in self.pages.items() if p.header.status != "committed"}
        return [
            Candidate(
                i,
                self.pages[i].header,
                corpus_read.guideline(self.pages[i]),
                alike=alike.get(i, []),
            )
            for i in chosen
        ]

    def superseded(self, candidate: Candidate, deciding: Sequence[Candidate]) -> list[Superseding]:
        """The lessons agents are shown, of the candidate's scope, that it contradicts or
        narrows (compiler/supersede.py): judged by the model when the gate has one, else as
        the mechanical filter finds them likely; once the candidate is committed they are
        retired, superseded by it. The lessons this call decides are left alone."""
        judge = None if self.asker is None else PairJudge(self.asker)
        leave = {ident for c in deciding for ident in (c.ident, *c.alike)}
        review = review_new_lessons(
            self.base, [candidate.ident], judge, leave=leave, filter_decides=True
        )
        return review.superseded

    def decide(self, candidate: Candidate) -> GateDecision:
        ident = decision_id("gate", self.number)
        self.number += 1
        return self.rule.decide(candidate, ident)


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
