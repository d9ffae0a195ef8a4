"""How often the update trigger compares, on simulated sequences whose topic changes are known.

Each simulated memory grows by updates of `--runs` runs. An update's runs all come from one
topic (a room of a household: kitchen, garage, bathroom, office, garden, laundry), and a topic
lasts 2 to 4 updates before the next one starts. Every task is written as ALFWorld writes them:
the same template ("You are in the middle of a room. Looking quickly around you, you see a ...
Your task is to: ..."), the room's furniture (some of it shared between rooms: cabinets,
drawers, shelves) and a task over one of its objects. Directions are computed by
`control.embed.update_direction` as `wikitrace update` does, with the momentum average kept as
if every update were deployed, and compared with the threshold.

The truth is known: the first update of a new topic should be compared (a miss deploys a turn
of memory unexamined), and a further update of the same topic need not be (a comparison there
costs agent runs for nothing). It prints both rates for the encoder `update` uses, and for two
contrasts: every word weighed alike, and each run encoded with its offline compilation title
as before (all runs' titles read alike: "task ... succeeded in 4 turns").

    python benchmarks/trigger_topic_bench.py [--sequences 200] [--runs 4] [--threshold 0.5]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import numpy as np

from wikitrace.control.embed import (
    TYPE_PREFIX,
    Embedder,
    HashingEmbedder,
    cosine,
    turning,
    update_direction,
    update_parts,
)

ROOMS = {
    "kitchen": (
        ["countertop", "fridge", "microwave", "sinkbasin", "stoveburner", "toaster", "cabinet"],
        ["mug", "egg", "tomato", "pan", "fork", "lettuce", "potato", "plate", "bread", "kettle"],
    ),
    "garage": (
        ["workbench", "toolbox", "rack", "car", "bicycle", "shelf", "cabinet"],
        ["wrench", "hammer", "screwdriver", "drill", "tire", "pump", "paintcan", "nail"],
    ),
    "bathroom": (
        [
            "bathtub",
            "toilet",
            "sinkbasin",
            "towelholder",
            "handtowelholder",
            "countertop",
            "drawer",
        ],
        ["soapbar", "toiletpaper", "towel", "spraybottle", "candle", "plunger", "soapbottle"],
    ),
    "office": (
        ["desk", "desklamp", "sidetable", "dresser", "shelf", "drawer", "safe"],
        ["pen", "pencil", "book", "cd", "laptop", "keychain", "creditcard", "alarmclock"],
    ),
    "garden": (
        ["flowerbed", "bench", "shed", "fence", "planter", "hose", "shelf"],
        ["trowel", "seed", "rake", "watercan", "glove", "pot", "shears"],
    ),
    "laundry": (
        ["washer", "dryer", "laundryhamper", "ironingboard", "shelf", "cabinet", "drawer"],
        ["shirt", "sock", "detergent", "iron", "basket", "hanger", "sheet"],
    ),
}
VERBS = {
    "pick_clean_then_place_in_recep": "put a clean {o} in {p}",
    "pick_heat_then_place_in_recep": "heat some {o} and put it on {p}",
    "pick_two_obj_and_place": "find two {o} and put them in {p}",
    "look_at_obj_in_light": "examine the {o} with the desklamp",
    "pick_cool_then_place_in_recep": "cool a {o} and put it in {p}",
    "pick_and_place_simple": "put a {o} on {p}",
}
"""ALFWorld's task types, each with how its tasks read."""


def task(rng: random.Random, room: str, kind: str) -> str:
    furniture, objects = ROOMS[room]
    seen = rng.sample(furniture, 5)
    where = ", ".join(f"a {thing} {rng.randint(1, 3)}" for thing in seen)
    verb = VERBS[kind].format(o=rng.choice(objects), p=f"{rng.choice(seen)} {rng.randint(1, 3)}")
    return (
        f"You are in the middle of a room. Looking quickly around you, you see {where}.\n"
        f"Your task is to: {verb}."
    )


class Unweighed(HashingEmbedder):
    """Every word alike (the trigger before its encoder weighed words)."""

    def fit(self, items: object) -> HashingEmbedder:
        return self


def plain(rng: random.Random, text: str, number: int) -> str:
    return text


def titled(rng: random.Random, text: str, number: int) -> str:
    outcome = rng.choice(["succeeded", "failed"])
    return f"{text}\ntask {number} {outcome} in {rng.randint(3, 30)} turns (0 with an error signal)"


Encoder = tuple[str, Embedder, Callable[[random.Random, str, int], str], bool, bool]
"""Its name, embedder, how a run's text is written, whether its task type is an item (as
`control.embed.memory_texts` adds it when the log names the type), and whether the update is
judged kind by kind (`update_parts` and `turning`, as `update` does) or as one direction."""


def run(
    rng: random.Random, encoder: Encoder, args: argparse.Namespace
) -> tuple[list[bool], list[bool], list[bool]]:
    """Compared or not: first updates of a new topic, further ones of the same, and whether a
    new topic was compared by its first or second update. A topic is a room (each task of a
    random type) or a task type (each task in a random room), as `--topic` says."""
    _, embedder, text, typed, by_kind = encoder
    topics = list(ROOMS) if args.topic == "room" else list(VERBS)
    memory: dict[str, str] = {}
    average = None
    new_topic: list[bool] = []
    same_topic: list[bool] = []
    by_second: list[bool] = []
    topic = rng.choice(topics)
    first = True
    for _ in range(args.topics):
        for update in range(rng.randint(2, 4)):
            added: dict[str, str] = {}
            runs = sum(ident.startswith("step-") for ident in memory)
            for i in range(args.runs):
                step = f"step-{runs + i + 1:04d}"
                room = topic if args.topic == "room" else rng.choice(list(ROOMS))
                kind = topic if args.topic == "type" else rng.choice(list(VERBS))
                added[step] = text(rng, task(rng, room, kind), runs + i)
                if typed:
                    added[TYPE_PREFIX + step] = kind
            new = {**memory, **added}
            changed = update_parts if by_kind else update_direction
            direction, _, _ = changed(memory, new, embedder)
            assert direction is not None
            if average is not None:
                similar = turning if by_kind else cosine
                compared = similar(direction, average) < args.threshold
                (new_topic if update == 0 and not first else same_topic).append(compared)
                if update == 0 and not first:
                    by_second.append(compared)
                elif update == 1 and not first:
                    by_second[-1] = by_second[-1] or compared
            average = (
                direction
                if average is None
                else (args.momentum * average + (1 - args.momentum) * direction)
            )
            memory = new
        first = False
        topic = rng.choice([t for t in topics if t != topic])
    return new_topic, same_topic, by_second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=200)
    parser.add_argument("--topics", type=int, default=4, help="topics in a sequence")
    parser.add_argument("--runs", type=int, default=4, help="runs an update")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument(
        "--topic", choices=["room", "type", "both"], default="both", help="what a topic is"
    )
    args = parser.parse_args()
    encoders: list[Encoder] = [
        ("update's: text and task type, kind by kind", HashingEmbedder(), plain, True, True),
        ("text and task type, one direction", HashingEmbedder(), plain, True, False),
        ("task text alone (before)", HashingEmbedder(), plain, False, False),
        ("task text alone, every word alike", Unweighed(), plain, False, False),
        ("with the compilation title, every word alike", Unweighed(), titled, False, False),
    ]
    for topic in ("room", "type") if args.topic == "both" else (args.topic,):
        report(encoders, argparse.Namespace(**{**vars(args), "topic": topic}))


def report(encoders: list[Encoder], args: argparse.Namespace) -> None:
    print(
        f"\nA topic is a {'room' if args.topic == 'room' else 'task type'}: "
        f"{args.sequences} sequences of {args.topics} topics, 2-4 updates a topic, "
        f"{args.runs} runs an update; momentum {args.momentum:g}, threshold {args.threshold:g}"
    )
    print(
        f"{'encoder':56} {'new topic compared':>19} {'by its 2nd update':>18} "
        f"{'same topic compared':>20}"
    )
    for encoder in encoders:
        rng = random.Random(7)
        new_topic: list[bool] = []
        same_topic: list[bool] = []
        by_second: list[bool] = []
        for _ in range(args.sequences):
            a, b, c = run(rng, encoder, args)
            new_topic += a
            same_topic += b
            by_second += c
        print(
            f"{encoder[0]:56} {np.mean(new_topic):8.3f} of {len(new_topic):5d}  "
            f"{np.mean(by_second):17.3f}  {np.mean(same_topic):9.3f} of {len(same_topic):5d}"
        )


if __name__ == "__main__":
    main()
