"""Importers stream: convert a big τ-bench results file and print its peak memory and speed.

Writes a JSON list of SIZE_MB (default 300) by repeating the two real results in tests/data,
then runs `wikitrace convert` on it in a child process (the check pass and the write pass) and
prints the child's peak resident memory beside the file's size.

    python benchmarks/import_bench.py [SIZE_MB]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).parent.parent / "tests" / "data" / "tau-bench-original-2results.json"


def main() -> None:
    size_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    results = json.loads(DATA.read_text())
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.json"
        count = 0
        with path.open("w") as handle:
            handle.write("[")
            while handle.tell() < size_mb * 1024 * 1024:
                for result in results:
                    handle.write(("," if count else "") + json.dumps({**result, "trial": count}))
                    count += 1
            handle.write("]")
        size = path.stat().st_size
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        started = time.monotonic()
        with open(os.devnull, "wb") as sink:
            subprocess.run(
                [sys.executable, "-m", "wikitrace.cli", "-q", "convert", str(path)],
                stdout=sink,
                check=True,
                env=env,
            )
        seconds = time.monotonic() - started
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"input: {size / 2**20:.0f} MiB, {count} runs (a single JSON list)")
    print(f"convert: {seconds:.1f} s, {size / 2**20 / seconds:.1f} MiB/s (two passes)")
    ratio = peak_mb / (size / 2**20)
    print(f"peak resident memory of the converter: {peak_mb:.0f} MiB ({ratio:.2f}x the file)")


if __name__ == "__main__":
    main()
