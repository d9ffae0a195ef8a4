"""Benchmark the peak memory of a model's build as the corpus grows, each size in a fresh
process.

A model draws up to three insights a run, each with its own title and guideline, and every
one of them is indexed, grouped with its near-duplicates and put in the catalog: a model's
build holds more than an offline one. Here the model is an instant fake at the build's own
LLM boundary (no HTTP, no litellm: the calls cost nothing, so what is measured is the
build): it answers each run with a valid compilation quoting the run's last turn and three
insights of random words from a vocabulary of --vocabulary words (near-duplicates are rare,
as they are among a real model's lessons). The build's peak resident memory (VmHWM) is
printed, and its resident memory sampled at each phase (when the runs have streamed, and
after). Asserts nothing.

    python benchmarks/model_memory_bench.py [--runs 1000 10000 50000] [--insights 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_bench import remove_work, write_runs

CHILD = r"""
import json, random, re, sys, threading, time
from pathlib import Path
from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.transport.llm import LLMReply

runs_file, output = sys.argv[1], sys.argv[2]
insights, vocabulary = int(sys.argv[3]), int(sys.argv[4])
TURN = re.compile(
    r"--- WIKITRACE-DATA-\w+ TURN (\d+) ---\n(.*?)"
    r"(?=\n--- WIKITRACE-DATA-\w+ TURN|\nWIKITRACE-DATA-)",
    re.S,
)
letters = "abcdefghijklmnopqrstuvwxyz"
rng = random.Random(11)
words = sorted(
    {"".join(rng.choice(letters) for _ in range(rng.randint(4, 10))) for _ in range(vocabulary)}
)


class InstantModel:
    model = "fake/instant"

    def __init__(self):
        self.calls = 0

    def cache_identity(self):
        return {"model": self.model}

    def count_tokens(self, text):
        return len(text) // 4

    async def complete(self, messages):
        self.calls += 1
        prompt = messages[0]["content"]
        last = list(TURN.finditer(prompt))[-1]
        quote = last.group(2).splitlines()[-1].split(": ", 1)[-1][:50]
        draw = random.Random(prompt)
        text = lambda n: " ".join(draw.choice(words) for _ in range(n))
        answer = {
            "title": text(6),
            "description": text(30),
            "claims": [
                {"statement": text(12), "evidence": [{"turn": int(last.group(1)), "quote": quote}]}
            ],
            "insights": [
                {
                    "title": text(8),
                    "guideline": text(30),
                    "applicability": text(10),
                    "supporting_claims": [1],
                }
                for _ in range(insights)
            ],
        }
        return LLMReply(text=json.dumps(answer), prompt_tokens=1, completion_tokens=1)


def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024


samples = []  # (seconds, MB) every 0.25 s
started = time.perf_counter()
streamed = []


def sample():
    while True:
        samples.append((time.perf_counter() - started, rss()))
        time.sleep(0.25)


threading.Thread(target=sample, daemon=True).start()


def progress(done, total):
    if done == total and not streamed:
        streamed.append((time.perf_counter() - started, rss()))


model = InstantModel()
build_corpus(
    BuildOptions(
        inputs=[Path(runs_file)],
        output=Path(output),
        model=model.model,
        use_cache=False,
        concurrency=16,
    ),
    llm=model,
    progress=progress,
)
seconds = time.perf_counter() - started
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]
after = [mb for at, mb in samples if streamed and at >= streamed[0][0]]
print(json.dumps({
    "seconds": seconds,
    "peak_mb": int(peak) / 1024,
    "calls": model.calls,
    "streamed_mb": streamed[0][1] if streamed else None,
    "streamed_at": streamed[0][0] if streamed else None,
    "finish_peak_mb": max(after) if after else None,
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10_000, 50_000])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--insights", type=int, default=3, help="insights the model draws a run")
    parser.add_argument("--vocabulary", type=int, default=20_000, help="words the lessons use")
    args = parser.parse_args()
    for count in args.runs:
        work = Path(tempfile.mkdtemp(prefix="wikitrace-model-memory-"))
        try:
            runs_file = work / "runs.jsonl"
            write_runs(runs_file, count, args.turns)
            corpus = work / "corpus"
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(runs_file),
                    str(corpus),
                    str(args.insights),
                    str(args.vocabulary),
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            )
            figures = json.loads(done.stdout)
            manifest = json.loads((corpus / "manifest.json").read_text())
            print(
                f"{count} runs, {manifest['counts']['insights']} insights "
                f"({figures['calls']} calls): model build {figures['seconds']:.1f} s; "
                f"peak memory {figures['peak_mb']:.0f} MB (target <= 300 MB at any size); "
                f"{figures['streamed_mb']} MB when the runs had streamed "
                f"({figures['streamed_at']:.1f} s), {figures['finish_peak_mb']} MB at most after",
                flush=True,
            )
        finally:
            remove_work(work)


if __name__ == "__main__":
    main()
