"""The settings a user gives, each declared once as one typed field: its option's flags, type,
default, help, environment variable, the commands that take it, whether a project's settings
file may set it (or why not) and whether a corpus's manifest records it.

From these fields `cli/common.py` (`option`, `options`) makes the click options,
`cli/settings.py` which keys a project's file may set, `docs/gen_cli.py` the tables of
docs/settings.md; the compiler's options (compiler/report.py), the model client
(transport/llm.py), the agent's runner and the gate (control/runner.py, control/gate_inputs.py)
read their defaults here, and the manifest's `model_settings` its names. Standard library only
(no click): `wikitrace --help` and `convert` read it without loading anything else.

Every option of every command is declared here (a test checks it): the settings of compiling
runs (build, add, update), of reading logs (convert too), of running the user's agent (gate,
update), of the gate, of update, of the first message (prompt), of reading trial rows (lift),
of monitoring, search, the hooks, lift's report, the other commands' own, and --no-deploy. A
setting with no flag (`("timeout",)`) is a settings file's key and a variable only
(cli/common.py, `FileSetting`).

Long because it is a table more than code: one declaration of a dozen lines for each setting,
kept in one place so that a key is declared once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# --- why a project's settings file may not set a key ----------------------------------------

RUNS_CODE = "it runs code"
SENDS_DATA = "it sends data to a server"
REDACTION = "it changes redaction"
OUTPUTS = "it chooses what is written where"
READS_OUTSIDE = "it reads files or lessons outside the folder"

# --- the defaults of a model call (the client's, the build's, the options') -----------------

MAX_OUTPUT_TOKENS = 4096
"""The longest answer one call may write."""
CONTEXT_TOKENS = 32_768
"""The model's context window: every call of a run's conversation fits in it."""
TEMPERATURE = 0.0
"""Sampling temperature of the model's calls."""
TIMEOUT_SECONDS = 300.0
"""Seconds before one call times out (and is retried)."""
MAX_RETRIES = 6
"""Backoff retries of a call on rate limits, time-outs and server errors."""

Kind = Literal["text", "int", "float", "flag", "switch", "choice", "path"]
"""What a value is: text, a number, a flag (on when given), a switch (--x/--no-x), one of
`choices`, or a path (`path_is`)."""


@dataclass(frozen=True)
class Setting:
    """One setting: everything the option, the settings-file key, the manifest and the docs
    say about it."""

    flags: tuple[str, ...]
    """The option's flags as click takes them: `("-f", "--format")`, `("--x/--no-x",)`; a
    setting with no flag (a tuning or test knob, set in a settings file or by its environment
    variable only) is named by its key alone: `("timeout",)`."""
    help: str
    """What --help says."""
    commands: tuple[str, ...]
    """The commands that take it (`lift eval` for a part of a group)."""
    kind: Kind = "text"
    default: Any = None
    """The built-in default (None: none; a flag's is off)."""
    name: str | None = None
    """The command's parameter name, when not the key's (`--redact`: `redact_patterns`)."""
    low: float | None = None
    """The least value of a number (None: no bound)."""
    high: float | None = None
    """The greatest value of a number (None: no bound)."""
    low_open: bool = False
    """`low` itself is not allowed."""
    high_open: bool = False
    """`high` itself is not allowed."""
    choices: tuple[str, ...] = ()
    path_is: Literal["any", "dir", "file"] = "any"
    exists: bool = False
    """A path that must exist."""
    multiple: bool = False
    """Repeatable: the value is a tuple (a list in a settings file)."""
    metavar: str | None = None
    hidden: bool = False
    """Left out of --help (a tuning option): --help-all and docs/cli.md show it."""
    more: str = ""
    """The rest of the help, which --help-all adds."""
    envvar: str | None = None
    required: bool = False
    """The command cannot run without it (from the command line, its variable or a file)."""
    refused: str | None = None
    """Why a project's settings file may not set it (one of the reasons above); None: it may."""
    recorded: bool = False
    """A corpus's manifest records its value (`model_settings`): `add` and `update` call the
    model as the build did."""

    @property
    def key(self) -> str:
        """Its name in a settings file: the first long flag without its dashes."""
        longs = [flag for flag in self.flags if flag.startswith("--")] or [self.flags[0]]
        return longs[0].split("/")[0].lstrip("-")

    @property
    def on_command_line(self) -> bool:
        """Whether a command takes it as an option (else only a file or its variable sets it)."""
        return self.flags[0].startswith("-")

    @property
    def variable(self) -> str | None:
        """The environment variable that sets it: the declared one, else WIKITRACE_<KEY> for a
        setting with no flag (so that a test or a one-off run need not write a file)."""
        if self.envvar is not None or self.on_command_line:
            return self.envvar
        return "WIKITRACE_" + self.key.upper().replace("-", "_")

    @property
    def param(self) -> str:
        """The command's parameter (and the manifest's field) name."""
        return self.name or self.key.replace("-", "_")


COMPILE = ("build", "add", "update")
"""The commands that compile runs."""
READ = ("convert", *COMPILE)
"""The commands that read logs."""

COMPILE_SETTINGS: tuple[Setting, ...] = (
    # Where the model is, and how many calls it is sent at once.
    Setting(
        ("--api-base",),
        "Base URL of the model's server (a local vLLM, Ollama, ...).",
        (*COMPILE, "gate", "hypothesize", "lift attribute", "lift drilldowns", "lift report"),
        more="gate and hypothesize: by default the one the corpus was built with.",
        refused=SENDS_DATA,
        recorded=True,
    ),
    Setting(
        ("--concurrency",),
        "Model calls in flight at once.",
        COMPILE,
        kind="int",
        default=8,
        low=1,
        high=512,
        metavar="N",
    ),
    # How much of a run one prompt holds, and whether the grader's details are in it.
    Setting(
        ("--context-tokens",),
        "The model's context window. Every call for a run fits in it: the prompt, the answer "
        "(max-output-tokens) and one repair round. A run of any length is shown to fit (long "
        "fields cut, then the run's skeleton with the turns that matter in full).",
        COMPILE,
        kind="int",
        default=CONTEXT_TOKENS,
        low=4000,
        hidden=True,
        recorded=True,
    ),
    Setting(
        ("max-prompt-tokens",),
        "The prompt's budget, instead of what --context-tokens leaves "
        "(context - 2 x max-output-tokens - 1500).",
        COMPILE,
        kind="int",
        low=1000,
        recorded=True,
    ),
    Setting(
        ("--outcome-details",),
        "Show the model the grader's details when the log has them (tau's reward_info, test "
        "results), labelled as the grader's. Off by default: graders often hold the expected "
        "answer, which then leaks into lessons.",
        COMPILE,
        kind="flag",
        hidden=True,
        refused=SENDS_DATA,
    ),
    # What a bad input record does to the build.
    Setting(
        ("--on-error",),
        "Bad input record: stop before writing, or skip it and report it.",
        READ,
        kind="choice",
        default="stop",
        choices=("stop", "skip"),
    ),
    # The cache of the model's replies.
    Setting(
        ("cache-dir",),
        "Cache of model replies (default: ~/.cache/wikitrace/llm). A rebuild of the same "
        "input, a resumed build or a judge asked again makes no call twice.",
        (*COMPILE, "lift attribute", "lift drilldowns", "lift report"),
        kind="path",
        path_is="dir",
        refused=OUTPUTS,
    ),
    Setting(
        ("no-cache",),
        "Neither read nor write the reply cache.",
        COMPILE,
        kind="flag",
    ),
    # What is redacted before a run is sent or written.
    Setting(
        ("--redact",),
        "Also redact text matching REGEX (repeatable).",
        COMPILE,
        name="redact_patterns",
        multiple=True,
        metavar="REGEX",
        more="Known secret formats (API keys, tokens, private keys, URL passwords, password "
        "assignments) are always redacted unless --no-redact.",
        refused=REDACTION,
    ),
    Setting(
        ("--redact-keep",),
        "Keep what REGEX matches in full although a secret rule found it (repeatable): a test "
        "fixture's fake key, a documented example token.",
        COMPILE,
        multiple=True,
        metavar="REGEX",
        hidden=True,
        refused=REDACTION,
    ),
    Setting(
        ("--no-redact",),
        "Send and write the runs exactly as logged.",
        COMPILE,
        kind="flag",
        refused=REDACTION,
    ),
    Setting(
        ("prompts-dir",),
        "Folder of templates that override the bundled ones of the same name.",
        (*COMPILE, "gate", "hypothesize", "prompt"),
        kind="path",
        path_is="dir",
        exists=True,
        refused=RUNS_CODE,
    ),
    # How one model call is made: sampling, answer length, time-out, retries.
    Setting(
        ("temperature",),
        "Sampling temperature of the model's calls.",
        COMPILE,
        kind="float",
        default=TEMPERATURE,
        recorded=True,
    ),
    Setting(
        ("max-output-tokens",),
        "The longest answer one call may write.",
        COMPILE,
        kind="int",
        default=MAX_OUTPUT_TOKENS,
        low=256,
        recorded=True,
    ),
    Setting(
        ("timeout",),
        "Seconds before one model call times out (and is retried).",
        COMPILE,
        kind="float",
        default=TIMEOUT_SECONDS,
        low=1,
    ),
    Setting(
        ("max-retries",),
        "Backoff retries of a call on rate limits, time-outs and server errors.",
        COMPILE,
        kind="int",
        default=MAX_RETRIES,
        low=0,
        high=20,
    ),
    # What the model is asked for, and how often an answer that does not hold is sent back.
    Setting(
        ("--hypotheses",),
        "Ask the model to state each insight as a falsifiable hypothesis too (precondition, "
        "behaviour, expected effect, verifier), as `wikitrace gate` tests.",
        COMPILE,
        kind="flag",
        hidden=True,
    ),
    Setting(
        ("invalid-retries",),
        "Times an answer that is not valid JSON of the right shape is sent back.",
        COMPILE,
        kind="int",
        default=2,
        low=0,
        high=10,
    ),
    Setting(
        ("quote-repairs",),
        "Times quotes not found in their turn are sent back for repair; those still not found "
        "are marked UNVERIFIED.",
        COMPILE,
        kind="int",
        default=1,
        low=0,
        high=10,
    ),
    # The judge: of the runs nothing else labels, and of lift's episodes.
    Setting(
        ("--judge",),
        "The judge: labels runs nothing else labels (sessions, traces), or lift's episodes.",
        (*COMPILE, "lift attribute", "lift drilldowns", "lift report"),
        metavar="MODEL",
        more="Any litellm model; lift attribute and drilldowns need it, lift's report attributes "
        "each Regression episode A-E with it, as `lift attribute` does (with --corpus). build, "
        "add, update: one call of MODEL (--api-base applies) each: success, failure or "
        "cannot_tell, why, and verbatim quotes checked against the log (sent back once when "
        "none is found). The label is marked as judged wherever the outcome is shown; a run "
        "the judge cannot tell, or whose quotes are not found, stays unlabelled. Text in a run "
        "that addresses a judge is named to it and listed in the report. Cached like compile "
        "calls; its calls and tokens are counted in the report.",
        refused=SENDS_DATA,
    ),
    # How hard a reasoning model thinks.
    Setting(
        ("--reasoning-effort",),
        "For a reasoning model: how hard it thinks (litellm's reasoning_effort; ignored by a "
        "model without one). Part of the cache key.",
        COMPILE,
        kind="choice",
        choices=("low", "medium", "high"),
        hidden=True,
        recorded=True,
    ),
    # Which lessons are kept: the model's, unfiltered or not, and those mined from contrasts.
    Setting(
        ("--unfiltered-insights",),
        'Leave out the prompt\'s "write no insight rather than a vague or over-broad one": '
        "the method as published keeps up to three insights per run, unfiltered.",
        COMPILE,
        kind="flag",
        hidden=True,
    ),
    Setting(
        ("--no-mine",),
        "Do not mine lessons from contrasts between runs. By default, with or without a model, "
        "each task type's runs are searched for patterns of action (a tool used, one tool "
        "before another, an action repeated after it failed, ...) that separate failed from "
        "successful runs of the same task (an exact test stratified by task, "
        "Benjamini-Hochberg corrected), and each task with both outcomes for where its runs "
        "first diverged; each finding becomes an insight with `compiled_by: mined`, its "
        "numbers and the runs it rests on.",
        COMPILE,
        kind="flag",
        hidden=True,
    ),
    # Sending the compile calls as a provider's batch.
    Setting(
        ("--batch",),
        "Send compile calls as a batch: half the price, answered within 24 h.",
        COMPILE,
        kind="flag",
        more="Through the provider's batch API (OpenAI-compatible and Azure models). The build "
        "waits, checking every batch-poll seconds; stopped while it waits (Ctrl-C), the same "
        "command again waits for the same batches without submitting anything twice. "
        "Corrections and quote repairs go in further batches. Needs the reply cache.",
        refused=SENDS_DATA,
    ),
    Setting(
        ("batch-poll",),
        "With --batch: how often to ask whether the batches are done.",
        COMPILE,
        kind="float",
        default=60.0,
        low=0.1,
        metavar="SECONDS",
    ),
    # Which processes do the work: the call workers, the offline build's workers, the fast path.
    Setting(
        ("call-workers",),
        "Processes that make the model calls, each importing litellm (about 225 MB each), so "
        "that litellm's work on each call (3 to 8 ms of CPU) runs on other cores than the "
        "build's own: with many calls in flight their answers queue less. One is enough unless "
        "it is the limit: a fast model server (a local vLLM, say) with hundreds of calls in "
        "flight, on a machine with cores to spare. Each call goes to the worker with the fewest "
        "calls waiting. 0: the calls are made in the build's process.",
        COMPILE,
        kind="int",
        default=1,
        low=0,
        high=64,
        metavar="N",
    ),
    Setting(
        ("workers",),
        "Processes that read, redact, compile and render the runs of an offline build "
        "(--model offline), on as many cores; in a build with a model, processes that write "
        "each run's files and pages while the calls flow. Default: offline, one for each core "
        "this process may use that other work leaves idle (by the load average), for a build "
        "of 5,000 runs or more; with a model, one for a build of 256 runs or more. Fewer runs "
        "are built in the build's own process, as with 1. The corpus is the same, byte for "
        "byte, whatever N.",
        COMPILE,
        kind="int",
        low=1,
        high=256,
        metavar="N",
    ),
    Setting(
        ("fast-path",),
        "Call a plain OpenAI-compatible server (--model openai/NAME with --api-base, a name "
        "litellm neither rewrites nor prices) with one shared HTTP client instead of litellm: "
        "the same requests, replies and errors, about 1 ms of CPU a call instead of 3 to 10, "
        "and no litellm import (8 s) at the start. fast-path = false sends every call through "
        "litellm.",
        COMPILE,
        kind="switch",
        default=True,
    ),
)
"""How runs are compiled (build, add, update), in the order --help lists them."""

READ_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("-f", "--format"),
        "The logs' format (`wikitrace convert --help-all`); auto: detect each file's.",
        READ,
        kind="choice",
        name="input_format",
        default="auto",
        metavar="NAME",
    ),
    Setting(
        ("--labels",),
        "Outcomes kept outside the logs (repeatable; a folder: every file).",
        READ,
        kind="path",
        exists=True,
        multiple=True,
        metavar="FILE",
        more="JSON {id: true|false|reward}, JSON Lines or CSV rows (id, success|reward), or "
        "SWE-bench reports. Ids are run ids or task ids. Wins over the log's own outcome.",
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--success-threshold",),
        "A run (logged, or your agent's, or a trial row) with a numeric reward or score and no "
        "success recorded succeeded when it is at least this (tau rewards, ATIF rewards, "
        "inspect scores; C=1, P=0.5, I=0).",
        (*READ, "gate", "lift eval", "lift report"),
        kind="float",
        default=1.0,
        hidden=True,
    ),
)
"""Which logs are read and how their outcomes are told (convert, build, add, update; the
threshold also of the agent's runs, gate's and update's, and of the trial rows `lift` reads)."""

RUN = ("gate", "update")
"""The commands that run the user's agent."""

RUNNER_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("--runner",),
        "How to run your agent on one task: a command with {task_id} and {memory} that prints "
        '{"success": true} or {"score": 0.8} as its last JSON line.',
        RUN,
        name="runner_template",
        required=True,
        envvar="WIKITRACE_RUNNER",
        metavar="COMMAND",
        more="{memory} is the corpus version's folder; {origin} (the task's source, needed where "
        "two sources share a task id), {seed}, {run_id}, {attempt} may be used too (env: "
        "WIKITRACE_RUNNER). Each value is one argument, never shell text; each run also gets "
        "$WIKITRACE_TASK_ID, $WIKITRACE_TASK_ORIGIN, $WIKITRACE_MEMORY, $WIKITRACE_SEED, "
        "$WIKITRACE_RUN_ID and $WIKITRACE_ATTEMPT, so a script under sh -c reads those (quoted) "
        "instead of a placeholder in its text, which is refused.",
        refused=RUNS_CODE,
    ),
    Setting(
        ("--runner-concurrency",),
        "Agent runs at once.",
        RUN,
        kind="int",
        default=4,
        low=1,
        high=256,
        metavar="N",
    ),
    Setting(
        ("runner-timeout",),
        "Seconds before an agent run is killed (and counted as an error).",
        RUN,
        kind="float",
        default=600.0,
        low=0.1,
    ),
    Setting(
        ("runner-retries",),
        "Extra attempts of an agent run that crashes, times out or prints no valid JSON.",
        RUN,
        kind="int",
        default=2,
        low=0,
        high=10,
    ),
)
"""How the user's agent is run (gate, update), in the order --help lists them."""

GATE = ("gate",)

GATE_SETTINGS: tuple[Setting, ...] = (
    # The tasks the probes are drawn from.
    Setting(
        ("--task-pool",),
        "The tasks your runner can run, one a line (gate: by default the corpus's tasks).",
        RUN,
        kind="path",
        path_is="file",
        exists=True,
        more="Others are never chosen. Each is a bare id (naming that task in every source; "
        "its text, type and source then come from the corpus), or JSON with task_id, task (its "
        "text), task_type and origin (its source, where two sources share the id).",
        refused=READS_OUTSIDE,
    ),
    # What decides, and the agent runs the sequential tests may spend on a lesson.
    Setting(
        ("--rule",),
        "What decides: sequential tests, bounds or the published estimates.",
        GATE,
        kind="choice",
        default="sequential",
        choices=("sequential", "bounds", "estimates"),
        more="sequential: probe pairs in rounds until anytime-valid tests decide; bounds: each "
        "figure's exact one-sided bound (at --confidence) on fixed probes; estimates: the "
        "figures themselves, as published (easier to pass by luck).",
    ),
    Setting(
        ("--max-runs",),
        "sequential: agent runs a lesson may take (both sides of every pair).",
        GATE,
        kind="int",
        default=400,
        low=2,
    ),
    Setting(
        ("--flip-rate",),
        "sequential: your agent's run-to-run flip rate; above 0 the tests judge the lesson's "
        "noise-free effects and --max-runs grows to --max-runs / (1 - 2 E)^4.",
        GATE,
        kind="float",
        default=0.0,
        low=0,
        high=0.3,
        more="Measure it by running tasks twice without memory on the same seed: with D the "
        "share of tasks whose two outcomes differ, E = (1 - sqrt(1 - 2 D)) / 2. 0 judges the "
        "outcomes as the runs show them (see docs/gate.md, outcome noise).",
    ),
    # How many probe tasks of each kind, at most.
    Setting(
        ("--targets",),
        "Target probe tasks, at most: those of the insight's type its precondition covers, "
        "most similar first (BM25); under sequential, pairs are drawn from them.",
        GATE,
        kind="int",
        default=8,
        low=0,
        hidden=True,
    ),
    Setting(
        ("--falsify",),
        "Falsification probe tasks, at most: boundary tasks, precondition violations (most "
        "alike to it), decoys of other types.",
        GATE,
        kind="int",
        default=8,
        low=0,
        hidden=True,
    ),
    Setting(
        ("--regress",),
        "Regression probe tasks, at most: tasks the corpus shows the agent solved.",
        GATE,
        kind="int",
        default=8,
        low=0,
        hidden=True,
    ),
    # Probe tasks given instead of chosen.
    Setting(
        ("--target-tasks",),
        "Use these target probes (ids, one a line).",
        GATE,
        kind="path",
        path_is="file",
        exists=True,
        hidden=True,
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--falsify-tasks",),
        "Use these falsification probes.",
        GATE,
        kind="path",
        path_is="file",
        exists=True,
        hidden=True,
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--regress-tasks",),
        "Use these regression probes.",
        GATE,
        kind="path",
        path_is="file",
        exists=True,
        hidden=True,
        refused=READS_OUTSIDE,
    ),
    # How often each probe runs on each side, and from which seed.
    Setting(
        ("--trials",),
        "Runs of each task on each side (with each memory), seeds SEED, SEED+1, ...",
        RUN,
        kind="int",
        default=1,
        low=1,
        hidden=True,
    ),
    Setting(
        ("--seed",),
        "The first seed: of the agent's runs (SEED, SEED+1, ...; gate, update), of the "
        "bootstrap's resampling (lift).",
        (*RUN, "lift eval", "lift report"),
        kind="int",
        default=0,
        hidden=True,
    ),
    # The figures a lesson must reach and the error rates the tests keep to.
    Setting(
        ("--bound-confidence",),
        "bounds: the confidence of each one-sided bound (exact binomial).",
        GATE,
        name="confidence",
        kind="float",
        default=0.9,
        low=0.5,
        high=1,
        high_open=True,
        hidden=True,
    ),
    Setting(
        ("--eta",),
        "Least transfer gain G worth having: sequential commits a lesson only once its net gain "
        "is shown above it (and stops one shown below 1.5 times it); bounds and estimates "
        "commit only at this G or more (its lower bound, or itself).",
        GATE,
        kind="float",
        default=0.1,
        hidden=True,
    ),
    Setting(
        ("--delta",),
        "Most falsification failure rate P_fail to commit (sequential: shown below it; bounds: "
        "its upper bound at most this).",
        GATE,
        kind="float",
        default=0.3,
        low=0,
        high=1,
        hidden=True,
    ),
    Setting(
        ("--beta",),
        "Most regression damage D_reg to commit (sequential: shown below it; bounds: its upper "
        "bound at most this).",
        GATE,
        kind="float",
        default=0.3,
        low=0,
        high=1,
        hidden=True,
    ),
    Setting(
        ("--alpha",),
        "sequential: chance, at most, that a lesson with D_reg >= --beta (on its falsification "
        "or its regression probes) or P_fail >= --delta, or one whose net gain is at most --eta, "
        "is committed (across one call's lessons: the expected share of such among those "
        "committed, by e-BH).",
        GATE,
        kind="float",
        default=0.1,
        low=0,
        high=1,
        low_open=True,
        high_open=True,
        hidden=True,
    ),
    Setting(
        ("--alpha-miss",),
        "sequential: chance, at most, that a lesson worth committing (gain >= --eta, harm at "
        "most half the limits) is stopped early.",
        GATE,
        kind="float",
        default=0.1,
        low=0,
        high=1,
        low_open=True,
        high_open=True,
        hidden=True,
    ),
    # What counts as a falsification failure, and whether a lesson failing off-target is narrowed.
    Setting(
        ("--p-fail",),
        "citations: a falsification probe fails when the agent's citation report says it used "
        "the lesson there (the method's wrong activation), for runs that return one, and when "
        "the outcome got worse otherwise; outcomes: when the outcome got worse, always.",
        GATE,
        kind="choice",
        default="citations",
        choices=("citations", "outcomes"),
        hidden=True,
    ),
    Setting(
        ("--no-narrow",),
        "Reject instead of narrowing a precondition.",
        GATE,
        kind="flag",
        hidden=True,
    ),
)
"""Which probes test a lesson, and what decides it (gate; the pool, trials and seed also of
update), in the order gate's --help lists them."""

UPDATE = ("update",)

UPDATE_SETTINGS: tuple[Setting, ...] = (
    # When an update is compared: the momentum trigger, or always.
    Setting(
        ("momentum",),
        "Weight of the past in the moving average of update directions.",
        UPDATE,
        kind="float",
        default=0.9,
        low=0,
        high=1,
        high_open=True,
    ),
    Setting(
        ("threshold",),
        "Compare when the cosine between this update's direction and the average is below it.",
        UPDATE,
        kind="float",
        default=0.5,
        low=-1,
        high=1,
    ),
    Setting(
        ("always-compare",),
        "Compare on every update.",
        UPDATE,
        kind="flag",
    ),
    # What a comparison runs: the rerun band, the tasks of each kind (the trials, the seed and
    # the pool are the gate's settings).
    Setting(
        ("rerun-band",),
        "Run the current memory once more per task and trial (other seeds) and deploy only when "
        "the candidate's gain is beyond that noise (a candidate that changes nothing passes "
        "about 5% of the time); without it, any higher mean deploys.",
        UPDATE,
        kind="switch",
        default=True,
    ),
    Setting(
        ("coverage",),
        "Tasks chosen to stand for the tasks seen so far (spread over task types).",
        UPDATE,
        kind="int",
        default=8,
        low=0,
    ),
    Setting(
        ("boundary",),
        "Tasks whose outcome changed with memory in earlier comparisons.",
        UPDATE,
        kind="int",
        default=4,
        low=0,
    ),
    Setting(
        ("fresh",),
        "Tasks of the runs added since the last comparison (newest first).",
        UPDATE,
        kind="int",
        default=4,
        low=0,
    ),
    # How an update's direction is measured (and, for prompt, near-duplicate lessons told).
    Setting(
        ("--embedding-model",),
        "What embeds the lessons (update: its direction; prompt: to tell near-duplicates "
        "apart by meaning): local (hashed words, offline, no download) or an embedding model "
        "litellm reaches (openai/text-embedding-3-small, ...).",
        ("update", "prompt"),
        default="local",
        hidden=True,
        refused=SENDS_DATA,
    ),
    Setting(
        ("embedding-api-base",),
        "Base URL of a local embedding server.",
        ("update", "prompt"),
        refused=SENDS_DATA,
    ),
    Setting(
        ("encode",),
        "What an update's direction encodes: the corpus (the insights and every run: what an "
        "agent reads; an update that only adds runs moves it too), or the insight set alone.",
        UPDATE,
        kind="choice",
        default="corpus",
        choices=("corpus", "insights"),
    ),
)
"""When `update` compares a candidate, on which tasks, and how its direction is measured."""

PROMPT = ("prompt",)
TASK_NAMED = (
    " A task is named by its id (the task of that id in every source) or SOURCE:ID (that "
    "source's alone), as raw/_index.md lists it."
)
"""How --exclude-task names a task (corpus_schema/tasks.py, TaskKey.named_in)."""

PROMPT_SETTINGS: tuple[Setting, ...] = (
    # Whose lessons and runs are shown: the task's type, project and kind, and tasks left out.
    Setting(
        ("--task-type",),
        "Only insights and past runs of this task type.",
        PROMPT,
        more="An unknown one is an error that lists the corpus's types. Without it, a corpus of "
        "several types keeps to the project's types, else to the domain of the task's most "
        "similar past runs when most of them agree, else lists no lesson.",
    ),
    Setting(
        ("--project",),
        "The code project the task is in: its name, remote or folder (default: the repository "
        "the current folder is in).",
        PROMPT,
        more="A folder stands for its repository (a worktree for its main one; its git remote, "
        "else the main folder's name); a remote URL and a name match the runs' keys (a name "
        "matches any remote of that name). A project with runs here gets only its own lessons "
        "and runs; one with none is told its domain by the task's words, as with no project, "
        "and a coding task then gets the same kind of work's from other coding projects, those "
        "that bear on it. The "
        "`[projects]` table of the user's settings file joins other names to a project.",
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--kind",),
        "The task's kind of work, for a corpus of coding sessions.",
        PROMPT,
        kind="choice",
        metavar="KIND",
        # The kinds (corpus_schema/work.py's KINDS) are the CLI's to add: `wikitrace --help`
        # reads this module, and work.py's patterns cost it some milliseconds.
        more="Each session's kind is inferred from its task and the files it changed. A task "
        "of a project with no runs here gets this kind's lessons and runs from other projects, "
        "and no other kind's (a project with runs gets its own, of every kind). Without it, the "
        "kind is inferred from the task's words; when it cannot be, every kind's lessons are "
        "listed and a warning says so.",
    ),
    Setting(
        ("--exclude-task",),
        "Leave out the runs of this task (repeatable): prompt and search show nothing drawn "
        "from them; view writes a corpus without them (and needs one at least).",
        ("prompt", "search", "view"),
        name="exclude_tasks",
        multiple=True,
        metavar="ID",
        more="prompt and search: the mounted corpus still holds them; mount a `wikitrace view` "
        "without them in an evaluation." + TASK_NAMED,
    ),
    # Where the agent sees the corpus, and what the message asks of it.
    Setting(
        ("--mount",),
        "Where the agent sees the corpus (prompt: the message's paths and commands use it; "
        "lift: a turn whose action names this folder drilled down).",
        ("prompt", "lift drilldowns", "lift report"),
        default="/work/corpus",
    ),
    Setting(
        ("--insights-only",),
        "The method's Insights Only control: the same insights, but no mounted corpus, no "
        "similar runs and no drill-down instructions.",
        PROMPT,
        kind="flag",
    ),
    Setting(
        ("--report-at",),
        "Ask for the citation report in the first message, or leave it for the harness to ask "
        "when the episode ends (the text: --report-request).",
        PROMPT,
        kind="choice",
        default="first",
        choices=("first", "end"),
    ),
    # How much the message lists: every type, similar runs, its budget, near-duplicates,
    # conflicts.
    Setting(
        ("--all-types",),
        "List every task type's insights and runs instead of keeping to the task's type.",
        PROMPT,
        kind="flag",
        hidden=True,
    ),
    Setting(
        ("--similar",),
        "How many similar past runs to list (BM25 over task texts).",
        PROMPT,
        kind="int",
        default=3,
        low=0,
        high=50,
        hidden=True,
    ),
    Setting(
        ("--message-tokens",),
        "Budget for the message (estimated as characters / 4). When not every insight fits, "
        "the most relevant ones are listed and the message points to insight/_index.md. 0: no "
        "budget, every insight.",
        PROMPT,
        kind="int",
        default=6000,
        low=0,
        hidden=True,
    ),
    Setting(
        ("--all-insights",),
        "List every insight, near-duplicates too (by default one of each group of lessons "
        "drawn alike from several runs is listed, with how many runs back it).",
        PROMPT,
        kind="flag",
        hidden=True,
    ),
    Setting(
        ("--flag-conflicts",),
        "Name the listed lessons whose applicability overlaps and whose source runs ended "
        "differently (one succeeded, one failed), as pairs to drill into before relying on "
        "either.",
        PROMPT,
        kind="flag",
        hidden=True,
    ),
)
"""What the first message shows, and how (prompt; where the agent sees the corpus also lift's),
in the order --help lists them."""

TRIAL_ROWS = ("lift eval", "lift report", "lift attribute", "lift drilldowns")
"""The commands that read trial rows."""

ROW_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("--baseline",),
        "The no-memory method.",
        TRIAL_ROWS,
        default="no-memory",
    ),
    Setting(
        ("--rerun",),
        "A second set of no-memory runs: its Gain and Regression are the noise band (never "
        "judged).",
        TRIAL_ROWS,
        default="no-memory-rerun",
    ),
    Setting(
        ("--resamples",),
        "Bootstrap resamples behind each confidence interval.",
        ("lift eval", "lift report"),
        kind="int",
        default=10_000,
        low=100,
    ),
)
"""How trial rows are read (lift and its parts): which methods are the baseline and the rerun,
and the bootstrap's resamples (its threshold and seed are declared above)."""

MONITOR = ("monitor",)

MONITOR_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("--controls",),
        "Reports of control episodes run without memory (each with its task_id and success): "
        "how often each task fails anyway. Repeatable; give them every call.",
        MONITOR,
        kind="path",
        path_is="file",
        exists=True,
        multiple=True,
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--min-judged",),
        "Fewest episodes that judged an insight before it can be retired.",
        MONITOR,
        kind="int",
        default=5,
        low=1,
    ),
    Setting(
        ("--max-violation-rate",),
        "Retire an insight once its violation rate is shown to be above this.",
        MONITOR,
        kind="float",
        default=0.3,
        low=0,
        high=1,
        low_open=True,
        high_open=True,
    ),
    Setting(
        ("--confidence",),
        "1 - the chance, at most, that an insight violated no more often than "
        "--max-violation-rate is ever retired, however often monitoring runs.",
        MONITOR,
        kind="float",
        default=0.95,
        low=0.5,
        high=1,
        high_open=True,
    ),
)
"""When monitoring retires an insight."""

SEARCH_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("--layer",),
        "Which layer to search: lessons, compilations (title, claims and quotes) or past tasks.",
        ("search",),
        name="kind",
        kind="choice",
        default="all",
        choices=("all", "insights", "compilations", "tasks"),
    ),
    Setting(
        ("--limit",),
        "Hits of each layer, at most.",
        ("search",),
        kind="int",
        default=10,
        low=1,
        high=100,
    ),
    Setting(
        ("--min-score",),
        'The least score a hit needs (from 0 to 1); below it for every entry, "no match".',
        ("search",),
        kind="float",
        default=0.15,
        low=0,
        high=1,
    ),
)
"""What `search` returns."""

HOOKS = ("hooks install", "hooks recall")

HOOK_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("--repo",),
        "The settings of the repository the current folder is in, instead of the user's "
        "(Claude Code: .claude/settings.local.json; Codex: .codex/; Gemini CLI: .gemini/).",
        ("hooks install", "hooks remove"),
        kind="flag",
        refused=OUTPUTS,
    ),
    Setting(
        ("--max-tokens",),
        "Budget of the recalled text (characters / 4); the most relevant lessons that fit.",
        HOOKS,
        kind="int",
        default=1500,
        low=0,
    ),
    Setting(
        # The agent waits for its hook: a second by default.
        ("--time-limit",),
        "Seconds recall may take; past them it answers nothing (logged) and exits 0.",
        HOOKS,
        kind="float",
        default=1.0,
        low=0.1,
        high=60,
        more="A hard deadline, kept by a watchdog thread: a corpus on a slow or hung disk never "
        "holds the agent up longer. `install` gives the agent's own limit for the hook 4 s more "
        "(5 s at least), for the process's start.",
    ),
)
"""How the agents' hooks recall (hooks install writes them into the recall command)."""

OTHER_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("--reason",),
        "Why, kept on record: versions --deploy's in the history (default: deployed by "
        "hand), retire's on its decision page (needed there).",
        ("versions", "retire"),
    ),
    Setting(
        # Each command's help says what it prints (`option(declared("json"), help=...)`).
        ("--json",),
        "Print the result as JSON on stdout.",
        (
            "build",
            "verify",
            "prompt",
            "view",
            "search",
            "cite",
            "audit",
            "add",
            "versions",
            "update",
            "gate",
            "monitor",
            "lift attribute",
            "lift drilldowns",
            "lift eval",
            "lift report",
            "export site",
            "export skill",
        ),
        name="as_json",
        kind="flag",
    ),
    Setting(
        ("--profile",),
        "'paper': the choices the published method states; 'default': ours.",
        ("build", "prompt", "add", "update", "gate", "lift eval"),
        kind="choice",
        choices=("default", "paper"),
        more="Options given, or set in a settings file, still win. See docs/paper.md.",
    ),
    Setting(
        ("--model",),
        "A litellm model (openai/gpt-4o-mini, ...) or 'offline'.",
        ("build",),
        default="offline",
        envvar="WIKITRACE_MODEL",
        more="Offline, the compilation is mechanical and the only insights are mined ones. "
        "Env: WIKITRACE_MODEL.",
        refused=SENDS_DATA,
    ),
    Setting(
        ("--task-file",),
        "Read the task from a file ('-' for stdin).",
        ("prompt",),
        metavar="FILE",
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--corpus",),
        "The corpus the memory methods ran with (lift report: for --judge; run-inspect: needed).",
        ("lift report", "lift run-inspect"),
        kind="path",
        path_is="dir",
        exists=True,
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--agent-model",),
        "The agent's model, as inspect names it.",
        ("lift run-inspect",),
        name="model",
        required=True,
        refused=SENDS_DATA,
    ),
    Setting(
        ("--unlabelled",),
        "Runs nothing labels: list them on stderr, or also write them with success null.",
        ("convert",),
        kind="choice",
        choices=("skip", "keep"),
        default="skip",
        more="Fill it in, then build; a build lists and leaves out runs still null.",
    ),
    Setting(
        ("--all",),
        "Check every version in CORPUS.versions/, not just the one CORPUS points at.",
        ("verify",),
        name="every_version",
        kind="flag",
    ),
    Setting(
        ("--remove",),
        "Stop trusting it.",
        ("trust",),
        kind="flag",
    ),
    Setting(
        ("--report-request",),
        "Print only what to send the agent when the episode ends, to get its citation report (no "
        "TASK needed).",
        ("prompt",),
        kind="flag",
    ),
    Setting(
        ("--lines",),
        "Only lines A to B of each turn, numbered.",
        ("turn",),
        metavar="A-B",
    ),
    Setting(
        ("--grep",),
        "Only the lines holding WORDS (any case), with 2 lines around each, numbered.",
        ("turn",),
        metavar="WORDS",
    ),
    Setting(
        ("--read-log",),
        "A read log the drill-down tools wrote ($WIKITRACE_READ_LOG); repeatable.",
        ("cite",),
        name="read_logs",
        kind="path",
        path_is="file",
        exists=True,
        multiple=True,
        refused=READS_OUTSIDE,
    ),
    Setting(
        ("--from-hook",),
        "Run as an agent's session-end hook: add the session its JSON names, in the background.",
        ("add",),
        kind="flag",
        more="Claude Code's SessionEnd or Stop hook input on stdin; Codex's notify argument as "
        "the one input. Exits 0 at once; problems go to --hook-log.",
        refused=OUTPUTS,
    ),
    Setting(
        ("--wait",),
        "With --from-hook: add in the foreground and exit as add does (1, 2 on a problem), to try "
        "a hook by hand. Not in an agent's hook (Claude Code reads exit 2 as 'go on').",
        ("add",),
        kind="flag",
        hidden=True,
    ),
    Setting(
        ("--hook-log",),
        "Where what each hook did is logged (default: ~/.cache/wikitrace/hook.log; add: with "
        "--from-hook). Env: WIKITRACE_HOOK_LOG.",
        ("hooks recall", "add"),
        kind="path",
        path_is="file",
        hidden=True,
        envvar="WIKITRACE_HOOK_LOG",
        refused=OUTPUTS,
    ),
    Setting(
        ("--nl",),
        "Print one JSON object a line (JSON Lines).",
        ("versions",),
        name="as_lines",
        kind="flag",
    ),
    Setting(
        ("--history",),
        "List every event (history.jsonl) instead.",
        ("versions",),
        kind="flag",
    ),
    Setting(
        ("--current",),
        "Print only the folder of the current version (for a mount, or a copy that must not copy "
        "the link itself).",
        ("versions",),
        kind="flag",
    ),
    Setting(
        ("--deploy",),
        "Point CORPUS at VERSION (vNNNN) instead: roll back, or deploy a candidate by hand; prints"
        " its folder.",
        ("versions",),
        metavar="VERSION",
        refused=OUTPUTS,
    ),
    Setting(
        ("--dry-run",),
        "Run nothing: print what the sequential gate can detect, and its cost in agent runs.",
        ("gate",),
        kind="flag",
    ),
    Setting(
        ("--by",),
        "The newer lesson that replaces INSIGHT.",
        ("retire",),
        name="newer",
        metavar="NEWER",
        refused=OUTPUTS,
    ),
    Setting(
        ("--second-model",),
        "A second judge (any model litellm reaches) that labels the same episodes: its agreement "
        "with the first (share alike and Cohen's kappa) is reported, as the method checks its "
        "judge. Twice the calls.",
        ("lift attribute",),
        refused=SENDS_DATA,
    ),
    Setting(
        ("--second-api-base",),
        "Base URL of the second judge's server.",
        ("lift attribute",),
        refused=SENDS_DATA,
    ),
    Setting(
        ("--strict",),
        "Warnings (duplicate trials, tasks with no baseline) are errors.",
        ("lift eval",),
        kind="flag",
    ),
    Setting(
        ("--csv",),
        "CSV on stdout.",
        ("lift eval",),
        name="as_csv",
        kind="flag",
    ),
    Setting(
        ("--plot",),
        "Also draw Gain and Regression per method to this PNG (needs wikitrace[plot]).",
        ("lift eval", "lift report"),
        kind="path",
        path_is="file",
        refused=OUTPUTS,
    ),
    Setting(
        ("--epochs",),
        "Trials of each sample per method (odd: the baseline's majority never ties).",
        ("lift run-inspect",),
        kind="int",
        low=1,
        default=3,
    ),
    Setting(
        ("--method",),
        "Run only these methods (repeat; default: all four).",
        ("lift run-inspect",),
        name="methods",
        kind="choice",
        choices=("no-memory", "no-memory-rerun", "insights-only", "wikitrace"),
        multiple=True,
    ),
    Setting(
        ("-T",),
        "A task argument, key=value (repeat).",
        ("lift run-inspect",),
        name="task_args",
        multiple=True,
        refused=RUNS_CODE,
    ),
    Setting(
        ("-M",),
        "A model argument, key=value (repeat).",
        ("lift run-inspect",),
        name="model_args",
        multiple=True,
        refused=SENDS_DATA,
    ),
    Setting(
        ("--samples",),
        "Run only the first N samples.",
        ("lift run-inspect",),
        name="limit",
        kind="int",
        low=1,
    ),
    Setting(
        ("--no-leave-one-out",),
        "Show lessons drawn from the sample's own task too (by default they are left out).",
        ("lift run-inspect",),
        kind="flag",
    ),
    Setting(
        ("--sandbox/--no-sandbox",),
        "Copy the corpus into the sample's sandbox (default: when the task has one); without, the "
        "agent gets the MCP server's tools.",
        ("lift run-inspect",),
        name="use_sandbox",
        kind="switch",
    ),
    Setting(
        ("--http",),
        "Serve streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio (loopback only).",
        ("mcp",),
        name="http_port",
        kind="int",
        low=1,
        high=65535,
        metavar="PORT",
        refused=SENDS_DATA,
    ),
    Setting(
        ("--list",),
        "Print the tools and resources a client would see, as JSON, and exit.",
        ("mcp",),
        name="list_only",
        kind="flag",
    ),
    Setting(
        ("-o", "--output"),
        "The folder this command writes (it appears when complete).",
        ("build", "view", "lift run-inspect", "export site", "export skill"),
        kind="path",
        path_is="dir",
        required=True,
        more="build: the corpus, a link to its first version, OUTPUT.versions/v0001 beside it "
        "(the store of its versions); view: the view; lift run-inspect: the logs (a folder a "
        "method) and results.jsonl; export: the site, or the skill, whose folder's name is the "
        "skill's name (lowercase, digits, hyphens), e.g. .claude/skills/airline-memory.",
        refused=OUTPUTS,
    ),
    Setting(
        ("--force",),
        "Replace OUTPUT, once the new one is complete.",
        ("build", "view", "export site", "export skill"),
        kind="flag",
        more="The old one stays current until then; only a folder wikitrace wrote (a corpus, a "
        "view, an export) is ever replaced.",
        refused=OUTPUTS,
    ),
)
"""The other commands' own settings: where a command writes, what it prints, which part it runs
(each command's, in the order `wikitrace --help` lists the commands)."""

VERSION_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("--no-deploy",),
        "Leave the new version as a candidate; CORPUS keeps pointing where it did.",
        ("add", "gate", "monitor", "retire", "hypothesize"),
        kind="flag",
    ),
)
"""What becomes of the version a command makes."""

SETTINGS: tuple[Setting, ...] = (
    COMPILE_SETTINGS
    + READ_SETTINGS
    + RUNNER_SETTINGS
    + GATE_SETTINGS
    + UPDATE_SETTINGS
    + PROMPT_SETTINGS
    + ROW_SETTINGS
    + MONITOR_SETTINGS
    + SEARCH_SETTINGS
    + HOOK_SETTINGS
    + OTHER_SETTINGS
    + VERSION_SETTINGS
)
"""Every declared setting."""


def declared(key: str) -> Setting:
    """The setting of settings-file key `key` (KeyError when none is declared)."""
    found = [setting for setting in SETTINGS if setting.key == key]
    if len(found) != 1:
        raise KeyError(key)
    return found[0]


def default(key: str) -> Any:
    """The built-in default of the setting `key`: what the core's own fields default to."""
    return declared(key).default


def recorded() -> tuple[str, ...]:
    """The names a manifest's `model_settings` keeps, in declaration order."""
    return tuple(setting.param for setting in SETTINGS if setting.recorded)


def recorded_defaults() -> dict[str, Any]:
    """Each name a manifest's `model_settings` keeps, with its built-in default: `add` and
    `update` take the recorded value of a setting the user left at this default."""
    return {setting.param: setting.default for setting in SETTINGS if setting.recorded}
