"""Convert tau-bench results (a JSON list of {task_id, trial, reward, info, traj}) to wikitrace's
native JSON Lines format. A stop-gap until `wikitrace convert` reads tau-bench itself.

Each chat message becomes a turn, except that a `tool` message joins the assistant turn whose
tool call it answers, as that call's `result`. Fields with no place in a native turn go into
its `metadata`; nothing is dropped.

    python examples/tau_bench_to_native.py results.json [--tasks 0,1,12] [--trials 0,1] > runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

TURN_FIELDS = {"role", "content", "tool_calls"}


def convert_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    calls_by_id: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") in calls_by_id:
            call = calls_by_id.pop(message["tool_call_id"])
            call["result"] = message.get("content")
            extra = {
                k: v for k, v in message.items() if k not in {"role", "content", "tool_call_id"}
            }
            if extra:
                call.setdefault("metadata", {})["tool_message"] = extra
            continue
        turn: dict[str, Any] = {"role": message.get("role"), "content": message.get("content")}
        calls = []
        for raw in message.get("tool_calls") or []:
            function = raw.get("function", {})
            call = {
                "id": raw.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
            extra = {k: v for k, v in raw.items() if k not in {"id", "function"}}
            if extra:
                call["metadata"] = extra
            calls.append(call)
            if raw.get("id"):
                calls_by_id[raw["id"]] = call
        if calls:
            turn["tool_calls"] = calls
        extra = {k: v for k, v in message.items() if k not in TURN_FIELDS}
        if extra:
            turn["metadata"] = extra
        turns.append(turn)
    return turns


def convert(result: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    info = result.get("info", {})
    return {
        "task_id": str(result["task_id"]),
        "task": info.get("task", {}).get("instruction", ""),
        "task_type": "airline",
        "success": result.get("reward") == 1.0,
        "turns": convert_messages(result["traj"]),
        "metadata": {
            "reward": result.get("reward"),
            "trial": result.get("trial"),
            "attempt": result.get("trial", 0) + 1,
            "model": "gpt-4o",
            "source": source,
            "source_index": index,
            "info": info,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--tasks", help="comma-separated task ids to keep (default: all)")
    parser.add_argument("--trials", help="comma-separated trials to keep (default: all)")
    parser.add_argument("--source", default=None, help="origin to record in each run's metadata")
    args = parser.parse_args()
    keep = set(args.tasks.split(",")) if args.tasks else None
    trials = {int(t) for t in args.trials.split(",")} if args.trials else None
    with open(args.results) as handle:
        results = json.load(handle)
    for index, result in enumerate(results):
        if (keep is None or str(result["task_id"]) in keep) and (
            trials is None or result.get("trial") in trials
        ):
            run = convert(result, index, args.source or args.results)
            sys.stdout.write(json.dumps(run, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
