"""Benchmark what the offline compilation quotes of each failure, on real logs.

Prints its figures; asserts nothing.

For each set of logs (by default the SWE-bench runs of mini-swe-agent, the Terminal-Bench runs
of Harbor (ATIF) and the coding-agent sessions under `../shared/data`), every run is compiled
offline (`compiler/offline.py`) and the first quote of each failed turn (the one that says
what failed; any after it are a second finding or the command that ran) is sorted:

- `traceback header`: only "Traceback (most recent call last):";
- `bare code`: only an exit or return code, or the log's error mark (`<returncode>1</returncode>`,
  `Exit code 1`, `"exit_code":1`, `"is_error":true`);
- `says nothing`: fewer than 12 letters left once those marks are taken out (an assertion
  aside: `E   assert 2 == 1` says what failed);
- `informative`: the rest (an exception and its message, a failing test, a finding).

The target (issue 54) is at most 10% of them in the first three groups. It also prints how many
quotes of all claims are not found in their turn (the corpus marks those UNVERIFIED), how many
texts of the compilations hold a Claude Code warm-up ("Warmup", "I'm ready to help"), and, for
the long sessions (--min-turns), whether the prompt a model is shown (--budget tokens) holds
every passage quoted of each failure.

    python benchmarks/quote_bench.py [--shared ../shared/data] [--show 5]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun, Unlabelled
from wikitrace.compiler.offline import compile_offline
from wikitrace.corpus_schema import RunRecord

SETS = {
    "SWE-bench (mini-swe-agent)": "trajectories/mini-swe-agent/trajs",
    "Terminal-Bench (atif-harbor)": "trajectories/atif-harbor",
    "sessions": "sessions",
}
_MARKS = re.compile(
    r"Traceback \(most recent call last\):|</?returncode>|(?i:exit code:?)|"
    r'"?(?:exit_?code|exitCode|returncode|return_code|is_error)"?\s*:\s*\S+|\d+'
)
_HEADER = re.compile(r"\s*Traceback \(most recent call last\):\s*")
_BARE = re.compile(
    r"\s*(?:<returncode>\s*-?\d+\s*</returncode>|(?i:(?:error: )?exit code:? -?\d+)|"
    r'"(?:exit_code|exitCode|returncode|return_code)":-?\d+|"is_error":true)\s*'
)
_WARMUP = re.compile(r"\bWarmup\b|ready to help", re.IGNORECASE)


def kind(quote: str) -> str:
    if _HEADER.fullmatch(quote):
        return "traceback header"
    if _BARE.fullmatch(quote):
        return "bare code"
    if len(re.findall(r"[A-Za-z]", _MARKS.sub("", quote))) < 12 and "assert" not in quote:
        return "says nothing"
    return "informative"


def records(folder: Path) -> list[RunRecord]:
    """Every run under `folder`, an unlabelled one as failed (the quotes do not depend on it)."""
    found = []
    for item in plan_inputs([folder]).items():
        if isinstance(item, SourceRun):
            found.append(item.record)
        elif isinstance(item, Unlabelled):
            found.append(RunRecord.model_validate({**item.data, "success": False}))
    return found


def measure(name: str, folder: Path, show: int) -> None:
    runs = records(folder)
    kinds: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    warm = 0
    unverified = quotes = 0
    for step, record in enumerate(runs, start=1):
        compilation = compile_offline(step, record)
        for claim in compilation.claims:
            texts = [claim.statement, *(e.quote for e in claim.evidence)]
            warm += sum(bool(_WARMUP.search(text)) for text in texts)
            quotes += len(claim.evidence)
            unverified += sum(not e.verified for e in claim.evidence)
            if claim.statement.startswith("The run's last") or not claim.evidence:
                continue
            # The first quote of a failed turn is the one that says what failed; the ones
            # after it are a second finding or the command that ran.
            sort = kind(claim.evidence[0].quote)
            kinds[sort] += 1
            examples.setdefault(sort, []).append(claim.evidence[0].quote[:160])
    total = sum(kinds.values())
    empty = total - kinds["informative"]
    share = empty / total if total else 0.0
    print(f"{name}: {len(runs)} runs, {total} failed turns quoted")
    for sort in ("traceback header", "bare code", "says nothing", "informative"):
        print(f"  {sort:17} {kinds[sort]:5}")
    print(f"  say nothing of what failed: {empty}/{total} = {share:.1%} (target <= 10%)")
    print(f"  quotes not found in their turn: {unverified} of {quotes}")
    print(f"  warm-up text in compilations: {warm}")
    for sort, quotes in examples.items():
        if sort != "informative":
            for quote in quotes[:show]:
                print(f"    [{sort}] {quote}")
    if show:
        for quote in examples.get("informative", [])[:show]:
            print(f"    [informative] {quote}")


class _Counter:
    """Tokens as characters / 4, as benchmarks/compile_bench.py counts them."""

    model = "bench"

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    def cache_identity(self) -> dict[str, str]:
        return {}


def cut_runs(folder: Path, budget: int, min_turns: int) -> None:
    """What a model is shown of each failure in the long runs of `folder`: the prompt's mode
    and how many of the passages that say what failed it holds whole."""
    from wikitrace.compiler.compile import Templates, render_prompt
    from wikitrace.compiler.signals import failures

    templates = Templates.load()
    for record in records(folder):
        if len(record.turns) < min_turns:
            continue
        prompt = render_prompt(templates, record, _Counter(), budget)  # type: ignore[arg-type]
        view = prompt.view
        failed = failures(record.turns)
        shown = sum(
            all(
                quote in (view.shown[n - 1] if view else prompt.text)
                for quote in getattr(f, "quotes", (f.quote,))  # an older wikitrace: one
            )
            for n, f in failed.items()
        )
        mode = view.mode if view else "whole"
        print(
            f"  {record.task_id[:40]}: {len(record.turns)} turns, {len(failed)} failed; "
            f"prompt {mode}, {len(prompt.text) // 4} tokens; every passage that says what "
            f"failed shown whole for {shown} of {len(failed)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--shared", type=Path, default=Path("../shared/data"))
    parser.add_argument("--show", type=int, default=3, help="example quotes of each kind")
    parser.add_argument("--budget", type=int, default=24000, help="prompt tokens (cut runs)")
    parser.add_argument("--min-turns", type=int, default=150, help="what counts as long")
    args = parser.parse_args()
    for name, folder in SETS.items():
        if (args.shared / folder).exists():
            measure(name, args.shared / folder, args.show)
        else:
            print(f"{name}: {args.shared / folder} not found, skipped")
    sessions = args.shared / SETS["sessions"]
    if sessions.exists():
        print(f"long sessions (>= {args.min_turns} turns) in a prompt of {args.budget} tokens:")
        cut_runs(sessions, args.budget, args.min_turns)


if __name__ == "__main__":
    main()
