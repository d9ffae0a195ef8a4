"""`wikitrace lift attribute`: why memory broke what the agent could do without it.

A Regression episode is a trial of a memory method that failed on a task the no-memory
baseline solved in every trial. For each (its row names its log, `trajectory`, and may carry the
agent's citation report, `used`), one cached model call reads the episode as a compile prompt
shows it, with the memory entries the agent reported using and the other insights it was shown,
and classifies the cause as the method's attribution does:

- A: the memory entry it followed was wrong;
- B: a sound entry applied outside its applicability;
- C: an entry misread or misused;
- D: a better entry in memory was missed;
- E: no link to memory.

Quotes are checked like a compilation's (sent back once when none is found); an answer with no
quote found in the episode is kept out of the counts and listed with why.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from wikitrace import prompts
from wikitrace.compiler.compile import CompileError, QuoteOut, Templates, record_fence
from wikitrace.compiler.importers import AUTO, DEFAULT_THRESHOLD, plan_inputs
from wikitrace.compiler.importers.runs import SourceRun, Unlabelled, validate
from wikitrace.compiler.judge import ask_about_run
from wikitrace.corpus_schema import CorpusError, InputError, RunRecord
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.catalog import InsightEntry
from wikitrace.corpus_schema.drilldown import as_text
from wikitrace.corpus_schema.setting_fields import default
from wikitrace.transport.llm import LLM, LLMCallError

from .rows import Row

Cause = Literal["A", "B", "C", "D", "E"]
CAUSES: dict[str, str] = {
    "A": "the memory entry it followed was wrong",
    "B": "a sound entry applied outside its applicability",
    "C": "an entry misread or misused",
    "D": "a better entry in memory was missed",
    "E": "no link to memory",
}
SHOWN_LIMIT = 30
"""At most this many other insights are listed to the judge (those the first message shows)."""
OUTPUT_TOKENS = 1024
PROMPT_TOKENS = 24_000
"""What a judge's prompt may hold of an episode (long ones are shown as compile prompts are)."""
AnswerT = TypeVar("AnswerT", bound=BaseModel)
ShownInsights = Callable[[str], list[InsightEntry]]
"""A task -> the insights the corpus's first message for it lists, with no budget
(tools/memory.py, `insights_shown`)."""


class AttributionAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cause: Cause
    entry: str | None = None
    reason: str = Field(min_length=1)
    evidence: list[QuoteOut] = Field(min_length=1)


@dataclass
class Attributed:
    """One Regression episode and what the judge found."""

    suite: str
    method: str
    task_id: str
    trial: int
    where: str
    cause: Cause | None = None
    entry: str | None = None
    reason: str = ""
    evidence: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None
    """Why it is not counted: no log, a log that cannot be read, no usable answer."""


@dataclass
class Agreement:
    """How far a second judge agrees with the first on the episodes both counted: the share
    of equal labels and Cohen's kappa (agreement beyond what the two judges' label rates give
    by chance: 1 full, 0 chance, below 0 worse than chance), as the method checks its judge."""

    model: str
    episodes: int
    agreed: int
    kappa: float | None
    """None when it is undefined (fewer than 2 episodes, or both judges gave one label alone)."""
    second: list[Attributed]
    """The second judge's answers, episode by episode (the report's order)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "episodes": self.episodes,
            "agreed": self.agreed,
            "kappa": self.kappa,
            "second": [vars(item) for item in self.second],
        }


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two raters' labels of the same items; None when undefined."""
    if len(first) != len(second):
        raise ValueError("two raters must label the same items")
    n = len(first)
    if n < 2:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    labels = set(first) | set(second)
    expected = sum((first.count(label) / n) * (second.count(label) / n) for label in labels)
    if expected >= 1.0:
        return None
    return round((observed - expected) / (1.0 - expected), 6)


def agreement(model: str, first: Sequence[Attributed], second: list[Attributed]) -> Agreement:
    """Compare two judges' causes, episode by episode, where both gave one."""
    both = [
        (a.cause, b.cause)
        for a, b in zip(first, second, strict=True)
        if a.cause is not None and b.cause is not None
    ]
    ones = [str(a) for a, _ in both]
    twos = [str(b) for _, b in both]
    return Agreement(
        model=model,
        episodes=len(both),
        agreed=sum(a == b for a, b in both),
        kappa=cohen_kappa(ones, twos),
        second=second,
    )


@dataclass
class AttributionReport:
    episodes: list[Attributed] = field(default_factory=list)
    regressions: int = 0
    agreement: Agreement | None = None
    """A second judge's agreement, when one was asked."""

    @property
    def counts(self) -> dict[str, list[str]]:
        """Cause -> the episodes behind it (`suite/method/task#trial`)."""
        found: dict[str, list[str]] = {cause: [] for cause in CAUSES}
        for item in self.episodes:
            if item.cause is not None:
                found[item.cause].append(f"{item.suite}/{item.method}/{item.task_id}#{item.trial}")
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "regressions": self.regressions,
            "counts": {cause: len(items) for cause, items in self.counts.items()},
            "by_cause": self.counts,
            "episodes": [vars(item) for item in self.episodes],
            "second_judge": self.agreement.as_dict() if self.agreement else None,
        }


def regression_rows(rows: list[Row], baseline: str, rerun: str | None = None) -> list[Row]:
    """Failed trials of a memory method on tasks the baseline solved in every trial."""
    baseline_trials: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for item in rows:
        if item.row.method == baseline:
            baseline_trials[(item.row.suite, item.row.task_id)].append(item.row.succeeded())
    solved = {key for key, outcomes in baseline_trials.items() if outcomes and all(outcomes)}
    return [
        item
        for item in rows
        if item.row.method not in (baseline, rerun)
        and (item.row.suite, item.row.task_id) in solved
        and not item.row.succeeded()
    ]


@dataclass
class _EpisodeJudge:
    """A judge model asked one question about an episode's log, its quotes checked."""

    llm: LLM
    templates: Templates
    max_prompt_tokens: int = field(default=PROMPT_TOKENS, kw_only=True)
    retries: int = field(default=1, kw_only=True)

    def _read(self, item: Row, result: Attributed | DrillEpisode) -> RunRecord | None:
        """The episode's run; None (with result.problem) when its log cannot be read."""
        try:
            return read_episode(*_trajectory(item))
        except (InputError, CorpusError, OSError) as error:
            result.problem = f"its log cannot be read: {error}"
            return None

    def _ask(
        self,
        record: RunRecord,
        template: str,
        answer: type[AnswerT],
        shape: str,
        extra: dict[str, Any],
        result: Attributed | DrillEpisode,
    ) -> AnswerT | None:
        """The judge's answer, its quotes in result.evidence. None (with result.problem) when
        it gave no usable answer; the answer, with result.problem set, when none of its quotes
        was found in the episode."""
        try:
            given, evidence = ask_about_run(
                self.llm,
                self.templates,
                record,
                template,
                answer,
                max_prompt_tokens=self.max_prompt_tokens,
                retries=self.retries,
                shape=shape,
                extra=extra,
            )
        except (CompileError, LLMCallError) as error:
            if isinstance(error, LLMCallError) and error.fatal:
                raise
            result.problem = f"no usable answer: {error}"
            return None
        result.evidence = evidence
        if not any(quote["verified"] for quote in evidence):
            result.problem = "none of the judge's quotes was found in the episode"
        return given


@dataclass
class Attributor(_EpisodeJudge):
    corpus: Path
    shown: ShownInsights

    def __call__(self, item: Row) -> Attributed:
        row = item.row
        result = Attributed(row.suite, row.method, row.task_id, row.trial, item.where)
        if not row.trajectory:
            result.problem = "the row names no trajectory (the episode's log)"
            return result
        record = self._read(item, result)
        if record is None:
            return result
        cited, shown = self._memory(record, row.used or {})
        fence = record_fence(record)  # memory text must not close the run's data
        answer = self._ask(
            record,
            prompts.ATTRIBUTE,
            AttributionAnswer,
            '{"cause": ..., "entry": ..., "reason": ..., "evidence": [...]}',
            {
                "cited": [entry.replace(fence, "[fence]") for entry in cited],
                "shown": [entry.replace(fence, "[fence]") for entry in shown],
            },
            result,
        )
        if answer is None:
            return result
        result.reason = answer.reason
        if result.problem is None:
            result.cause, result.entry = answer.cause, answer.entry
        return result

    def _memory(self, record: RunRecord, used: dict[str, list[str]]) -> tuple[list[str], list[str]]:
        cited = []
        for ident in used.get("insights", []):
            try:
                page = corpus_read.insight(self.corpus, ident)
            except (CorpusError, InputError):
                cited.append(f"{ident}: (not in the corpus)")
                continue
            header = page.header
            cited.append(
                f"{header.id}: {header.title}. Guideline: {corpus_read.guideline(page)} "
                f"Applies when: {header.applicability} (from {header.source_step}, a "
                f"{header.source_outcome} run)"
            )
        cited += [f"compilation {ident}" for ident in used.get("compilations", [])]
        cited += [f"raw run {ident}" for ident in used.get("raw", [])]
        shown = [
            f"{entry.id}: {entry.title}. Applies when: {entry.applicability}"
            for entry in self.shown(record.task)
            if entry.id not in used.get("insights", [])
        ][:SHOWN_LIMIT]
        return cited, shown


def read_episode(path: Path, at: str | None = None) -> RunRecord:
    """The first run of an episode's log, in any format `wikitrace build` reads, or the run
    `at` a place in a log of many (a zip member, as a build names it). Its label, if any, is
    not used: the row says it failed."""
    plan = plan_inputs([path], AUTO, [], DEFAULT_THRESHOLD)
    for item in plan.items():
        if at is not None and getattr(item, "at", None) != at:
            continue
        if isinstance(item, SourceRun):
            return item.record
        if isinstance(item, Unlabelled):
            data = {**item.data, "success": False}
            return validate(data, item.path, line=item.line, at=item.at, format=item.format).record
        raise item
    raise InputError("no run in it" if at is None else f"no run at {at!r} in it", path=path)


def attribute(
    rows: list[Row],
    attributor: Attributor,
    baseline: str,
    rerun: str | None,
    *,
    second: tuple[str, Attributor] | None = None,
) -> AttributionReport:
    """Attribute every Regression episode of `rows`; with `second` (its model's name and an
    attributor asking it), a second judge labels them too and its agreement is reported."""
    episodes = regression_rows(rows, baseline, rerun)
    report = AttributionReport(regressions=len(episodes))
    for item in episodes:
        report.episodes.append(attributor(item))
    if second is not None:
        model, other = second
        report.agreement = agreement(model, report.episodes, [other(item) for item in episodes])
    return report


# --- drill-downs, labelled on the method's three axes -------------------------------------------

Trigger = Literal["blocked", "conflict", "missing_detail", "failed_source", "routine"]
Effect = Literal["revised", "detail", "new_fact", "none"]
DEFAULT_MOUNT: str = default("mount")


def mount_pattern(mount: str) -> re.Pattern[str]:
    """Matches a text that names the corpus's mount (the folder itself or a path under it)."""
    return re.compile(re.escape(mount.rstrip("/")) + r"""(?=$|[/\s"'`;|&)])""")


def find_drilldowns(record: RunRecord, mount: str = DEFAULT_MOUNT) -> list[dict[str, Any]]:
    """The turns whose actions read the corpus mounted at `mount`, and what each read: an
    insight page, a compilation, a raw run (its files or the drill-down tools), or a search."""
    names = mount_pattern(mount)
    found = []
    for number, turn in enumerate(record.turns, start=1):
        texts = [turn.action or ""]
        texts += [as_text(call.arguments) for call in turn.tool_calls or [] if call.arguments]
        text = "\n".join(texts)
        if not names.search(text):
            continue
        targets = []
        if "/insight/" in text:
            targets.append("insight page")
        if "/compilation/" in text:
            targets.append("compilation")
        if "/raw/" in text or "/tools/turn" in text or "/tools/actions" in text:
            targets.append("raw run")
        found.append({"turn": number, "target": ", ".join(targets) or "search"})
    return found


def fill_drilldowns(
    rows: list[Row], baseline: str, rerun: str | None, mount: str = DEFAULT_MOUNT
) -> list[str]:
    """Give each memory episode whose row says no `drilldowns` but names its log the number
    of turns that read the corpus at `mount` (`find_drilldowns`), so that Stay/Descent counts
    it. Returns why the logs that could not be read were not counted."""
    problems = []
    for item in rows:
        if item.row.method in (baseline, rerun) or item.row.drilldowns is not None:
            continue
        if not item.row.trajectory:
            continue
        try:
            record = read_episode(*_trajectory(item))
        except (InputError, CorpusError, OSError) as error:
            problems.append(f"{item.where}: its log cannot be read: {error}")
            continue
        item.row.drilldowns = len(find_drilldowns(record, mount))
    return problems


class DrillLabel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn: int
    trigger: Trigger
    effect: Effect


class DrillAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: list[DrillLabel]
    evidence: list[QuoteOut] = Field(min_length=1)


@dataclass
class DrillEpisode:
    suite: str
    method: str
    task_id: str
    trial: int
    where: str
    success: bool
    drilldowns: list[dict[str, Any]] = field(default_factory=list)
    """Each: turn, target, and the judge's trigger and effect (None where it gave none)."""
    evidence: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None


@dataclass
class DrillReport:
    episodes: list[DrillEpisode] = field(default_factory=list)

    def axes(self) -> dict[str, dict[str, dict[str, int]]]:
        """Axis (trigger, target, effect) -> label -> drill-downs and the successes among
        their episodes."""
        table: dict[str, dict[str, dict[str, int]]] = {"trigger": {}, "target": {}, "effect": {}}
        for episode in self.episodes:
            if episode.problem:
                continue
            for item in episode.drilldowns:
                for axis in table:
                    label = item.get(axis)
                    if label is None:
                        continue
                    cell = table[axis].setdefault(str(label), {"drilldowns": 0, "successes": 0})
                    cell["drilldowns"] += 1
                    cell["successes"] += episode.success
        return table

    def as_dict(self) -> dict[str, Any]:
        descended = [e for e in self.episodes if e.drilldowns and not e.problem]
        return {
            "episodes": len(self.episodes),
            "descended": len(descended),
            "drilldowns": sum(len(e.drilldowns) for e in descended),
            "axes": self.axes(),
            "per_episode": [vars(e) for e in self.episodes],
        }


@dataclass
class DrillLabeller(_EpisodeJudge):
    """One cached call per episode that drilled down: each drill-down's trigger and effect."""

    mount: str = DEFAULT_MOUNT

    def __call__(self, item: Row) -> DrillEpisode:
        row = item.row
        result = DrillEpisode(
            row.suite, row.method, row.task_id, row.trial, item.where, item.row.succeeded()
        )
        record = self._read(item, result)
        if record is None:
            return result
        found = find_drilldowns(record, self.mount)
        result.drilldowns = found
        if not found:
            return result  # it stayed at the first message: nothing to ask
        answer = self._ask(
            record,
            prompts.DRILLDOWNS,
            DrillAnswer,
            '{"labels": [...], "evidence": [...]}',
            {"mount": self.mount, "drilldowns": found},
            result,
        )
        if answer is None or result.problem is not None:
            return result
        labels = {label.turn: label for label in answer.labels}
        for drill in found:
            label = labels.get(drill["turn"])
            drill["trigger"] = label.trigger if label else None
            drill["effect"] = label.effect if label else None
        return result


def _trajectory(item: Row) -> tuple[Path, str | None]:
    """The episode's log, relative to the results file, and the place of its run in the log
    when the row names one (`run.eval#samples/3_epoch_1.json`)."""
    if not item.row.trajectory:
        raise InputError("the row names no trajectory (the episode's log)")
    name, _, at = item.row.trajectory.partition("#")
    path = Path(name)
    if not path.is_absolute():
        path = Path(item.where.rsplit(":", 1)[0]).parent / path
    return path, at or None


def label_drilldowns(
    rows: list[Row], labeller: DrillLabeller, baseline: str, rerun: str | None
) -> DrillReport:
    """Every episode of a memory method whose row names its log."""
    report = DrillReport()
    for item in rows:
        if item.row.method in (baseline, rerun) or not item.row.trajectory:
            continue
        report.episodes.append(labeller(item))
    return report
