"""What a store records beside its versions: every agent run, every update decision, and the
update controller's memory between updates (runs.jsonl, updates/, update-state.json)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import CorpusError, first_problem
from .tasks import TaskKey, task_key

LEDGER_VERSION = 1
Record = TypeVar("Record", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- agent runs (runs.jsonl) -----------------------------------------------------------------


class Attempt(_Strict):
    """One try at a run."""

    exit_code: int | None
    """None when it never started or was killed at the timeout."""
    seconds: float
    error: str | None = None
    """Why this try is not a result: exit code, timeout, no JSON, a bad field."""
    stderr_tail: str = ""
    """The end of what the agent wrote on stderr (and stray stdout, when the result was bad)."""


class AgentRun(_Strict):
    """One line of runs.jsonl: a run of the agent on a task with a memory, as it ended."""

    id: str
    """run-NNNNNN, in the order runs were started over the store's life."""
    purpose: str
    """What it was run for: the update record (update-NNNN) that asked for it."""
    task_id: str
    origin: str | None = None
    """The task's source (RecordHeader.origin) when the run was asked for one; None for a task
    known by its id alone, and in lines written before sources were kept."""
    memory: str
    """The corpus version it was given (vNNNN)."""
    memory_path: str
    seed: int
    command: list[str]
    """The command of the last attempt, as run."""
    started: str
    seconds: float
    """Wall time over all attempts."""
    status: Literal["ok", "error"]
    success: bool | None
    """The outcome; None when status is error (an error is never a success or a failure)."""
    score: float | None = None
    trajectory: str | None = None
    """Where the agent says it wrote its log of the run."""
    error: str | None = None
    attempts: list[Attempt]
    output: dict[str, Any] = Field(default_factory=dict)
    """The agent's JSON result as printed."""

    @property
    def task_key(self) -> TaskKey:
        """The task it ran: its source and id."""
        return task_key(self.origin, self.task_id)

    @property
    def value(self) -> float | None:
        """What the run scored: its score when it gave one, else 1 for a success, 0 for not."""
        if self.status != "ok":
            return None
        if self.score is not None:
            return self.score
        return 1.0 if self.success else 0.0


def append_line(path: Path, record: BaseModel) -> None:
    """Append one record as one line in one write, so a crash never leaves half a line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(record.model_dump(mode="json")) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path, model: type[Record]) -> list[Record]:
    """A JSON Lines record of the store, typed; an error names the file, line and field."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(model.model_validate(orjson.loads(line)))
        except orjson.JSONDecodeError as error:
            raise CorpusError(f"{path}:{number}: not JSON ({error})") from None
        except ValidationError as error:
            where, message = first_problem(error)
            raise CorpusError(f"{path}:{number}: field '{where}': {message}") from None
    return records


def read_agent_runs(path: Path) -> dict[str, AgentRun]:
    """Every recorded run by id."""
    return {run.id: run for run in read_lines(path, AgentRun)}


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    except FileNotFoundError:
        return 0


# --- update decisions (updates/update-NNNN.json) ---------------------------------------------

Group = Literal["fresh", "boundary", "coverage"]


class Trigger(_Strict):
    """Whether the update was compared, and the figures that decided it."""

    compared: bool
    why: str
    embedder: str
    cosine: float | None = None
    """Between this update's direction and the average of past deployed ones."""
    threshold: float
    momentum: float
    always_compare: bool = False
    encoded: Literal["insights", "corpus"] = "insights"
    """What the direction encodes: the insight set, or the corpus (insights and runs)."""
    insights_added: list[str] = Field(default_factory=list)
    insights_removed: list[str] = Field(default_factory=list)
    runs_added: list[str] = Field(default_factory=list)
    """With `encoded: corpus`: the runs the update adds (`step-0013`)."""


class TaskResult(_Strict):
    """One task of a comparison: why it was chosen, and what old and new memory scored."""

    task_id: str
    origin: str | None = None
    """The task's source; None when it names none (and in records written before)."""
    group: Group
    """fresh (added since the last comparison), boundary (its outcome changed with memory in a
    past comparison), coverage (stands for the tasks seen so far)."""
    old_runs: list[str]
    new_runs: list[str]
    old: float | None
    """Mean over its runs with the old memory that gave a result; None when all errored."""
    new: float | None
    compared: bool
    """Both sides gave a result, so the task counts in the scores."""
    rerun_runs: list[str] = Field(default_factory=list)
    """The old memory run again on the same seeds: how much outcomes move with no change."""
    rerun: float | None = None


class UpdateRecord(_Strict):
    """One `wikitrace update` decision, with links to everything behind it."""

    format_version: int = LEDGER_VERSION
    id: str
    time: str
    current: str
    """The version deployed when the update began."""
    candidate: str
    """The version made from it by adding the runs."""
    deployed: str
    """The version deployed when the update ended."""
    decision: Literal["accepted", "deployed", "kept", "undecided"]
    """accepted (not compared, deployed), deployed (compared, the candidate did better beyond
    the rerun band), kept (compared, it did not: ties keep the old), undecided (compared, but
    no task gave results on both sides: the old is kept)."""
    reason: str
    trigger: Trigger
    seeds: list[int] = Field(default_factory=list)
    """The seeds each task was run with, the same for old and new."""
    tasks: list[TaskResult] = Field(default_factory=list)
    score_old: float | None = None
    """Mean over compared tasks of the old memory's per-task mean."""
    score_new: float | None = None
    gain: float | None = None
    """Tasks' worth the candidate gained over the old memory: the sum over compared tasks of
    new minus old."""
    band: float | None = None
    """The rerun band: how much a candidate that changes nothing would gain by chance, from
    what changed when the old memory was simply run again (control.update.rerun_band; None: no
    rerun). Deployed only when gain > band."""
    rerun_seeds: list[int] = Field(default_factory=list)
    agent_runs: int = 0
    errors: int = 0
    """Agent runs that ended as errors after their retries."""
    added: dict[str, Any] = Field(default_factory=dict)
    """What the candidate adds: runs, steps, insights, task ids, duplicates left out."""


class UpdateState(_Strict):
    """What the controller remembers between updates (update-state.json)."""

    format_version: int = LEDGER_VERSION
    embedder: str | None = None
    """The embedding space the average lives in; another one starts the average afresh."""
    average: list[float] | None = None
    """Exponential moving average of the unit directions of deployed updates."""
    updates: int = 0
    fresh_tasks: list[str] = Field(default_factory=list)
    """Tasks of runs deployed since the last comparison, oldest first."""
    boundary_tasks: list[str] = Field(default_factory=list)
    """Tasks whose outcome differed between old and new memory in a comparison, newest first."""
    last_comparison: str | None = None


class Tally(_Strict):
    """One insight's running record in the episodes monitoring has counted."""

    cited: int = 0
    judged: int = 0
    violations: int = 0
    log_evidence: float = 0.0
    """The log of the anytime test's e-value so far (its bets go on across calls)."""


class MonitorState(_Strict):
    """What monitoring remembers between calls (monitor-state.json): every report it has
    counted (sha256 of its JSON -> the JSON), and each insight's totals over them."""

    format_version: int = LEDGER_VERSION
    reports: dict[str, str] = Field(default_factory=dict)
    tallies: dict[str, Tally] = Field(default_factory=dict)


def load_model(path: Path, model: type[Any], default: Any = None) -> Any:
    """A JSON record of the store, typed; `default` when the file does not exist yet."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return default
    except orjson.JSONDecodeError as error:
        raise CorpusError(f"{path}: not valid JSON ({error})") from None
    try:
        return model.model_validate(data)
    except ValidationError as error:
        where, message = first_problem(error)
        raise CorpusError(f"{path}: field '{where}': {message}") from None


# --- gate and monitoring decisions (gate/ in a version) --------------------------------------

ProbeKind = Literal["target", "falsify", "regress"]


class ProbeResult(_Strict):
    """One probe task of a gate decision: why it was chosen, its runs and what they scored."""

    task_id: str
    origin: str | None = None
    """The task's source; None when it names none (and in decisions written before)."""
    kind: ProbeKind
    """target (a task the lesson claims to help), falsify (a boundary task, a look-alike that
    violates its precondition, or a decoy), regress (a task the agent solved before)."""
    why: str
    base_runs: list[str]
    """Runs with the current memory without the lesson."""
    lesson_runs: list[str]
    """Runs with the lesson added."""
    narrowed_runs: list[str] = Field(default_factory=list)
    """Runs with the narrowed lesson on this probe (decisions before the narrowed lesson had
    probes of its own: see GateDecision.narrowed_probes)."""


class GateFigures(_Strict):
    """The estimates a gate decision rests on, each with its one-sided bound."""

    n_target: int
    gains: int
    """Target (task, seed) pairs that did better with the lesson."""
    losses: int
    gain: float
    """G: (gains - losses) / n_target."""
    gain_lower: float
    """Lower bound on G: lower bound of the gain rate minus upper bound of the loss rate."""
    gain_rate_lower: float
    """Lower bound of the gain rate alone: is the gain real?"""
    n_falsify: int
    failures: int
    """Falsification pairs that did worse with the lesson (`p_fail_basis` outcomes), or whose
    run with it cited it (citations: it was used where it should not apply)."""
    p_fail_basis: Literal["outcomes", "citations"] = "outcomes"
    """What P_fail counts: harm to the outcome, or the agent's citation report (the method's
    "activates wrongly"), used when the runner returns one."""
    p_fail: float
    p_fail_upper: float
    n_regress: int
    """Pairs, over every probe, that succeeded without the lesson."""
    damaged: int
    """Of those, pairs that did worse with it."""
    d_reg: float
    d_reg_upper: float
    errors: int
    """Pairs left out because a run of theirs ended as an error."""
    passes: bool
    """Under the bounds rule: gain_lower >= eta, p_fail_upper <= delta and d_reg_upper <=
    beta; under estimates: the same of gain, p_fail and d_reg; under sequential: each test's
    evidence reached `tests["needed"]`."""
    d_reg_by_kind: dict[str, float] = Field(default_factory=dict)
    """D_reg among the solved pairs of each probe kind (D_reg pools them)."""
    tests: dict[str, float] = Field(default_factory=dict)
    """Under the sequential rule: each anytime-valid test's evidence (its e-value: help, that
    it helps its targets; damage, that D_reg is below beta; failure, that P_fail is below
    delta) and the evidence `needed` to commit (1 / alpha, more when e-BH asks)."""
    runs: int = 0
    """Agent runs behind these figures, both sides of every pair."""


class TogetherCheck(_Strict):
    """The lessons one gate call committed, run side by side on their regression probes."""

    insights: list[str]
    """Every lesson in the memory for this test (the call's committed set)."""
    figures: GateFigures
    passes: bool
    runs: list[str] = Field(default_factory=list)
    """The ids of the runs with the set (the runs without it are the decision's own)."""


class GateDecision(_Strict):
    """Header of gate/gate-NNNN.md: one insight tested, and what became of it."""

    id: str
    insight: str
    kind: Literal["gate", "monitor", "retire", "supersede"] = "gate"
    """Who decided: the gate, monitoring, a person (`wikitrace retire`), or `add` on a judge's
    word that a newer lesson contradicts or narrows this one (compiler/supersede.py)."""
    tested_on: str
    """The version whose memory the probes ran with."""
    time: str
    verdict: Literal["committed", "rejected", "retired", "undecided"]
    """undecided: some probe runs ended as errors and the rest did not suffice to commit; the
    insight stays ungated (an error is never counted as a failure)."""
    reason: str
    confidence: float
    thresholds: dict[str, float]
    """eta (least gain), delta (most falsification failures), beta (most regression damage);
    for monitoring, the violation rate and the least number of citations."""
    precondition: str
    narrowed_precondition: str | None = None
    figures: GateFigures | None = None
    narrowed_figures: GateFigures | None = None
    seeds: list[int] = Field(default_factory=list)
    probes: list[ProbeResult] = Field(default_factory=list)
    narrowed_probes: list[ProbeResult] = Field(default_factory=list)
    """The narrowed lesson's own probes, chosen anew for its precondition and run on fresh
    seeds (`narrowed_seeds`), so that it is not judged on the runs that shaped it."""
    narrowed_seeds: list[int] = Field(default_factory=list)
    evidence: str
    """The file in the same folder that holds every run or report behind the decision."""
    agent_runs: int = 0
    together: list[TogetherCheck] = Field(default_factory=list)
    """Committed with other lessons in one call: each test of the set it was in, in order
    (a set that failed lost its last lesson, and was tested again)."""
    monitoring: dict[str, Any] = Field(default_factory=dict)
    """For monitoring: citations, violations, their rate and bound, the episodes behind them."""
