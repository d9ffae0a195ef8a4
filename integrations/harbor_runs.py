"""Harbor job folders read as the rows `wikitrace lift` (and its parts) reads.

A Harbor job folder (`jobs/JOB/`, as `harbor run` writes it) holds its `config.json` and
`result.json` and one folder a trial (`TASK__ID/`) with the trial's `config.json`, `result.json`
(the reward under `verifier_result.rewards`, tokens under `agent_result`, timings), the agent's
logs (`agent/trajectory.json`: its ATIF trajectory) and, for a trial run with the memory
(integrations/harbor.py), `wikitrace.json`. A folder of one trial reads as a job of one.

Each trial Harbor counts becomes one row: a trial with a reward that Harbor holds valid
(`reward_valid`, which Harbor 0.26 writes: no reward, or an error its policy says spoils the
reward, makes it invalid; an older result without the field is valid when it has a reward).
The others are left out and named with why, as Harbor leaves them out of its `n_trials`.
A row's suite is the trial's dataset (`source`, else "harbor"), and, when the jobs hold more
than one agent or model (Harbor's `agent_info`), the agent and model too: `terminal-bench
(claude-code, claude-sonnet-4-5)`, so each model's memory is compared with that model's own
baseline and rerun. Its task is Harbor's task name, its trial the attempt's number among the
method's trials of that task (in order of start), its score the reward. The method is the
memory's ("wikitrace" for the full memory, "insights-only") or, for a trial without it, the
baseline: per agent and model, the plain trials of the first job that has any are the baseline,
those of the next the rerun. A trial that ran with the memory's kwargs but never saw it (the
wrapper failed before writing its record, or, with an older wrapper, Harbor's `load` or
`resume` ran without it) is left out, though Harbor may count its reward.

A trial is read whole: a multi-step trial's tokens and seconds are its steps' sums and its
trajectories each step's (`steps/NAME/agent/trajectory.json`); a trajectory continued in
`trajectory.cont-N.json` (terminus-2 after summarising) is read with its continuations, their
copied context once. A memory episode's row also says its drill-downs (turns whose actions read
the mount) and its citation report (the JSON block ending the agent's last message; a
multi-step trial's, every step's).
"""

from __future__ import annotations

import tempfile
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
    """Trials not counted (no reward, or one Harbor holds invalid; a memory skipped), each with
    why."""
    problems: list[str] = field(default_factory=list)
    """Memory episodes whose drill-downs or citation report could not be read."""
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per suite (dataset, with agent and model when several): trials counted, left out."""


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


def _steps(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A multi-step trial's step results (Harbor's `step_results`), in order; [] for one step."""
    steps = result.get("step_results")
    return [step for step in steps if isinstance(step, dict)] if isinstance(steps, list) else []


def _errors(result: dict[str, Any]) -> list[str]:
    """The trial's recorded errors (its own, then its steps'), each type and message."""
    found = []
    for holder in [result, *_steps(result)]:
        error = holder.get("exception_info")
        if isinstance(error, dict) and error.get("exception_type"):
            message = " ".join(str(error.get("exception_message") or "").split())[:120]
            found.append(f"{error['exception_type']}" + (f": {message}" if message else ""))
    return found


def _not_counted(result: dict[str, Any]) -> str | None:
    """Why Harbor does not count the trial (None: it does): no reward, or Harbor's own verdict
    `reward_valid: false` (an error whose policy spoils the reward)."""
    errors = "; ".join(_errors(result))
    if result.get("reward_valid") is False:
        return "reward not valid (Harbor's reward_valid: false)" + (f": {errors}" if errors else "")
    if _reward(result) is not None:
        return None
    if errors:
        return f"no reward: {errors}"
    verifier = result.get("verifier_result")
    if isinstance(verifier, dict) and isinstance(verifier.get("rewards"), dict):
        return f"no single reward among {sorted(verifier['rewards'])}"
    return "no reward: no verifier result"


def _agent_and_model(result: dict[str, Any]) -> tuple[str, str]:
    """Harbor's agent and model of the trial (`agent_info`, as Harbor keys its job stats)."""
    info = result.get("agent_info")
    info = info if isinstance(info, dict) else {}
    model = info.get("model_info")
    model_name = model.get("name") if isinstance(model, dict) else None
    if not model_name:
        config = result.get("config")
        agent = config.get("agent") if isinstance(config, dict) else None
        model_name = agent.get("model_name") if isinstance(agent, dict) else None
    return str(info.get("name") or "agent"), str(model_name or "no model")


def _memory(trial: Path, result: dict[str, Any]) -> dict[str, Any] | None:
    """The memory's settings for the trial: its record, else the agent kwargs it ran with."""
    if (trial / RECORD).is_file():
        record = _json(trial / RECORD)
        if isinstance(record, dict):
            return record
    agent = _agent_config(result)
    kwargs = agent.get("kwargs")
    if isinstance(kwargs, dict) and kwargs.get("wikitrace_corpus"):
        return {
            "mode": kwargs.get("wikitrace_mode", "full"),
            "mount": kwargs.get("wikitrace_mount"),
            "recorded": False,
        }
    return None


def _agent_config(result: dict[str, Any]) -> dict[str, Any]:
    config = result.get("config")
    agent = config.get("agent") if isinstance(config, dict) else None
    return agent if isinstance(agent, dict) else {}


def _memory_skipped(result: dict[str, Any], memory: dict[str, Any]) -> str | None:
    """Why the memory was not shown though the trial ran with it: the wrapper failed before
    it wrote its record (Harbor may still grade the task), or Harbor seeded (`load`) or
    resumed (`resume`) the agent and the record does not say the memory went with it (an
    older wrapper, whose record has no `calls`)."""
    if isinstance(memory.get("calls"), list):
        return None
    errors = _errors(result)
    if memory.get("recorded") is False and errors:  # the wrapper failed before it showed any
        return f"the memory was never shown (no {RECORD}): {'; '.join(errors)}"
    agent = _agent_config(result)
    if agent.get("load_trajectory"):
        return "the memory was skipped: Harbor loaded the agent's trajectory (load_trajectory)"
    if agent.get("resume_trajectory") and len(_steps(result)) > 1:
        return "the memory was skipped: Harbor resumed the agent (resume_trajectory)"
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


def _segments(trajectory: Path) -> list[dict[str, Any]]:
    """An ATIF trajectory and the segments that continue it (`continued_trajectory_ref`, as
    terminus-2 writes `trajectory.cont-N.json`), in order; each read once."""
    segments: list[dict[str, Any]] = []
    seen: set[Path] = set()
    path: Path | None = trajectory
    while path is not None and path not in seen and path.is_file():
        seen.add(path)
        data = _json(path)
        if not isinstance(data, dict):
            raise InputError("expected an ATIF trajectory (an object)", path=path)
        segments.append(data)
        ref = data.get("continued_trajectory_ref")
        # A ref names a file beside this one, nothing elsewhere.
        path = trajectory.parent / ref if isinstance(ref, str) and ref == Path(ref).name else None
    return segments


def _whole(segments: list[dict[str, Any]]) -> dict[str, Any]:
    """One trajectory of a trajectory and its continuations, their copied context once."""
    whole = dict(segments[0])
    steps = list(whole.get("steps") or [])
    for segment in segments[1:]:
        steps += [
            step
            for step in segment.get("steps") or []
            if not (isinstance(step, dict) and step.get("is_copied_context"))
        ]
    whole["steps"] = steps
    whole.pop("continued_trajectory_ref", None)
    return whole


def citation_report(trajectory: Path) -> dict[str, list[str]] | None:
    """The citation report ending the agent's last message (the first message asks for one),
    in the trajectory's last continuation; None when there is none."""
    from wikitrace.compiler.compile import reply_json
    from wikitrace.tools.cite import parse_report

    segments = _segments(trajectory)
    text = _last_message(segments[-1]) if segments else None
    if text is None or '"used"' not in text:
        return None
    try:
        report = parse_report(reply_json(text[text.rfind("{", 0, text.rfind('"used"')) :]))
    except (ValueError, InputError):
        return None
    used: dict[str, list[str]] = report.used.model_dump()
    return used


def drilldowns(trajectory: Path, mount: str) -> int:
    """The turns of the trial whose actions read the corpus at `mount`, its continuations'
    included."""
    from wikitrace.evaluation.attribute import find_drilldowns, read_episode

    segments = _segments(trajectory)
    if len(segments) <= 1:
        return len(find_drilldowns(read_episode(trajectory), mount))
    with tempfile.TemporaryDirectory() as folder:
        whole = Path(folder) / trajectory.name
        whole.write_bytes(orjson.dumps(_whole(segments)))
        return len(find_drilldowns(read_episode(whole), mount))


def _trajectories(trial: Path, result: dict[str, Any]) -> list[Path]:
    """The trial's trajectories: each step's (a multi-step trial), else the agent's."""
    steps = _steps(result)
    if steps:
        names = [str(step.get("step_name") or "") for step in steps]
        # A step's name is a folder of the trial's, nothing elsewhere.
        names = [name for name in names if name == Path(name).name and name not in ("", ".", "..")]
        found = [trial / "steps" / name / TRAJECTORY for name in names]
        return [path for path in found if path.is_file()]
    return [trial / TRAJECTORY] if (trial / TRAJECTORY).is_file() else []


def _tokens(result: dict[str, Any]) -> int | None:
    """Input and output tokens, the trial's or (multi-step) its steps' sum."""
    holders = [result] if isinstance(result.get("agent_result"), dict) else _steps(result)
    counts = []
    for holder in holders:
        agent = holder.get("agent_result")
        if isinstance(agent, dict):
            counts += [agent.get("n_input_tokens"), agent.get("n_output_tokens")]
    numbers = [c for c in counts if isinstance(c, int) and not isinstance(c, bool)]
    return sum(numbers) if any(numbers) else None


def _agent_seconds(result: dict[str, Any]) -> float | None:
    """The agent's wall time, the trial's or (multi-step) its steps' sum."""
    if isinstance(result.get("agent_execution"), dict):
        return _seconds(result["agent_execution"])
    spans = [_seconds(step.get("agent_execution")) for step in _steps(result)]
    known = [span for span in spans if span is not None]
    return sum(known) if known else None


def _merge_reports(reports: list[dict[str, list[str]]]) -> dict[str, list[str]]:
    merged: dict[str, list[str]] = {}
    for report in reports:
        for kind, ids in report.items():
            merged.setdefault(kind, [])
            merged[kind] += [i for i in ids if i not in merged[kind]]
    return merged


@dataclass
class _Trial:
    job: int
    folder: Path
    result: dict[str, Any]
    memory: dict[str, Any] | None
    group: tuple[str, str]


def _read_trials(jobs: list[Path]) -> list[_Trial]:
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
            memory = _memory(folder, result)
            trials.append(_Trial(number, folder, result, memory, _agent_and_model(result)))
    trials.sort(key=lambda t: (t.job, str(t.result.get("started_at") or ""), t.folder.name))
    return trials


def _roles(
    jobs: list[Path], trials: list[_Trial], baseline: str, rerun: str
) -> dict[tuple[tuple[str, str], int], str]:
    """Per agent and model, the baseline's job and the rerun's: the first two with plain
    trials of it."""
    roles = {}
    for group in sorted({t.group for t in trials}):
        plain = sorted({t.job for t in trials if t.memory is None and t.group == group})
        if len(plain) > 2:
            named = ", ".join(str(jobs[i]) for i in plain)
            raise InputError(
                f"{len(plain)} jobs have trials of {group[0]} ({group[1]}) without the memory "
                f"({named}): the first is the {baseline}, the second the {rerun}; give at "
                "most two"
            )
        for job, role in zip(plain, (baseline, rerun), strict=False):
            roles[(group, job)] = role
    return roles


def _method(trial: _Trial, roles: dict[tuple[tuple[str, str], int], str]) -> str:
    if trial.memory is None:
        return roles[(trial.group, trial.job)]
    mode = str(trial.memory.get("mode") or "full")
    if mode not in MEMORY_METHODS:
        raise InputError(f"unknown memory mode {mode!r}", path=trial.folder / RECORD)
    return MEMORY_METHODS[mode]


def _memory_use(trial: _Trial, method: str, row: ResultRow, out: HarborRows) -> None:
    """A memory episode's citation report and drill-downs, every step's."""
    from wikitrace.evaluation.attribute import DEFAULT_MOUNT

    assert trial.memory is not None
    mount = str(trial.memory.get("mount") or DEFAULT_MOUNT)
    paths = _trajectories(trial.folder, trial.result)
    if not paths:
        return
    try:
        reports = [r for r in (citation_report(path) for path in paths) if r is not None]
        row.used = _merge_reports(reports) if reports else None
        if method == "wikitrace":
            row.drilldowns = sum(drilldowns(path, mount) for path in paths)
        else:
            row.drilldowns = 0  # nothing to drill into
    except (InputError, CorpusError) as error:
        out.problems.append(f"{paths[0]}: {error}")


def read_jobs(
    jobs: list[Path], baseline: str = "no-memory", rerun: str = "no-memory-rerun"
) -> HarborRows:
    """One row per trial Harbor counts, of every job in `jobs` (see the module's docstring)."""
    trials = _read_trials(jobs)
    roles = _roles(jobs, trials, baseline, rerun)
    several = len({t.group for t in trials}) > 1
    out = HarborRows(rows=[])
    attempts: Counter[tuple[str, str, str]] = Counter()
    counted: Counter[str] = Counter()
    left: Counter[str] = Counter()
    for trial in trials:
        result, where = trial.result, trial.folder / RESULT
        suite = str(result.get("source") or "harbor")
        if several:
            suite += " ({}, {})".format(*trial.group)
        why = _not_counted(result)
        if why is None and trial.memory is not None:
            why = _memory_skipped(result, trial.memory)
        if why is not None:
            out.left_out.append(f"{trial.folder}: {why}")
            left[suite] += 1
            continue
        counted[suite] += 1
        method = _method(trial, roles)
        task = str(result["task_name"])
        attempts[(suite, method, task)] += 1
        paths = _trajectories(trial.folder, result)
        row = ResultRow(
            suite=suite,
            method=method,
            task_id=task,
            trial=attempts[(suite, method, task)],
            score=_reward(result),
            trajectory=paths[0].relative_to(trial.folder).as_posix() if paths else None,
            tokens=_tokens(result),
            seconds=_agent_seconds(result),
        )
        if trial.memory is not None:
            _memory_use(trial, method, row, out)
        out.rows.append(Row(where=f"{where}:1", row=row))
    out.counts = {suite: (counted[suite], left[suite]) for suite in sorted({*counted, *left})}
    return out


__all__ = ["HarborRows", "citation_report", "drilldowns", "is_job", "read_jobs"]
