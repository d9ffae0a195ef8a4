"""The runner protocol: templates, results on stdout, errors, retries, timeouts, the run log."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from wikitrace.control.runner import RunLog, Runner, RunnerSpec, RunRequest, read_result
from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.ledger import read_agent_runs

# A tiny agent: its behaviour per task id is in the id itself.
AGENT = r"""
import json, os, sys, time
task, memory, attempt = sys.argv[1], sys.argv[2], int(sys.argv[3])
if task == "crash":
    print("Traceback: boom", file=sys.stderr); sys.exit(3)
if task == "silent":
    print("thinking..."); sys.exit(0)
if task == "slow":
    time.sleep(600)
if task == "flaky" and attempt == 1:
    sys.exit(1)
if task == "bad":
    print(json.dumps({"success": "yes"})); sys.exit(0)
if task.startswith("score"):
    print("log line"); print(json.dumps({"score": float(task[5:]), "trajectory": "t.json"}))
    sys.exit(0)
print("some chatter")
print(json.dumps({"success": os.path.basename(memory) == "good", "tokens": 12}))
"""


@pytest.fixture
def agent(tmp_path: Path) -> str:
    path = tmp_path / "agent.py"
    path.write_text(AGENT)
    return f"{sys.executable} {path} {{task_id}} {{memory}} {{attempt}}"


def request(task_id: str, memory: str = "good", seed: int = 0) -> RunRequest:
    return RunRequest(task_id=task_id, memory=memory, memory_path=Path("/m") / memory, seed=seed)


def run_all(spec: RunnerSpec, log: Path, *requests: RunRequest) -> list:  # type: ignore[type-arg]
    return Runner(spec, RunLog(log), purpose="test").run(list(requests))


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("", "the command is empty"),
        ("agent --task {task_id} 'unclosed", "cannot split the command"),
        ("agent {task_id} {memory} {model}", "unknown placeholder {model}"),
        ("agent {task_id} {memory:>5}", "unknown placeholder {memory:>5}"),
        ("agent --task {task_id}", "never names {memory}"),
        ("agent {memory}", "never names {task_id}"),
        ("agent {task_id} {memory} {", "Single '{' encountered"),
    ],
)
def test_bad_templates_are_refused(template: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as caught:
        RunnerSpec(template=template)
    assert caught.value.field == "--runner"


def test_values_are_single_arguments_never_shell() -> None:
    spec = RunnerSpec(template="agent --task={task_id} --memory {memory} --seed {seed} {run_id}")
    runner = Runner(spec, RunLog(Path("/nonexistent/runs.jsonl")), purpose="p")
    argv = runner.command(request("a b; rm -rf /", seed=7), "run-000001", 1)
    assert argv == [
        "agent",
        "--task=a b; rm -rf /",
        "--memory",
        "/m/good",
        "--seed",
        "7",
        "run-000001",
    ]


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ('{"success": true}\n', (True, "")),
        ('{"success": false}\nbye\n', (False, "")),
        ('{"score": 0.5}\n{"score": 1}\n', (True, "")),  # the last JSON line counts
        ('{"score": 0.99}', (False, "")),
        ('[1, 2]\n{"success": 1}\n', (None, "field 'success': Input should be a valid boolean")),
        ('{"trajectory": "x"}', (None, "the JSON object has neither 'success' nor 'score'")),
        ("no json here\n{broken\n", (None, "printed no JSON object on stdout")),
    ],
)
def test_reading_the_result(stdout: str, expected: tuple[bool | None, str]) -> None:
    _, success, problem = read_result(stdout, threshold=1.0)
    assert (success, problem) == expected


def test_runs_are_recorded_with_their_result(agent: str, tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    runs = run_all(RunnerSpec(agent), log, request("t1"), request("t1", "bad"), request("score0.7"))
    assert [(r.id, r.status, r.success, r.score) for r in runs] == [
        ("run-000001", "ok", True, None),
        ("run-000002", "ok", False, None),
        ("run-000003", "ok", False, 0.7),
    ]
    assert runs[0].output == {"success": True, "tokens": 12}
    assert runs[2].trajectory == "t.json" and runs[2].value == 0.7
    assert runs[0].command[-3:] == ["t1", "/m/good", "1"]
    recorded = read_agent_runs(log)
    assert sorted(recorded) == ["run-000001", "run-000002", "run-000003"]
    assert recorded["run-000002"].memory == "bad" and recorded["run-000002"].purpose == "test"
    # Ids go on from the log in a later session.
    more = run_all(RunnerSpec(agent), log, request("t2"))
    assert more[0].id == "run-000004" and len(read_agent_runs(log)) == 4


def test_errors_are_retried_then_recorded_never_counted(agent: str, tmp_path: Path) -> None:
    spec = RunnerSpec(agent, retries=1)
    crash, silent, bad, flaky = run_all(
        spec,
        tmp_path / "runs.jsonl",
        request("crash"),
        request("silent"),
        request("bad"),
        request("flaky"),
    )
    assert (crash.status, crash.success, crash.value) == ("error", None, None)
    assert len(crash.attempts) == 2
    assert crash.error == "2 attempts failed; last: exit code 3: Traceback: boom"
    assert silent.error == "2 attempts failed; last: printed no JSON object on stdout"
    assert "thinking..." in silent.attempts[-1].stderr_tail
    assert bad.error == "2 attempts failed; last: field 'success': Input should be a valid boolean"
    assert (flaky.status, flaky.success, len(flaky.attempts)) == ("ok", True, 2)
    assert flaky.attempts[0].error == "exit code 1"


def test_a_run_past_its_timeout_is_killed(agent: str, tmp_path: Path) -> None:
    spec = RunnerSpec(agent, timeout_seconds=0.5, retries=0)
    started = time.monotonic()
    (slow,) = run_all(spec, tmp_path / "runs.jsonl", request("slow"))
    assert time.monotonic() - started < 120  # killed, not waited for (it sleeps 600 s)
    assert slow.status == "error" and slow.error == "1 attempts failed; last: timed out after 0.5 s"
    assert slow.attempts[0].exit_code is None


def test_a_missing_program_is_an_error(tmp_path: Path) -> None:
    spec = RunnerSpec("/no/such/agent {task_id} {memory}", retries=0)
    (run,) = run_all(spec, tmp_path / "runs.jsonl", request("x"))
    assert run.status == "error" and run.error is not None and "cannot start" in run.error


def test_concurrency_is_bounded(tmp_path: Path) -> None:
    # Each run notes when it starts and ends; no more than 2 may overlap.
    script = tmp_path / "a.py"
    script.write_text(
        "import json, sys, time\n"
        "t0 = time.time(); time.sleep(0.3)\n"
        "open(sys.argv[2], 'a').write(f'{t0} {time.time()}\\n')\n"
        "print(json.dumps({'success': True}))\n"
    )
    spans = tmp_path / "spans"
    spec = RunnerSpec(f"{sys.executable} {script} {{task_id}} {{memory}}", concurrency=2)
    runner = Runner(spec, RunLog(tmp_path / "runs.jsonl"), purpose="p")
    requests = [RunRequest(f"t{i}", "v", spans, 0) for i in range(6)]
    assert all(r.status == "ok" for r in runner.run(requests))
    times = [tuple(map(float, line.split())) for line in spans.read_text().splitlines()]
    overlap = max(sum(start <= t < end for start, end in times) for t, _ in times)
    assert len(times) == 6 and overlap <= 2


def test_cancelling_kills_the_agent_and_its_children(tmp_path: Path) -> None:
    # Ctrl-C cancels the runner's tasks: no agent, nor anything it started, is left running.
    script = tmp_path / "a.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "open(sys.argv[2], 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    pid_file = tmp_path / "pid"
    spec = RunnerSpec(f"{sys.executable} {script} {{task_id}} {{memory}}")
    runner = Runner(spec, RunLog(tmp_path / "runs.jsonl"), purpose="p")

    async def interrupted() -> None:
        task = asyncio.ensure_future(runner._run_all([RunRequest("t", "v", pid_file, 0)], None))
        # Generous: on a busy machine, starting two Pythons can take seconds.
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the agent never started its child"
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 60
    while True:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, f"the agent's child {child} is still running"
        time.sleep(0.05)
    assert not (tmp_path / "runs.jsonl").exists()  # a cancelled run is not recorded as a result


def test_task_pools_say_what_is_wrong_and_where(tmp_path: Path) -> None:
    from wikitrace.control.pool import PoolTask, read_pool

    pool = tmp_path / "pool.jsonl"
    pool.write_text(
        '# tasks\ndrawer-1\n\n{"task_id": "safe-1", "task": "Open it.", "task_type": "safe"}\n'
    )
    assert read_pool(pool) == [PoolTask("drawer-1"), PoolTask("safe-1", "Open it.", "safe")]
    for text, message in [
        ('{"task": "x"}\n', f"{pool}:1: field 'task_id': missing or not a string"),
        ("a\n{broken\n", f"{pool}:2: not JSON"),
        ('{"task_id": "a", "task": 3}\n', f"{pool}:1: field 'task': not a string"),
        ("a\nb\na\n", f"{pool}:3: task a is listed twice"),
        ("# nothing\n", f"{pool}: the task pool lists no task"),
    ]:
        pool.write_text(text)
        with pytest.raises(InputError) as caught:
            read_pool(pool)
        assert str(caught.value).startswith(message)


# --- placeholders never reach a shell as text ------------------------------------------------

HOSTILE_IDS = [
    "; touch pwned",
    "$(touch pwned)",
    "`touch pwned`",
    "x\ntouch pwned",
    "' ; touch pwned ; '",
    '" ; touch pwned ; "',
]
SAFE_SHELL_TEMPLATES = [
    # The values as arguments of their own, quoted in the script.
    'sh -c \'printf %s "$1" > seen; echo {{\\"success\\": true}}\' sh {task_id} {memory}',
    # The environment variables every run gets.
    'sh -c \'printf %s "$WIKITRACE_TASK_ID" > seen; test "$WIKITRACE_MEMORY" = /m/good; '
    'echo {{\\"success\\": true}}\'',
]


@pytest.mark.parametrize("template", SAFE_SHELL_TEMPLATES, ids=["arguments", "environment"])
def test_hostile_task_ids_never_run_as_commands(tmp_path: Path, template: str) -> None:
    spec = RunnerSpec(template, retries=0, cwd=tmp_path)
    for task_id in HOSTILE_IDS:
        (run,) = run_all(spec, tmp_path / "runs.jsonl", request(task_id))
        assert (run.status, run.success) == ("ok", True), (task_id, run.error)
        assert (tmp_path / "seen").read_text() == task_id  # the script got it, as it is
        assert not (tmp_path / "pwned").exists(), task_id


def test_every_run_gets_its_values_in_the_environment(tmp_path: Path) -> None:
    script = tmp_path / "a.py"
    script.write_text(
        "import json, os\n"
        "names = ['TASK_ID', 'MEMORY', 'SEED', 'RUN_ID', 'ATTEMPT']\n"
        "seen = {n: os.environ['WIKITRACE_' + n] for n in names}\n"
        "print(json.dumps({'success': True, 'seen': seen}))\n"
    )
    spec = RunnerSpec(f"{sys.executable} {script} {{task_id}} {{memory}}", retries=0)
    (run,) = run_all(spec, tmp_path / "runs.jsonl", request("t 1; x", seed=5))
    assert run.output["seen"] == {
        "TASK_ID": "t 1; x",
        "MEMORY": "/m/good",
        "SEED": "5",
        "RUN_ID": "run-000001",
        "ATTEMPT": "1",
    }


@pytest.mark.parametrize(
    ("template", "how"),
    [
        ("sh -c 'python run.py {task_id} {memory}'", "sh -c"),
        ("sh -c 'python run.py \"{task_id}\"' sh {memory}", "sh -c"),
        ("/bin/bash -euc 'run --task {task_id}' bash {memory}", "bash -c"),
        ("bash -o pipefail -c 'run {task_id}' bash {memory}", "bash -c"),
        ("env A=1 timeout 60 zsh -c 'run {task_id} {memory}'", "zsh -c"),
        ("docker run img sh -c 'run {task_id}' sh {memory}", "sh -c"),
        ("cmd.exe /c run.bat {task_id} {memory}", "cmd /c"),
        ("pwsh -Command run.ps1 {task_id} {memory}", "pwsh -Command"),
        ("python3 -c 'import agent; agent.run(\"{task_id}\")' {memory}", "python -c"),
        ("node -e 'run(\"{task_id}\")' {memory}", "node -e"),
        ("ssh worker run-agent {task_id} {memory}", "ssh"),
        ("ray job submit -- python agent.py --task {task_id} --memory {memory}", "ray job submit"),
        ("ray job submit --no-wait python agent.py {task_id} {memory}", "ray job submit"),
        ("su agent -c 'run {task_id}' {memory}", "su -c"),
    ],
)
def test_a_placeholder_in_code_a_program_parses_is_refused(template: str, how: str) -> None:
    with pytest.raises(InputError) as caught:
        RunnerSpec(template=template)
    assert caught.value.field == "--runner"
    message = caught.value.message
    assert f"would be spliced into the code `{how}` runs" in message
    assert "WIKITRACE_TASK_ID" in message or "WIKITRACE_MEMORY" in message


def test_the_refusal_gives_the_safe_spelling_for_a_shell() -> None:
    with pytest.raises(InputError) as caught:
        RunnerSpec(template="sh -c 'python run.py --task {task_id} --memory {memory}'")
    assert str(caught.value) == (
        "field '--runner': {memory} would be spliced into the code `sh -c` runs ('python run.py "
        "--task {task_id} --memory {memory}'): a value (a task id) holding ; $( ) ` or a newline "
        'would run as a command; quote the variable every run gets in the script ("$WIKITRACE_'
        'MEMORY"), or pass {memory} as an argument of its own after the script and quote it '
        'there: sh -c \'python run.py --task "$1" --memory "$2"\' sh {task_id} {memory}'
    )


@pytest.mark.parametrize(
    "template",
    [
        "bash run.sh {task_id} {memory}",
        "bash run.sh -c {task_id} {memory}",  # -c after the script is the script's
        "python run.py -c {task_id} {memory}",
        "python -m agent --task {task_id} --memory {memory}",
        "python -c 'import sys; run(sys.argv[1:])' {task_id} {memory}",
        "pwsh -File run.ps1 {task_id} {memory}",
        "python ray_runner.py --task {task_id} --memory {memory}",
        'sh -c \'run "$WIKITRACE_TASK_ID" "$WIKITRACE_MEMORY"\'',
    ],
)
def test_placeholders_as_arguments_of_their_own_are_accepted(template: str) -> None:
    RunnerSpec(template=template)
