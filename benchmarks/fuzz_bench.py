"""Run the fuzz tests long: `python benchmarks/fuzz_bench.py [EXAMPLES]` (default 2000 per test).

The suite runs the same tests with 40 examples each. This prints how many examples ran, how long
it took and whether anything failed; a failure is printed by hypothesis with its input.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    env = {**os.environ, "WIKITRACE_FUZZ_EXAMPLES": str(examples)}
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            str(ROOT / "tests/test_fuzz.py"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    tail = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    print(f"fuzz: {examples} examples per test, {seconds:.0f} s: {tail}")
    if result.returncode:
        print(result.stdout[-20000:])
        print(result.stderr[-5000:], file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
