"""wikitrace against Harbor itself (the harbor package, which needs Python 3.12+; .ci/run
installs it in a 3.12 venv and runs this file there; without it these tests are skipped): job
folders written with Harbor's own result models, and real Harbor jobs run on this machine
(tests/harbor_local.py's environment: a chroot, no Docker), read back by `wikitrace lift`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from harbor_local import can_chroot, harbor_corpus

from helpers import run

pytest.importorskip("harbor", reason="Harbor (pip install harbor, Python 3.12+)")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return harbor_corpus(tmp_path_factory.mktemp("harbor"))


DATASET = "terminal-bench"
MODELS = ("model-a", "model-b")


def _harbor_trial(
    job: Path,
    task: str,
    model: str,
    number: int,
    *,
    memory: bool,
    reward: float | None,
    error: str | None = None,
) -> Any:
    """One trial as Harbor writes it: its folder, config.json and result.json (TrialResult)."""
    from datetime import datetime, timedelta

    from harbor.models.agent.context import AgentContext
    from harbor.models.task.id import LocalTaskId
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
    from harbor.models.trial.result import (
        AgentInfo,
        ExceptionInfo,
        ModelInfo,
        TimingInfo,
        TrialResult,
    )
    from harbor.models.verifier.result import VerifierResult

    name = f"{task}__{model[-1]}{number:06d}"
    start = datetime(2026, 1, 10, 9, 0) + timedelta(minutes=number)
    kwargs = {"wikitrace_corpus": "/home/me/corpus"} if memory else {}
    agent = "wikitrace.integrations.harbor:claude-code" if memory else "claude-code"
    config = TrialConfig(
        task=TaskConfig(path=Path("/tasks") / task, source=DATASET),
        trial_name=name,
        trials_dir=job,
        agent=AgentConfig(name=agent, model_name=f"anthropic/{model}", kwargs=kwargs),
    )
    result = TrialResult(
        task_name=task,
        trial_name=name,
        trial_uri=(job / name).as_uri(),
        task_id=LocalTaskId(path=Path("/tasks") / task),
        source=DATASET,
        task_checksum="0" * 64,
        config=config,
        agent_info=AgentInfo(
            name="claude-code",
            version="2.0.46",
            model_info=ModelInfo(name=model, provider="anthropic"),
        ),
        agent_result=AgentContext(n_input_tokens=1000, n_output_tokens=100),
        verifier_result=None if reward is None else VerifierResult(rewards={"reward": reward}),
        exception_info=None
        if error is None
        else ExceptionInfo(
            exception_type=error,
            exception_message=f"{error} in the test",
            exception_traceback="",
            occurred_at=start,
        ),
        started_at=start,
        finished_at=start + timedelta(seconds=60),
        agent_execution=TimingInfo(started_at=start, finished_at=start + timedelta(seconds=40)),
    )
    folder = job / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config.model_dump_json(indent=4))
    (folder / "result.json").write_text(result.model_dump_json(indent=4))
    if memory:  # what the wrapper writes before the agent starts
        record = {"mode": "full", "task_name": task, "calls": [{"entry": "run"}]}
        (folder / "wikitrace.json").write_text(json.dumps(record))
    return result


def _harbor_job(job: Path, trials: list[Any]) -> Any:
    """The job's config.json and result.json (JobResult and its JobStats, as Harbor sums)."""
    from datetime import datetime
    from uuid import uuid4

    from harbor.models.job.result import JobResult, JobStats

    stats = JobStats.from_trial_results(trials, n_total_trials=len(trials))
    done = JobResult(
        id=uuid4(),
        started_at=datetime(2026, 1, 10, 9, 0),
        n_total_trials=len(trials),
        stats=stats,
    )
    (job / "config.json").write_text(json.dumps({"job_name": job.name}))
    (job / "result.json").write_text(done.model_dump_json(indent=4))
    return stats


def test_a_harbor_job_of_two_models_with_invalid_trials_counts_what_harbor_counts(
    tmp_path: Path,
) -> None:
    # task -> reward per job; per model. An ApiError spoils a reward (Harbor: reward_valid
    # false); an AgentTimeoutError keeps it; EnvironmentStartTimeoutError leaves none.
    plan: dict[str, list[tuple[str, float | None, str | None]]] = {
        "baseline": [("t1", 1.0, None), ("t2", 0.0, None), ("t3", 0.0, None)],
        "rerun": [
            ("t1", 1.0, None),
            ("t2", 0.0, None),
            ("t3", None, "EnvironmentStartTimeoutError"),
        ],
        "memory": [
            ("t1", 1.0, "AgentTimeoutError"),
            ("t2", 1.0, "ApiError"),
            ("t3", 1.0, "ApiError"),
        ],
    }
    stats, jobs, number = {}, [], 0
    for job_name, trials in plan.items():
        job = tmp_path / job_name
        results = []
        for model in MODELS:
            for task, reward, error in trials:
                if model == "model-b" and job_name == "memory" and error == "ApiError":
                    error = None  # model-b's memory trials are valid
                number += 1
                results.append(
                    _harbor_trial(
                        job,
                        task,
                        model,
                        number,
                        memory=job_name == "memory",
                        reward=reward,
                        error=error,
                    )
                )
        stats[job_name] = _harbor_job(job, results)
        jobs.append(job)

    code, out, err = run(["lift", *map(str, jobs), "--json", "--resamples", "200"])
    assert code == 0, err
    got = {(r["suite"], r["method"]): r for r in json.loads(out)["results"]}
    methods = {"baseline": "no-memory", "rerun": "no-memory-rerun", "memory": "wikitrace"}
    for job_name, job_stats in stats.items():
        for model in MODELS:
            harbor = job_stats.evals[f"claude-code__{model}__{DATASET}"]
            line = got[(f"{DATASET} (claude-code, {model})", methods[job_name])]
            successes = len(harbor.reward_stats["reward"].get(1.0, []))
            assert (line["trials"], round(line["success_rate"]["value"] * line["trials"])) == (
                harbor.n_trials,
                successes,
            ), (job_name, model)
    model_a = got[(f"{DATASET} (claude-code, model-a)", "wikitrace")]
    model_b = got[(f"{DATASET} (claude-code, model-b)", "wikitrace")]
    assert (model_a["trials"], model_a["gain_trials"]) == (1, 0)  # t2's spoilt success left out
    assert (model_b["trials"], model_b["gain_trials"]) == (3, 2)
    assert err.splitlines() == [
        f"not counted: {tmp_path}/rerun/t3__a000009: reward not valid (Harbor's reward_valid: "
        "false): EnvironmentStartTimeoutError: EnvironmentStartTimeoutError in the test",
        f"not counted: {tmp_path}/rerun/t3__b000012: reward not valid (Harbor's reward_valid: "
        "false): EnvironmentStartTimeoutError: EnvironmentStartTimeoutError in the test",
        f"not counted: {tmp_path}/memory/t2__a000014: reward not valid (Harbor's reward_valid: "
        "false): ApiError: ApiError in the test",
        f"not counted: {tmp_path}/memory/t3__a000015: reward not valid (Harbor's reward_valid: "
        "false): ApiError: ApiError in the test",
        f"{DATASET} (claude-code, model-a): 6 trials counted, 3 not",
        f"{DATASET} (claude-code, model-b): 8 trials counted, 1 not",
    ]


def test_the_oracle_with_memory_is_made_by_a_harbor_trial(corpus: Path, tmp_path: Path) -> None:
    """Harbor gives the task's folder only to the agent it names `oracle`; the memory's
    oracle (`wikitrace.integrations.harbor:oracle`) takes it from the trial."""
    from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
    from harbor.trial.trial import Trial

    task = tmp_path / "hello-world"
    for part in ("environment", "tests", "solution"):
        (task / part).mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n\n[agent]\ntimeout_sec = 60.0\n')
    (task / "instruction.md").write_text("Create hello.txt in /app.\n")
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho hi > /app/hello.txt\n")
    config = TrialConfig(
        task=TaskConfig(path=task),
        trial_name="hello-world__abc",
        trials_dir=tmp_path / "job",
        agent=AgentConfig(
            name="wikitrace.integrations.harbor:oracle",
            kwargs={"wikitrace_corpus": str(corpus), "wikitrace_mode": "insights-only"},
        ),
    )
    trial = anyio.run(Trial.create, config)
    agent = trial.agent
    assert type(agent).__name__ == "oracle" and agent.to_agent_info().name == "oracle"
    assert agent._task.task_dir == task and agent.wikitrace.mode == "insights-only"

    from harbor.agents.factory import AgentFactory

    from wikitrace.corpus_schema import InputError

    with pytest.raises(InputError, match="needs its task's folder"):  # no trial to take it from
        AgentFactory.create_agent_from_config(config.agent, logs_dir=tmp_path / "agent")


def _task(root: Path, name: str, solve: str, test: str) -> Path:
    """A Harbor task folder: its task.toml, instruction, environment, tests and solution."""
    task = root / name
    for part in ("environment", "tests", "solution"):
        (task / part).mkdir(parents=True)
    (task / "task.toml").write_text(
        'version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n'
    )
    (task / "instruction.md").write_text(f"Solve {name}.\n")
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (task / "tests" / "test.sh").write_text(f"#!/bin/bash\n{test}\n")
    (task / "solution" / "solve.sh").write_text(f"#!/bin/bash\n{solve}\n")
    return task


@pytest.mark.skipif(not can_chroot(), reason="the local environment needs root and unshare")
# Harbor 0.26's own trial warns about its own call (Task.checksum); not ours to fix.
@pytest.mark.filterwarnings("ignore:Task.checksum will be deprecated:DeprecationWarning")
def test_real_harbor_jobs_on_this_machine_read_back_as_harbor_counts_them(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three jobs of Harbor's oracle, the third with the memory: hello-world is solved only
    where the corpus is at /work/corpus; fix-git's verifier writes no reward (Harbor:
    RewardFileNotFoundError, reward_valid false), in every job."""
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")  # Harbor's usage events: no network in tests
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.job.result import JobResult
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    tasks = [
        _task(
            tmp_path / "tasks",
            "hello-world",
            "if [ -f /work/corpus/manifest.json ]; then echo hi > /app/hello.txt; fi",
            "if [ -f /app/hello.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt",
        ),
        _task(tmp_path / "tasks", "fix-git", "echo done > /app/done", "true"),
    ]
    plain = AgentConfig(name="oracle")
    memory = AgentConfig(
        name="wikitrace.integrations.harbor:oracle", kwargs={"wikitrace_corpus": str(corpus)}
    )
    jobs = []
    for name, agent in (("baseline", plain), ("rerun", plain), ("memory", memory)):
        config = JobConfig(
            job_name=name,
            jobs_dir=tmp_path / "jobs",
            tasks=[TaskConfig(path=task) for task in tasks],
            agents=[agent],
            environment=EnvironmentConfig(import_path="harbor_local:LocalEnvironment"),
        )

        async def run_job(config: JobConfig = config) -> None:
            job = await Job.create(config)
            await job.run()

        anyio.run(run_job)
        jobs.append(tmp_path / "jobs" / name)

    code, out, err = run(["lift", *map(str, jobs), "--json", "--resamples", "200"])
    assert code == 0, err
    got = {r["method"]: r for r in json.loads(out)["results"]}
    for job, method in zip(jobs, ("no-memory", "no-memory-rerun", "wikitrace"), strict=True):
        stats = JobResult.model_validate_json((job / "result.json").read_text()).stats
        harbor = stats.evals["oracle__adhoc"]
        successes = len(harbor.reward_stats["reward"].get(1.0, []))
        line = got[method]
        assert harbor.n_trials == 1 and stats.n_errored_trials == 1
        assert (line["trials"], round(line["success_rate"]["value"])) == (1, successes)
    assert got["wikitrace"]["success_rate"]["value"] == 1.0
    assert got["no-memory"]["success_rate"]["value"] == 0.0
    not_counted = [line for line in err.splitlines() if line.startswith("not counted: ")]
    assert len(not_counted) == 3 and all(
        "/fix-git__" in line
        and "reward not valid (Harbor's reward_valid: false): RewardFileNotFoundError" in line
        for line in not_counted
    ), err
    [trial] = (tmp_path / "jobs" / "memory").glob("hello-world__*")
    record = json.loads((trial / "wikitrace.json").read_text())
    assert [call["entry"] for call in record["calls"]] == ["run"]
    assert record["excluded_tasks"] == ["terminal-bench/hello-world"]
    assert record["files_uploaded"] > 0


@pytest.mark.skipif(not can_chroot(), reason="the local environment needs root and unshare")
@pytest.mark.filterwarnings("ignore:Task.checksum will be deprecated:DeprecationWarning")
def test_a_real_multi_step_trial_gets_the_memory_at_each_step_and_reads_whole(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig

    from wikitrace.integrations.harbor_runs import read_jobs

    task = tmp_path / "tasks" / "hello-world"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (task / "task.toml").write_text(
        'version = "1.0"\n\n[agent]\ntimeout_sec = 60.0\n\n'
        '[[steps]]\nname = "one"\n\n[[steps]]\nname = "two"\n'
    )
    for number, name in enumerate(("one", "two"), start=1):
        step = task / "steps" / name
        for part in ("tests", "solution"):
            (step / part).mkdir(parents=True)
        (step / "instruction.md").write_text(f"Write line {number} of hello.txt in /app.\n")
        (step / "solution" / "solve.sh").write_text(
            f"#!/bin/bash\ntest -f /work/corpus/manifest.json && echo {number} >> /app/hello.txt\n"
        )
        (step / "tests" / "test.sh").write_text(
            f"#!/bin/bash\nif grep -qx {number} /app/hello.txt; then echo 1; else echo 0; fi "
            "> /logs/verifier/reward.txt\n"
        )
    config = JobConfig(
        job_name="steps",
        jobs_dir=tmp_path / "jobs",
        tasks=[TaskConfig(path=task)],
        agents=[
            AgentConfig(
                name="wikitrace.integrations.harbor:oracle",
                kwargs={"wikitrace_corpus": str(corpus)},
            )
        ],
        environment=EnvironmentConfig(import_path="harbor_local:LocalEnvironment"),
    )

    async def run_job() -> None:
        await (await Job.create(config)).run()

    anyio.run(run_job)
    [trial] = (tmp_path / "jobs" / "steps").glob("hello-world__*")
    result = json.loads((trial / "result.json").read_text())
    assert [step["step_name"] for step in result["step_results"]] == ["one", "two"]
    record = json.loads((trial / "wikitrace.json").read_text())
    assert [call["entry"] for call in record["calls"]] == ["run", "run"]
    read = read_jobs([tmp_path / "jobs" / "steps"])
    assert read.left_out == [] and read.problems == []
    [item] = read.rows
    assert (item.row.method, item.row.score) == ("wikitrace", 1.0)
    spans = [step["agent_execution"] for step in result["step_results"]]
    assert result["agent_execution"] is None and len(spans) == 2  # Harbor: per step only
    seconds = sum(
        (
            datetime.fromisoformat(span["finished_at"]) - datetime.fromisoformat(span["started_at"])
        ).total_seconds()
        for span in spans
    )
    assert item.row.seconds == pytest.approx(seconds) and seconds > 0
