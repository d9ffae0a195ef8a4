"""The gate with default settings on the toy, through its real runner, with outcome noise.

    python benchmarks/gate_toy_bench.py              # 10 repetitions, --noise 0.15
    python benchmarks/gate_toy_bench.py --reps 3 --noise 0

Each repetition builds the toy corpus (the model's three lessons, from the toy's stand-in
model at our LLM boundary) and gates it with a new seed, the toy agent flipping each outcome
with chance --noise. It prints each repetition's verdicts and runs, then how often the doormat
lesson was committed and the forcing lessons committed as stated.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "examples" / "toy"))

from lessons import answer  # noqa: E402

from wikitrace.compiler import BuildOptions, CompileLimits, build_corpus  # noqa: E402
from wikitrace.control.gate import gate_insights  # noqa: E402
from wikitrace.control.gate_inputs import GateOptions  # noqa: E402
from wikitrace.control.pool import read_pool  # noqa: E402
from wikitrace.control.runner import RunnerSpec  # noqa: E402

from helpers import FakeLLM  # noqa: E402

TOY = ROOT / "examples" / "toy"
RUNS = ["start.jsonl", "mat.jsonl", "force.jsonl", "force-drawer.jsonl"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--noise", type=float, default=0.15)
    args = parser.parse_args()
    doormat = broad_as_stated = drawers = 0
    for rep in range(args.reps):
        folder = Path(tempfile.mkdtemp())
        llm = FakeLLM(answer=lambda messages: answer(messages[0]["content"]), model="openai/toy")
        corpus = folder / "toy"
        build_corpus(
            BuildOptions(
                inputs=[TOY / "runs" / name for name in RUNS],
                output=corpus,
                model="openai/toy",
                cache_dir=folder / "cache",
                limits=CompileLimits(hypotheses=True),
                mine=False,
            ),
            llm=llm,
        )
        agent = f"{sys.executable} {TOY / 'agent.py'} --task {{task_id}} --memory {{memory}}"
        spec = RunnerSpec(f"{agent} --seed {{seed}} --noise {args.noise}", concurrency=4)
        start = time.perf_counter()
        options = GateOptions(runner=spec, pool=read_pool(TOY / "tasks.jsonl"), seed=rep * 1000)
        report = gate_insights(corpus, [], options, llm=llm)
        found = {d.insight: d for d in report.decisions}
        mat, broad, harmful = (found[f"insight-000{i}"] for i in (1, 2, 3))
        doormat += mat.verdict == "committed"
        broad_as_stated += broad.verdict == "committed" and broad.narrowed_precondition is None
        drawers += harmful.verdict == "committed"
        print(
            f"{rep}: {time.perf_counter() - start:.0f} s; "
            + "; ".join(
                f"{d.insight} {d.verdict}"
                + (f" (narrowed: {d.narrowed_precondition})" if d.narrowed_precondition else "")
                + f", {d.agent_runs} runs"
                for d in report.decisions
            ),
            flush=True,
        )
    print(
        f"noise {args.noise:g}, {args.reps} repetitions: doormat committed {doormat}; "
        f"'force containers open' committed as stated {broad_as_stated}; "
        f"'force drawers open' committed {drawers}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
