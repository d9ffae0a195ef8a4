"""How well `add` tells a newer lesson that contradicts or narrows an older one from one that
only shares its words (compiler/supersede.py, search/contradict.py).

A corpus is built from one run per older lesson of benchmarks/supersede_pairs.py (every set:
contradicting, narrowing, unrelated-but-similar, and the held-out ones written after the
rules were fixed), its lessons drawn by a fake model at our LLM boundary (tests/helpers.py's
FakeLLM) as the pairs write them; then the newer lessons' runs are added to a copy of it,
twice: offline (no judge: the filter flags) and with a fake judge that answers the truth for
each pair it is asked about (an oracle: what it measures is the filter's choice of pairs and
the add's wiring, not a model's judgement). Every newer lesson is compared with every older
one of its task type, so a lesson also meets its pair's neighbours: the confusion figures
count every such (newer, older) pair. Prints the figures; asserts nothing.

    python benchmarks/supersede_bench.py [--scale 30000]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import supersede_pairs as pairs  # noqa: E402

from wikitrace.compiler import BuildOptions, add_runs, build_corpus  # noqa: E402
from wikitrace.search.contradict import Lesson, candidates  # noqa: E402

from helpers import FakeLLM, good_answer, make_run, write_runs  # noqa: E402

SETS = {
    "contradicts": pairs.CONTRADICTS,
    "narrows": pairs.NARROWS,
    "similar": pairs.SIMILAR,
    "held-out contradicts": pairs.HELD_OUT_CONTRADICTS,
    "held-out narrows": pairs.HELD_OUT_NARROWS,
    "held-out similar": pairs.HELD_OUT_SIMILAR,
}
LABELS = ("contradicts", "narrows", "none")


def _runs() -> tuple[dict[str, tuple[str, str, str]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Each run's lesson by task id, the older runs and the newer ones."""
    lessons: dict[str, tuple[str, str, str]] = {}
    older, newer = [], []
    for name, found in SETS.items():
        for index, (task_type, old, new) in enumerate(found):
            key = f"{name.replace(' ', '_')}-{index}"
            lessons[f"{key}-old"], lessons[f"{key}-new"] = old, new
            older.append(make_run(f"{key}-old", task=f"{key} old", task_type=task_type))
            newer.append(make_run(f"{key}-new", task=f"{key} new", task_type=task_type))
    return lessons, older, newer


def _truth(set_name: str) -> str:
    return set_name.removeprefix("held-out ") if "similar" not in set_name else "none"


def _truths(lessons: dict[str, tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """(newer lesson's text, older's) -> how the newer stands to the older: as its set says
    for the two of a pair, and for any two lessons with the same texts as such a pair (some
    sets reuse an older lesson); "none" for any other."""
    found: dict[tuple[str, str], str] = {}
    for name, members in SETS.items():
        for _task_type, old, new in members:
            found[_text(new), _text(old)] = _truth(name)
    return found


def _text(lesson: tuple[str, str, str]) -> str:
    return f"{lesson[0]}\n{lesson[1]}"


class Model:
    """The compiler's fake (each run's lesson by its task id) and the oracle judge, which
    answers each pair it is asked about with its truth (`_truths`)."""

    def __init__(self, lessons: dict[str, tuple[str, str, str]]) -> None:
        self.lessons = lessons
        self.truths = _truths(lessons)
        self.by_id: dict[str, tuple[str, str, str]] = {}
        """Insight id -> its lesson, once the corpus is built."""
        self.asked = 0

    def truth(self, newer: str, older: str) -> str:
        key = (_text(self.by_id[newer]), _text(self.by_id[older]))
        return self.truths.get(key, "none")

    def answer(self, messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        if prompt.startswith("You are comparing two lessons"):
            self.asked += 1
            older = prompt.split("\nOLDER LESSON ", 1)[1].split(":", 1)[0]
            newer = prompt.split("\nNEWER LESSON ", 1)[1].split(":", 1)[0]
            truth = self.truth(newer, older).replace("none", "neither")
            return json.dumps({"relation": truth, "reason": "The oracle's answer."})
        data = json.loads(good_answer(prompt))
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        title, guideline, applicability = self.lessons[task_id]
        data["insights"][0].update(title=title, guideline=guideline, applicability=applicability)
        return json.dumps(data)


def _confusion(found: dict[tuple[str, str], str], pairs_of: dict[tuple[str, str], str]) -> None:
    """Print truth x prediction over every (newer, older) pair of one task type."""
    table: Counter[tuple[str, str]] = Counter()
    for key, truth in pairs_of.items():
        table[truth, found.get(key, "none")] += 1
    print("  " + "truth / found".ljust(14) + "".join(f"{label:>13}" for label in LABELS))
    for truth in LABELS:
        print(f"  {truth:<14}" + "".join(f"{table[truth, label]:>13}" for label in LABELS))
    positive = [k for k, t in pairs_of.items() if t != "none"]
    hits = sum(1 for k in positive if found.get(k, "none") != "none")
    called = sum(1 for k in found if found[k] != "none")
    false = sum(1 for k, v in found.items() if v != "none" and pairs_of.get(k, "none") == "none")
    print(
        f"  superseding pairs found {hits} of {len(positive)} (recall {hits / len(positive):.3f});"
        f" pairs found {called}, of which wrong {false} (precision "
        f"{(called - false) / called if called else 1:.3f})"
    )


def measure(work: Path) -> None:
    lessons, older, newer = _runs()
    model = Model(lessons)
    llm = FakeLLM(answer=model.answer, model="fake/compiler")
    base = work / "base"
    base.mkdir()
    cache = work / "cache"
    build_corpus(
        BuildOptions(
            inputs=[write_runs(work / "older.jsonl", older)],
            output=base / "corpus",
            model=llm.model,
            cache_dir=cache,
            mine=False,
        ),
        llm=llm,
    )
    by_key = {key: n for n, key in enumerate([r["task_id"] for r in older + newer], start=1)}
    ident = {key: f"insight-{n:04d}" for key, n in by_key.items()}
    model.by_id = {ident[key]: lessons[key] for key in ident}
    task_type = {r["task_id"]: r["task_type"] for r in older + newer}
    pairs_of: dict[tuple[str, str], str] = {}  # (newer, older) of one task type -> truth
    for new in (r["task_id"] for r in newer):
        for old in (r["task_id"] for r in older):
            if task_type[new] == task_type[old]:
                pairs_of[ident[new], ident[old]] = model.truth(ident[new], ident[old])
    import wikitrace.compiler.add as build_module

    judge_of, review_of = build_module._pair_judge, build_module.supersede_after_add
    spent_reviewing = [0.0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        cpu = time.process_time()
        try:
            return review_of(*args, **kwargs)
        finally:
            spent_reviewing[0] = time.process_time() - cpu

    build_module.supersede_after_add = timed  # type: ignore[assignment]
    for mode in ("offline filter", "fake judge (oracle)"):
        folder = work / mode.split()[0]
        shutil.copytree(base, folder, symlinks=True)
        build_module._pair_judge = judge_of if mode != "offline filter" else (lambda *a: None)
        model.asked = 0
        started, cpu = time.monotonic(), time.process_time()
        report = add_runs(
            BuildOptions(
                inputs=[write_runs(work / "newer.jsonl", newer)],
                output=folder / "corpus",
                model=llm.model,
                cache_dir=cache,
                mine=False,
            ),
            llm=llm,
        )
        spent = time.process_time() - cpu
        review = report.supersede or {}
        found = {
            (item["newer"], item["older"]): item["relation"]
            for item in review.get("superseded", []) + review.get("flagged", [])
        }
        print(
            f"{mode}: {len(newer)} lessons added to {len(older)}, {len(pairs_of)} pairs of one "
            f"task type; judge calls {model.asked}; add {time.monotonic() - started:.2f} s wall, "
            f"{spent:.2f} s CPU (the whole add; comparing and superseding "
            f"{spent_reviewing[0]:.2f} s of it)"
        )
        _confusion(found, pairs_of)
        partners = {
            (ident[key], ident[key.removesuffix("-new") + "-old"])
            for key in ident
            if key.endswith("-new")
        }
        print(" the pairs as written (each newer lesson with its own older one):")
        _confusion(
            {k: v for k, v in found.items() if k in partners},
            {k: v for k, v in pairs_of.items() if k in partners},
        )
        for held in (False, True):
            subset = {
                k: v
                for k, v in pairs_of.items()
                if any(
                    ident[f"{s.replace(' ', '_')}-{i}-new"] == k[0]
                    for s, found_pairs in SETS.items()
                    if s.startswith("held-out") == held
                    for i in range(len(found_pairs))
                )
            }
            print(f" {'held-out pairs' if held else 'pairs the rules were chosen on'}:")
            _confusion({k: v for k, v in found.items() if k in subset}, subset)
    build_module._pair_judge, build_module.supersede_after_add = judge_of, review_of


def scale(count: int) -> None:
    """The filter's cost at an add of 10 lessons into `count` older ones (40 task types)."""
    older = []
    for n in range(count):
        task_type, old, _ = pairs.SIMILAR[n % len(pairs.SIMILAR)]
        title, guideline, _ = old
        older.append(
            Lesson(
                f"insight-{n:06d}",
                f"{title} {n % 97}",
                f"{guideline} v{n}",
                task_type=f"{task_type}-{n % 40}",
            )
        )
    newer = [
        Lesson(f"new-{n}", new[0], new[1], task_type=f"{task_type}-{n % 40}")
        for n, (task_type, _, new) in enumerate(pairs.CONTRADICTS[:10])
    ]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    found = candidates(newer, older)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"scale: 10 lessons against {count} older (40 task types): {len(found)} pairs worth a "
        f"call, {usage.ru_utime + usage.ru_stime - cpu:.3f} s CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=0, help="also time the filter at N lessons")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        measure(Path(folder))
    if args.scale:
        scale(args.scale)


if __name__ == "__main__":
    main()
