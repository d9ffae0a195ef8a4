"""Harbor job folders read as the rows `wikitrace lift` (and `eval`, `attribute`) reads.

A Harbor job folder (`jobs/JOB/`, as `harbor run` writes it) holds its `config.json` and
`result.json` and one folder a trial (`TASK__ID/`) with the trial's `config.json`, `result.json`
(the reward under `verifier_result.rewards`, tokens under `agent_result`, timings), the agent's
logs (`agent/trajectory.json`: its ATIF trajectory) and, for a trial run with the memory
(integrations/harbor.py), `wikitrace.json`. A folder of one trial reads as a job of one.

Each trial with a reward becomes one row: its suite the trial's dataset (`source`, else
"harbor"), its task Harbor's task name, its trial the attempt's number among the method's
trials of that task (in order of start), its score the reward. The method is the memory's
("wikitrace" for the full memory, "insights-only") or, for a trial without it, the baseline:
the plain trials of the first job that has any are the baseline, those of the next the rerun.
A memory episode's row also says its drill-downs (turns whose actions read the mount, from the
trajectory) and its citation report (the JSON block ending the agent's last message).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import CorpusError, InputError
from wikitrace.corpus_schema.input_files import read_input
from wikitrace.evaluation.rows import ResultRow, Row

RESULT = "result.json"
TRAJECTORY = "agent/trajectory.json"
RECORD = "wikitrace.json"
"""What the memory showed a trial (integrations/harbor.py writes it; Harbor never does)."""
MEMORY_METHODS = {"full": "wikitrace", "insights-only": "insights-only"}


@dataclass
class HarborRows:
    rows: list[Row]
    left_out: list[str] = field(default_factory=list)
    """Trials without a reward (an error before the verifier ran), each with why."""
    problems: list[str] = field(default_factory=list)
    """Memory episodes whose drill-downs or citation report could not be read."""


def _json(path: Path) -> Any:
    try:
        return orjson.loads(read_input(path))
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", path=path) from None
    except orjson.JSONDecodeError as error:
        raise InputError(f"not valid JSON: {error}", path=path) from None


def _is_trial(folder: Path) -> bool:
    result = folder / RESULT
    if not result.is_file():
        return False
    data = _json(result)
    return isinstance(data, dict) and "trial_name" in data


def is_job(path: Path) -> bool:
    """Whether `path` is a Harbor job folder (or one trial's folder)."""
    if not path.is_dir():
        return False
    if _is_trial(path):
        return True
    return (path / "config.json").is_file() and any(_is_trial(child) for child in _trials(path))


def _trials(job: Path) -> Iterator[Path]:
    for child in sorted(job.iterdir()):
        if child.is_dir() and (child / RESULT).is_file():
            yield child


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds(span: Any) -> float | None:
    if not isinstance(span, dict):
        return None
    start, end = _time(span.get("started_at")), _time(span.get("finished_at"))
    if start is None or end is None or end < start:
        return None
    return (end - start).total_seconds()


def _reward(result: dict[str, Any]) -> float | None:
    """The trial's reward: `reward`, or the one reward the verifier gave."""
    verifier = result.get("verifier_result")
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    if not isinstance(rewards, dict) or not rewards:
        return None
    value = rewards.get("reward", next(iter(rewards.values())) if len(rewards) == 1 else None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _why_no_reward(result: dict[str, Any]) -> str:
    error = result.get("exception_info")
    if isinstance(error, dict) and error.get("exception_type"):
        message = " ".join(str(error.get("exception_message") or "").split())[:120]
        return f"{error['exception_type']}" + (f": {message}" if message else "")
    verifier = result.get("verifier_result")
    if isinstance(verifier, dict) and isinstance(verifier.get("rewards"), dict):
        return f"no single reward among {sorted(verifier['rewards'])}"
    return "no verifier result"


def _memory(trial: Path, result: dict[str, Any]) -> dict[str, Any] | None:
    """The memory's settings for the trial: its record, else the agent kwargs it ran with."""
    if (trial / RECORD).is_file():
        record = _json(trial / RECORD)
        if isinstance(record, dict):
            return record
    config = result.get("config")
    agent = config.get("agent") if isinstance(config, dict) else None
    kwargs = agent.get("kwargs") if isinstance(agent, dict) else None
    if isinstance(kwargs, dict) and kwargs.get("wikitrace_corpus"):
        return {
            "mode": kwargs.get("wikitrace_mode", "full"),
            "mount": kwargs.get("wikitrace_mount"),
        }
    return None


def _last_message(trajectory: dict[str, Any]) -> str | None:
    """The text of the agent's last message in an ATIF trajectory."""
    for step in reversed(trajectory.get("steps") or []):
        if not isinstance(step, dict) or step.get("source") != "agent":
            continue
        message = step.get("message")
        if isinstance(message, list):  # content parts: their text
            message = "\n".join(
                str(part.get("text", "")) for part in message if isinstance(part, dict)
            )
        if isinstance(message, str) and message.strip():
            return message
    return None


def citation_report(trajectory: Path) -> dict[str, list[str]] | None:
    """The citation report ending the agent's last message (the first message asks for one),
    None when there is none."""
    from wikitrace.compiler.compile import reply_json
    from wikitrace.tools.cite import parse_report

    data = _json(trajectory)
    text = _last_message(data) if isinstance(data, dict) else None
    if text is None or '"used"' not in text:
        return None
    try:
        report = parse_report(reply_json(text[text.rfind("{", 0, text.rfind('"used"')) :]))
    except (ValueError, InputError):
        return None
    used: dict[str, list[str]] = report.used.model_dump()
    return used


def drilldowns(trajectory: Path, mount: str) -> int:
    """The turns of the trial whose actions read the corpus at `mount`."""
    from wikitrace.evaluation.attribute import find_drilldowns, read_episode

    return len(find_drilldowns(read_episode(trajectory), mount))


@dataclass
class _Trial:
    job: int
    folder: Path
    result: dict[str, Any]
    memory: dict[str, Any] | None


def read_jobs(
    jobs: list[Path], baseline: str = "no-memory", rerun: str = "no-memory-rerun"
) -> HarborRows:
    """One row per trial with a reward, of every job in `jobs` (see the module's docstring)."""
    from wikitrace.evaluation.attribute import DEFAULT_MOUNT

    trials: list[_Trial] = []
    for number, job in enumerate(jobs):
        folders = [job] if _is_trial(job) else list(_trials(job))
        if not folders:
            raise InputError(
                "no Harbor trial in it (a trial folder holds a result.json with a trial_name)",
                path=job,
            )
        for folder in folders:
            result = _json(folder / RESULT)
            if not isinstance(result, dict) or not result.get("task_name"):
                raise InputError(
                    "expected a trial's result", path=folder / RESULT, field="task_name"
                )
            trials.append(_Trial(number, folder, result, _memory(folder, result)))
    plain_jobs = sorted({t.job for t in trials if t.memory is None})
    if len(plain_jobs) > 2:
        named = ", ".join(str(jobs[i]) for i in plain_jobs)
        raise InputError(
            f"{len(plain_jobs)} jobs have trials without the memory ({named}): the first is "
            f"the {baseline}, the second the {rerun}; give at most two"
        )
    roles = dict(zip(plain_jobs, (baseline, rerun), strict=False))
    out = HarborRows(rows=[])
    trials.sort(key=lambda t: (t.job, str(t.result.get("started_at") or ""), t.folder.name))
    attempts: Counter[tuple[str, str]] = Counter()
    for trial in trials:
        result, where = trial.result, trial.folder / RESULT
        score = _reward(result)
        if score is None:
            out.left_out.append(f"{trial.folder}: {_why_no_reward(result)}")
            continue
        if trial.memory is None:
            method = roles[trial.job]
        else:
            mode = str(trial.memory.get("mode") or "full")
            if mode not in MEMORY_METHODS:
                raise InputError(f"unknown memory mode {mode!r}", path=trial.folder / RECORD)
            method = MEMORY_METHODS[mode]
        task = str(result["task_name"])
        attempts[(method, task)] += 1
        agent = result.get("agent_result")
        agent = agent if isinstance(agent, dict) else {}
        counts = [agent.get("n_input_tokens"), agent.get("n_output_tokens")]
        tokens = sum(c for c in counts if isinstance(c, int)) if any(counts) else None
        trajectory = trial.folder / TRAJECTORY
        row = ResultRow(
            suite=str(result.get("source") or "harbor"),
            method=method,
            task_id=task,
            trial=attempts[(method, task)],
            score=score,
            trajectory=TRAJECTORY if trajectory.is_file() else None,
            tokens=tokens,
            seconds=_seconds(result.get("agent_execution")),
        )
        if trial.memory is not None and trajectory.is_file():
            try:
                row.used = citation_report(trajectory)
                if method == "wikitrace":
                    mount = str(trial.memory.get("mount") or DEFAULT_MOUNT)
                    row.drilldowns = drilldowns(trajectory, mount)
                else:
                    row.drilldowns = 0  # nothing to drill into
            except (InputError, CorpusError) as error:
                out.problems.append(f"{trajectory}: {error}")
        out.rows.append(Row(where=f"{where}:1", row=row))
    return out


__all__ = ["HarborRows", "citation_report", "drilldowns", "is_job", "read_jobs"]
