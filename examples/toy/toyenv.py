"""A toy environment for trying wikitrace's update controller: fetch an item from a container.

Deterministic and tiny on purpose. Each task names a container (a drawer or a safe) and says
whether it is locked. An unlocked container opens. A locked drawer's key is under the doormat
(except in the attic of the later world, drawer-13 to 16). A locked safe is an old one whose
lock gives way when forced; forcing anything else breaks it (a drawer jams, a modern safe's
alarm locks it down). So a lesson can help (look under the doormat), hurt when applied too
broadly (force every container open), or stop holding when the world changes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    task_id: str
    container: str  # "drawer" or "safe"
    item: str
    locked: bool
    key_under_mat: bool = True
    """Where a locked drawer's key is; False in the later world (tasks-later.jsonl)."""
    room: str = "study"

    @property
    def text(self) -> str:
        lock = "locked " if self.locked else ""
        return f"Fetch the {self.item} from the {lock}{self.container} in the {self.room}."


_ITEMS = {
    "drawer": "letter stamp pen ledger compass map ribbon candle button thimble key-ring diary",
    "safe": "ring watch deed bond coin seal pearl brooch medal cheque locket tiara",
}


def _tasks() -> list[Task]:
    tasks = []
    for container, items in _ITEMS.items():
        for number, item in enumerate(items.split(), start=1):
            # 1-3 and 7-9 open; 4-6 and 10-12 locked
            locked = (number - 1) % 6 >= 3
            tasks.append(Task(f"{container}-{number}", container, item, locked))
    # The later world: drawers in the attic, whose keys are not under the doormat.
    for number, item in enumerate(["atlas", "inkwell", "journal", "spyglass"], start=13):
        tasks.append(
            Task(f"drawer-{number}", "drawer", item, True, key_under_mat=False, room="attic")
        )
    return tasks


TASKS = {task.task_id: task for task in _tasks()}
LATER = {f"drawer-{n}" for n in range(13, 17)}
"""Tasks of the later world, where a lesson that held before stops holding."""


def episode(task: Task, strategy: str) -> tuple[list[dict[str, str]], bool]:
    """Play one episode with a strategy ("plain", "mat" or "force"): (turns, success)."""
    turns = [{"role": "user", "content": task.text}]
    box = task.container

    def act(action: str, observation: str) -> None:
        turns.append({"role": "assistant", "action": action, "observation": observation})

    def done(message: str, success: bool) -> tuple[list[dict[str, str]], bool]:
        turns.append({"role": "assistant", "content": message})
        return turns, success

    act("look", f"You are in the study. There is a {box} and a doormat by the door.")
    if strategy == "force":
        if box == "drawer":
            act(f"force {box}", "The drawer splinters and jams shut.")
            return done(f"I could not get the {task.item}.", False)
        if not task.locked:
            act(f"force {box}", "The alarm goes off and the safe locks itself down.")
            return done(f"I could not get the {task.item}.", False)
        act(f"force {box}", f"The old lock gives way. The safe is open; you see the {task.item}.")
        act(f"take {task.item}", f"You take the {task.item}.")
        return done(f"I fetched the {task.item}.", True)
    if not task.locked:
        act(f"open {box}", f"The {box} opens. You see the {task.item}.")
        act(f"take {task.item}", f"You take the {task.item}.")
        return done(f"I fetched the {task.item}.", True)
    act(f"open {box}", f"The {box} is locked.")
    if strategy == "mat":
        if box == "drawer" and task.key_under_mat:
            act("lift doormat", "You find a small key under the doormat.")
            act(f"unlock {box} with key", f"The {box} opens. You see the {task.item}.")
            act(f"take {task.item}", f"You take the {task.item}.")
            return done(f"I fetched the {task.item}.", True)
        act("lift doormat", "There is nothing under the doormat.")
    return done(f"The {box} is locked and I found no way to open it.", False)
