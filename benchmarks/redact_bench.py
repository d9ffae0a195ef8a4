"""Benchmark redaction: speed on real logs, what it redacts there (and how much of it issue
56's rules, whose hits there are false-positive candidates), a held-out planted set of issue
56's kinds, its share of an offline build, and hostile inputs. Prints its figures; asserts
nothing.

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


# Held out: none of these lines or values is in tests/secret_kinds.py (the rules were written
# against that table). Each is (kind, line with {} where the secret sits, secret).
HELD_OUT = (
    ("command line", "mariadb -uroot -p{} -e 'show databases'", "Wq4eR7tY1u"),
    ("command line", "mysqladmin -u admin -p'{}' status", "Jk8&lM3#nb"),
    ("command line", "influx -username admin --password '{}'", "Cv5bN8mQ2w"),
    ("command line", "sshpass -p{} scp f root@h:/tmp", "Er9tY2uI5o"),
    ("command line", "PGPASSWORD='{}' pg_restore -h db -d shop dump", "Az3sX6dC9v"),
    ("command line", "curl --user deploy:{} https://ci.example.org/api", "Tg7yH1uJ4k"),
    ("command line", "pip install -i https://bot:{}@pypi.corp.example/simple x", "Np2oL5kJ8h"),
    ("config file", "default login anonymous password {}", "Mi6nU9bY3t"),
    ("config file", "*:*:*:postgres:{}\n", "Rf4gT7hY0u"),
    ("config file", '[mysqldump]\nuser=backup\npassword="{}"', "Ol1kI4jU7y"),
    ("cookie", '{{"name": "Cookie", "value": "JSESSIONID={}"}}', "A1B2C3D4E5F6A7B8C9D0E1F2"),
    ("cookie", "set-cookie: __Host-sid={}; Secure; Path=/", "pL9oK8iJ7uH6yG5tF4rD"),
    (
        "signed URL",
        "https://d111.cloudfront.net/v.mp4?Expires=1700000000&Signature={}&Key-Pair-Id=K2",
        "dGhpcy1pcy1hLXNpZ25hdHVyZS1iYXNlNjQtbG9uZw__",
    ),
    (
        "signed URL",
        "https://b.s3.amazonaws.com/k?X-Amz-Security-Token={}&X-Amz-Date=20240101T000000Z",
        "IQoJb3JpZ2luX2VjEHYaCXVzLWVhc3QtMSJHMEUCIQD",
    ),
    ("signed URL", "https://a.blob.core.windows.net/c?sp=r&sig={}", "q7Xz%2BvL3mN9pR2tY5wK8"),
    (
        "wallet key",
        'PRIVATE_KEY="{}"',
        "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcaa7bed5b2d1f5e2a",
    ),
    (
        "wallet key",
        "forge script Deploy --broadcast --private-key {}",
        "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    ),
    (
        "wallet key",
        'seed_phrase = "{}"',
        "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon "
        "abandon about",
    ),
    (
        "cluster",
        "    token: {}",
        "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzYSJ9.c2lnbmF0dXJlMTIz",
    ),
    ("cluster", "    client-key-data: {}", "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVF"),
    ("cluster", "kubectl --token={} get pods", "sha256~aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789ab"),
    (
        "webhook",
        "POST https://outlook.office.com/webhook/{}",
        "9e1c7a52-3f4b-4d2e-8c6a-1b2d3e4f5a6b@72f988bf-86f1"
        "-41af-91ab-2d7cd011db47/IncomingWebhook/0f1e2d3c4b5a69788796a5b4c3d2e1f0/"
        "7f3b1a2c-1234-4abc-9def-0123456789ab",
    ),
    (
        "sendgrid",
        '{{"key":"{}"}}',
        "SG.aBcDeFgHiJkLmNoPqRsTuV.wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012",
    ),
)

ISSUE_56_KINDS = frozenset(
    {
        "sendgrid-api-key",
        "teams-webhook",
        "signed-url-signature",
        "cookie-header",
        "command-line-password",
        "netrc-password",
        "pgpass-password",
        "wallet-private-key",
        "wallet-seed-phrase",
    }
)
"""The rules issue 56 added: their redactions in real logs are read as false positives unless
`--show` says otherwise."""


def held_out() -> None:
    """The held-out planted set: how many of its secrets leak (any 8-character piece left)."""
    leaked = []
    by_kind: Counter[str] = Counter()
    for kind, line, secret in HELD_OUT:
        out = Redactor().text(line.format(secret))
        by_kind[kind] += 1
        if any(secret[i : i + 8] in out for i in range(0, max(1, len(secret) - 7), 4)):
            leaked.append(f"{kind}: {line.format(secret)[:70]!r} -> {out[:90]!r}")
    print(f"  {len(HELD_OUT)} planted ({dict(by_kind)}): {len(leaked)} leak")
    for line in leaked:
        print(f"    LEAK {line}")


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
        new = {kind: count for kind, count in counts.items() if kind in ISSUE_56_KINDS}
        print(
            f"  {'':15} by issue 56's rules (false positives unless --show says otherwise): "
            f"{sum(new.values())} {dict(sorted(new.items()))}"
        )
    print("held-out planted secrets (issue 56's kinds):")
    held_out()
    print("hostile inputs (one text each):")
    hostile()
    if args.show:
        print("every redaction in the logs:")
        show(runs)
    if args.build:
        build_share(args.build)


if __name__ == "__main__":
    main()
