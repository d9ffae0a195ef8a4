"""The test tiers: each marker the default tier leaves out is declared, documented and run by
CI, so that no test is left out of every run."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from helpers import TIERS
from walk_throughs import page, section

ROOT = Path(__file__).resolve().parent.parent


def test_each_tier_is_declared_documented_and_run_by_ci() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = [line.split(":")[0] for line in config["tool"]["pytest"]["ini_options"]["markers"]]
    assert sorted(declared) == sorted(TIERS)
    table = section("## Test tiers", page("development.md"))
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == list(TIERS)
    ci = (ROOT / ".ci" / "run").read_text()
    # The default tier, then the rest: together, every test.
    # (the default tier timed by bash's `time`, its figure printed pass or fail)
    assert re.search(r"^\{ time \.venv/bin/pytest 2>&3; \}", ci, re.M)
    assert re.search(r"^\.venv/bin/pytest --tier rest$", ci, re.M)
