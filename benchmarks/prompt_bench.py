"""Benchmark the test-time path on large corpora: `wikitrace prompt` and the budget search.

Builds (or reuses, with --keep DIR) a corpus of --runs synthetic runs compiled by an instant
fake model that draws 3 insights a run, then prints: the median wall and CPU time (the child's
user + system) of the whole `wikitrace prompt CORPUS TASK --message-tokens 6000` command, for a
task whose domain cannot be told (no lesson listed) and for the task of a past run (its type
found from it: the lessons of that type ranked to fit), with the load average; and with the
corpus loaded once, the time of first_message as --message-tokens grows (how many insights it
shows, how many renders). Asserts nothing.

    python benchmarks/prompt_bench.py [--runs 3400] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema.catalog import PastRun, records_in
from wikitrace.corpus_schema.layout import CATALOG
from wikitrace.transport.llm import LLMReply

WORDS = [
    "cabinet",
    "drawer",
    "mug",
    "lamp",
    "kettle",
    "safe",
    "key",
    "shelf",
    "counter",
    "fridge",
    "sink",
    "stove",
    "desk",
    "book",
    "pen",
    "plate",
    "bowl",
    "towel",
    "box",
    "bed",
    "sofa",
    "table",
    "chair",
    "window",
    "door",
    "letter",
    "coin",
    "apple",
    "bread",
    "knife",
]
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bu", "do", "fe"]
VOCABULARY = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]
"""1,728 made-up words: lessons as varied as real ones, so few are near-duplicates."""
TYPES = ["pick_and_place", "look_at", "heat", "cool", "clean", "two_objects"]
TURN_BLOCK = re.compile(
    r"--- WIKITRACE-DATA-\w+ TURN (\d+) ---\n(.*?)"
    r"(?=\n--- WIKITRACE-DATA-\w+ TURN|\nWIKITRACE-DATA-)",
    re.S,
)
WIKITRACE = str(Path(sys.executable).parent / "wikitrace")


class InstantModel:
    """A compile answer at once: 3 insights, each with its own words, quoting the last turn."""

    model = "fake/bench"

    def __init__(self) -> None:
        self.rng = random.Random(5)

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model}

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    async def complete(self, messages: list[dict[str, str]]) -> LLMReply:
        prompt = messages[0]["content"]
        turns = {int(m.group(1)): m.group(2) for m in TURN_BLOCK.finditer(prompt)}
        turn = max(turns)
        quote = turns[turn].splitlines()[-1].split(": ", 1)[-1][:40]

        def words(n: int) -> str:
            return " ".join(self.rng.choice(VOCABULARY) for _ in range(n))

        answer = {
            "title": f"The agent {words(4)}",
            "description": words(12),
            "claims": [{"statement": words(10), "evidence": [{"turn": turn, "quote": quote}]}],
            "insights": [
                {
                    "title": f"Check the {words(3)}",
                    "guideline": f"Before acting, {words(14)}.",
                    "applicability": f"Tasks with a {words(3)}.",
                    "supporting_claims": [1],
                }
                for _ in range(3)
            ],
        }
        return LLMReply(text=json.dumps(answer), prompt_tokens=100, completion_tokens=50)


def write_runs(path: Path, count: int) -> None:
    rng = random.Random(3)
    with path.open("w") as handle:
        for index in range(count):
            things = " ".join(rng.choice(WORDS) for _ in range(6))
            turns = [
                {"role": "user", "content": f"Put the {things} away."},
                {"role": "assistant", "action": f"go to {rng.choice(WORDS)} {index % 7}"},
                {"role": "tool", "observation": f"You see a {rng.choice(WORDS)}."},
            ]
            record = {
                "task_id": str(index // 2),
                "task": f"Put the {things} in the {rng.choice(WORDS)}.",
                "task_type": TYPES[index % len(TYPES)],
                "success": rng.random() < 0.4,
                "turns": turns,
            }
            handle.write(json.dumps(record) + "\n")


def _timed(command: list[str], repeat: int) -> tuple[float, float]:
    """The median wall time of `command` and its median CPU time (user + system)."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3400, help="3 insights each")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build here once, reuse it afterwards")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = args.keep or Path(scratch) / "corpus"
        if not corpus.exists():
            runs = Path(scratch) / "runs.jsonl"
            write_runs(runs, args.runs)
            started = time.perf_counter()
            llm = InstantModel()
            options = BuildOptions(
                inputs=[runs], output=corpus, model=llm.model, use_cache=False, mine=False
            )
            build_corpus(options, llm=llm)  # type: ignore[arg-type]
            print(f"built {args.runs} runs in {time.perf_counter() - started:.1f} s", flush=True)
        insights = len(list((corpus / "insight").glob("insight-*.md")))
        task = "Put the mug and the lamp on the shelf by the window."
        first = next(records_in(corpus / CATALOG))
        assert isinstance(first, PastRun)
        for what, asked in (("a task of no domain", task), ("a past run's task", first.task)):
            command = [WIKITRACE, "prompt", str(corpus), asked, "--message-tokens", "6000"]
            load = os.getloadavg()[0]
            wall, cpu = _timed(command, args.repeat)
            print(
                f"{insights} insights, {what}: `wikitrace prompt --message-tokens 6000` "
                f"{wall:.2f} s wall, {cpu:.2f} s CPU (medians of {args.repeat}; load "
                f"{load:.1f} to {os.getloadavg()[0]:.1f}; target <= 1 s at 100k insights)",
                flush=True,
            )
        from wikitrace.tools.memory import Memory

        started = time.perf_counter()
        memory = Memory.load(corpus)
        print(f"Memory.load: {time.perf_counter() - started:.2f} s")
        for budget in (6000, 60_000, 120_000):
            started = time.perf_counter()
            message = memory.first_message(task, max_tokens=budget, infer_type=False)
            print(
                f"--message-tokens {budget}: {len(message.insights)} insights shown in "
                f"{time.perf_counter() - started:.2f} s"
            )


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
