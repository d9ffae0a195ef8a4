"""A scripted agent for the toy environment, written as a wikitrace runner.

    python examples/toy/agent.py --task drawer-4 --memory CORPUS_VERSION --seed 0

It reads the insights of the corpus version it is given (plain files: insight/insight-*.md),
leaving out those the admission gate rejected or monitoring retired. It plays the task with the
strategy of the lessons whose precondition (or, without one, "Applies when") fits the task,
writes its trajectory as one line of wikitrace's native JSON Lines, and prints the one JSON
object on stdout the runner protocol asks for, with the lessons it used:
{"success": true, "used": {"insights": ["insight-0001"]}, "task_id": "drawer-4",
"trajectory": "..."}: the task named, so that monitoring knows how often it fails anyway, and
`checks` of each lesson's own effect (was the key under the doormat?) when the episode tried it.

The agent is naive on purpose: it reads a precondition literally (the containers it names,
locked or not) and follows the lesson wherever that reading fits. A guideline that says to look
under the doormat makes it do so; one that says to force containers open makes it force them.
`--memory none` gives no lessons.
`--strategy` plays a fixed strategy instead (how the example runs in runs/ were made).
`--noise P` flips the episode's outcome with chance P, drawn from the task, the seed and the
lessons the memory holds (their text, not the folder's path: the same run gives the same outcome
wherever the corpus is copied, and the two sides of a gate's pair are independent): an agent that
samples, whose outcome the lessons change only in part.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from toyenv import TASKS, Task, episode

# A paragraph runs on over wrapped lines (a list item's indented) to a blank line or an item.
_GUIDELINE = re.compile(r"^\*\*Guideline\.\*\* (.*(?:\n(?!- )\S.*)*)", re.M)
_APPLIES = re.compile(r"^\*\*Applies when\.\*\* (.*(?:\n(?!- )\S.*)*)", re.M)
_PRECONDITION = re.compile(r"^- precondition: (.*(?:\n  \S.*)*)", re.M)
_STATUS = re.compile(r"^status: (\w+)$", re.M)


@dataclass
class Lesson:
    id: str
    guideline: str
    precondition: str

    @property
    def strategy(self) -> str:
        text = self.guideline.lower()
        return "force" if "force" in text else "mat" if "doormat" in text else "plain"

    def applies_to(self, task: Task) -> bool:
        """A literal reading of the precondition: the containers it names, locked or not."""
        words = set(re.findall(r"[a-z]+", self.precondition.lower()))
        kinds = {kind for kind in ("drawer", "safe") if kind in words or kind + "s" in words}
        if kinds and task.container not in kinds:
            return False
        if "locked" in words and not task.locked:
            return False
        return not ("unlocked" in words and task.locked)


def lessons(memory: str) -> list[Lesson]:
    """The lessons in a corpus version an agent may use: not those the gate rejected or retired."""
    if memory == "none":
        return []
    folder = Path(memory) / "insight"
    if not folder.is_dir():
        raise SystemExit(f"{memory} is not a wikitrace corpus (no insight/ folder)")
    found = []
    for page in sorted(folder.glob("insight-*.md")):
        text = page.read_text(encoding="utf-8")
        status = _STATUS.search(text)
        guideline = _GUIDELINE.search(text)
        if guideline is None or (status and status.group(1) in ("rejected", "retired")):
            continue
        precondition = _PRECONDITION.search(text) or _APPLIES.search(text)
        found.append(
            Lesson(
                page.stem,
                " ".join(guideline.group(1).split()),
                " ".join(precondition.group(1).split()) if precondition else "",
            )
        )
    return found


def noise_key(known: list[Lesson]) -> str:
    """What the noise is drawn from besides task and seed: the lessons' text, "none" without any."""
    if not known:
        return "none"
    text = json.dumps(sorted((lesson.guideline, lesson.precondition) for lesson in known))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def choose(task: Task, known: list[Lesson]) -> tuple[str, list[str]]:
    """The strategy for a task and the lessons it rests on: forcing wins, then the doormat."""
    applicable = [lesson for lesson in known if lesson.applies_to(task)]
    for strategy in ("force", "mat"):
        used = [lesson.id for lesson in applicable if lesson.strategy == strategy]
        if used:
            return strategy, used
    return "plain", []


TRIED = {"mat": ("lift doormat", "You find a small key"), "force": ("force ", " is open")}
"""For a strategy a lesson gives: the action that tries it, and what it shows when it works."""


def checks(strategy: str, used: list[str], turns: list[dict[str, str]]) -> dict[str, object]:
    """What the episode showed of the lessons it acted on, as a harness that watches the
    lesson's own effect would report it (`checks` in a citation report): whether the key was
    under the doormat, whether the container gave way. Unsaid when the episode never tried it
    (an unlocked container opens without the doormat)."""
    action, effect = TRIED.get(strategy, ("", ""))
    tried = [t for t in turns if action and t.get("action", "").startswith(action)]
    if not tried:
        return {}
    return {ident: {"effect_observed": effect in tried[0]["observation"]} for ident in used}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--memory", required=True, help="a corpus version folder, or none")
    parser.add_argument("--seed", type=int, default=0, help="draws the noise (if any)")
    parser.add_argument(
        "--noise", type=float, default=0.0, help="chance the outcome is flipped (default 0)"
    )
    parser.add_argument("--strategy", choices=["plain", "mat", "force"])
    parser.add_argument("--out", default=None, help="folder for trajectories (default: none)")
    args = parser.parse_args()

    task = TASKS[args.task]
    known = lessons(args.memory)
    if args.strategy:
        strategy, used = args.strategy, []
    else:
        strategy, used = choose(task, known)
    turns, success = episode(task, strategy)
    draw = random.Random(f"{task.task_id}:{args.seed}:{noise_key(known)}")
    if args.noise and draw.random() < args.noise:
        success = not success
        turns.append({"role": "assistant", "content": "(the outcome was flipped by --noise)"})
    # The result, and a citation report of the lessons it acted on (see `wikitrace cite`).
    result: dict[str, object] = {
        "success": success,
        "used": {"insights": used},
        "task_id": task.task_id,
    }
    if checks(strategy, used, turns):
        result["checks"] = checks(strategy, used, turns)
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
