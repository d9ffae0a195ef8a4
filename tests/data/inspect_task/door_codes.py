"""A small inspect task where a lesson changes the answer: door codes are the room number
written backwards, except in the annex (where the lesson, followed, breaks the answer)."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate

ROOMS = [("1", "What is the door code of room 34?", "43"),
         ("2", "What is the door code of room 11?", "11"),
         ("3", "What is the door code of annex room 58?", "58")]


@task
def door_codes() -> Task:
    return Task(
        dataset=[Sample(id=i, input=q, target=t, metadata={"task_type": "door_codes"})
                 for i, q, t in ROOMS],
        solver=generate(),
        scorer=match(location="any"),
    )
