"""Read the trajectory logs people have: detect each file's format from its content, read it as
a stream of runs in the native shape, label them (from the log, a side-car, or a reward and a
threshold), and validate them.

`plan_inputs()` resolves files and folders into an `InputPlan`, each file's format told from its
start by `sniffers.py` (so a file is opened again to be read, and only the readers of the
formats found are imported: `FORMATS` names each by "module:function"); its `items()` yields
each run (`SourceRun`), each run with no label (`Unlabelled`) and each bad record
(`InputError`), and can be iterated more than once (`convert` checks every record before it
writes one). A build iterates it once and builds the runs it checked (compiler/stages.py).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import input_problem
from wikitrace.corpus_schema.setting_fields import default

from . import sniffers
from .base import Candidate, Found, LeftOut, Probe, probe
from .labels import Labels, read_labels_file
from .runs import SourceRun, Unlabelled, check_json, validate

log = logging.getLogger(__name__)

AUTO = default("format")
LOGS_NAMED_HIDDEN = frozenset({sniffers.AIDER_HISTORY})
"""Logs whose name starts with a dot, read in a folder all the same (other hidden files are not)."""
DEFAULT_THRESHOLD = default("success-threshold")


@dataclass(frozen=True)
class Format:
    name: str
    summary: str
    sniff: Callable[[Probe], bool]
    """Whether a file is in this format, from its start (sniffers.py: no reader imported)."""
    reader: str | None = None
    """Its reader, "module:function" of this package, imported when a file of this format is
    read; None for a side-car, which labels runs and is no run itself."""
    labels: bool = False
    """A side-car that holds labels (read into the labels); else read by its trajectory."""
    companion: str | None = None
    """Where to ask ("module:function") why a file of this format is read with another one (a
    sub-agent with its session), if it is: such a file is listed as ignored, with that reason."""

    def read(self, path: Path, found: Probe) -> Iterator[Found]:
        """The runs (and bad records) of `path`, a file of this format."""
        assert self.reader is not None, self.name
        read: Callable[[Path, Probe], Iterator[Found]] = _resolve(self.reader)
        return read(path, found)

    def read_with(self, path: Path) -> str | None:
        """Why `path` is read with another file, if it is."""
        if self.companion is None:
            return None
        why: Callable[[Path], str | None] = _resolve(self.companion)
        return why(path)


def _resolve(target: str) -> Any:
    """The function `target` ("module:function" of this package) names, its module imported."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


FORMATS: tuple[Format, ...] = (
    Format(
        "native",
        "wikitrace's own JSON Lines (task_id, task, success, turns)",
        sniffers.native,
        "native:read",
    ),
    Format(
        "claude-code",
        "Claude Code session (~/.claude/projects/<project>/<session>.jsonl, sub-agents included)",
        sniffers.claude_code,
        "claude_code:read",
        companion="claude_code:read_with",
    ),
    Format(
        "codex",
        "Codex CLI rollout (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)",
        sniffers.codex,
        "codex:read",
    ),
    Format(
        "gemini-cli",
        "Gemini CLI chat (single JSON or JSON Lines)",
        sniffers.gemini_cli,
        "gemini:read",
        companion="gemini:read_with",
    ),
    Format(
        "copilot-chat",
        "GitHub Copilot chat in VS Code (chatSessions/<id>.json or .jsonl, or an exported chat)",
        sniffers.copilot_chat,
        "copilot:read",
    ),
    Format(
        "cursor",
        "Cursor chats in its SQLite state.vscdb (one run per composer or chat tab)",
        sniffers.cursor,
        "cursor:read",
        companion="cursor:read_with",
    ),
    Format(
        "langfuse",
        "Langfuse trace export ({trace, observations}); outcome from a success score",
        sniffers.langfuse,
        "langfuse:read",
    ),
    Format(
        "otel-genai",
        "OpenTelemetry GenAI spans (SDK JSON or OTLP JSON, gen_ai.* attributes)",
        sniffers.otel_genai,
        "otel:read",
    ),
    Format(
        "opencode",
        "OpenCode session (~/.local/share/opencode/storage: session/<project>/<id>.json, read "
        "with its message/ and part/ files)",
        sniffers.opencode,
        "opencode:read",
    ),
    Format(
        "aider",
        "aider chat history (.aider.chat.history.md; one run per session)",
        sniffers.aider,
        "aider:read",
    ),
    Format(
        "inspect-eval",
        "inspect_ai eval log, .eval zip",
        sniffers.inspect_eval,
        "inspect_log:read_eval",
    ),
    Format("inspect", "inspect_ai eval log, .json", sniffers.inspect, "inspect_log:read_json"),
    Format(
        "atif",
        "ATIF trajectory.json (Harbor, Terminal-Bench), schema 1.x",
        sniffers.atif,
        "atif:read",
        companion="atif:read_with",
    ),
    Format("tau2-bench", "τ²-bench simulations file", sniffers.tau2_bench, "tau:read_tau2"),
    Format("tau-bench", "τ-bench results list", sniffers.tau_bench, "tau:read_tau"),
    Format(
        "terminal-bench",
        "Terminal-Bench 1.0 trial results.json (read with the trial's agent logs)",
        sniffers.terminal_bench,
        "terminal_bench:read",
    ),
    Format("mini-swe-agent", "mini-swe-agent .traj.json", sniffers.mini_swe_agent, "swe:read_mini"),
    Format("swe-agent", "SWE-agent .traj", sniffers.swe_agent, "swe:read_sweagent"),
    Format(
        "openhands", "OpenHands output.jsonl (event history)", sniffers.openhands, "openhands:read"
    ),
    Format(
        "openhands-events",
        "OpenHands trajectory saved as a JSON list of events (--save-trajectory-path, download)",
        sniffers.openhands_events,
        "openhands:read_events",
    ),
    Format(
        "fever",
        "ReAct FEVER run log (`N Claim:`, Thought/Action/Observation k, {'em': ...}), text or "
        ".ipynb",
        sniffers.fever,
        "react_runs:read_fever",
    ),
    Format(
        "webshop",
        "ReAct WebShop run log (Action: reset, the shop's pages, Your score), text or .ipynb",
        sniffers.webshop,
        "react_runs:read_webshop",
    ),
    Format(
        "alfworld",
        "ALFWorld ReAct text log (Act k: / Obs k:)",
        sniffers.alfworld,
        "react:read_alfworld",
    ),
    Format(
        "hotpotqa",
        "HotpotQA ReAct text log (Thought/Action/Observation k:)",
        sniffers.hotpotqa,
        "react:read_hotpotqa",
    ),
    Format(
        "openai",
        "OpenAI chat messages ({messages: [...]} a line, or one list)",
        sniffers.openai,
        "chat:read",
    ),
    Format(
        "swebench-report",
        "SWE-bench harness report (labels)",
        sniffers.swebench_report,
        labels=True,
    ),
    Format(
        "harbor-result", "Harbor result.json (read with its trajectory)", sniffers.harbor_result
    ),
    Format(
        "opencode-part",
        "OpenCode message or part file (read with its session)",
        sniffers.opencode_part,
    ),
)
BY_NAME = {f.name: f for f in FORMATS}
READABLE = tuple(f.name for f in FORMATS if f.reader is not None)
"""The names `--format` accepts (besides auto)."""


def detect(found: Probe) -> Format | None:
    for fmt in FORMATS:
        if fmt.sniff(found):
            return fmt
    return None


def expected_formats() -> str:
    return "; ".join(f"{f.name} ({f.summary})" for f in FORMATS if f.reader is not None)


@dataclass
class InputFile:
    path: Path
    format: str
    detected: bool


@dataclass
class InputPlan:
    """The files a build or a conversion reads, each with its format, and the labels."""

    files: list[InputFile] = field(default_factory=list)
    label_files: list[InputFile] = field(default_factory=list)
    ignored: list[dict[str, str]] = field(default_factory=list)
    labels: Labels = field(default_factory=Labels)
    threshold: float = DEFAULT_THRESHOLD
    labeller: Callable[[Unlabelled], SourceRun | Unlabelled] | None = None
    """What labels a run nothing else labels (the build's --judge), if anything."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Files read and found to hold no run (path -> why), filled as they are read."""
    unreadable: list[dict[str, str]] = field(default_factory=list)
    """Of `ignored`, the files not opened: FIFOs, devices, links out, files over the limit."""

    def describe(self) -> list[str]:
        """One line per format: how many files, and whether detected or given."""
        counts: dict[tuple[str, bool], int] = {}
        for item in self.files + self.label_files:
            key = (item.format, item.detected)
            counts[key] = counts.get(key, 0) + 1
        lines = []
        for (name, detected), n in counts.items():
            how = "detected from content" if detected else "as given by --format"
            if name == "labels":  # the files --labels names, whatever --format says
                lines.append(f"labels from {n} file{'s' * (n != 1)} given with --labels")
            elif name not in BY_NAME or BY_NAME[name].reader is not None:
                lines.append(f"reading {n} file{'s' * (n != 1)} as {name} ({how})")
            else:
                lines.append(f"labels from {n} {name} file{'s' * (n != 1)} ({how})")
        lines += [f"skipped {item['path']}: {item['reason']}" for item in self.unreadable[:20]]
        if len(self.unreadable) > 20:
            lines.append(f"skipped {len(self.unreadable) - 20} more files not opened (-v)")
        others = [item for item in self.ignored if item not in self.unreadable]
        if others:
            lines.append(f"ignored {len(others)} other files (-v lists them)")
        return lines

    def candidates(self) -> Iterator[tuple[str, Candidate | InputError]]:
        for item in self.files:
            fmt = BY_NAME[item.format]
            try:
                found = probe(item.path)
                nothing = True
                for result in fmt.read(item.path, found):
                    nothing = False
                    if isinstance(result, LeftOut):
                        self._leave_out(result)
                        continue
                    yield item.format, result
                if nothing and not item.detected:  # --format named a format it is not in
                    looks = detect(found)
                    yield (
                        item.format,
                        InputError(
                            f"no runs found reading it as {item.format}; its content looks "
                            + (f"like {looks.name}" if looks else "like no format wikitrace knows"),
                            path=item.path,
                            hint="leave --format out to detect each file's format",
                        ),
                    )
            except InputError as error:  # a reader that gave up on the whole file
                yield item.format, error
            except OSError as error:
                yield (
                    item.format,
                    InputError(f"cannot read: {error.strerror or error}", path=item.path),
                )
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
                # A record shaped unlike anything the reader expects: the file's remaining
                # runs cannot be found reliably, so it is reported as one bad record.
                log.debug("reading %s as %s", item.path, item.format, exc_info=True)
                yield (
                    item.format,
                    InputError(
                        f"not readable as {item.format}: {type(error).__name__}: "
                        f"{_short(str(error))}",
                        path=item.path,
                        hint="the file is damaged or not in this format; name another with "
                        "--format, or leave it out",
                    ),
                )

    def _leave_out(self, item: LeftOut) -> None:
        self.left_out.setdefault(item.path, item.reason)

    def left_out_list(self) -> list[dict[str, str]]:
        """The files read and left out so far, as the reports list them."""
        return [{"path": path, "reason": why} for path, why in self.left_out.items()]

    def items(self) -> Iterator[SourceRun | Unlabelled | InputError]:
        """Every run of every file, labelled and validated, in order."""
        for name, found in self.candidates():
            if isinstance(found, InputError):
                yield found
                continue
            try:
                result = finish(found, name, self.labels, self.threshold)
                if isinstance(result, Unlabelled) and self.labeller is not None:
                    result = self.labeller(result)
                yield result
            except InputError as error:
                yield error


def finish(
    candidate: Candidate, fmt: str, labels: Labels, threshold: float
) -> SourceRun | Unlabelled:
    """Apply a label (side-car first, then the log's own, then reward >= threshold); validate."""
    data = candidate.data
    check_json(data, candidate.path, line=candidate.line, at=candidate.at)
    if fmt != "native" and not data.get("origin"):
        # The log family at least (a session store: claude-code, codex, ...); the importers
        # of benchmarks name the dataset and split too, from what their log says.
        data["origin"] = fmt
    metadata = data.setdefault("metadata", {}) if isinstance(data.get("metadata", {}), dict) else {}
    task_id = str(data.get("task_id"))
    label = labels.lookup(candidate.run_id, task_id, *candidate.aliases) if len(labels) else None
    reward = candidate.reward
    if label is not None:
        value, source = label
        metadata["label_source"] = source
        if isinstance(value, bool):
            data["success"] = value
        else:
            reward = value
            metadata["reward"] = value
            data["success"] = None
    if data.get("success") is None and "success" in data and reward is not None:
        data["success"] = reward >= threshold
        metadata["success_threshold"] = threshold
    if "success" in data and data["success"] is None:
        return Unlabelled(
            path=candidate.path,
            line=candidate.line,
            at=candidate.at,
            task_id=task_id,
            run_id=candidate.run_id,
            format=fmt,
            reason=candidate.note or "no success or reward in the log and no label for it",
            data=data,
        )
    return validate(data, candidate.path, line=candidate.line, at=candidate.at, format=fmt)


def _short(message: str, limit: int = 80) -> str:
    """An exception's message cut short: it may quote input, which may hold a secret."""
    message = message.splitlines()[0] if message else ""
    return message if len(message) <= limit else message[:limit] + "..."


def _walk(folder: Path, skipped: list[dict[str, str]] | None = None) -> Iterator[Path]:
    """The files under `folder` to look at; a link to a file outside it is not followed (and
    listed in `skipped`), nor is a link to a folder."""
    inside = folder.resolve()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") or name in LOGS_NAMED_HIDDEN:
                path = Path(root) / name
                if path.is_symlink() and not path.resolve().is_relative_to(inside):
                    if skipped is not None:
                        skipped.append({"path": str(path), "reason": "a link out of the folder"})
                    continue
                yield path


def _unrecognised(path: Path, found: Probe) -> InputError:
    why = f" ({found.text_error})" if found.text_error else ""
    return InputError(
        f"not a trajectory format wikitrace knows{why}",
        path=path,
        hint=f"expected one of: {expected_formats()}; or name the format with --format",
    )


def plan_inputs(
    paths: list[Path],
    fmt: str = AUTO,
    labels: list[Path] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> InputPlan:
    """Resolve files and folders into what to read. Raises InputError for a missing path, an
    explicit file whose format is unknown, or inputs that hold no trajectory at all."""
    if fmt != AUTO and fmt not in READABLE:
        raise InputError(f"unknown format {fmt!r}; expected auto or one of: {', '.join(READABLE)}")
    plan = InputPlan(threshold=threshold)
    for path in paths:
        if not path.exists():
            raise InputError("no such file or folder", path=path)
        if path.is_dir():
            for file in _walk(path, plan.unreadable):
                _add(plan, file, fmt, given=False)
        else:
            _add(plan, path, fmt, given=True)
    for path in labels or []:
        if not path.exists():
            raise InputError("no such file or folder", path=path)
        files = list(_walk(path, plan.unreadable)) if path.is_dir() else [path]
        for file in files:
            problem = input_problem(file)
            if problem is not None and file != path:
                plan.unreadable.append({"path": str(file), "reason": problem})
                continue
            if problem is not None:
                raise InputError(f"{problem}: not a labels file", path=file)
            read_labels_file(file, plan.labels)
            plan.label_files.append(InputFile(file, "labels", detected=False))
    for item in plan.label_files:
        if item.format != "labels":
            read_labels_file(item.path, plan.labels)
    plan.ignored += plan.unreadable
    if not plan.files:
        where = ", ".join(str(p) for p in paths)
        raise InputError(
            "no trajectories found"
            + (f" of format {fmt}" if fmt != AUTO else "")
            + (f" ({len(plan.ignored)} files looked at)" if plan.ignored else "")
            + "".join(f"; skipped {i['path']}: {i['reason']}" for i in plan.unreadable[:5]),
            path=where,
            hint=f"expected one of: {expected_formats()}",
        )
    return plan


def _add(plan: InputPlan, path: Path, fmt: str, *, given: bool) -> None:
    problem = input_problem(path)
    if problem is not None:
        if given:
            raise InputError(
                f"{problem}: its start is read to tell its format before it is read whole, so "
                "give a regular file",
                path=path,
            )
        plan.unreadable.append({"path": str(path), "reason": problem})
        return
    try:
        found = probe(path)
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", path=path) from None
    if not found.head.strip() and found.kind == "text":
        if given:
            raise InputError("the file is empty: no runs to build", path=path)
        plan.ignored.append({"path": str(path), "reason": "empty"})
        return
    if given and fmt != AUTO:
        plan.files.append(InputFile(path, fmt, detected=False))
        return
    detected = detect(found)
    if detected is None:
        if given:
            raise _unrecognised(path, found)
        reason = found.text_error or "not a known trajectory format"
        plan.ignored.append({"path": str(path), "reason": reason})
        return
    if detected.reader is None:
        if detected.labels:
            plan.label_files.append(InputFile(path, detected.name, detected=True))
        else:
            plan.ignored.append(
                {"path": str(path), "reason": f"{detected.name}: read with its trajectory"}
            )
        return
    if fmt != AUTO and detected.name != fmt:
        plan.ignored.append({"path": str(path), "reason": f"detected as {detected.name}"})
        return
    companion = detected.read_with(path)
    if companion is not None and given:
        raise InputError(
            f"{detected.name}: {companion}", path=path, hint="give that file (or its folder)"
        )
    if companion is not None:
        plan.ignored.append({"path": str(path), "reason": f"{detected.name}: {companion}"})
        return
    plan.files.append(InputFile(path, detected.name, detected=True))


__all__ = [
    "AUTO",
    "DEFAULT_THRESHOLD",
    "FORMATS",
    "READABLE",
    "InputFile",
    "InputPlan",
    "Labels",
    "detect",
    "plan_inputs",
    "probe",
]
