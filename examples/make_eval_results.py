"""Write examples/eval-results.jsonl: synthetic result rows for `wikitrace lift eval` (seeded).

Two suites of 60 tasks, 3 trials per task and method. `no-memory-rerun` behaves like
`no-memory`; `wikitrace` fixes some failures and breaks few successes; `naive-memory` fixes
as many but breaks more. The numbers are made up to show the report, not measured.
"""

from __future__ import annotations

import json
import random
import sys

METHODS = {
    # method: (chance to succeed where the task is hard, where it is easy)
    "no-memory": (0.15, 0.85),
    "no-memory-rerun": (0.15, 0.85),
    "wikitrace": (0.45, 0.85),
    "naive-memory": (0.45, 0.6),
}


def main() -> None:
    rng = random.Random(7)
    for suite in ("alfworld", "tau-airline"):
        for task in range(60):
            easy = rng.random() < 0.5
            for method, (hard_p, easy_p) in METHODS.items():
                for trial in range(3):
                    success = rng.random() < (easy_p if easy else hard_p)
                    row = {
                        "suite": suite,
                        "method": method,
                        "task_id": f"{suite}-{task}",
                        "trial": trial,
                        "success": success,
                    }
                    sys.stdout.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
