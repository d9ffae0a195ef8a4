"""A toy environment for trying wikitrace's update controller: fetch an item from a container.

Deterministic and tiny on purpose. Each task names a container (a drawer or a safe) and whether
it is locked. An unlocked container opens. A locked drawer's key is under the doormat. A locked
safe is an old one whose lock gives way when forced; forcing anything else breaks it (a drawer
jams, a modern safe's alarm locks it down). So a lesson can help (look under the doormat) or,
applied too broadly, hurt (force every container open).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    task_id: str
    container: str  # "drawer" or "safe"
    item: str
    locked: bool

    @property
    def text(self) -> str:
        return f"Fetch the {self.item} from the {self.container} in the study."


TASKS = {
    task.task_id: task
    for task in [
        Task("drawer-1", "drawer", "letter", locked=False),
        Task("drawer-2", "drawer", "stamp", locked=False),
        Task("drawer-3", "drawer", "pen", locked=False),
        Task("drawer-4", "drawer", "ledger", locked=True),
        Task("drawer-5", "drawer", "compass", locked=True),
        Task("drawer-6", "drawer", "map", locked=True),
        Task("safe-1", "safe", "ring", locked=False),
        Task("safe-2", "safe", "watch", locked=False),
        Task("safe-3", "safe", "deed", locked=False),
        Task("safe-4", "safe", "bond", locked=True),
        Task("safe-5", "safe", "coin", locked=True),
        Task("safe-6", "safe", "seal", locked=True),
    ]
}


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
        if box == "drawer":
            act("lift doormat", "You find a small key under the doormat.")
            act(f"unlock {box} with key", f"The {box} opens. You see the {task.item}.")
            act(f"take {task.item}", f"You take the {task.item}.")
            return done(f"I fetched the {task.item}.", True)
        act("lift doormat", "There is nothing under the doormat.")
    return done(f"The {box} is locked and I found no way to open it.", False)
