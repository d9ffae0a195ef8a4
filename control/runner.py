"""The runner protocol: run the user's agent on a task with a given memory, record every run.

The user gives a command template such as `python run_agent.py --task {task_id} --memory
{memory} --seed {seed}`. For each run wikitrace fills it in (after splitting it like a shell
would, so a value is always one argument and never shell syntax), and sets the same values as
environment variables (`ENVIRONMENT`). A task is its source and its id there (`TaskKey`):
`{origin}` names the source (empty for a task that names none), so a corpus where two sources
share an id can be run; a template that names only `{task_id}` cannot tell those tasks apart,
and the gate and `update` refuse such a corpus. A template that would put a value inside code
another program parses (the script of `sh -c`, `cmd /c`, `python -c`, a command `ssh` or `ray
job submit` hands to a remote shell) is refused: a task id such as `; rm -rf ~` would run. Runs
go with bounded concurrency and a timeout; wikitrace reads the last line of each one's stdout
that is a JSON object: `success` (true/false) or `score` (a number; at or above the threshold is
a success), and optionally `trajectory` (the path of the log it wrote). Anything else the agent
prints on stdout or stderr is kept only as a short tail for diagnosis.

A run that exits non-zero, times out or prints no valid result is an error: it is retried up to
`retries` times and, if it never succeeds, recorded as an error. An error is never counted as
a success or a failure. Every run, error or not, is appended to the store's runs.jsonl as soon
as it ends, so each decision can name the runs behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.history import now
from wikitrace.corpus_schema.ledger import AgentRun, Attempt, append_line, count_lines
from wikitrace.corpus_schema.setting_fields import default
from wikitrace.corpus_schema.tasks import TaskKey, task_key

PLACEHOLDERS = ("task_id", "origin", "memory", "seed", "run_id", "attempt")
"""What a runner template may name: the task's id and its source (empty when it names none),
the corpus version's folder, the seed, the run's id in runs.jsonl and the attempt number (1
for the first try)."""
REQUIRED = ("task_id", "memory")
ENVIRONMENT = {
    name: "WIKITRACE_TASK_ORIGIN" if name == "origin" else f"WIKITRACE_{name.upper()}"
    for name in PLACEHOLDERS
}
"""The environment variable each run gets for each placeholder, whether the template names it
or not: `WIKITRACE_TASK_ID`, `WIKITRACE_TASK_ORIGIN`, `WIKITRACE_MEMORY`, `WIKITRACE_SEED`,
`WIKITRACE_RUN_ID`, `WIKITRACE_ATTEMPT`. A script reads them (quoted: "$WIKITRACE_TASK_ID")
instead of having values spliced into its text."""
TAIL = 2000
"""Characters of the agent's stderr (and stray stdout) kept with an error."""


class AgentResult(BaseModel):
    """The JSON object an agent prints as its last stdout line that is one."""

    model_config = ConfigDict(extra="allow")

    success: bool | None = Field(default=None, strict=True)
    """Whether the agent solved the task."""
    score: float | None = None
    """A graded result; a success when at or above the threshold."""
    trajectory: str | None = None
    """Where the agent wrote its log of this run (any format wikitrace reads)."""


@dataclass(frozen=True)
class RunRequest:
    task_id: str
    memory: str
    memory_path: Path
    seed: int
    origin: str | None = None
    """The task's source; None for a task known by its id alone."""

    @property
    def task_key(self) -> TaskKey:
        return task_key(self.origin, self.task_id)


def cited_insights(run: AgentRun) -> list[str] | None:
    """The insights a run's citation report says it used (`"used": {"insights": [...]}` in
    the JSON the agent printed), or None when it returned no report."""
    used = run.output.get("used")
    insights = used.get("insights") if isinstance(used, dict) else None
    return insights if isinstance(insights, list) else None


@dataclass
class RunnerSpec:
    """How to run the agent."""

    template: str
    concurrency: int = default("runner-concurrency")
    timeout_seconds: float = default("runner-timeout")
    retries: int = default("runner-retries")
    """Extra attempts after an error."""
    success_threshold: float = default("success-threshold")
    cwd: Path | None = None
    argv: list[str] = field(init=False)
    tells_origin: bool = field(init=False)
    """Whether the command names the task's source (`{origin}` or $WIKITRACE_TASK_ORIGIN), so
    two sources' tasks of one id can be told apart."""

    def __post_init__(self) -> None:
        self.argv, named = parse_template(self.template)
        self.tells_origin = "origin" in named


def parse_template(template: str) -> tuple[list[str], set[str]]:
    """Split the template like a shell and check its placeholders: (its arguments, the
    placeholders it names, as such or as their variables); InputError names the fault. A
    placeholder in code another program parses is refused (`check_not_code`)."""
    try:
        argv = shlex.split(template)
    except ValueError as error:
        raise InputError(f"cannot split the command: {error}", field="--runner") from None
    if not argv:
        raise InputError("the command is empty", field="--runner")
    named: set[str] = set()
    named_in: list[set[str]] = []
    for token in argv:
        named_in.append(set())
        named |= {name for name, variable in ENVIRONMENT.items() if variable in token}
        try:
            parts = list(string.Formatter().parse(token))
        except ValueError as error:
            raise InputError(
                f"{token!r}: {error}", field="--runner", hint="write a literal brace as {{ or }}"
            ) from None
        for _, name, spec, _ in parts:
            if name is None:
                continue
            if name not in PLACEHOLDERS or spec:
                raise InputError(
                    f"unknown placeholder {{{name}{':' + spec if spec else ''}}} in {token!r}",
                    field="--runner",
                    hint="use " + ", ".join("{" + p + "}" for p in PLACEHOLDERS),
                )
            named.add(name)
            named_in[-1].add(name)
    check_not_code(argv, named_in)
    missing = [name for name in REQUIRED if name not in named]
    if missing:
        raise InputError(
            "the command never names " + " or ".join("{" + m + "}" for m in missing),
            field="--runner",
            hint="every run must be told its task and the memory to use: name them, or "
            f"read ${ENVIRONMENT['task_id']} and ${ENVIRONMENT['memory']}",
        )
    return argv, named


# --- programs that run a string as code ----------------------------------------------------

_SHELLS = frozenset(
    {"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "pdksh", "yash", "fish"}
    | {"csh", "tcsh"}
)
"""POSIX-like shells: `-c` (alone or in a cluster such as `-ec`) makes the first operand after
the options a script."""
_SHELL_VALUED = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


@dataclass(frozen=True)
class _Inline:
    """An interpreter whose option runs its value as code: `python -c CODE`, `perl -e CODE`."""

    code: str
    """Short options whose value is code (`c` for -c); attached (`-cCODE`) or the next one."""
    long_code: tuple[str, ...] = ()
    valued: str = ""
    """Short options that take a value (skipped)."""
    stop: str = ""
    """Short options after which the rest are the program's arguments (`python -m mod`)."""


_INLINE = {
    "python": _Inline("c", valued="WXQ", stop="m"),
    "pypy": _Inline("c", valued="WXQ", stop="m"),
    "perl": _Inline("eE", valued="ICmMx"),
    "ruby": _Inline("e", valued="ICEFrxK"),
    "node": _Inline("ep", ("--eval", "--print"), valued="r"),
    "php": _Inline("r", valued="cdz"),
}
_SSH_VALUED = "BbcDEeFIiJLlmOopQRSWw"
_PROGRAM = re.compile(r"^([a-z]+?)(?:[0-9][0-9.]*)?(?:\.exe)?\Z")


def _program(token: str) -> str:
    """A command's program as this check knows it: `/usr/bin/python3.12` -> `python`."""
    name = re.split(r"[\\/]", token)[-1].lower()
    found = _PROGRAM.match(name)
    return found.group(1) if found else name


def _code_at(argv: list[str], at: int) -> tuple[str, list[int]]:
    """Whether argv[at] names a program that runs some of the arguments after it as code:
    (how it is named in a message, the indexes of those arguments)."""
    program = _program(argv[at])
    if program in _SHELLS:
        return _shell_code(program, argv, at)
    if program == "cmd":
        return _cmd_code(argv, at)
    if program in ("powershell", "pwsh"):
        return _powershell_code(program, argv, at)
    if program == "su":
        return _su_code(argv, at)
    if program == "ssh":
        return _ssh_code(argv, at)
    if program == "ray" and argv[at + 1 : at + 3] == ["job", "submit"]:
        return _ray_code(argv, at)
    inline = _INLINE.get(program)
    if inline is None:
        return "", []
    return _inline_code(program, inline, argv, at)


def _shell_code(program: str, argv: list[str], at: int) -> tuple[str, list[int]]:
    """`sh -c SCRIPT` (or `-ec`, `--command`): the first operand after the options."""
    script, index = False, at + 1
    while index < len(argv):
        token = argv[index]
        if token == "--":
            index += 1
            break
        if token in _SHELL_VALUED:
            index += 2
            continue
        if token in ("--command", "-command") or token.startswith("--command="):
            if "=" in token:
                return f"{program} --command", [index]
            script = True
        elif token[:1] == "-" and token[1:2] != "-" and "c" in token[1:]:
            script = True
        elif token[:1] not in ("-", "+") or len(token) == 1:
            break
        index += 1
    return (f"{program} -c", [index]) if script and index < len(argv) else ("", [])


def _cmd_code(argv: list[str], at: int) -> tuple[str, list[int]]:
    """`cmd /c COMMAND` (or /k, /r): everything from the switch on."""
    for index in range(at + 1, len(argv)):
        if argv[index].lower()[:2] in ("/c", "/k", "/r"):
            return "cmd /c", list(range(index, len(argv)))
    return "", []


def _powershell_code(program: str, argv: list[str], at: int) -> tuple[str, list[int]]:
    """PowerShell runs as a command everything from `-Command` (or the first operand) on,
    unless it is given `-File`."""
    for index in range(at + 1, len(argv)):
        token = argv[index].lower()
        if token in ("-file", "-f", "/file"):
            return "", []
        if not token.startswith(("-", "/")) or token.lstrip("-/") in (
            "c",
            "command",
            "ec",
            "e",
            "encodedcommand",
        ):
            return f"{program} -Command", list(range(index, len(argv)))
    return "", []


def _su_code(argv: list[str], at: int) -> tuple[str, list[int]]:
    """su USER -c CMD: its options may follow the user."""
    for index in range(at + 1, len(argv)):
        token = argv[index]
        if token.startswith("--command="):
            return "su -c", [index]
        if token == "--command" or (token[:1] == "-" and token[1:2] != "-" and "c" in token):
            return ("su -c", [index + 1]) if index + 1 < len(argv) else ("", [])
    return "", []


def _ssh_code(argv: list[str], at: int) -> tuple[str, list[int]]:
    """`ssh [options] DESTINATION COMMAND...`: what follows the destination."""
    index = at + 1
    while index < len(argv) and argv[index][:1] == "-" and argv[index] != "--":
        letters = argv[index][1:]
        for place, letter in enumerate(letters):
            if letter in _SSH_VALUED:
                index += place == len(letters) - 1  # its value is the next argument
                break
        index += 1
    if index < len(argv) and argv[index] == "--":
        index += 1
    # After the destination, every argument is joined into one command for the remote shell.
    return "ssh", list(range(index + 1, len(argv)))


def _ray_code(argv: list[str], at: int) -> tuple[str, list[int]]:
    """`ray job submit`: the entrypoint (after `--`, else every argument that is not an
    option) is run by a shell on the cluster."""
    rest = range(at + 3, len(argv))
    if "--" in argv[at + 3 :]:
        return "ray job submit", list(range(argv.index("--", at + 3) + 1, len(argv)))
    return "ray job submit", [i for i in rest if argv[i][:1] != "-"]


def _inline_code(program: str, inline: _Inline, argv: list[str], at: int) -> tuple[str, list[int]]:
    """An interpreter's options whose value is code (`python -c CODE`, `node --eval CODE`),
    up to the first operand (or the option after which the rest are the program's)."""
    code: list[int] = []
    index = at + 1
    while index < len(argv):
        token = argv[index]
        if token == "--" or token[:1] != "-" or token == "-":
            break
        name, equals, _ = token.partition("=")
        if name in inline.long_code:
            code.append(index if equals else index + 1)
            index += 1 if equals else 2
            continue
        if token.startswith("--"):
            index += 1
            continue
        letters, skip = token[1:], 1
        for place, letter in enumerate(letters):
            attached = place < len(letters) - 1
            if letter in inline.code:
                code.append(index if attached else index + 1)
                skip = 1 if attached else 2
                break
            if letter in inline.valued:
                skip = 1 if attached else 2
                break
            if letter in inline.stop:
                return (f"{program} -{inline.code[:1]}", code) if code else ("", [])
        index += skip
    code = [i for i in code if i < len(argv)]
    return (f"{program} -{inline.code[:1] or 'e'}", code) if code else ("", [])


def check_not_code(argv: list[str], named_in: list[set[str]]) -> None:
    """Refuse a template that puts a placeholder inside code: the script a shell runs (`sh -c
    '... {task_id}'`), a `cmd /c` or PowerShell command, `python -c` code, what `ssh` hands to
    the remote shell. A value is spliced into that text, so a task id like `; touch pwned`,
    `$(...)` or a backquote would run. `named_in` is the placeholders each argument names."""
    for at in range(len(argv)):
        how, code = _code_at(argv, at)
        for index in code:
            if not named_in[index]:
                continue
            name = sorted(named_in[index])[0]
            variable = ENVIRONMENT[name]
            if how == "ray job submit":
                safe = (
                    "ray runs the entrypoint through a shell on the cluster: call a local "
                    "script that passes the values as the job's environment variables "
                    f"(runtime_env env_vars, e.g. {variable}) with a fixed entrypoint; see "
                    "docs/scale.md"
                )
            elif how == "ssh":
                safe = (
                    "ssh joins its arguments into one command line for the remote shell: call a "
                    f"local script that reads ${variable} (set for every run) and quotes it for "
                    "the remote side (printf %q), or sends it on stdin"
                )
            elif how.startswith(tuple(_SHELLS)) or how == "su -c":
                safe = (
                    f'quote the variable every run gets in the script ("${variable}"), or pass '
                    "{" + name + "} as an argument of its own after the script and quote it "
                    'there: sh -c \'python run.py --task "$1" --memory "$2"\' sh '
                    "{task_id} {memory}"
                )
            elif how == "cmd /c":
                safe = f"read %{variable}% (set for every run) in a script file instead"
            elif how.endswith("-Command"):
                safe = f"read $env:{variable} (set for every run) instead"
            else:
                safe = (
                    "pass {" + name + "} as an argument of its own after the code, or read "
                    f"the environment variable {variable}, set for every run"
                )
            raise InputError(
                f"{{{name}}} would be spliced into the code `{how}` runs ({argv[index]!r}): a "
                f"value (a task id) holding ; $( ) ` or a newline would run as a command; {safe}",
                field="--runner",
            )


def read_result(stdout: str, threshold: float) -> tuple[AgentResult | None, bool | None, str]:
    """The result in an agent's stdout: (result, success, error); error is '' when valid."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        try:
            result = AgentResult.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return None, None, f"field '{where}': {first['msg']}"
        if result.success is not None:
            return result, result.success, ""
        if result.score is not None:
            return result, result.score >= threshold, ""
        return None, None, "the JSON object has neither 'success' nor 'score'"
    return None, None, "printed no JSON object on stdout"


class RunLog:
    """runs.jsonl: one line per finished run; ids go on from the lines already there."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.next_number = count_lines(path) + 1

    def new_id(self) -> str:
        ident = f"run-{self.next_number:06d}"
        self.next_number += 1
        return ident

    def append(self, run: AgentRun) -> None:
        append_line(self.path, run)


RunDone = Callable[[AgentRun], None]


class Runner:
    """Runs requests through the spec, records each, and hands back the records in order."""

    def __init__(self, spec: RunnerSpec, log: RunLog, purpose: str) -> None:
        self.spec = spec
        self.log = log
        self.purpose = purpose

    def run(self, requests: Sequence[RunRequest], done: RunDone | None = None) -> list[AgentRun]:
        return asyncio.run(self._run_all(requests, done))

    async def _run_all(
        self, requests: Sequence[RunRequest], done: RunDone | None
    ) -> list[AgentRun]:
        slots = asyncio.Semaphore(self.spec.concurrency)
        ids = [self.log.new_id() for _ in requests]

        async def one(request: RunRequest, ident: str) -> AgentRun:
            async with slots:
                run = await self._run_one(request, ident)
            self.log.append(run)
            if done is not None:
                done(run)
            return run

        return list(await asyncio.gather(*(one(r, i) for r, i in zip(requests, ids, strict=True))))

    def command(self, request: RunRequest, ident: str, attempt: int) -> list[str]:
        values = _values(request, ident, attempt)
        return [token.format_map(values) for token in self.spec.argv]

    def environment(self, request: RunRequest, ident: str, attempt: int) -> dict[str, str]:
        """The environment of an attempt: wikitrace's own, and each placeholder's value."""
        values = _values(request, ident, attempt)
        return {**os.environ, **{ENVIRONMENT[name]: values[name] for name in PLACEHOLDERS}}

    async def _run_one(self, request: RunRequest, ident: str) -> AgentRun:
        started, clock = now(), time.monotonic()
        attempts: list[Attempt] = []
        argv: list[str] = []
        result: AgentResult | None = None
        success: bool | None = None
        for number in range(1, self.spec.retries + 2):
            argv = self.command(request, ident, number)
            attempt, stdout = await self._attempt(argv, self.environment(request, ident, number))
            attempts.append(attempt)
            if attempt.error is None:
                result, success, problem = read_result(stdout, self.spec.success_threshold)
                if result is not None:
                    break
                attempt.error = problem
                attempt.stderr_tail = (attempt.stderr_tail + "\n" + stdout[-TAIL:]).strip()[-TAIL:]
        return AgentRun(
            id=ident,
            purpose=self.purpose,
            task_id=request.task_id,
            origin=request.origin,
            memory=request.memory,
            memory_path=str(request.memory_path),
            seed=request.seed,
            command=argv,
            started=started,
            seconds=round(time.monotonic() - clock, 3),
            status="ok" if result is not None else "error",
            success=success if result is not None else None,
            score=result.score if result else None,
            trajectory=result.trajectory if result else None,
            error=None
            if result is not None
            else f"{len(attempts)} attempts failed; last: {attempts[-1].error}",
            attempts=attempts,
            output=result.model_dump(mode="json", exclude_none=True) if result else {},
        )

    async def _attempt(self, argv: list[str], env: dict[str, str]) -> tuple[Attempt, str]:
        clock = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.spec.cwd,
                start_new_session=True,  # its own process group, so a kill reaches its children
            )
        except OSError as error:
            return Attempt(exit_code=None, seconds=0.0, error=f"cannot start: {error}"), ""
        try:
            out, err = await asyncio.wait_for(process.communicate(), self.spec.timeout_seconds)
        except TimeoutError:
            _kill(process)
            await process.communicate()
            return (
                Attempt(
                    exit_code=None,
                    seconds=round(time.monotonic() - clock, 3),
                    error=f"timed out after {self.spec.timeout_seconds:g} s",
                ),
                "",
            )
        except BaseException:  # Ctrl-C or cancellation: leave no agent running
            _kill(process)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(process.communicate(), 5)  # reap it, close its pipes
            raise
        stderr = err.decode("utf-8", "replace")[-TAIL:]
        attempt = Attempt(
            exit_code=process.returncode,
            seconds=round(time.monotonic() - clock, 3),
            stderr_tail=stderr,
        )
        if process.returncode != 0:
            last = stderr.strip().splitlines()[-1:] or [""]
            attempt.error = f"exit code {process.returncode}" + (f": {last[0]}" if last[0] else "")
        return attempt, out.decode("utf-8", "replace")


def _values(request: RunRequest, ident: str, attempt: int) -> dict[str, str]:
    return {
        "task_id": request.task_id,
        "origin": request.origin or "",
        "memory": str(request.memory_path),
        "seed": str(request.seed),
        "run_id": ident,
        "attempt": str(attempt),
    }


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
