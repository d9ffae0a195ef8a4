"""Benchmark what the compiler shows a model, and how well it compiles long runs.

Prints its figures; asserts nothing.

1. Prompt size per run (tokens estimated as characters / 4) on real logs, and how many turns
   are shown in full: the tau-bench and mini-swe-agent samples and a Claude Code session from
   `../shared/data` (skipped when absent), with --old PYTHON also for another wikitrace install
   (a checkout of an earlier commit) to compare.
2. Compiling synthetic runs of 50, 200 and 1,000 turns, and the Claude Code session, through a
   local OpenAI-compatible stub and litellm's real code path: compiled or not, turns in full,
   quotes verified.
3. The quote checker on the table of quote variants in tests/test_compile_view.py.

    python benchmarks/compile_bench.py [--shared ../shared/data] [--old /path/to/python]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent

MEASURE = r"""
import json, sys
from pathlib import Path
from wikitrace.compiler.compile import Templates, render_prompt
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun
from wikitrace.corpus_schema import RunRecord

class Counter:
    model = "bench"
    def count_tokens(self, text): return len(text) // 4
    def cache_identity(self): return {}

templates = Templates.load()
budget = int(sys.argv[1])
out = []
for arg in sys.argv[2:]:
    path = Path(arg)
    if path.suffix == ".native":
        records = [RunRecord.model_validate(json.loads(l)) for l in path.read_text().splitlines()]
    else:
        records = [i.record for i in plan_inputs([path]).items() if isinstance(i, SourceRun)]
    for record in records:
        try:
            prompt = render_prompt(templates, record, Counter(), budget)
            view = getattr(prompt, "view", None)
            whole = len(record.turns) if prompt.cut_to is None else 0
            whole = view.whole_turns if view else whole
            row = {"source": path.name, "turns": len(record.turns)}
            out.append({**row, "chars": len(prompt.text), "whole": whole})
        except Exception as error:
            out.append({"source": path.name, "turns": len(record.turns), "error": str(error)[:80]})
print(json.dumps(out))
"""


def claude_code_native(path: Path, out: Path) -> Path:
    """A rough conversion of a Claude Code session to one native run, for measuring only:
    the importer that reads these logs properly is another issue's."""
    turns: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    task = None
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message")
        if entry.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        turn: dict[str, Any] = {"role": message.get("role", entry["type"])}
        texts = []
        for block in blocks:
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "tool_use":
                call = {
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": block.get("input"),
                }
                calls[str(block.get("id"))] = call
                turn.setdefault("tool_calls", []).append(call)
            elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) in calls:
                result = block.get("content")
                calls[str(block["tool_use_id"])]["result"] = (
                    result if isinstance(result, str) else json.dumps(result)
                )
        if texts:
            turn["content"] = "\n".join(texts)
            task = task or (turn["content"] if turn["role"] == "user" else None)
        if len(turn) > 1:
            turns.append(turn)
    run = {
        "task_id": path.stem,
        "task": (task or "a coding session")[:2000],
        "success": True,
        "turns": turns,
    }
    out.write_text(json.dumps(run) + "\n")
    return out


def measure(python: str, budget: int, files: list[Path]) -> list[dict[str, Any]]:
    result = subprocess.run(
        [python, "-c", MEASURE, str(budget), *map(str, files)],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    if result.returncode:
        raise SystemExit(result.stderr[-2000:])
    return json.loads(result.stdout)


def synthetic_run(turns: int, seed: int, words_per_turn: int = 400) -> dict[str, Any]:
    import random

    rng = random.Random(seed)
    words = ["file", "test", "error", "cache", "write", "read", "patch", "diff"]
    words += ["import", "module", "config"]
    items = [{"role": "user", "content": "Fix the failing test in the cache module. " * 3}]
    for n in range(2, turns + 1):
        out = " ".join(rng.choices(words, k=rng.randint(20, words_per_turn)))
        if n % 37 == 0:
            out += "\nTraceback (most recent call last): ValueError: cache key missing"
        items.append(
            {"role": "assistant", "action": f"run {rng.choice(words)} {n}", "observation": out}
        )
    return {
        "task_id": f"syn-{turns}",
        "task": "Fix the failing test in the cache module.",
        "success": False,
        "turns": items,
    }


_TURN = re.compile(
    r"^--- WIKITRACE-DATA-\w+ TURN (\d+) ---\n(.*?)"
    r"(?=^--- WIKITRACE-DATA-|^WIKITRACE-DATA-\w+ END)",
    re.S | re.M,
)


def stub_answer(prompt: str) -> str:
    """What a careful model answers: quotes one shown line of each of a few turns."""
    shown = {int(n): text for n, text in _TURN.findall(prompt)}
    claims = []
    for number in sorted(shown)[-3:]:
        lines = [
            line
            for line in shown[number].splitlines()
            if len(line) > 20 and "wikitrace cut" not in line
        ]
        if lines:
            quote = lines[-1].split(": ", 1)[-1][:80]
            claims.append(
                {"statement": f"turn {number}", "evidence": [{"turn": number, "quote": quote}]}
            )
    answer = {"title": "t", "description": "d", "claims": claims or [], "insights": []}
    return json.dumps(answer)


class _Stub(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        text = stub_answer(body["messages"][0]["content"])
        payload = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def compile_long(runs: list[dict[str, Any]], work: Path) -> None:
    from wikitrace.compiler import BuildOptions, build_corpus
    from wikitrace.corpus_schema.read import compilations

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OPENAI_API_KEY"] = "sk-local-stub"
    try:
        for run in runs:
            path = work / f"{run['task_id']}.jsonl"
            path.write_text(json.dumps(run) + "\n")
            corpus = work / f"c-{run['task_id']}"
            report = build_corpus(
                BuildOptions(
                    inputs=[path],
                    output=corpus,
                    model="openai/stub",
                    api_base=f"http://127.0.0.1:{server.server_port}/v1",
                    use_cache=False,
                    redact=False,
                )
            )
            pages = list(compilations(corpus))
            quotes = [e for p in pages for c in p.header.claims for e in c.evidence]
            note = next(
                (n for p in pages for n in p.body.splitlines() if "was shown to fit" in n), ""
            )
            full = re.search(r"(\d+) of (\d+) turns in full", note)
            print(
                f"  {run['task_id']:<28} {len(run['turns']):>5} turns  "
                f"compiled {report.compiled}/{report.runs}  "
                f"turns in full {full.group(1) + '/' + full.group(2) if full else 'all'}  "
                f"quotes verified {sum(q.verified for q in quotes)}/{len(quotes)}"
            )
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--old", help="python of another wikitrace install, to compare")
    parser.add_argument("--budget", type=int, default=24_000, help="the old default budget")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wikitrace-compile-bench-"))
    files: list[Path] = []
    traj = args.shared / "trajectories"
    if (traj / "tau-bench").is_dir():
        files += sorted((traj / "tau-bench").glob("*.json"))
    if (traj / "mini-swe-agent").is_dir():
        files.append(traj / "mini-swe-agent")
    session = (
        args.shared
        / "sessions"
        / "claude-code"
        / "marot-spotter"
        / "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
    )
    cc = claude_code_native(session, work / "claude-code.native") if session.exists() else None
    if cc:
        files.append(cc)
    print(f"1. prompt per run, budget {args.budget} tokens (tokens = characters / 4)")
    pythons = [("now", sys.executable)] + ([("old", args.old)] if args.old else [])
    for label, python in pythons:
        rows = measure(python, args.budget, files)
        by: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by.setdefault(row["source"], []).append(row)
        for source, items in by.items():
            ok = [r for r in items if "chars" in r]
            tokens = sorted(r["chars"] // 4 for r in ok)
            turns = sum(r["turns"] for r in ok)
            whole = sum(r["whole"] for r in ok)
            median = tokens[len(tokens) // 2] if tokens else 0
            print(
                f"  {label} {source:<32} runs {len(items):>3}  "
                f"no prompt {len(items) - len(ok):>2}  "
                f"median tokens {median:>6}  max {max(tokens, default=0):>6}  "
                f"turns in full {whole}/{turns}"
            )
    print("2. compiling long runs through the local stub (litellm), default budget")
    # The 1,000-turn run is about 5 MB, as long coding sessions are.
    long_runs = [synthetic_run(50, 50), synthetic_run(200, 200), synthetic_run(1000, 1000, 1600)]
    if cc:
        long_runs.append(json.loads(cc.read_text()))
    compile_long(long_runs, work)
    print("3. the quote checker on the variants table")
    sys.path.insert(0, str(ROOT / "tests"))
    from test_compile_view import QUOTES, TURNS

    from wikitrace.compiler.evidence import QuoteChecker
    from wikitrace.corpus_schema import RunRecord

    record = RunRecord.model_validate(
        {"task_id": "a", "task": "x", "success": True, "turns": TURNS}
    )
    checker = QuoteChecker(record.turns)
    right = sum(
        (found := checker.check(turn, quote)).verified == expected[0] and found.turn == expected[1]
        for turn, quote, expected in QUOTES
    )
    true_quotes = sum(expected[0] for _, _, expected in QUOTES)
    print(
        f"  {right}/{len(QUOTES)} variants judged as the table says ({true_quotes} are real quotes)"
    )


if __name__ == "__main__":
    main()
