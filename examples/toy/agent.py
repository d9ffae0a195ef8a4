"""A scripted agent for the toy environment, written as a wikitrace runner.

    python examples/toy/agent.py --task drawer-4 --memory CORPUS_VERSION --seed 0

It reads the insights of the corpus version it is given (plain files: insight/insight-*.md),
picks its strategy from their guidelines, plays the task, writes its trajectory as one line of
wikitrace's native JSON Lines, and prints the result as the one JSON object on stdout that the
runner protocol asks for: {"success": true, "trajectory": "..."}.

The agent is naive on purpose: it follows every lesson it is given, everywhere. A guideline
that says to look under the doormat makes it do so when a container is locked; one that says
to force containers open makes it force every container. `--memory none` gives no lessons.
`--strategy` plays a fixed strategy instead (how the example runs in runs/ were made).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from toyenv import TASKS, episode

_GUIDELINE = re.compile(r"^\*\*Guideline\.\*\* (.*)$", re.M)


def guidelines(memory: str) -> list[str]:
    """The guideline line of every insight in a corpus version (none for `none`)."""
    if memory == "none":
        return []
    folder = Path(memory) / "insight"
    if not folder.is_dir():
        raise SystemExit(f"{memory} is not a wikitrace corpus (no insight/ folder)")
    found = []
    for page in sorted(folder.glob("insight-*.md")):
        match = _GUIDELINE.search(page.read_text(encoding="utf-8"))
        if match:
            found.append(match.group(1))
    return found


def strategy_from(lessons: list[str]) -> str:
    text = " ".join(lessons).lower()
    if "force" in text:
        return "force"
    if "doormat" in text:
        return "mat"
    return "plain"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--memory", required=True, help="a corpus version folder, or none")
    parser.add_argument("--seed", type=int, default=0, help="unused: the toy is deterministic")
    parser.add_argument("--strategy", choices=["plain", "mat", "force"])
    parser.add_argument("--out", default=None, help="folder for trajectories (default: none)")
    args = parser.parse_args()

    task = TASKS[args.task]
    strategy = args.strategy or strategy_from(guidelines(args.memory))
    turns, success = episode(task, strategy)
    result: dict[str, object] = {"success": success}
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{task.task_id}-{strategy}-seed{args.seed}.jsonl"
        run = {
            "task_id": task.task_id,
            "task": task.text,
            "task_type": task.container,
            "success": success,
            "turns": turns,
            "metadata": {"strategy": strategy, "seed": args.seed},
        }
        path.write_text(json.dumps(run) + "\n", encoding="utf-8")
        result["trajectory"] = str(path)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
