"""wikitrace inside Harbor: the agent wrapper against a fake agent class and environment, and
Harbor job folders read back through `wikitrace lift` (tests/test_harbor_release.py runs the
same against Harbor itself, where it is installed: Python 3.12+). The job folders are
tests/data/harbor_jobs (see its README: the layout of
Harbor 0.25.0's `TrialPaths` and `TrialResult`, checked against a real job folder)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from harbor_local import OTHER, OWN, harbor_corpus

from wikitrace.corpus_schema import InputError
from wikitrace.integrations.harbor import MemorySettings, attach_memory, own_tasks, with_memory
from wikitrace.integrations.harbor_runs import read_jobs

from helpers import run

JOBS = Path(__file__).parent / "data" / "harbor_jobs"
BASELINE, RERUN, MEMORY = (
    JOBS / name for name in sorted(p.name for p in JOBS.iterdir() if p.is_dir())
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return harbor_corpus(tmp_path_factory.mktemp("harbor"))


class Result:
    def __init__(self, code: int, stderr: str) -> None:
        self.return_code, self.stdout, self.stderr = code, "", stderr


class FakeEnvironment:
    """A Harbor environment's upload_dir and exec, on this machine (the mount is a folder here)."""

    def __init__(self, environment_name: str) -> None:
        self.environment_name = environment_name
        self.commands: list[tuple[str, Any]] = []

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        subprocess.run(["cp", "-R", f"{source_dir}/.", target_dir], check=True)

    async def exec(self, command: str, user: str | int | None = None, **_: Any) -> Result:
        self.commands.append((command, user))
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
        return Result(done.returncode, done.stderr)


def _hidden(corpus: Path) -> list[str]:
    """What leave-one-task-out must hide from a fix-git trial: its run and its lesson."""
    own = [p.stem for p in (corpus / "insight").glob("insight-*.md") if OWN in p.read_text()]
    step = [
        p.parent.name
        for p in (corpus / "raw").glob("step-*/metadata.md")
        if "lost my last commit" in p.read_text()
    ]
    assert len(own) == len(step) == 1
    return [own[0], step[0], OWN, "lost my last commit"]


def test_the_memory_uploads_the_view_without_the_own_task_and_replaces_the_instruction(
    corpus: Path, tmp_path: Path
) -> None:
    mount = tmp_path / "box" / "work" / "corpus"
    settings = MemorySettings.take({"wikitrace_corpus": str(corpus), "wikitrace_mount": str(mount)})
    environment = FakeEnvironment("fix-git")
    instruction = "I lost my last commit after a checkout in /app/repo. Merge it into master."
    text = anyio.run(attach_memory, settings, instruction, "fix-git", environment, tmp_path)

    assert text.startswith("# Your task\n\n" + instruction)
    assert f"`{mount}`" in text and OTHER in text
    assert all(user == "root" for _, user in environment.commands)
    uploaded = sorted(p.relative_to(mount).as_posix() for p in mount.rglob("*") if p.is_file())
    assert "raw/_index.md" in uploaded and "catalog.jsonl" in uploaded
    texts = {rel: (mount / rel).read_bytes().decode("utf-8", "replace") for rel in uploaded}
    for hidden in _hidden(corpus):
        assert not [rel for rel, t in texts.items() if hidden in t or hidden in rel], hidden
        assert hidden == "lost my last commit" or hidden not in text
    assert all(not p.stat().st_mode & 0o222 for p in mount.rglob("*"))
    assert (mount / "tools" / "turn").stat().st_mode & 0o111
    record = json.loads((tmp_path / "wikitrace.json").read_text())
    assert record["excluded_tasks"] == ["terminal-bench/fix-git"]
    assert record["files_uploaded"] == len(uploaded) and record["mode"] == "full"
    subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=True)


class FakeAgent:
    """The part of harbor.agents.base.BaseAgent the wrapper relies on: options checked against
    a closed set (Harbor's options_model forbids extra keys), `run` given the instruction."""

    OPTIONS: ClassVar[set[str]] = {"max_turns"}

    def __init__(self, logs_dir: Path, model_name: str | None = None, **kwargs: Any) -> None:
        self.logs_dir = logs_dir
        self.options = type(self).parse_options(kwargs)
        self.given: list[str] = []

    @classmethod
    def parse_options(cls, kwargs: dict[str, Any] | None = None, env: Any = None) -> Any:
        unknown = set(kwargs or {}) - cls.OPTIONS
        if unknown:
            raise ValueError(f"Unknown option {sorted(unknown)}")
        return dict(kwargs or {})

    @classmethod
    def preflight(cls, kwargs: dict[str, Any] | None = None, env: Any = None) -> None:
        cls.parse_options(kwargs, env)

    async def run(self, instruction: str, environment: Any, context: Any) -> None:
        self.given.append(instruction)


def test_with_memory_wraps_an_agent_class_and_keeps_its_options_its_own(
    corpus: Path, tmp_path: Path
) -> None:
    wrapped = with_memory(FakeAgent)
    assert issubclass(wrapped, FakeAgent) and wrapped.__name__ == "FakeAgentWithMemory"
    kwargs = {"max_turns": 5, "wikitrace_corpus": str(corpus), "wikitrace_mode": "insights-only"}
    wrapped.preflight(dict(kwargs))
    with pytest.raises(InputError, match="no such corpus folder"):
        wrapped.preflight({"wikitrace_corpus": str(tmp_path / "nope")})
    with pytest.raises(InputError, match="no agent kwarg wikitrace_mout"):
        wrapped.preflight({"wikitrace_corpus": str(corpus), "wikitrace_mout": "/x"})

    trial = tmp_path / "hello-world__Ab3dE7q"
    agent = wrapped(logs_dir=trial / "agent", model_name="anthropic/x", **kwargs)
    assert agent.options == {"max_turns": 5}
    environment = FakeEnvironment("hello-world")
    anyio.run(agent.run, "Create hello.txt in /app with Hello, world!", environment, None)
    [given] = agent.given
    assert given.startswith("# Your task\n\nCreate hello.txt in /app with Hello, world!")
    assert OWN in given and OTHER not in given  # hello-world's own lesson is left out
    assert "/work/corpus" not in given and environment.commands == []  # insights only
    record = json.loads((trial / "wikitrace.json").read_text())
    assert record["excluded_tasks"] == ["terminal-bench/hello-world"]
    assert record["task_name"] == "hello-world" and record["files_uploaded"] == 0
    assert own_tasks(corpus, "terminal-bench/hello-world") == ["terminal-bench/hello-world"]
    assert own_tasks(corpus, "build-linux-kernel") == []


def test_harbor_jobs_read_as_rows() -> None:
    read = read_jobs([BASELINE, RERUN, MEMORY])
    rows = {(r.row.method, r.row.task_id.split("/")[1], r.row.trial): r.row for r in read.rows}
    assert sorted(rows) == [
        (method, task, 1)
        for method in ("insights-only", "no-memory", "no-memory-rerun", "wikitrace")
        for task in ("fix-git", "hello-world")
    ]
    assert read.left_out == [
        f"{RERUN}/fix-git__eeeeeee: no reward: AgentTimeoutError: Agent execution timed out "
        "after 900.0 seconds"
    ]
    assert read.counts == {"terminal-bench": (8, 1)}
    assert read.problems == []
    drilled = rows[("wikitrace", "fix-git", 1)]
    assert (drilled.score, drilled.drilldowns, drilled.suite) == (1.0, 1, "terminal-bench")
    assert drilled.used == {"raw": [], "compilations": [], "insights": ["insight-0001"]}
    assert (drilled.tokens, drilled.seconds) == (3150, 30.0)
    assert rows[("wikitrace", "hello-world", 1)].drilldowns == 0
    assert rows[("no-memory", "fix-git", 1)].used is None
    assert rows[("no-memory", "fix-git", 1)].drilldowns is None


def test_lift_reads_harbor_job_folders(tmp_path: Path) -> None:
    code, out, err = run(["lift", str(BASELINE), str(RERUN), str(MEMORY), "--json"])
    assert code == 0, err
    assert err == (
        f"not counted: {RERUN}/fix-git__eeeeeee: no reward: AgentTimeoutError: "
        "Agent execution timed out after 900.0 seconds\n"
        "terminal-bench: 8 trials counted, 1 not\n"
    )
    got = {r["method"]: r for r in json.loads(out)["results"]}
    wikitrace, insights = got["wikitrace"], got["insights-only"]
    assert (
        wikitrace["success_rate"]["value"] == 1.0
        and got["no-memory"]["success_rate"]["value"] == 0.5
    )
    assert wikitrace["gain"]["value"] == 1.0 and wikitrace["regression"]["value"] == 0.0
    assert insights["regression"]["value"] == 1.0
    assert wikitrace["stay_descent"] == {
        "stayed": 1,
        "stayed_succeeded": 1,
        "descended": 1,
        "descended_succeeded": 1,
    }

    # Three jobs of the plain agent: which is the baseline is not guessed.
    code, out, err = run(["lift", str(BASELINE), str(RERUN), str(BASELINE / ".." / BASELINE.name)])
    assert (code, out) == (2, "")
    assert "3 jobs have trials of claude-code (claude-sonnet-4-5) without the memory" in err
    empty = tmp_path / "job"
    (empty / "trial").mkdir(parents=True)
    (empty / "config.json").write_text("{}")
    code, out, err = run(["lift", str(empty)])
    assert code == 2 and "results.jsonl: no such file" in err


def test_stay_descent_from_the_log_when_a_row_does_not_say(tmp_path: Path) -> None:
    """Rows without "drilldowns" that name their logs: lift counts the turns that read the
    mount, as `wikitrace drilldowns` finds them."""
    read = read_jobs([BASELINE, RERUN, MEMORY])
    lines = []
    for item in read.rows:
        data = item.row.model_dump(exclude_none=True)
        data.pop("drilldowns", None)
        data["trajectory"] = str(Path(item.where.rsplit(":", 1)[0]).parent / data["trajectory"])
        lines.append(json.dumps(data))
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(lines) + "\n")
    code, out, err = run(["lift", str(results), "--json", "--resamples", "200"])
    assert code == 0, err
    got = {r["method"]: r["stay_descent"] for r in json.loads(out)["results"]}
    assert got["wikitrace"] == {
        "stayed": 1,
        "stayed_succeeded": 1,
        "descended": 1,
        "descended_succeeded": 1,
    }
    assert got["insights-only"]["stayed"] == 2 and got["no-memory"] is None
    code, out, err = run(["lift", str(results), "--json", "--mount", "/elsewhere"])
    got = {r["method"]: r["stay_descent"] for r in json.loads(out)["results"]}
    assert (got["wikitrace"]["stayed"], got["wikitrace"]["descended"]) == (2, 0)


def _agent_step(number: int, text: str, command: str | None = None, **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"step_id": number, "source": "agent", "message": text, **extra}
    if command is not None:
        step["tool_calls"] = [
            {
                "tool_call_id": f"c{number}",
                "function_name": "Bash",
                "arguments": {"command": command},
            }
        ]
        step["observation"] = {"results": [{"source_call_id": f"c{number}", "content": "ok"}]}
    return step


def _atif(steps: list[dict[str, Any]], continued: str | None = None) -> str:
    data: dict[str, Any] = {
        "schema_version": "ATIF-v1.2",
        "session_id": "s1",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "m"},
        "steps": [{"step_id": 0, "source": "user", "message": "# Your task\n\nFix it."}, *steps],
    }
    if continued:
        data["continued_trajectory_ref"] = continued
    return json.dumps(data)


def test_a_multi_step_trial_with_a_continued_trajectory_is_read_whole(tmp_path: Path) -> None:
    """Tokens and seconds are the steps' sums; drill-downs and citation reports every step's,
    a terminus-2 continuation (trajectory.cont-1.json) read with its trajectory, its copied
    context once."""
    trial = tmp_path / "fix-git__mmmmmmm"
    subprocess.run(["cp", "-R", str(MEMORY / "fix-git__ggggggg"), str(trial)], check=True)
    result = json.loads((trial / "result.json").read_text())
    for key in ("agent_result", "agent_execution"):
        del result[key]

    def span(seconds: int) -> dict[str, str]:
        return {
            "started_at": "2026-01-10T09:00:00",
            "finished_at": f"2026-01-10T09:00:{seconds:02d}",
        }

    result["step_results"] = [
        {
            "step_name": name,
            "agent_result": {"n_input_tokens": tokens, "n_output_tokens": tokens // 10},
            "agent_execution": span(seconds),
            "verifier_result": {"rewards": {"reward": 1.0}},
        }
        for name, tokens, seconds in (("one", 100, 10), ("two", 200, 20))
    ]
    (trial / "result.json").write_text(json.dumps(result))
    one, two = trial / "steps" / "one" / "agent", trial / "steps" / "two" / "agent"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    (trial / "agent" / "trajectory.json").rename(one / "trajectory.json")
    drill = _agent_step(1, "Reading the run.", "cat /work/corpus/raw/step-0003/metadata.md")
    (two / "trajectory.json").write_text(_atif([drill], continued="trajectory.cont-1.json"))
    report = '```json\n{"used": {"raw": ["step-0003"], "compilations": [], "insights": []}}\n```'
    (two / "trajectory.cont-1.json").write_text(
        _atif(
            [
                {**drill, "is_copied_context": True},
                _agent_step(2, "The notes.", "ls /work/corpus/compilation/"),
                _agent_step(3, f"Done.\n\n{report}"),
            ]
        )
    )

    read = read_jobs([trial])
    assert read.left_out == [] and read.problems == []
    [item] = read.rows
    row = item.row
    assert (row.method, row.tokens, row.seconds) == ("wikitrace", 330, 30.0)
    assert row.trajectory == "steps/one/agent/trajectory.json"
    assert row.drilldowns == 3  # one in step one, two in step two (the copied one once)
    assert row.used == {"raw": ["step-0003"], "compilations": [], "insights": ["insight-0001"]}


class ResumingAgent(FakeAgent):
    """An agent whose load and resume go through run, as Harbor's installed agents' do."""

    entries: ClassVar[list[str]] = []

    async def load(self, instruction: str, environment: Any, context: Any) -> None:
        type(self).entries.append("load")
        await self.run(instruction, environment, context)

    async def resume(self, instruction: str, environment: Any, context: Any) -> None:
        type(self).entries.append("resume")
        await self.run(instruction, environment, context)


def test_load_and_resume_get_the_memory_once_each_and_say_so(corpus: Path, tmp_path: Path) -> None:
    wrapped = with_memory(ResumingAgent)
    trial = tmp_path / "hello-world__Ab3dE7q"
    kwargs = {"wikitrace_corpus": str(corpus), "wikitrace_mode": "insights-only"}
    agent = wrapped(logs_dir=trial / "agent", **kwargs)
    environment = FakeEnvironment("hello-world")
    anyio.run(agent.load, "Create hello.txt in /app.", environment, None)
    anyio.run(agent.resume, "Now add a second line.", environment, None)
    assert ResumingAgent.entries == ["load", "resume"]
    first, second = agent.given
    assert first.startswith("# Your task\n\nCreate hello.txt in /app.") and OWN in first
    assert second.startswith("# Your task\n\nNow add a second line.")
    record = json.loads((trial / "wikitrace.json").read_text())
    assert [call["entry"] for call in record["calls"]] == ["load", "resume"]
    assert record["insights_shown"] == record["calls"][0]["insights_shown"]


def test_a_trial_whose_load_skipped_the_memory_is_not_counted_as_the_memory(
    tmp_path: Path,
) -> None:
    """A record without `calls` (a wrapper before load and resume had the memory) and a trial
    Harbor seeded from a trajectory: the agent never saw the memory."""
    trial = tmp_path / "fix-git__lllllll"
    subprocess.run(["cp", "-R", str(MEMORY / "fix-git__ggggggg"), str(trial)], check=True)
    result = json.loads((trial / "result.json").read_text())
    result["config"]["agent"]["load_trajectory"] = "/home/me/seed.json"
    (trial / "result.json").write_text(json.dumps(result))
    read = read_jobs([trial])
    assert read.rows == []
    assert read.left_out == [
        f"{trial}: the memory was skipped: Harbor loaded the agent's trajectory (load_trajectory)"
    ]
    record = json.loads((trial / "wikitrace.json").read_text())
    record["calls"] = [{"entry": "load"}]
    (trial / "wikitrace.json").write_text(json.dumps(record))
    assert [item.row.method for item in read_jobs([trial]).rows] == ["wikitrace"]


def test_a_trial_whose_memory_failed_before_its_record_is_not_counted(tmp_path: Path) -> None:
    """The wrapper raised before it showed anything (here: no corpus at the path): Harbor
    still ran the verifier and, the error being unknown to its policy, counts the reward."""
    trial = tmp_path / "fix-git__kkkkkkk"
    subprocess.run(["cp", "-R", str(MEMORY / "fix-git__ggggggg"), str(trial)], check=True)
    (trial / "wikitrace.json").unlink()
    result = json.loads((trial / "result.json").read_text())
    result["reward_valid"] = True
    result["exception_info"] = {
        "exception_type": "CorpusError",
        "exception_message": "/home/me/corpus has no manifest.json",
        "exception_traceback": "",
        "occurred_at": "2026-01-10T09:07:11",
    }
    (trial / "result.json").write_text(json.dumps(result))
    read = read_jobs([trial])
    assert read.rows == []
    assert read.left_out == [
        f"{trial}: the memory was never shown (no wikitrace.json): CorpusError: "
        "/home/me/corpus has no manifest.json"
    ]
    del result["exception_info"]
    (trial / "result.json").write_text(json.dumps(result))
    assert [item.row.method for item in read_jobs([trial]).rows] == ["wikitrace"]
