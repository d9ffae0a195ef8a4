"""Session import speed: read the real 3.5 MB Claude Code session in tests/data (243 tool calls,
two sub-agents) and print seconds per MB, and the calls and results kept.

    python benchmarks/session_bench.py [REPEATS]
"""

from __future__ import annotations

import sys
import tarfile
import tempfile
import time
from pathlib import Path

from wikitrace.compiler.importers import plan_inputs

ARCHIVE = Path(__file__).parent.parent / "tests/data/sessions/claude-code/spotter-project.tar.gz"


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(ARCHIVE) as archive:
            archive.extractall(folder, filter="data")
        files = sorted(Path(folder).rglob("*.jsonl"))
        size_mb = sum(f.stat().st_size for f in files) / 1e6
        best = float("inf")
        counts = {}
        for _ in range(repeats):
            started = time.perf_counter()
            items = list(plan_inputs([Path(folder)]).items())
            best = min(best, time.perf_counter() - started)
            counts = items[0].data["metadata"]["counts"]
        print(
            f"{size_mb:.2f} MB of session files: best of {repeats} {best:.3f} s "
            f"({best / size_mb:.3f} s per MB); kept {counts}"
        )


if __name__ == "__main__":
    main()
