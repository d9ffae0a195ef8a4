"""Benchmark redaction: speed on real logs, what it redacts there, its share of an offline
build, and hostile inputs. Prints its figures; asserts nothing.

    python benchmarks/redact_bench.py [LOGS ...] [--baseline OLD_REDACT_PY] [--show]
        [--build TRAJECTORIES]

LOGS default to ../shared/data (read-only, never written). `--baseline` times another
redact.py the same way (`git show REV:compiler/redact.py > /tmp/old_redact.py`). `--show` lists
every redaction in the logs with its kind, place and the text around it (for judging false
positives). `--build` profiles an offline build of TRAJECTORIES and prints redaction's share.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import pstats
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun, Unlabelled
from wikitrace.compiler.redact import Redactor
from wikitrace.corpus_schema import InputError

DEFAULT_LOGS = Path(__file__).resolve().parents[2] / "shared" / "data"
MARKER = re.compile(r"\[REDACTED:([\w-]+)\]")


def read_runs(paths: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    """Every run (labelled or not) the importers find under `paths`, with its file."""
    runs = []
    for top in paths:
        folders = [top] if top.is_file() else sorted(p for p in top.glob("*/*") if p.is_dir())
        for folder in folders or [top]:
            try:
                plan = plan_inputs([folder])
            except InputError:
                continue
            for item in plan.items():
                if isinstance(item, SourceRun | Unlabelled):
                    runs.append((str(item.path), item.data))
    return runs


def load_redactor(path: Path | None) -> type[Any]:
    if path is None:
        return Redactor
    spec = importlib.util.spec_from_file_location("wikitrace.compiler._baseline_redact", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Redactor  # type: ignore[no-any-return]


def time_runs(redactor_class: type[Any], runs: list[tuple[str, dict[str, Any]]]) -> float:
    """Best of three passes over the runs, each with a new redactor (setup excluded)."""
    redactor_class().value({"warm": "up key=abc token: x"})
    best = float("inf")
    for _ in range(3):
        redactor = redactor_class()
        started = time.perf_counter()
        for _, data in runs:
            redactor.value(data)
        best = min(best, time.perf_counter() - started)
    return best


def strings(value: Any, path: str = "") -> Any:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}/{key}(key)", str(key)
            yield from strings(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, f"{path}/{index}")


def show(runs: list[tuple[str, dict[str, Any]]]) -> None:
    """Every redaction in the runs: file, kind, and the text around it, original and redacted."""
    redactor = Redactor()
    seen: set[tuple[str, str]] = set()
    for file, data in runs:
        redacted = redactor.value(data)
        for (where, before), (_, after) in zip(strings(data), strings(redacted), strict=True):
            if before == after:
                continue
            for match in MARKER.finditer(after):
                head = after[max(0, match.start() - 50) : match.start()]
                at = before.find(after[: match.start()][-50:]) if match.start() else 0
                start = at + len(after[: match.start()][-50:]) if match.start() else 0
                original = before[start : start + 60]
                key = (match.group(1), original[:30])
                if key in seen:
                    continue
                seen.add(key)
                name = file.split("/data/")[-1]
                print(f"  {match.group(1):24} {name[:60]} {where[-40:]}")
                print(f"      {head!r} -> {original!r}")
    print(f"  places: {redactor.where()}")


HOSTILE = {
    "keywords, no value (200 KB)": "api_key token secret password auth " * 6000,
    "assignments, no secret (200 KB)": "key=ab; token: x\n" * 12000,
    "word characters (200 KB)": "a" * 200_000,
    "a PEM header, no end (200 KB)": "-----BEGIN RSA PRIVATE KEY-----\n" + "QUJD\n" * 40000,
    "curl lines (100 KB)": "curl -s http://x \\\n" * 5000,
    "base64 JSON prefixes (200 KB)": "eyJhYmMiOiAi" * 16000,
    "URLs with a colon (200 KB)": "http://a:b" * 20000,
    "curl -u on one line (160 KB)": "curl -u " * 20000,
    "jwt starts in one token (200 KB)": ("eyJ-" + "a" * 16) * 10000,
    "kubernetes kind/data (150 KB)": "kind: secret\ndata:\n" * 8000,
}


def hostile() -> None:
    for name, text in HOSTILE.items():
        started = time.perf_counter()
        Redactor().text(text)
        print(f"  {name:34} {time.perf_counter() - started:7.3f} s")


def build_share(trajectories: Path) -> None:
    """Redaction's share of an offline build's CPU (cProfile, cumulative)."""
    with tempfile.TemporaryDirectory() as folder:
        profile = cProfile.Profile()
        options = BuildOptions(inputs=[trajectories], output=Path(folder) / "c", on_error="skip")
        profile.enable()
        report = build_corpus(options)
        profile.disable()
    stats = pstats.Stats(profile)
    total = stats.total_tt  # type: ignore[attr-defined]
    redact = sum(
        row[3]
        for func, row in stats.stats.items()  # type: ignore[attr-defined]
        if func[0].endswith("redact.py") and func[2] in ("value", "text")
    )
    print(
        f"  offline build of {report.runs} runs: {total:.2f} s of CPU, redaction "
        f"{redact:.2f} s ({100 * redact / total:.0f}%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("logs", nargs="*", type=Path, default=[DEFAULT_LOGS])
    parser.add_argument("--baseline", type=Path, help="another redact.py to time the same way")
    parser.add_argument("--show", action="store_true", help="list every redaction in the logs")
    parser.add_argument("--build", type=Path, help="profile an offline build of these inputs")
    args = parser.parse_args()
    runs = read_runs(args.logs)
    size = sum(len(str(data)) for _, data in runs) / 1e6
    print(f"{len(runs)} runs, {size:.1f} M characters, from {', '.join(map(str, args.logs))}")
    for label, path in (("this redact.py", None), ("baseline", args.baseline)):
        if label == "baseline" and path is None:
            continue
        redactor_class = load_redactor(path)
        seconds = time_runs(redactor_class, runs)
        counts: Counter[str] = Counter()
        redactor = redactor_class()
        for _, data in runs:
            redactor.value(data)
        counts.update(redactor.counts)
        print(f"  {label:15} {seconds:.3f} s ({size / seconds:.1f} M characters/s)")
        print(f"  {'':15} {sum(counts.values())} redactions: {dict(sorted(counts.items()))}")
    print("hostile inputs (one text each):")
    hostile()
    if args.show:
        print("every redaction in the logs:")
        show(runs)
    if args.build:
        build_share(args.build)


if __name__ == "__main__":
    main()
