"""inspect_ai eval logs: `.json` (one document, samples streamed) and `.eval` (a zip with one
member per sample). A sample and its epoch are one run; its first scorer's value is the label
(C correct, I incorrect, P partial = 0.5, N no answer, or a number or a boolean)."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import (
    Candidate,
    Found,
    Probe,
    first_user_text,
    json_items,
    json_value,
    need,
    rest,
    zip_member,
)
from .chat import chat_turns
from .labels import LETTER_SCORES

_ATTACHMENT = re.compile(r"attachment://([0-9a-f]{32})")
_SAMPLE_MEMBER = re.compile(r"^samples/.+\.json$")


def _resolve(value: Any, attachments: dict[str, str]) -> Any:
    """inspect_ai moves long strings into `attachments`; put them back where they were."""
    if not attachments:
        return value
    if isinstance(value, str):
        if "attachment://" not in value:
            return value
        return _ATTACHMENT.sub(lambda m: attachments.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_resolve(item, attachments) for item in value]
    if isinstance(value, dict):
        return {key: _resolve(item, attachments) for key, item in value.items()}
    return value


def score_value(scores: Any) -> tuple[float | None, str | None]:
    """(reward, scorer) from a sample's `scores`: the first scorer with a usable value."""
    if not isinstance(scores, dict):
        return None, None
    for name, score in scores.items():
        value = score.get("value") if isinstance(score, dict) else score
        if isinstance(value, bool):
            return (1.0 if value else 0.0), name
        if isinstance(value, (int, float)):
            return float(value), name
        if isinstance(value, str) and value.strip().upper() in LETTER_SCORES:
            return LETTER_SCORES[value.strip().upper()], name
    return None, None


def _task_text(sample: dict[str, Any], turns: list[dict[str, Any]]) -> str | None:
    given = sample.get("input")
    if isinstance(given, str):
        return given
    if isinstance(given, list):
        user = [t for t in chat_turns(given) if t.get("role") == "user" and t.get("content")]
        if user:
            return str(user[0]["content"])
    return first_user_text(turns)


def _run(sample: Any, eval_info: dict[str, Any], path: Path, *, at: str) -> Candidate:
    messages = need(sample, "messages", path, at=at)
    if not isinstance(messages, list) or not messages:
        raise InputError("expected a non-empty list", path=path, at=at, field="messages")
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}
    sample = _resolve(sample, attachments)
    turns = chat_turns(sample["messages"])
    task = _task_text(sample, turns)
    if task is None:
        raise InputError("no task: no input and no user message", path=path, at=at)
    task_name = str(eval_info.get("task") or "inspect")
    sample_id = str(need(sample, "id", path, at=at))
    epoch = sample.get("epoch")
    reward, scorer = score_value(sample.get("scores"))
    metadata = rest(sample, {"messages", "attachments", "id"})
    metadata["sample_id"] = sample_id
    metadata["eval"] = eval_info
    if isinstance(epoch, int) and not isinstance(epoch, bool):
        metadata["attempt"] = epoch
    if reward is not None:
        metadata["reward"] = reward
        metadata["scorer"] = scorer
    task_id = f"{task_name}/{sample_id}"
    return Candidate(
        path=str(path),
        at=at,
        run_id=f"{task_id}#{epoch}",
        reward=reward,
        note=None if sample.get("scores") else "the sample has no scores",
        data={
            "task_id": task_id,
            "task": task,
            "origin": f"inspect/{task_name}",
            "task_type": task_name,
            "success": None,
            "turns": turns,
            "metadata": metadata,
        },
    )


def read_json(path: Path, found: Probe) -> Iterator[Found]:
    eval_info = json_value(path, "eval")
    eval_info = eval_info if isinstance(eval_info, dict) else {}
    count = 0
    for item in json_items(path, "samples.item"):
        if isinstance(item, InputError):
            yield item
            continue
        index, sample = item
        count += 1
        try:
            yield _run(sample, eval_info, path, at=f"samples[{index}]")
        except InputError as error:
            yield error
    if count == 0:
        status = json_value(path, "status")
        yield InputError(
            f"the log holds no samples (status {status!r}); inspect_ai writes them only when the "
            "eval logs samples",
            path=path,
            field="samples",
        )


def read_eval(path: Path, found: Probe) -> Iterator[Found]:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as error:
        yield InputError(f"a damaged zip: {error}", path=path)
        return
    with archive:
        names = archive.namelist()
        header_name = "header.json" if "header.json" in names else "_journal/start.json"
        try:
            header = zip_member(archive, header_name, path) if header_name in names else {}
        except InputError as error:
            yield error
            header = {}
        eval_info = header.get("eval") if isinstance(header, dict) else None
        eval_info = eval_info if isinstance(eval_info, dict) else {}
        members = sorted((n for n in names if _SAMPLE_MEMBER.match(n)), key=_sample_order)
        if not members:
            yield InputError("the log holds no samples/ members", path=path)
        for name in members:
            try:
                yield _run(zip_member(archive, name, path), eval_info, path, at=name)
            except InputError as error:
                yield error


def _sample_order(name: str) -> tuple[Any, ...]:
    """samples/ID_epoch_N.json, by id then epoch (numbers as numbers)."""
    stem = name.removeprefix("samples/").removesuffix(".json")
    head, _, epoch = stem.rpartition("_epoch_")
    key: Any = int(head) if head.isdigit() else head
    return (isinstance(key, str), key, int(epoch) if epoch.isdigit() else 0)
