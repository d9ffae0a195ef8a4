"""Where `search`'s "no match" threshold (tools/find.py, MIN_SCORE) should sit: the scores of
real queries against those of unrelated ones, on corpora built from real logs.

Builds one offline corpus per group of logs under DATA (airline and telecom customer service,
coding, household, question answering; the session logs carry no outcome and are labelled
success, which search does not read), and asks each:

- real queries, whose right answer is known: a phrase of 4 to 8 words from one quote of a
  compilation (the right hit: that compilation, or any whose text holds the phrase), and a
  phrase of 6 to 10 words from a run's task (any run of that task text);
- the 24 plain-language queries of tests/search_queries.py (written from the sample logs, not
  copied from them) against that corpus, compiled by the fake model;
- unrelated queries: 40 everyday questions (cooking, gardening, money, health, ...), and the
  other groups' real phrases (a coding corpus asked an airline quote).

For each threshold it prints the share of unrelated queries answered "no match" (no hit of any
kind at or over it), and the recall@5 of the real ones (the right entry among the first 5 of
its kind at or over it). Asserts nothing.

    nice -n 10 python benchmarks/search_threshold_bench.py /work/shared/data --per-corpus 60
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from wikitrace.search import MIN_SCORE
from wikitrace.tools.find import SearchKind
from wikitrace.tools.memory import Memory

GROUPS = {
    "service": ["trajectories/tau-bench", "trajectories/tau2-bench"],
    "coding": [
        "trajectories/mini-swe-agent",
        "trajectories/atif-harbor",
        "trajectories/openhands",
        "sessions/claude-code",
        "sessions/codex",
        "sessions/gemini-cli",
    ],
    "household": ["trajectories/alfworld-react"],
    "qa": ["trajectories/hotpotqa-react", "trajectories/inspect-ai"],
}
EVERYDAY = [
    "how do I get a red wine stain out of a wool carpet",
    "what temperature should I roast a chicken at",
    "best time of year to plant tulip bulbs",
    "how much should I save for retirement each month",
    "why does my sourdough starter smell like nail polish",
    "can dogs eat grapes",
    "how to fix a squeaky door hinge",
    "what is a good stretching routine for lower back pain",
    "how long do boiled eggs keep in the fridge",
    "should I repaint the living room in a lighter colour",
    "how often do you water a cactus",
    "tips for a toddler who will not sleep through the night",
    "how to negotiate a higher salary",
    "what vegetables grow well in shade",
    "how do I descale an electric kettle",
    "recommend a novel for a long train journey",
    "how many calories are in a banana",
    "how to remove rust from a bicycle chain",
    "what is the difference between baking soda and baking powder",
    "how do I unclog a bathroom sink without chemicals",
    "is it worth buying an extended warranty for a fridge",
    "how to keep basil alive indoors",
    "ideas for a child's birthday party in the garden",
    "how to iron a shirt without creases",
    "what wine goes with grilled salmon",
    "how to train for a first half marathon",
    "why do my tomato leaves turn yellow",
    "how to budget for a wedding",
    "how do I get my cat to stop scratching the sofa",
    "what is the best way to store winter clothes",
    "how to make a vegetable lasagne",
    "help me write a condolence card",
    "how to learn to knit a scarf",
    "what should I pack for a camping weekend",
    "how to clean grout between bathroom tiles",
    "how long should I steep green tea",
    "how to choose a mattress for side sleepers",
    "do I need a permit to build a garden shed",
    "how can I improve my credit score",
    "what causes hiccups and how do I stop them",
]


@dataclass(frozen=True)
class Asked:
    text: str
    kind: SearchKind
    right: frozenset[str]
    """The steps of the right entries."""


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z][A-Za-z0-9_'.-]*", text)


def _phrase(text: str, low: int, high: int, rng: random.Random) -> str | None:
    words = _words(text)
    if len(words) < low:
        return None
    size = rng.randint(low, min(high, len(words)))
    start = rng.randint(0, len(words) - size)
    return " ".join(words[start : start + size])


def _labels(paths: list[Path], scratch: Path) -> Path:
    """Every run the logs leave unlabelled, labelled success (search reads no outcome)."""
    done = subprocess.run(
        ["wikitrace", "convert", *map(str, paths)], capture_output=True, text=True, check=False
    )
    ids = re.findall(r"^unlabelled .*?: task (.+?)(?: \(run .*?\))?: the log", done.stderr, re.M)
    path = scratch / "labels.json"
    path.write_text(json.dumps(dict.fromkeys(ids, True)))
    return path


def _build(name: str, data: Path, scratch: Path) -> Memory:
    paths = [data / part for part in GROUPS[name] if (data / part).exists()]
    out = scratch / name
    command = ["wikitrace", "build", *map(str, paths), "-o", str(out), "-q"]
    command += ["--labels", str(_labels(paths, scratch))]
    subprocess.run(command, check=True, capture_output=True)
    return Memory.load(out)


def _quotes(root: Path, step: str) -> list[str]:
    data = root / "data" / "compilation" / f"{step}.json"
    if not data.is_file():
        return []
    claims = json.loads(data.read_text()).get("claims", [])
    return [e["quote"] for c in claims for e in c.get("evidence", []) if e.get("verified")]


def _real(memory: Memory, count: int, rng: random.Random) -> list[Asked]:
    asked: list[Asked] = []
    runs = list(memory.runs)
    rng.shuffle(runs)
    for run in runs:
        if len(asked) >= count:
            break
        quotes = _quotes(memory.root, run.step)
        if not quotes:
            continue
        phrase = _phrase(rng.choice(quotes), 4, 8, rng)
        if phrase is None:
            continue
        holders = {
            r.step for r in memory.runs if phrase.lower() in " ".join(_words(r.explanation)).lower()
        }
        asked.append(Asked(phrase, "compilations", frozenset(holders | {run.step})))
    tasks = 0
    for run in runs:
        if tasks >= count:
            break
        phrase = _phrase(run.task, 6, 10, rng)
        if phrase is None:
            continue
        same = frozenset(r.step for r in memory.runs if r.task == run.task)
        asked.append(Asked(phrase, "tasks", same))
        tasks += 1
    return asked


THRESHOLDS = [0.0, 0.05, 0.1, 0.12, 0.15, 0.17, 0.2, 0.25, 0.3, 0.4]


def _best(memory: Memory, query: str) -> float:
    hits = memory.search(query, limit=1, min_score=0.0)
    return max((hit.score for hit in hits), default=0.0)


def _placed(memory: Memory, asked: Asked, threshold: float) -> bool:
    hits = memory.search(asked.text, [asked.kind], limit=5, min_score=threshold)
    return any(hit.id in asked.right for hit in hits)


def _row(label: str, values: list[float]) -> None:
    print(f"{label:<46}" + "".join(f"{v:>7.2f}" for v in values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="the folder of real logs (../shared/data)")
    parser.add_argument("--per-corpus", type=int, default=60, help="real phrases of each kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        memories = {name: _build(name, args.data, scratch) for name in GROUPS}
        real = {name: _real(m, args.per_corpus, rng) for name, m in memories.items()}
        print(f"MIN_SCORE today: {MIN_SCORE}; thresholds: {THRESHOLDS}")
        print(f"{'':<46}" + "".join(f"{t:>7.2f}" for t in THRESHOLDS))
        everyday_best: list[float] = []
        cross_best: list[float] = []
        for name, memory in memories.items():
            print(f"-- {name}: {len(memory.runs)} runs, {len(memory.insights)} insights")
            for kind in ("compilations", "tasks"):
                mine = [a for a in real[name] if a.kind == kind]
                if not mine:
                    continue
                recalls = [sum(_placed(memory, a, t) for a in mine) / len(mine) for t in THRESHOLDS]
                _row(f"  recall@5, {len(mine)} {kind} phrases", recalls)
            everyday = [_best(memory, q) for q in EVERYDAY]
            everyday_best += everyday
            for question, best in zip(EVERYDAY, everyday, strict=True):
                if best >= MIN_SCORE:
                    print(f"  over {MIN_SCORE}: {best:.3f} {question!r}")
            _row(
                f"  no match, {len(everyday)} everyday questions",
                [sum(b < t for b in everyday) / len(everyday) for t in THRESHOLDS],
            )
            others = [a.text for other, asked in real.items() if other != name for a in asked]
            cross = [_best(memory, q) for q in others]
            cross_best += cross
            _row(
                f"  no match, {len(cross)} other groups' phrases",
                [sum(b < t for b in cross) / len(cross) for t in THRESHOLDS],
            )
        print("-- all groups")
        print(
            f"  at {MIN_SCORE}: no match for {sum(b < MIN_SCORE for b in everyday_best)} of "
            f"{len(everyday_best)} everyday, {sum(b < MIN_SCORE for b in cross_best)} of "
            f"{len(cross_best)} cross-group"
        )
        _row(
            f"  no match, {len(everyday_best)} everyday (corpus, question)",
            [sum(b < t for b in everyday_best) / len(everyday_best) for t in THRESHOLDS],
        )
        _row(
            f"  no match, {len(cross_best)} cross-group pairs",
            [sum(b < t for b in cross_best) / len(cross_best) for t in THRESHOLDS],
        )
        _plain_language(scratch)


def _plain_language(scratch: Path) -> None:
    """recall@5 of tests/search_queries.py's 24 queries at each threshold, and the everyday
    questions against that corpus."""
    import search_queries

    memory = Memory.load(search_queries.build(scratch / "plain"))
    print(f"-- plain language: {len(memory.runs)} runs compiled by a fake model")
    queries = search_queries.QUERIES
    recalls = []
    for threshold in THRESHOLDS:
        placed = 0
        for query in queries:
            hits = memory.search(query.text, [query.kind], limit=5, min_score=threshold)
            placed += any(hit.task_id in query.tasks for hit in hits)
        recalls.append(placed / len(queries))
    _row(f"  recall@5, {len(queries)} written queries", recalls)
    everyday = [_best(memory, q) for q in EVERYDAY]
    for question, best in zip(EVERYDAY, everyday, strict=True):
        if best >= MIN_SCORE:
            print(f"  over {MIN_SCORE}: {best:.3f} {question!r}")
    _row(
        f"  no match, {len(everyday)} everyday questions",
        [sum(b < t for b in everyday) / len(everyday) for t in THRESHOLDS],
    )


if __name__ == "__main__":
    main()
