"""Typed records: the native run format (input), the compilation, and every frontmatter header."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .work import kind_named

if TYPE_CHECKING:  # a task key is made when asked for: reading a log needs none
    from .tasks import TaskKey

Outcome = Literal["success", "failure"]
CompiledBy = Literal["llm", "offline"]
InsightOrigin = Literal["llm", "mined"]
"""llm: a model drew the lesson from one run; mined: it was found by counting how runs with
and without a pattern ended (compiler/mine.py), no model involved."""

TURN_TEXT_FIELDS = ("content", "reasoning", "action", "observation")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- native input format -------------------------------------------------------------


class ToolCall(_Strict):
    """One tool call an agent made in a turn, with its result when the log has it."""

    id: str | None = None
    """The call id the log gave it, if any."""
    name: str
    """The tool's name."""
    arguments: Any = None
    """The arguments as logged: a JSON object, or the raw string the model produced."""
    result: Any = None
    """What the tool returned, as logged."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else the log recorded for this call, verbatim."""


class Turn(_Strict):
    """One turn of a run. Every field is optional; nothing in it is dropped or shortened."""

    role: str | None = None
    """Who produced the turn: system, user, assistant, tool, environment, ..."""
    content: str | None = None
    """The message text."""
    reasoning: str | None = None
    """The agent's reasoning or thought, when logged apart from the message."""
    action: str | None = None
    """The action taken, as text (a shell command, `search[x]`, ...)."""
    observation: str | None = None
    """What the environment returned for the action."""
    tool_calls: list[ToolCall] | None = None
    """Tool calls made in this turn, each with its result."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Fields of the log that have no place above, verbatim."""


_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
REPO_FILES = 200
"""The most files a run's repository state lists (the first it touched)."""


class RepoState(_Strict):
    """The repository as a run saw it, where its log says so (a coding agent's session):
    what recall checks a lesson drawn from the run against (tools/first_message_drift.py)."""

    commit: str | None = None
    """The commit checked out when the run started (Codex's session_meta.git.commit_hash);
    None when the log names none (Claude Code logs name the branch alone)."""
    branch: str | None = None
    """The branch checked out (Claude Code's gitBranch, Codex's git.branch)."""
    started: str | None = None
    """When the run started (ISO 8601, as the log wrote it): a lesson's age, and the commit of
    that time when the log names none."""
    files: list[str] = Field(default_factory=list, max_length=REPO_FILES)
    """The files its tool calls touched (read, edited, written, patched), relative to its
    working folder, in the order first touched. Taken from the log: recall treats them as
    untrusted names, never as paths to open outside the repository."""

    @field_validator("commit")
    @classmethod
    def _commit_is_hex(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _COMMIT.match(value):
            raise ValueError("must be a commit's hex id (7 to 40 of 0-9a-f), or left out")
        return value


def repo_json(repo: RepoState | None) -> dict[str, Any] | None:
    """A run's repository state as the rows and the catalog hold it: JSON, unset fields left
    out."""
    return None if repo is None else repo.model_dump(mode="json", exclude_defaults=True)


class RunRecord(_Strict):
    """One past run: a line of the native JSON Lines input."""

    task_id: str
    """The task's id; several runs (attempts) may share it."""
    task: str
    """The task as the agent was given it."""
    origin: str | None = None
    """The task's source: the log family and dataset the run came from (`tau-bench/airline`,
    `tau2-bench/airline`, `swe-bench`, `inspect/<task>`, `claude-code`, ...). A task is its
    source and its id (corpus_schema/tasks.py): runs of two sources never share a task, even
    when their ids are the same. Optional: without it a task is known by its id alone."""
    task_type: str | None = None
    """A task family (ALFWorld type, tau domain, benchmark name, coding for a coding agent's
    session, ...)."""
    project: str | None = None
    """The code project the run worked in, for a coding agent's session: its repository
    (corpus_schema/projects.py): `github.com/owner/repo` when the log (or the folder's
    repository on the machine that built) names its remote, else the repository's main
    folder's name (a worktree's main one); None for a temporary folder. A task of a project
    with runs is shown that project's lessons alone (`prompt --project`)."""
    kind: str | None = None
    """The kind of work a coding session did: fix-bug, add-feature, refactor, tests, docs,
    build-ci-deps or investigate (corpus_schema/work.py), inferred from its task and the files
    it changed; None when unknown or unsure. A task of a project with no runs is shown the
    same kind of work's lessons from other projects (`prompt --kind`)."""
    kind_basis: str | None = None
    """How `kind` was inferred, or why it could not be ("unsure: ..."); None when given."""
    repo: RepoState | None = None
    """The repository as the run saw it (commit, branch, start, files touched), where its log
    says so; None for a run of no repository, or a log that says nothing of it."""
    success: bool = Field(strict=True)
    """Whether the run solved the task (true or false; not a string or a number)."""
    turns: list[Turn]
    """The trajectory, in order; turn numbers start at 1."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else about the run: reward, model, attempt, source file, ..."""

    @field_validator("task_id", mode="before")
    @classmethod
    def _task_id_as_text(cls, value: Any) -> Any:
        # Benchmarks number their tasks; an int id is the same id as its decimal text.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("task_id")
    @classmethod
    def _task_id_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("origin")
    @classmethod
    def _origin_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty (leave it out when the source is not known)")
        return value

    @field_validator("kind")
    @classmethod
    def _kind_known(cls, value: str | None) -> str | None:
        return None if value is None else kind_named(value)

    @property
    def outcome(self) -> Outcome:
        return "success" if self.success else "failure"

    @property
    def task_key(self) -> TaskKey:
        """Its task: its source and its id."""
        from .tasks import task_key

        return task_key(self.origin, self.task_id)


# --- compilation ----------------------------------------------------------------------


QuoteSource = Literal["action", "result", "read"]
Support = Literal["acted", "read-content-only"]
READ_ONLY: Support = "read-content-only"
"""The support of a lesson whose every found quote is content the agent read: never committed
by the gate without a probe that shows it helps (control/gate.py); shown marked
(catalog.READ_ONLY_MARK)."""


class Evidence(_Strict):
    """A verbatim quote from one raw turn, and whether it was found there."""

    turn: int
    """The 1-based turn number the quote comes from."""
    quote: str
    """The quoted text."""
    verified: bool
    """True only when the quote was found in that raw turn (whitespace-normalised)."""
    step: str | None = None
    """The run the turn belongs to, when not the page's own source run (a mined lesson quotes
    several runs)."""
    note: str | None = None
    """How the check went when not plainly: "typography and spacing normalised", "cited as
    turn 5; found in turn 7" (the turn was corrected), "too short to prove anything",
    "not found in the turn"."""
    source: QuoteSource | None = None
    """Where the quoted text is in its turn (compiler.evidence.quote_source): action, what the
    agent wrote or did; result, what came back from one of its actions; read, content it read
    (a file, a web page, search results, a document or message it was given). None when the
    quote was not found, or the corpus was made before sources were told apart."""


class Claim(_Strict):
    """A key decision (successful run) or a failure reason (failed run), with its evidence."""

    statement: str
    evidence: list[Evidence]
    basis: Literal["observed", "inferred"] = "observed"
    """observed: the log shows it; inferred: the compiler's reading of what the log shows."""

    @property
    def support(self) -> Support | None:
        """What its found quotes rest on (support_of)."""
        return support_of([self])


def support_of(claims: Iterable[Claim]) -> Support | None:
    """acted when a found quote of the claims is the agent's action or what came back from
    one; read-content-only when every found quote is content the agent read (how injected
    instructions become memory); None when no found quote says where it is from."""
    sources = {e.source for claim in claims for e in claim.evidence if e.verified and e.source}
    if sources & {"action", "result"}:
        return "acted"
    return READ_ONLY if sources else None


class Hypothesis(_Strict):
    """A lesson stated so that a test can prove it wrong."""

    precondition: str
    """When it applies: what must hold of the task or the state before acting on it."""
    behaviour: str
    """What to do differently when it applies."""
    expected_effect: str
    """What should be observed when it works."""
    verifier: str
    """The external signal that judges whether it worked (e.g. the task's success)."""


InsightStatus = Literal["ungated", "committed", "rejected", "retired"]
"""ungated (never tested), committed (passed the admission gate), rejected (failed it; kept on
record, never shown), retired (committed, then failed too often in later episodes)."""


class InsightDraft(_Strict):
    """A lesson drawn from one run, before it is numbered into the corpus."""

    title: str
    guideline: str
    applicability: str
    supporting_claims: list[int] = Field(default_factory=list)
    """1-based numbers of the claims in the run's compilation that support it."""
    hypothesis: Hypothesis | None = None
    """The lesson as a falsifiable hypothesis, when the compiler was asked for one."""


class PromptRef(_Strict):
    """Which template produced a compilation, by name and hash of its source."""

    template: str
    sha256: str


JUDGED = "judged"
"""`metadata.outcome_source` of a run whose label a model gave (`build --judge`)."""


def is_judged(metadata: dict[str, Any]) -> bool:
    """Whether a run's label was judged by a model rather than given by a verifier."""
    return metadata.get("outcome_source") == JUDGED


class Compilation(_Strict):
    """Why one run ended as it did: the compiler's output, ready to be written."""

    step: int
    outcome: Outcome
    judged: bool = False
    """The outcome is a model's verdict on the log (`build --judge`), not a verifier's."""
    compiled_by: CompiledBy
    model: str
    prompt: PromptRef | None = None
    title: str
    description: str
    claims: list[Claim]
    insights: list[InsightDraft] = Field(default_factory=list, max_length=3)
    notes: list[str] = Field(default_factory=list)
    """Facts about how it was made that a reader must know (cut prompt, repairs, ...)."""

    @property
    def unverified_quotes(self) -> int:
        return sum(not e.verified for claim in self.claims for e in claim.evidence)


# --- frontmatter headers ----------------------------------------------------------------


class RawHeader(_Strict):
    """Frontmatter of raw/step-NNNN/metadata.md."""

    step: str
    task_id: str
    task_type: str | None
    attempt: int
    """Attempt number: the run's metadata `attempt` if it has one, else its order (from 1)
    among the runs of its task in the input."""
    outcome: Outcome
    turns: int
    origin: str | None = None
    """The task's source (RunRecord.origin); absent when the log named none, and in pages
    made before sources were kept: the task is then known by its id alone."""
    project: str | None = None
    """The code project it worked in (RunRecord.project), if known."""
    kind: str | None = None
    """The kind of work it did (RunRecord.kind), if known."""
    kind_basis: str | None = None
    """How its kind was inferred, or why it could not be (RunRecord.kind_basis)."""
    repo: RepoState | None = None
    """The repository as it saw it (RunRecord.repo); absent when unknown, and in pages made
    before it was kept."""
    source: str
    """Input file and line the run was read from."""
    turns_file: str
    """Path of the turn log, relative to the corpus root."""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def task_key(self) -> TaskKey:
        """Its task: its source and its id."""
        from .tasks import task_key

        return task_key(self.origin, self.task_id)


class CompilationSummary(_Strict):
    """The frontmatter of compilation/step-NNNN.md but its claims: what the indexes show."""

    step: str
    outcome: Outcome
    title: str
    insights: list[str]
    """The insights drawn from this run: by a model, or mined with it as their source."""
    compiled_by: CompiledBy
    model: str
    prompt: PromptRef | None
    unverified_quotes: int
    raw: str
    judged: bool = False
    """The outcome is a model's verdict on the log, not a verifier's."""
    cited_by: list[str] = Field(default_factory=list)
    """The mined insights that rest on this run: as their source, or as one of the runs they
    quote (`insights` names those drawn from it). Its body says which."""
    data: str | None = None
    """Its data file (layout.data_rel), which holds its claims; None in a page of format 1,
    whose header holds them."""


class CompilationHeader(CompilationSummary):
    """What compilation/step-NNNN.md says of itself: its header, and its claims from its
    data file (read.read_page joins them)."""

    claims: list[Claim]
    """The claims of the body, machine-readable: each with its turns, quotes and whether
    every quote was found in its turn."""


COMPILATION_DATA_FIELDS = ("claims",)
"""The fields of a CompilationHeader kept in its data file, not on its page's header."""


MinedKind = Literal["contrast", "divergence"]


class MinedFinding(_Strict):
    """What a mined lesson rests on: counts over past runs, not a model's reading of one."""

    kind: MinedKind
    """contrast: a pattern whose presence separates failed from successful runs of the same
    tasks of a task type (an exact test stratified by task, Benjamini-Hochberg corrected;
    before issue 54, Fisher's exact test over all the type's runs); divergence: where a failed
    and a successful run of one task first took different actions."""
    pattern: str
    """The pattern's key (`uses:search`, `retry_after_error`, ...; `diverge` for a divergence)."""
    description: str
    """The pattern in words: "called `search`"."""
    with_pattern: list[int] = Field(default_factory=list)
    """[failed, total] among the runs that show the pattern."""
    without_pattern: list[int] = Field(default_factory=list)
    """[failed, total] among the runs that do not."""
    p_value: float | None = None
    """The exact test stratified by task, two-sided (Fisher's over all runs when
    `tasks_compared` is 0)."""
    q_value: float | None = None
    """The p-value adjusted for every pattern tried in the build (Benjamini-Hochberg)."""
    patterns_tried: int = 0
    judged_runs: int = 0
    """How many of the runs counted have an outcome a model judged (`build --judge`)."""
    tasks: int = 0
    """How many distinct tasks the runs with the pattern come from."""
    tasks_compared: int = 0
    """How many tasks the test compared runs within (each with runs with and without the
    pattern, and runs of both outcomes); 0 on a lesson mined before issue 54, whose test
    pooled every run of the type."""
    within_with: list[int] = Field(default_factory=list)
    """[failed, total] among the compared tasks' runs that show the pattern."""
    within_without: list[int] = Field(default_factory=list)
    """[failed, total] among the compared tasks' runs that do not."""
    expected_failed: float | None = None
    """Failures expected among `within_with` had the pattern made no difference within its
    task."""
    tasks_split: list[int] = Field(default_factory=list)
    """[more, fewer]: compared tasks whose runs with the pattern failed at a higher rate than
    those without, and at a lower rate (the rest: at the same)."""
    odds_ratio: float | None = None
    """Mantel-Haenszel common odds ratio of failure with the pattern, within tasks."""
    runs: list[str] = Field(default_factory=list)
    """Every run the finding counts (steps), the source run first."""
    task_id: str | None = None
    """The one task a divergence is about (the lesson applies to it alone)."""
    task_origin: str | None = None
    """The source of that task (RunRecord.origin), when its runs named one."""
    task_outcomes: list[int] = Field(default_factory=list)
    """For a divergence: [failed, total] among the task's runs."""
    shared_actions: int | None = None
    """For a divergence: how many actions the two runs took alike before they diverged."""
    version: str | None = None
    """Once it no longer holds, the version whose runs it failed (a lesson written before
    issue 58 names the version whose runs were counted); none: the runs of the version the
    page is in, as its page is written anew whenever its numbers change (so a chain of adds
    writes the page one build of its runs writes)."""
    holds: bool = True
    """False once a later version's runs no longer support it: kept on record, never shown."""

    @property
    def task(self) -> TaskKey | None:
        """The one task a divergence is about, with its source."""
        from .tasks import task_key

        return None if self.task_id is None else task_key(self.task_origin, self.task_id)

    @property
    def goes_with(self) -> Outcome:
        """The outcome the pattern goes with (a divergence: success, the run it recommends)."""
        if self.kind != "contrast" or len(self.with_pattern) != 2 or len(self.without_pattern) != 2:
            return "success"
        if self.tasks_compared and self.expected_failed is not None and self.within_with:
            return "failure" if self.within_with[0] > self.expected_failed else "success"
        (a, n1), (c, n0) = self.with_pattern, self.without_pattern
        return "failure" if a * n0 > c * n1 else "success"

    def counted(self) -> str:
        """A contrast's numbers in words, to follow "runs that {description}": compared
        within tasks when it was (the audit, the site, the first message and the page)."""
        (a, n1), (c, n0) = self.with_pattern or [0, 0], self.without_pattern or [0, 0]
        pooled = f"failed {a} of {n1}; runs that did not, {c} of {n0}"
        if not self.tasks_compared or len(self.within_with) != 2:
            return pooled
        (wa, wn), (wc, wn0) = self.within_with, self.within_without or [0, 0]
        more, fewer = self.tasks_split or [0, 0]
        return (
            f"failed {wa} of {wn} within the {self.tasks_compared} tasks tried both with and "
            f"without it, where {self.expected_failed:.1f} failures were expected had it made "
            f"no difference within its task (runs that did not: {wc} of {wn0}); they failed "
            f"more often in {more} of those tasks, less often in {fewer}. Over all runs, "
            f"{pooled}"
        )


class InsightHeader(_Strict):
    """Frontmatter of insight/insight-NNNN.md."""

    id: str
    title: str
    task_type: str | None
    source_step: str
    source_outcome: Outcome
    source_judged: bool = False
    """The source run's outcome is a model's verdict on its log, not a verifier's."""
    applicability: str
    source_claims: list[int]
    model: str
    compilation: str
    raw: str
    hypothesis: Hypothesis | None = None
    """Precondition, behaviour, expected effect and verifier, when the lesson has them."""
    compiled_by: InsightOrigin | None = None
    """How it was drawn: `mined` for a lesson counted from many runs (see `mined`); absent on
    a model's lessons."""
    mined: MinedFinding | None = None
    """The counts a mined lesson rests on."""
    status: InsightStatus = "ungated"
    support: Support | None = None
    """What the quotes behind it rest on (records.support_of): read-content-only when its only
    support is text the agent read, which may be an injected instruction; None for a mined
    lesson, one with no quote found, or a page made before this was told."""
    decisions: list[str] = Field(default_factory=list)
    """The gate and monitoring decisions about it, oldest first (gate/gate-NNNN.md)."""
    evidence: list[Claim] = Field(default_factory=list)
    """The claims it rests on, with their quotes, copied from its compilation so that the page
    shows its evidence (numbered as `source_claims` names them)."""
    data: str | None = None
    """Its data file (layout.data_rel), which holds the fields INSIGHT_DATA_FIELDS names; None
    in a page of format 1, whose header holds them."""
    supersedes: list[str] = Field(default_factory=list)
    """The older lessons this one replaces (`wikitrace retire OLD --by THIS`): each is
    retired, and the first message names them beside this one."""
    superseded_by: str | None = None
    """For a retired lesson a newer one replaces: that lesson's id."""

    @property
    def verified(self) -> bool:
        """Whether any quote behind it was found in its run (True for pages from before
        `evidence` was kept: their compilation says)."""
        return not self.evidence or any(e.verified for c in self.evidence for e in c.evidence)

    @property
    def rests_on(self) -> list[str]:
        """Every run it rests on (steps): its source first, then each other run a mined lesson
        compares or quotes (a model's lesson quotes its source alone)."""
        steps = [self.source_step, *(self.mined.runs if self.mined else ())]
        steps += [e.step for claim in self.evidence for e in claim.evidence if e.step]
        return list(dict.fromkeys(steps))

    @property
    def precondition(self) -> str:
        """When it applies: its hypothesis's precondition, or else its applicability."""
        return self.hypothesis.precondition if self.hypothesis else self.applicability


INSIGHT_DATA_FIELDS = ("applicability", "hypothesis", "mined", "evidence")
"""The fields of an InsightHeader kept in its data file, not on its page's header: the page's
body shows each of them once, as lines."""
