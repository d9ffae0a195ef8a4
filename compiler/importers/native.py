"""wikitrace's own JSON Lines (task_id, task, success, turns): each line a run as it is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, Probe, jsonl_objects


def read(path: Path, found: Probe) -> Iterator[Found]:
    for item in jsonl_objects(path):
        if isinstance(item, InputError):
            yield item
            continue
        line, data = item
        given = data.get("metadata")
        metadata: dict[str, Any] = given if isinstance(given, dict) else {}
        reward = metadata.get("reward")
        attempt = metadata.get("attempt")
        task_id = str(data.get("task_id"))
        yield Candidate(
            path=str(path),
            line=line,
            data=data,
            run_id=str(metadata.get("run_id") or f"{task_id}#{attempt or line}"),
            reward=float(reward)
            if isinstance(reward, (int, float)) and not isinstance(reward, bool)
            else None,
        )
