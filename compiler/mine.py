"""Lessons without a model: what the runs themselves say about which behaviour goes with failure.

Two kinds of lesson are mined, both from the actions a run took (tool calls, `action` lines),
never from what the environment said about the outcome:

- **contrast**: within a task type, a pattern of action (a tool used, one tool used before
  another, an action repeated unchanged, an action repeated after it failed, ...) whose
  presence separates failed from successful runs. Each pattern is tested with Fisher's exact
  test; the p-values of every pattern tried in the build are adjusted together
  (Benjamini-Hochberg), and a pattern is kept when its adjusted value is at most `FDR`, it is
  seen in and missing from at least `MIN_SUPPORT` runs each, and those runs come from at least
  `MIN_TASKS` tasks (so that one task's repeated trials never make a lesson alone).
- **divergence**: for a task with both a failed and a successful run, the first action where
  the two (the pair that agree longest) went different ways.

A run is reduced to its patterns as it streams through the build (`Miner.observe`); what is
kept is a row of pattern -> turn per run in a table of arrays (`PatternTable`), also written
to `raw/_patterns.jsonl` so that `add` mines across the whole corpus without reading every
run again. Quotes are cut from the raw turn logs as written (redacted) and checked like any
compilation's.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import re
import sys
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeAlias, overload

import orjson

from wikitrace.corpus_schema import Claim, Evidence, Layout, RunRecord, Turn
from wikitrace.corpus_schema.records import InsightHeader, MinedFinding, Outcome
from wikitrace.corpus_schema.render import shortened
from wikitrace.corpus_schema.store import spill_file
from wikitrace.corpus_schema.turns import as_text

from .evidence import QuoteChecker
from .signals import failures

MINED_MODEL = "mined"
"""The `model` field of a mined lesson: no model drew it."""
FDR = 0.05
"""The false discovery rate Benjamini-Hochberg holds across every pattern tried."""
MIN_SUPPORT = 5
"""A pattern must be seen in, and missing from, at least this many runs."""
MIN_TASKS = 3
"""...and the runs on each side must come from at least this many distinct tasks."""
MAX_PER_TYPE = 3
"""At most this many contrast lessons per task type, strongest first."""
MAX_KINDS_FOR_ORDER = 12
"""Order patterns (A before B) are tried among the most used kinds of action only."""
QUOTE_LIMIT = 240
EVIDENCE_RUNS = 4
"""How many runs a lesson quotes: its source run and up to three more."""
NO_TYPE = "(no task type)"

CORRELATION_NOTE = (
    "This is a correlation in past runs, counted without a model, not a cause: the runs that "
    "show the pattern may differ in other ways. Read the runs it cites before acting on it."
)

_SHELL_TOOLS = frozenset(
    {
        *("bash", "shell", "sh", "execute_bash", "run_shell_command", "exec_command"),
        *("terminal", "run_command", "local_shell", "container.exec", "execute_command"),
    }
)
_COMMAND_KEYS = ("command", "cmd", "code", "script", "commands")
_CALL_FORM = re.compile(r"([A-Za-z_][\w.-]{0,60})\s*[\[(]")
_WORD = re.compile(r"[A-Za-z_][\w.+-]{0,60}")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_SHELL_SPLIT = re.compile(r"&&|\|\||;|\||\n")
_UNSAFE = re.compile(r"[^\w.+-]")
"""Kept out of a kind: it names patterns (`order:A<B`) and shows in pages."""
_PREFIXES = frozenset({"sudo", "timeout", "time", "env", "nohup", "exec", "command"})
_SKIPPED_SEGMENTS = frozenset({"cd", "export", "source", ".", "set", "pushd", "popd"})


# --- actions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One thing a run did: a tool call or an `action` line."""

    turn: int
    kind: str | None
    """What kind of action (a tool's name, a command's program, `search` for `Search[x]`)."""
    signature: str
    """The action whole, spacing collapsed: two equal signatures are the same action."""
    quote: str
    """A verbatim passage of the turn that shows the action (checked before it is cited)."""
    failed: bool
    """What came back says the turn failed (compiler/signals.py: the log's `is_error`, an exit
    code, a failed test run, ...)."""


def _program(command: str) -> str | None:
    """The program a shell command runs: `cd x && python -m pytest -q` -> pytest."""
    for segment in _SHELL_SPLIT.split(command):
        words = segment.split()
        while words and (words[0] in _PREFIXES or _ENV_ASSIGNMENT.match(words[0])):
            words = words[1:]
            if words and words[0].lstrip("-").isdigit():  # timeout 30 cmd
                words = words[1:]
        if not words or words[0] in _SKIPPED_SEGMENTS:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program.startswith(("python", "uv")) and len(words) > 2 and words[1] == "-m":
            program = words[2]
        match = _WORD.match(program)
        return match.group().lower().rstrip(":") if match else None
    return None


def _text_kind(text: str) -> str | None:
    """`Search[x]` -> search; `go to drawer 1` -> go; `think: ...` -> think; `ls -la` -> ls."""
    line = text.strip().split("\n", 1)[0]
    call = _CALL_FORM.match(line)
    if call:
        return call.group(1).lower()
    return _program(line)


def _command(given: Any) -> str | None:
    arguments = given
    if isinstance(given, str):
        try:
            arguments = orjson.loads(given)
        except orjson.JSONDecodeError:
            return given
    if isinstance(arguments, dict):
        for key in _COMMAND_KEYS:
            value = arguments.get(key)
            if isinstance(value, list):  # ["bash", "-lc", "pytest -q"]
                value = next((v for v in reversed(value) if isinstance(v, str)), None)
            if isinstance(value, str):
                return value
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:QUOTE_LIMIT]
    return ""


def actions_of(turns: Sequence[Turn]) -> list[Action]:
    """Every action of a run, in order."""
    found: list[Action] = []
    failed_turns = failures(turns)
    for number, turn in enumerate(turns, start=1):
        calls = turn.tool_calls or []
        if not turn.action and not calls:
            continue
        failed = number in failed_turns
        if turn.action and turn.action.strip():
            found.append(
                Action(
                    number,
                    _text_kind(turn.action),
                    " ".join(turn.action.split()),
                    _first_line(turn.action),
                    failed,
                )
            )
        for call in calls:
            arguments = "" if call.arguments is None else as_text(call.arguments)
            kind: str | None = call.name
            if call.name.lower() in _SHELL_TOOLS:
                command = _command(call.arguments)
                kind = (_program(command) if command else None) or call.name
            errored = call.metadata.get("is_error") is True or failed
            found.append(
                Action(
                    number,
                    _UNSAFE.sub("_", kind)[:60] if kind else None,
                    f"{call.name} {' '.join(arguments.split())}",
                    f"{call.name}: {arguments}"[:QUOTE_LIMIT].strip(),
                    errored,
                )
            )
    return found


# --- patterns of one run ---------------------------------------------------------------------

REPEAT = "repeat"
RETRY = "retry_after_error"
STUCK = "stuck"
ERRORS = "errors"
STUCK_AT = 3
ERRORS_AT = 3


def patterns(actions: Sequence[Action]) -> dict[str, int]:
    """Pattern -> the turn that shows it first. `uses:K` for each kind of action; `repeat` (the
    same action twice in a row), `retry_after_error` (repeated right after it failed), `stuck`
    (one action issued 3 times or more), `errors` (3 or more failed actions before the last)."""
    found: dict[str, int] = {}
    seen: Counter[str] = Counter()
    errors = 0
    previous: Action | None = None
    for index, action in enumerate(actions):
        if action.kind:
            # Interned: a build holds every run's patterns, and runs share most of them.
            found.setdefault(sys.intern(f"uses:{action.kind}"), action.turn)
        if previous is not None and action.signature == previous.signature:
            found.setdefault(REPEAT, action.turn)
            if previous.failed:
                found.setdefault(RETRY, action.turn)
        seen[action.signature] += 1
        if seen[action.signature] == STUCK_AT:
            found.setdefault(STUCK, action.turn)
        # The last action's result is left out: it often is the verdict ("Answer is INCORRECT").
        if action.failed and index < len(actions) - 1:
            errors += 1
            if errors == ERRORS_AT:
                found.setdefault(ERRORS, action.turn)
        previous = action
    return found


def describe(pattern: str) -> str:
    """A pattern in words, to follow "runs that"."""
    if pattern.startswith("uses:"):
        return f'called "{pattern[5:]}"'
    if pattern.startswith("order:"):
        first, second = pattern[6:].split("<", 1)
        return f'called "{first}" before "{second}"'
    return {
        REPEAT: "issued the same action twice in a row",
        RETRY: "repeated an action unchanged right after it failed",
        STUCK: f"issued one action {STUCK_AT} times or more",
        ERRORS: f"had {ERRORS_AT} or more actions fail (the last action aside)",
    }[pattern]


# --- statistics --------------------------------------------------------------------------------


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test for the table [[a, b], [c, d]]: the sum of the
    probabilities (hypergeometric, margins fixed) of every table no more likely than this one."""
    row1, col1, n = a + b, a + c, a + b + c + d
    low, high = max(0, row1 + col1 - n), min(row1, col1)
    denominator = _log_choose(n, col1)

    def log_p(x: int) -> float:
        return _log_choose(row1, x) + _log_choose(n - row1, col1 - x) - denominator

    observed = log_p(a)
    total = 0.0
    for x in range(low, high + 1):
        value = log_p(x)
        if value <= observed + 1e-7:  # relative tolerance, as exact tests use
            total += math.exp(value)
    return min(1.0, total)


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Adjusted p-values (q-values), in the order given."""
    count = len(p_values)
    order = sorted(range(count), key=lambda i: p_values[i])
    adjusted = [1.0] * count
    running = 1.0
    for rank in range(count, 0, -1):
        index = order[rank - 1]
        running = min(running, p_values[index] * count / rank)
        adjusted[index] = running
    return adjusted


# --- runs seen by the miner -----------------------------------------------------------------


def _interned(text: Any) -> Any:
    return sys.intern(text) if isinstance(text, str) else text


@dataclass(slots=True)
class RunPatterns:
    """What mining keeps of one run."""

    step: int
    task_id: str
    task_type: str | None
    success: bool
    judged: bool
    patterns: dict[str, int]

    def as_json(self) -> bytes:
        return orjson.dumps(
            {
                "step": self.step,
                "task_id": self.task_id,
                "task_type": self.task_type,
                "success": self.success,
                "judged": self.judged,
                "patterns": self.patterns,
            }
        )

    @classmethod
    def from_json(cls, line: bytes) -> RunPatterns:
        data = orjson.loads(line)
        return cls(
            step=int(data["step"]),
            task_id=str(data["task_id"]),
            task_type=_interned(data.get("task_type")),
            success=bool(data["success"]),
            judged=bool(data.get("judged")),
            patterns={sys.intern(str(k)): int(v) for k, v in data["patterns"].items()},
        )


class PatternTable(Sequence[RunPatterns]):
    """Every run's patterns, as a build keeps them until its lessons are mined: in arrays,
    the pattern names numbered once (about 40 bytes a run and 12 a pattern, where a
    RunPatterns and its dict take about 400). Each run read back is a new RunPatterns, its
    patterns in the order they were found."""

    def __init__(self, runs: Iterable[RunPatterns] = ()) -> None:
        self._names: list[str] = []
        self._numbers: dict[str, int] = {}
        self._steps = array("q")
        self._task_ids: list[str] = []
        self._task_types: list[str | None] = []
        self._flags = bytearray()  # success, and judged times 2
        self._patterns = array("i")  # a name's number
        self._turns = array("q")
        self._ends = array("q")
        for run in runs:
            self.append(run)

    def append(self, run: RunPatterns) -> None:
        self._steps.append(run.step)
        self._task_ids.append(sys.intern(run.task_id))
        self._task_types.append(run.task_type)
        self._flags.append(run.success | run.judged << 1)
        for name, turn in run.patterns.items():
            number = self._numbers.get(name)
            if number is None:
                number = self._numbers[name] = len(self._names)
                self._names.append(name)
            self._patterns.append(number)
            self._turns.append(turn)
        self._ends.append(len(self._patterns))

    def __len__(self) -> int:
        return len(self._steps)

    @overload
    def __getitem__(self, index: int) -> RunPatterns: ...
    @overload
    def __getitem__(self, index: slice) -> list[RunPatterns]: ...
    def __getitem__(self, index: int | slice) -> RunPatterns | list[RunPatterns]:
        if isinstance(index, slice):
            return [self._run(i) for i in range(len(self))[index]]
        return self._run(range(len(self))[index])  # IndexError past either end

    def __iter__(self) -> Iterator[RunPatterns]:
        return (self._run(i) for i in range(len(self)))

    def _run(self, i: int) -> RunPatterns:
        start, end = self._ends[i - 1] if i else 0, self._ends[i]
        names = self._names
        return RunPatterns(
            step=self._steps[i],
            task_id=self._task_ids[i],
            task_type=self._task_types[i],
            success=bool(self._flags[i] & 1),
            judged=bool(self._flags[i] & 2),
            patterns={
                names[number]: turn
                for number, turn in zip(
                    self._patterns[start:end], self._turns[start:end], strict=True
                )
            },
        )


def read_patterns(path: Path) -> PatternTable:
    """`raw/_patterns.jsonl` of a version (empty when it has none: built before mining)."""
    table = PatternTable()
    try:
        with path.open("rb") as lines:
            for line in lines:
                if line.strip():
                    table.append(RunPatterns.from_json(line))
    except FileNotFoundError:
        pass
    return table


def patterns_file(runs: Iterable[RunPatterns]) -> Iterator[bytes]:
    """`raw/_patterns.jsonl`, a line at a time."""
    for run in runs:
        yield run.as_json() + b"\n"


# --- findings ----------------------------------------------------------------------------------


@dataclass
class Contrast:
    """A pattern tried in the runs of a task type: how many with it and how many without it
    failed. The runs themselves (`present`, `absent`) are split out again only for the
    contrasts kept: a build tries dozens of patterns over every run of a type."""

    task_type: str | None
    pattern: str
    runs: Sequence[RunPatterns]
    """The task type's runs."""
    counts: tuple[int, int, int, int]
    """Runs with the pattern, how many of them failed; runs without it, how many failed."""
    p_value: float
    q_value: float = 1.0

    @functools.cached_property
    def _split(self) -> tuple[list[RunPatterns], list[RunPatterns]]:
        return split(self.pattern, self.runs)

    @property
    def present(self) -> list[RunPatterns]:
        return self._split[0]

    @property
    def absent(self) -> list[RunPatterns]:
        return self._split[1]

    @property
    def with_failed(self) -> int:
        return self.counts[1]

    @property
    def without_failed(self) -> int:
        return self.counts[3]

    @property
    def harmful(self) -> bool:
        """The pattern goes with failure (rather than with success)."""
        present, with_failed, absent, without_failed = self.counts
        return with_failed * absent > without_failed * present


@dataclass
class Divergence:
    """Where the successful and failed runs of a task that agree longest went different ways.
    The actions it names are read again from the runs' logs when asked (`load`), so that a
    build holds none of them for its thousands of tasks."""

    task_id: str
    task_type: str | None
    success: RunPatterns
    failure: RunPatterns
    shared: int
    """How many actions the two runs took alike before they diverged."""
    load: Callable[[int], Sequence[Action]]
    """A run's actions, by step."""
    runs: int = 0
    successes: int = 0

    def _action(self, run: RunPatterns, last: bool = False) -> Action | None:
        actions = self.load(run.step)
        if last:
            return actions[-1] if actions else None
        return actions[self.shared] if self.shared < len(actions) else None

    @property
    def success_action(self) -> Action | None:
        """The successful run's first differing action (None: it had stopped)."""
        return self._action(self.success)

    @property
    def failure_action(self) -> Action | None:
        """The failed run's first differing action (None: it had stopped)."""
        return self._action(self.failure)

    @property
    def last_success(self) -> Action | None:
        return self._action(self.success, last=True)

    @property
    def last_failure(self) -> Action | None:
        return self._action(self.failure, last=True)


@dataclass
class MiningReport:
    patterns_tried: int = 0
    contrasts: int = 0
    divergences: int = 0
    same_actions: int = 0
    """Tasks whose failed and successful runs took the very same actions."""
    task_types: dict[str, str] = field(default_factory=dict)
    """Task type -> why it yielded no contrast (too few runs, one outcome, nothing significant)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "patterns_tried": self.patterns_tried,
            "contrasts": self.contrasts,
            "divergences": self.divergences,
            "tasks_with_same_actions": self.same_actions,
            "task_types": dict(sorted(self.task_types.items())),
        }


def _tasks(runs: Sequence[RunPatterns], positions: Iterable[int] | None = None) -> int:
    """How many tasks `runs` (those at `positions`, if given) are of."""
    chosen = runs if positions is None else (runs[i] for i in positions)
    return len({run.task_id for run in chosen})


def _without(population: Sequence[int], present: Sequence[int]) -> array[int]:
    """The positions of `population` not in `present` (both ascending)."""
    absent = array("i")
    shown = iter(present)
    next_shown = next(shown, None)
    for index in population:
        if index == next_shown:
            next_shown = next(shown, None)
        else:
            absent.append(index)
    return absent


Candidate: TypeAlias = "tuple[str, array[int], array[int]]"
"""A pattern, the runs that show it and the runs it is counted among, by index."""


def _seen(runs: Sequence[RunPatterns]) -> Iterator[Candidate]:
    """Each pattern but an order, the runs that show it, and all the runs, by index."""
    everyone = array("i", range(len(runs)))
    kinds = sorted({p for run in runs for p in run.patterns if not p.startswith("order")})
    for pattern in kinds:
        yield pattern, array("i", (i for i in everyone if pattern in runs[i].patterns)), everyone


def _orders(runs: Sequence[RunPatterns]) -> Iterator[Candidate]:
    """`order:A<B`, the runs that used A first and the runs that used both (in order), by
    index in `runs`: one pair of the commonest kinds at a time."""
    kinds: Counter[str] = Counter()
    for run in runs:
        kinds.update(p for p in run.patterns if p.startswith("uses:"))
    common = [k for k, _ in kinds.most_common(MAX_KINDS_FOR_ORDER)]
    for i, first in enumerate(common):
        for second in common[i + 1 :]:
            a_first, b_first, both = array("i"), array("i"), array("i")
            for index, run in enumerate(runs):
                before = _first_before(run, first, second)
                if before is not None:
                    (a_first if before else b_first).append(index)
                    both.append(index)
            name_a, name_b = first[5:], second[5:]
            if len(a_first) >= len(b_first):
                yield f"order:{name_a}<{name_b}", a_first, both
            else:
                yield f"order:{name_b}<{name_a}", b_first, both


def _first_before(run: RunPatterns, first: str, second: str) -> bool | None:
    """Whether the run's first `first` (a `uses:` pattern) came before its first `second`;
    None when it lacks one of them or both came in one turn: it is not counted for their
    order."""
    at_first, at_second = run.patterns.get(first), run.patterns.get(second)
    if at_first is None or at_second is None or at_first == at_second:
        return None
    return at_first < at_second


def split(pattern: str, runs: Sequence[RunPatterns]) -> tuple[list[RunPatterns], list[RunPatterns]]:
    """The runs that show `pattern` and those it is compared with, as mining counts them:
    for `order:A<B`, among the runs whose order of A and B counts, those with A first and the
    others; else the runs with the pattern and those without."""
    if pattern.startswith("order:"):
        first, second = (f"uses:{name}" for name in pattern[6:].split("<", 1))
        order = [(run, _first_before(run, first, second)) for run in runs]
        return (
            [run for run, before in order if before is True],
            [run for run, before in order if before is False],
        )
    return [run for run in runs if pattern in run.patterns], [
        run for run in runs if pattern not in run.patterns
    ]


def contrasts(
    runs: Sequence[RunPatterns], report: MiningReport, fdr: float = FDR
) -> list[Contrast]:
    """The contrasts of every task type whose adjusted p-value is at most `fdr`, strongest
    first within a type."""
    by_type: dict[str | None, list[RunPatterns]] = defaultdict(list)
    for run in runs:
        by_type[run.task_type].append(run)
    tried: list[Contrast] = []
    for task_type, members in sorted(by_type.items(), key=lambda kv: kv[0] or ""):
        name = task_type or NO_TYPE
        failed = sum(not run.success for run in members)
        if failed < MIN_SUPPORT or len(members) - failed < MIN_SUPPORT:
            report.task_types[name] = (
                f"{len(members)} runs, {failed} failed: too few of one outcome to compare"
            )
            continue
        before = len(tried)
        candidates = itertools.chain(_seen(members), _orders(members))
        seen_splits: set[bytes] = set()
        for pattern, present, population in candidates:
            absent = _without(population, present)
            if min(len(present), len(absent)) < MIN_SUPPORT:
                continue
            if min(_tasks(members, present), _tasks(members, absent)) < MIN_TASKS:
                continue
            # The same runs split the same way: one pattern is enough.
            key = hashlib.blake2b(present.tobytes() + b"/" + absent.tobytes()).digest()
            if key in seen_splits:
                continue
            seen_splits.add(key)
            a = sum(not members[i].success for i in present)
            c = sum(not members[i].success for i in absent)
            p_value = fisher_exact(a, len(present) - a, c, len(absent) - c)
            counts = (len(present), a, len(absent), c)
            tried.append(Contrast(task_type, pattern, members, counts, p_value))
        if len(tried) == before:
            report.task_types[name] = (
                f"{len(members)} runs: no pattern seen in and missing from {MIN_SUPPORT} runs "
                f"of {MIN_TASKS} tasks each"
            )
    report.patterns_tried = len(tried)
    for contrast, q_value in zip(
        tried, benjamini_hochberg([c.p_value for c in tried]), strict=True
    ):
        contrast.q_value = q_value
    kept: list[Contrast] = []
    for task_type in dict.fromkeys(c.task_type for c in tried):
        significant = sorted(
            (c for c in tried if c.task_type == task_type and c.q_value <= fdr),
            key=lambda c: (c.p_value, c.pattern),
        )
        chosen: list[Contrast] = []
        for contrast in significant:
            steps = {run.step for run in contrast.present}
            if any(_overlap(steps, {r.step for r in other.present}) >= 0.9 for other in chosen):
                continue  # says nearly what a stronger one says, of nearly the same runs
            chosen.append(contrast)
            if len(chosen) == MAX_PER_TYPE:
                break
        name = task_type or NO_TYPE
        if not chosen and name not in report.task_types:
            best = min((c for c in tried if c.task_type == task_type), key=lambda c: c.p_value)
            report.task_types[name] = (
                f"nothing significant: the strongest pattern ({best.pattern}) has p = "
                f"{best.p_value:.3g}, q = {best.q_value:.3g}"
            )
        kept += chosen
    report.contrasts = len(kept)
    return kept


def _overlap(a: AbstractSet[Any], b: AbstractSet[Any]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


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
    tasks: set[str] = set()
    for run in runs:
        if run.task_id not in tasks:
            tasks.add(run.task_id)
            chosen.append(run)
        if len(chosen) == count:
            return chosen
    rest = [run for run in runs if run not in chosen]
    return chosen + rest[: count - len(chosen)]


# --- divergence within a task ------------------------------------------------------------------


def divergences(
    runs: Sequence[RunPatterns],
    load: Callable[[int], Sequence[Action]],
    report: MiningReport,
    only_tasks: set[str] | None = None,
    kept: ActionHashes | None = None,
) -> list[Divergence]:
    """For each task with both outcomes, where the failed and successful runs that agree
    longest first went different ways. `load(step)` gives a run's actions; `kept` holds those
    of the runs it saw stream past, as hashes, so that their logs are not read back."""

    def compared(step: int) -> Sequence[int]:
        held = kept.get(step) if kept is not None else None
        return held if held is not None else action_hashes(load(step))

    by_task: dict[str, list[RunPatterns]] = defaultdict(list)
    for run in runs:
        by_task[run.task_id].append(run)
    found: list[Divergence] = []
    for task_id, members in by_task.items():
        if only_tasks is not None and task_id not in only_tasks:
            continue
        wins = [run for run in members if run.success]
        losses = [run for run in members if not run.success]
        if not wins or not losses:
            continue
        actions = {run.step: compared(run.step) for run in members}
        best: tuple[int, int, int] | None = None
        for win in wins:
            for loss in losses:
                shared = _shared_prefix(actions[win.step], actions[loss.step])
                if shared is None:
                    continue
                key = (-shared, win.step, loss.step)
                if best is None or key < best:
                    best = key
        if best is None:
            report.same_actions += 1
            continue
        shared, win_step, loss_step = -best[0], best[1], best[2]
        found.append(
            Divergence(
                task_id=task_id,
                task_type=members[0].task_type,
                # Its runs less their patterns, which it never reads: a build may hold a
                # divergence for every fourth run while its pages wait to be written.
                success=replace(next(r for r in wins if r.step == win_step), patterns={}),
                failure=replace(next(r for r in losses if r.step == loss_step), patterns={}),
                shared=shared,
                load=load,
                runs=len(members),
                successes=len(wins),
            )
        )
    report.divergences = len(found)
    return found


def _shared_prefix(first: Sequence[int], second: Sequence[int]) -> int | None:
    """How many actions the two runs share from the start (each action's signature hashed);
    None when they are the same."""
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return index
    if len(first) == len(second):
        return None
    return min(len(first), len(second))


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
    The last few runs read are kept, with their actions."""

    KEPT = 32
    """Runs kept read: lessons cite few runs each."""

    def __init__(self, layout_of: Any) -> None:
        self._layout_of = layout_of
        self._turns: dict[int, list[Turn]] = {}
        self._actions: dict[int, list[Action]] = {}

    def turns(self, step: int) -> list[Turn]:
        if step not in self._turns:
            layout: Layout = self._layout_of(step)
            data = (layout.root / layout.raw_turns_rel(step)).read_bytes()
            self._turns[step] = [
                Turn.model_validate(orjson.loads(line)) for line in data.splitlines()
            ]
            if len(self._turns) > self.KEPT:
                gone = next(iter(self._turns))
                del self._turns[gone]
                self._actions.pop(gone, None)
        return self._turns[step]

    def actions(self, step: int) -> list[Action]:
        turns = self.turns(step)
        if step not in self._actions:
            self._actions[step] = actions_of(turns)
        return self._actions[step]

    def evidence(self, step: int, turn: int, step_id: str) -> Evidence:
        """The action at `turn` of run `step`, quoted verbatim and checked."""
        turns = self.turns(step)
        chosen = next((a for a in actions_of(turns[turn - 1 : turn]) if a.quote), None)
        quote = chosen.quote if chosen is not None else ""
        checker = QuoteChecker(turns)
        return Evidence(
            turn=turn,
            quote=quote,
            verified=bool(quote) and checker.found(turn, quote),
            step=step_id,
        )


class LessonWriter:
    """Mined findings as insight headers (corpus_schema renders the pages)."""

    def __init__(self, layout: Layout, quotes: Quotes, version: str) -> None:
        self.layout = layout
        self.quotes = quotes
        self.version = version

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
        numbers = (
            f"runs that {words} failed {_rate(contrast.with_failed, present)} times; "
            f"runs that did not, {_rate(contrast.without_failed, absent)}"
        )
        if contrast.pattern.startswith("order:"):
            numbers += " (among runs that called both)"
        # Cited: runs that show the pattern and ended the way the lesson says it goes.
        cited_pool = [run for run in contrast.present if run.success != harmful]
        cited = _distinct_tasks(typical(cited_pool), EVIDENCE_RUNS)
        source = cited[0]
        if harmful:
            title = f"{kind} runs that {words} failed more often"
            advice = (
                f"Be wary of this: {numbers}. If you are about to do it, check first whether "
                "it is what the task needs; the failed runs this lesson cites show where it "
                "went wrong."
            )
        else:
            title = f"{kind} runs that {words} succeeded more often"
            advice = (
                f"Consider doing this: {numbers}. The successful runs this lesson cites show "
                "it done."
            )
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
            runs=[self.layout.step(run.step) for run in cited],
            version=self.version,
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
        # The pattern is the page's: each claim says which run and turns, its quotes the rest.
        return Claim(
            statement=f"{step_id} ({outcome}), turn " + " then turn ".join(str(t) for t in turns),
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
            f"On task {shortened(found.task_id, 40)}, {after}the successful run "
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
            description=f"where runs of task {found.task_id} first took different actions",
            runs=[win, loss],
            task_outcomes=[found.runs - found.successes, found.runs],
            shared_actions=found.shared,
            task_id=found.task_id,
            version=self.version,
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
                f'the task {found.task_id} ("{shortened(task_text(found.success.step), 120)}"), '
                "when it comes again",
                finding,
            ),
            evidence=claims,
        )
        return MinedLesson(header, guideline, f"divergence {found.task_id}")


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


def _outcome(success: bool) -> Outcome:
    return "success" if success else "failure"


def action_hashes(actions: Sequence[Action]) -> array[int]:
    """Each action's signature as a hash: two runs' actions are compared by these."""
    return signature_hashes([action.signature for action in actions])


def signature_hashes(signatures: Sequence[str]) -> array[int]:
    """`action_hashes` of actions with these signatures. Python's hash of a text differs
    from one process to the next: every run's are taken in the build's own process."""
    return array("q", (hash(signature) for signature in signatures))


class ActionHashes:
    """The actions of each run that streamed past, as hashes of their signatures (8 bytes an
    action), in an unnamed file beside the staging folder: a divergence compares the runs of
    a task without reading their logs back and checking every turn again. Runs come in step
    order; a run not held (a parent's) is None."""

    def __init__(self, folder: Path) -> None:
        self._file = spill_file(folder, "actions")
        self._first = 0
        self._ends = array("q")  # where each run's hashes end in the file
        self._size = 0

    def add(self, step: int, actions: Sequence[Action]) -> None:
        self.add_hashes(step, action_hashes(actions))

    def add_hashes(self, step: int, hashes: array[int]) -> None:
        """The next run's actions, as `action_hashes` gives them."""
        if not self._ends:
            self._first = step
        elif step != self._first + len(self._ends):
            last = self._first + len(self._ends) - 1
            raise ValueError(f"internal error: run {step} observed after run {last}")
        data = hashes.tobytes()
        self._file.seek(self._size)
        self._file.write(data)
        self._size += len(data)
        self._ends.append(self._size)

    def get(self, step: int) -> array[int] | None:
        index = step - self._first
        if not self._ends or not 0 <= index < len(self._ends):
            return None
        start = self._ends[index - 1] if index else 0
        self._file.seek(start)
        return array("q", self._file.read(self._ends[index] - start))

    def close(self) -> None:
        self._file.close()


def run_patterns(step: int, record: RunRecord, judged: bool) -> tuple[RunPatterns, list[Action]]:
    """What mining keeps of a run, and the actions they were found in."""
    actions = actions_of(record.turns)
    run = RunPatterns(
        step=step,
        task_id=record.task_id,
        task_type=record.task_type,  # interned by the raw layer
        success=record.success,
        judged=judged,
        patterns=patterns(actions),
    )
    return run, actions


class Miner:
    """Reduces each run of a build to its patterns as it streams past (and, given a folder
    for them, keeps its actions' hashes on disk for the divergences)."""

    def __init__(self, base: Iterable[RunPatterns] = (), folder: Path | None = None) -> None:
        self.runs = base if isinstance(base, PatternTable) else PatternTable(base)
        self.new_tasks: set[str] = set()
        self.actions = ActionHashes(folder) if folder is not None else None

    def observe(self, step: int, record: RunRecord, judged: bool) -> None:
        run, actions = run_patterns(step, record, judged)
        self.add(run, action_hashes(actions))

    def add(self, run: RunPatterns, hashes: array[int]) -> None:
        """A run observed (`run_patterns`), in step order, with its actions' hashes."""
        if self.actions is not None:
            self.actions.add_hashes(run.step, hashes)
        self.runs.append(run)
        self.new_tasks.add(run.task_id)

    def release(self) -> None:
        """Let go of every run's patterns, once the version's lessons are mined and its patterns
        table is written: the catalog and rankers made after them reuse that memory."""
        self.runs = PatternTable()
        self.new_tasks = set()
        self.close()

    def close(self) -> None:
        """Remove the file of actions' hashes (no file of the corpus)."""
        if self.actions is not None:
            self.actions.close()
            self.actions = None

    def watch(
        self, runs: Iterable[tuple[int, RunRecord]], judged: Any
    ) -> Iterator[tuple[int, RunRecord]]:
        """`runs`, each observed on its way through."""
        for step, record in runs:
            self.observe(step, record, judged(record.metadata))
            yield step, record


# --- one version's mined lessons ---------------------------------------------------------------


@dataclass
class MinedPage:
    """A mined insight page of the new version: new, or a parent's page written anew. A new
    divergence's header is made only when the page is written (`content`): a corpus with
    a task in four with both outcomes holds one for every fourth run."""

    number: int
    new: bool
    lesson: MinedLesson | Callable[[], MinedLesson]

    def content(self) -> tuple[InsightHeader, str]:
        """The page's header (its id not yet set) and guideline; made anew at each call when
        the page is lazy."""
        lesson = _made(self.lesson)
        return lesson.header, lesson.guideline


def _made(lesson: MinedLesson | Callable[[], MinedLesson]) -> MinedLesson:
    return lesson if isinstance(lesson, MinedLesson) else lesson()


def _key(header: InsightHeader) -> str | None:
    finding = header.mined
    if finding is None:
        return None
    if finding.kind == "divergence":
        return f"divergence {finding.task_id}"
    return f"contrast {header.task_type} {finding.pattern}"


def _same(old: InsightHeader, new: InsightHeader) -> bool:
    """Whether a parent's mined page says what the new one would (the version aside)."""
    if old.mined is None or new.mined is None or not old.mined.holds:
        return False
    keep = {"version"}
    return old.mined.model_dump(exclude=keep) == new.mined.model_dump(exclude=keep) and (
        old.title == new.title and old.evidence == new.evidence
    )


def mine_version(
    miner: Miner,
    layout: Layout,
    *,
    version: str,
    first_number: int,
    task_text: Callable[[int], str],
    parent: dict[int, tuple[InsightHeader, str]] | None = None,
    parent_root: Path | None = None,
    parent_steps: int = 0,
) -> tuple[list[MinedPage], MiningReport]:
    """The mined insight pages a version writes (their ids are set by the caller, once the
    width of insight ids is known): lessons found anew get numbers from `first_number`; a
    parent's mined lesson found again keeps its number (and status) and is written anew when
    its numbers changed; one no longer found is written anew as no longer holding. Runs up
    to `parent_steps` are read from `parent_root`, the rest from `layout`."""
    report = MiningReport()

    def layout_of(step: int) -> Layout:
        if parent_root is not None and step <= parent_steps:
            return Layout(parent_root, layout.step_width, layout.insight_width)
        return layout

    quotes = Quotes(layout_of)
    writer = LessonWriter(layout, quotes, version)
    runs = list(miner.runs)  # made once from the table, for both kinds of lesson
    found = contrasts(runs, report)
    lessons: list[tuple[str, MinedLesson | Callable[[], MinedLesson]]] = [
        (lesson.key, lesson)
        for lesson in (writer.contrast(contrast, report.patterns_tried) for contrast in found)
    ]
    # A divergence of a parent's task is kept unless this version added runs of that task.
    only = miner.new_tasks if parent is not None else None
    for divergence in divergences(runs, quotes.actions, report, only, miner.actions):
        # Its task's text is read when its page is made, not held until then.
        make = functools.partial(writer.divergence, divergence, task_text)
        lessons.append((f"divergence {divergence.task_id}", make))
    by_key = {
        key: (number, header, guideline)
        for number, (header, guideline) in (parent or {}).items()
        if (key := _key(header)) is not None
    }
    pages: list[MinedPage] = []
    number = first_number - 1
    matched: set[str] = set()
    for key, made in lessons:
        old = by_key.get(key)
        if old is None:
            number += 1
            pages.append(MinedPage(number, new=True, lesson=made))
            continue
        lesson = _made(made)
        assert lesson.key == key, f"mined lesson {lesson.key} listed as {key}"
        matched.add(lesson.key)
        old_number, old_header, _ = old
        lesson.header.id = old_header.id
        lesson.header.status = old_header.status
        lesson.header.decisions = list(old_header.decisions)
        lesson.header.hypothesis = old_header.hypothesis
        if (
            not _same(old_header, lesson.header)
            or not old_header.mined
            or not old_header.mined.holds
        ):
            pages.append(MinedPage(old_number, new=False, lesson=lesson))
    for key, (old_number, old_header, guideline) in by_key.items():
        finding = old_header.mined
        if key in matched or finding is None or not finding.holds:
            continue
        if finding.kind == "divergence" and finding.task_id not in miner.new_tasks:
            continue
        gone = old_header.model_copy(
            update={"mined": finding.model_copy(update={"holds": False, "version": version})}
        )
        pages.append(MinedPage(old_number, new=False, lesson=MinedLesson(gone, guideline, key)))
    return pages, report


def patterns_of_written(rows: Iterable[Any], layout_of: Any) -> PatternTable:
    """Patterns of runs already written (a parent built before mining): read from their logs."""
    quotes = Quotes(layout_of)
    found = PatternTable()
    for row in rows:
        found.append(
            RunPatterns(
                step=row.step,
                task_id=row.task_id,
                task_type=row.task_type,
                success=row.outcome == "success",
                judged=row.judged,
                patterns=patterns(quotes.actions(row.step)),
            )
        )
    return found
