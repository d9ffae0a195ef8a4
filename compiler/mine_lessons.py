"""Mined findings as lessons (compiler/mine.py): the insight header of a contrast or a
divergence, its title and guideline in words, and the quotes it cites, read back from the
written runs and checked."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, overload

import orjson

from wikitrace.corpus_schema import Claim, Evidence, Layout, Turn
from wikitrace.corpus_schema.records import InsightHeader, MinedFinding, Outcome
from wikitrace.corpus_schema.render import shortened
from wikitrace.corpus_schema.tasks import TaskKey

from .evidence import QuoteChecker
from .mine_contrast import Contrast, _overlap, _tasks
from .mine_divergence import Divergence, divergence_key
from .mine_patterns import Action, actions_of, describe, turn_actions
from .mine_table import RunPatterns, task_of

MINED_MODEL = "mined"
"""The `model` field of a mined lesson: no model drew it."""
EVIDENCE_RUNS = 4
"""How many runs a lesson quotes: its source run and up to three more."""


def typical(runs: Sequence[RunPatterns], limit: int = 200) -> list[RunPatterns]:
    """`runs` most typical first: by how much their patterns overlap the others' (mean Jaccard
    over at most `limit` of them), ties by step."""
    sample = list(runs[:limit])
    sets = [set(run.patterns) for run in sample]

    def score(i: int) -> float:
        return sum(_overlap(sets[i], sets[j]) for j in range(len(sets)) if j != i)

    order = sorted(range(len(sample)), key=lambda i: (-score(i), sample[i].step))
    return [sample[i] for i in order] + list(runs[limit:])


def _distinct_tasks(runs: Sequence[RunPatterns], count: int) -> list[RunPatterns]:
    """Up to `count` of `runs` in order, one per task first."""
    chosen: list[RunPatterns] = []
    tasks: set[TaskKey] = set()
    for run in runs:
        if task_of(run) not in tasks:
            tasks.add(task_of(run))
            chosen.append(run)
        if len(chosen) == count:
            return chosen
    rest = [run for run in runs if run not in chosen]
    return chosen + rest[: count - len(chosen)]


def _compared_tasks(contrast: Contrast) -> set[TaskKey]:
    """The tasks a contrast compared runs within: runs with and without the pattern, runs of
    both outcomes."""
    with_it = {task_of(run) for run in contrast.present}
    without = {task_of(run) for run in contrast.absent}
    outcomes: dict[TaskKey, set[bool]] = {}
    for run in [*contrast.present, *contrast.absent]:
        outcomes.setdefault(task_of(run), set()).add(run.success)
    return {task for task in with_it & without if len(outcomes[task]) == 2}


# --- lessons -----------------------------------------------------------------------------------


def _rate(failed: int, total: int) -> str:
    return f"{failed} of {total}"


@dataclass
class MinedLesson:
    """A mined lesson before it is numbered: the header less its id, and its guideline."""

    header: InsightHeader
    guideline: str
    key: str
    """What identifies it across versions: task type and pattern, or task for a divergence."""


class Quotes:
    """Turns of written runs, read when a lesson cites them: `runs_root(step)` says where.
    The last few runs read are kept, with their actions. A run whose actions' places are
    known (`know`: mine_patterns.action_places) has only the turns asked for read."""

    KEPT = 32
    """Runs kept read: lessons cite few runs each."""

    def __init__(self, layout_of: Any) -> None:
        self._layout_of = layout_of
        self._turns: dict[int, list[Turn]] = {}
        self._actions: dict[int, list[Action]] = {}
        self._places: dict[int, Sequence[int]] = {}
        self._lines: dict[int, list[bytes]] = {}
        """Runs whose places are known: their turn logs' lines, each parsed when asked."""
        self._read_turns: dict[tuple[int, int], tuple[Turn, list[Action]]] = {}
        """(step, number) -> a turn of a run whose places are known, and its actions."""

    def know(self, step: int, places: Sequence[int]) -> None:
        """The places of run `step`'s actions, as the build kept them (mine_table.ActionHashes):
        `actions(step)` and `evidence` read only the turns asked for."""
        self._places[step] = places

    def turns(self, step: int) -> list[Turn]:
        if step not in self._turns:
            self._turns[step] = [
                Turn.model_validate(orjson.loads(line)) for line in self._read(step)
            ]
            if len(self._turns) > self.KEPT:
                gone = next(iter(self._turns))
                del self._turns[gone]
                self._actions.pop(gone, None)
        return self._turns[step]

    def _read(self, step: int) -> list[bytes]:
        """The lines of a run's turn log (line N is turn N)."""
        layout: Layout = self._layout_of(step)
        return (layout.root / layout.raw_turns_rel(step)).read_bytes().splitlines()

    def _turn(self, step: int, number: int) -> tuple[Turn, list[Action]]:
        """Turn `number` of run `step`, whose places are known, and its actions: made from its
        line alone."""
        known = self._read_turns.get((step, number))
        if known is None:
            if step not in self._lines:
                self._lines[step] = self._read(step)
                if len(self._lines) > self.KEPT:
                    del self._lines[next(iter(self._lines))]
            turn = Turn.model_validate(orjson.loads(self._lines[step][number - 1]))
            failed = all(place & 1 for place in self._places[step] if place >> 1 == number)
            known = (turn, turn_actions(number, turn, failed))
            if len(self._read_turns) >= 4 * self.KEPT:
                self._read_turns.clear()
            self._read_turns[step, number] = known
        return known

    def _turn_actions(self, step: int, number: int) -> list[Action]:
        """The actions of turn `number` of run `step`, whose places are known (none, and the
        turn not read, when no action is at that turn)."""
        if not any(place >> 1 == number for place in self._places[step]):
            return []
        return self._turn(step, number)[1]

    def actions(self, step: int) -> Sequence[Action]:
        places = self._places.get(step)
        if places is not None:
            return _ActionsAt(self, step, places)
        turns = self.turns(step)
        if step not in self._actions:
            self._actions[step] = actions_of(turns)
        return self._actions[step]

    def evidence(self, step: int, turn: int, step_id: str) -> Evidence:
        """The action at `turn` of run `step`, quoted verbatim and checked."""
        if step in self._places:
            actions: Sequence[Action] = self._turn_actions(step, turn)
        else:
            # The run's actions, found once (an action's quote is its turn's alone).
            actions = [a for a in self.actions(step) if a.turn == turn]
        chosen = next((a for a in actions if a.quote), None)
        quote = chosen.quote if chosen is not None else ""
        return Evidence(
            turn=turn,
            quote=quote,
            verified=bool(quote) and self._holds(step, turn, quote),
            step=step_id,
        )

    def _holds(self, step: int, turn: int, quote: str) -> bool:
        """Whether turn `turn` of run `step` holds `quote` (QuoteChecker.found): a turn's
        quote is checked against that turn alone."""
        if step in self._places:
            return QuoteChecker([self._turn(step, turn)[0]]).found(1, quote)
        return QuoteChecker(self.turns(step)).found(turn, quote)


class _ActionsAt(Sequence[Action]):
    """A run's actions (`actions_of`) whose places are known: each made from its turn alone
    when asked for."""

    def __init__(self, quotes: Quotes, step: int, places: Sequence[int]) -> None:
        self._quotes = quotes
        self._step = step
        self._places = places

    def __len__(self) -> int:
        return len(self._places)

    @overload
    def __getitem__(self, index: int) -> Action: ...
    @overload
    def __getitem__(self, index: slice) -> list[Action]: ...
    def __getitem__(self, index: int | slice) -> Action | list[Action]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        index = range(len(self))[index]  # IndexError past either end
        turn = self._places[index] >> 1
        first = index
        while first and self._places[first - 1] >> 1 == turn:
            first -= 1
        return self._quotes._turn_actions(self._step, turn)[index - first]


class LessonWriter:
    """Mined findings as insight headers (corpus_schema renders the pages)."""

    def __init__(self, layout: Layout, quotes: Quotes) -> None:
        self.layout = layout
        self.quotes = quotes

    def _common(
        self, source: RunPatterns, title: str, applicability: str, finding: MinedFinding
    ) -> dict[str, Any]:
        return {
            "id": "",
            "title": title,
            "task_type": source.task_type,
            "source_step": self.layout.step(source.step),
            "source_outcome": _outcome(source.success),
            "source_judged": source.judged,
            "applicability": applicability,
            "source_claims": [],
            "model": MINED_MODEL,
            "compilation": self.layout.compilation_rel(source.step),
            "raw": self.layout.raw_dir_rel(source.step) + "/",
            "compiled_by": "mined",
            "mined": finding,
        }

    def contrast(self, contrast: Contrast, patterns_tried: int) -> MinedLesson:
        harmful = contrast.harmful
        words = describe(contrast.pattern)
        kind = contrast.task_type or "untyped"
        present, absent = len(contrast.present), len(contrast.absent)
        # Cited: runs that show the pattern and ended the way the lesson says it goes.
        compared = _compared_tasks(contrast)
        cited_pool = [
            run for run in contrast.present if run.success != harmful and task_of(run) in compared
        ] or [run for run in contrast.present if run.success != harmful]
        cited = _distinct_tasks(typical(cited_pool), EVIDENCE_RUNS)
        source = cited[0]
        within = contrast.within
        finding = MinedFinding(
            kind="contrast",
            pattern=contrast.pattern,
            description=words,
            with_pattern=[contrast.with_failed, present],
            without_pattern=[contrast.without_failed, absent],
            p_value=float(f"{contrast.p_value:.4g}"),
            q_value=float(f"{contrast.q_value:.4g}"),
            patterns_tried=patterns_tried,
            judged_runs=sum(run.judged for run in [*contrast.present, *contrast.absent]),
            tasks=_tasks(contrast.present),
            tasks_compared=within.tasks,
            within_with=list(within.with_pattern),
            within_without=list(within.without_pattern),
            expected_failed=float(f"{within.expected:.4g}"),
            tasks_split=[within.more, within.fewer],
            odds_ratio=_rounded(within.odds_ratio),
            runs=[self.layout.step(run.step) for run in cited],
        )
        numbers = f"runs that {words} {finding.counted()}"
        if contrast.pattern.startswith("order:"):
            numbers += " (among runs that called both)"
        if harmful:
            title = f"{kind} runs that {words} failed more often than others of their task"
            advice = (
                f"Be wary of this: {numbers}. If you are about to do it, check first whether "
                "it is what the task needs; the failed runs this lesson cites show where it "
                "went wrong."
            )
        else:
            title = f"{kind} runs that {words} succeeded more often than others of their task"
            advice = (
                f"Consider doing this: {numbers}. The successful runs this lesson cites show "
                "it done."
            )
        claims = [self._pattern_claim(run, contrast.pattern) for run in cited]
        header = InsightHeader(
            **self._common(
                source,
                title,
                f"{kind} tasks; a run that {words}",
                finding,
            ),
            evidence=claims,
        )
        return MinedLesson(header, advice, f"contrast {contrast.task_type} {contrast.pattern}")

    def _pattern_claim(self, run: RunPatterns, pattern: str) -> Claim:
        step_id = self.layout.step(run.step)
        outcome = "succeeded" if run.success else "failed"
        if pattern.startswith("order:"):
            first, second = pattern[6:].split("<", 1)
            turns = [run.patterns[f"uses:{first}"], run.patterns[f"uses:{second}"]]
        else:
            turns = [run.patterns[pattern]]
        # The pattern is the page's: each claim says which run (of which task) and turns, its
        # quotes the rest.
        return Claim(
            statement=f"{step_id} ({run.task}, {outcome}), turn "
            + " then turn ".join(str(t) for t in turns),
            evidence=[self.quotes.evidence(run.step, turn, step_id) for turn in turns],
        )

    def divergence(self, found: Divergence, task_text: Callable[[int], str]) -> MinedLesson:
        """The lesson of a divergence; `task_text(step)` gives a run's task."""
        win, loss = self.layout.step(found.success.step), self.layout.step(found.failure.step)

        def did(action: Action | None, last: Action | None) -> str:
            if action is not None:
                return gist(action)
            return "stopped there" if last is not None else "took no action at all"

        after = (
            f"after {found.shared} action{'s' if found.shared != 1 else ''} alike, "
            if found.shared
            else ""
        )
        title = (
            f"On {shortened(str(found.task), 60)}, {after}the successful run "
            f"{did(found.success_action, found.last_success)}; the failed one "
            f"{did(found.failure_action, found.last_failure)}"
        )
        guideline = (
            "When this task comes again, at the point where these two runs parted, weigh the "
            f"successful run's choice over the failed one's; read both from there ({win} "
            f"succeeded, {loss} failed) with the corpus's drill-down tool: actions {win}, "
            f"actions {loss}."
        )
        finding = MinedFinding(
            kind="divergence",
            pattern="diverge",
            description=f"where runs of {found.task} first took different actions",
            runs=[win, loss],
            task_outcomes=[found.runs - found.successes, found.runs],
            shared_actions=found.shared,
            task_id=found.task_id,
            task_origin=found.origin,
        )
        claims = []
        for run, action, last in (
            (found.success, found.success_action, found.last_success),
            (found.failure, found.failure_action, found.last_failure),
        ):
            shown = action or last
            step_id = self.layout.step(run.step)
            outcome = "succeeded" if run.success else "failed"
            if shown is None:
                claims.append(Claim(statement=f"{step_id} ({outcome}) took no action", evidence=[]))
                continue
            what = (
                "its first action unlike the other run's"
                if action is not None
                else "its last action: it stopped where the other went on"
            )
            claims.append(
                Claim(
                    statement=f"{step_id} ({outcome}), turn {shown.turn}: {what}",
                    evidence=[self.quotes.evidence(run.step, shown.turn, step_id)],
                )
            )
        header = InsightHeader(
            **self._common(
                found.success,
                title,
                f'the {found.task} ("{shortened(task_text(found.success.step), 120)}"), '
                "when it comes again",
                finding,
            ),
            evidence=claims,
        )
        return MinedLesson(header, guideline, divergence_key(found.task))


GIST_VALUES = 2
"""Argument values a divergence's title names of a tool call."""


def gist(action: Action) -> str:
    """An action in a few words for a title: the tool it called and the gist of its arguments
    (`called get_reservation_details (X7BYG1)`), or the start of its text (`did "go to
    drawer 1"`); never a cut-off JSON object."""
    name, _, rest = action.signature.partition(" ")
    try:
        arguments = orjson.loads(rest) if rest.startswith("{") else None
    except orjson.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        return f'did "{shortened(action.signature, 48)}"'
    values = [_value_gist(value) for value in arguments.values()]
    shown = [value for value in values if value][:GIST_VALUES]
    return f"called {shortened(name, 40)}" + (f" ({', '.join(shown)})" if shown else "")


def _value_gist(value: Any) -> str:
    """A short argument value as it is; a long text as its first words, quoted; a list or an
    object as nothing."""
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return ""
    text = " ".join(str(value).split())
    if len(text) <= 24:
        return text
    words = text.split()[:4]
    return f'"{shortened(" ".join(words), 28).removesuffix("…")}…"'


def _rounded(value: float) -> float | None:
    """To 4 significant digits; None for an infinite value (JSON holds none)."""
    return float(f"{value:.4g}") if math.isfinite(value) else None


def _outcome(success: bool) -> Outcome:
    return "success" if success else "failure"
