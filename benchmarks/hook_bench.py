"""Benchmark recall through an agent's hook: `wikitrace hooks recall`, run as the agent runs it
(a new process, the hook's JSON on stdin), on a large corpus and on damaged ones.

Makes a git checkout whose remote is one of --projects projects, with --commits commits a day
apart, each after the first deleting, renaming or changing one of its files (the same ids
every time: fixed dates and author). Builds (or reuses, with --keep DIR) a corpus of --runs
synthetic coding sessions spread over the projects, compiled by benchmarks/prompt_bench.py's
instant fake model (3 lessons a run, each quoting a line that names a file the run touched);
each session carries the repository state it saw (the commit of its day, named for half of
the checkout's project's as Codex logs do, the others only when it started, as Claude Code's;
two files of that commit, which it touched), so recall checks the lessons of the checkout's
project against it
(tools/first_message_drift.py: git runs). Makes one more repository whose remote has no run.
Then prints, each beside its target, the median wall and CPU time (the child's and git's,
from getrusage) of --repeat calls, with the fastest and slowest wall and the load average
(1 minute) before and after them: a SessionStart in the checkout (target <= 0.5 s), a
UserPromptSubmit there whose prompt no lesson bears on and one that a lesson of the project's
bears on (the title of its first lesson whose files are all still in the checkout), a
SessionStart elsewhere (nothing to say), with the lessons marked stale and left out; and with
a damaged corpus (a garbage catalog; a catalog and manifest that never give their bytes,
FIFOs: a hung disk; none at all) the same times, the answer (empty) and the log line (target
<= 2 s). Each line says "met" or "NOT MET": by the median wall, and for a damaged corpus by
the slowest (and an empty answer every time). Asserts nothing.

The hook runs as an installed one does: its modules read from compiled files (.pyc, written
at the first call under the bench's scratch folder, PYTHONPYCACHEPREFIX, whatever
PYTHONDONTWRITEBYTECODE says), and its template kept compiled in its cache folder
(XDG_CACHE_HOME, the scratch folder's): the first call of all pays for both.

    nice -n 10 python benchmarks/hook_bench.py [--runs 10000] [--projects 40] [--commits 40]
        [--repeat 10] [--keep DIR] [--time-limit SECONDS] [--wikitrace COMMAND]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from drift_bench import git as drift_git
from prompt_bench import WORDS, InstantModel

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema.catalog import PastRun, records_in
from wikitrace.corpus_schema.layout import CATALOG
from wikitrace.corpus_schema.work import KINDS

WIKITRACE = str(Path(sys.executable).parent / "wikitrace")
COMMAND = [WIKITRACE]
"""The command the hook runs (--wikitrace)."""
LIMIT: list[str] = []
"""`--time-limit SECONDS` when given, for the recalls measured (not the damaged corpora's):
past it the hook answers nothing (1 s unless said)."""
RECALL_TARGET = 0.5
DAMAGED_TARGET = 2.0


PROJECT = 7
"""The project whose checkout the agent works in."""
START = datetime(2026, 1, 1, tzinfo=UTC)


def git(repo: Path, *arguments: str, day: int = 0) -> str:
    """A git command in `repo` as of `day` days after START (drift_bench.git)."""
    return drift_git(repo, *arguments, date=START + timedelta(days=day))


def checkout(path: Path, remote: str, commits: int) -> tuple[list[str], list[list[str]]]:
    """A repository of one file for each of WORDS (src/WORD.py) and `commits` commits, a day
    apart: each after the first deletes, renames or changes one file. The ids, oldest first,
    and the files of each."""
    (path / "src").mkdir(parents=True)
    for word in WORDS:
        (path / "src" / f"{word}.py").write_text(f"def {word}_handling():\n    return 1\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "remote", "add", "origin", remote)
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    ids = [git(path, "rev-parse", "HEAD")]
    files = [git(path, "ls-files").splitlines()]
    for day in range(1, commits):
        target = path / "src" / f"{WORDS[day % len(WORDS)]}.py"
        if target.exists():
            rel = str(target.relative_to(path))
            if day % 3 == 0:
                git(path, "rm", "-q", rel, day=day)
            elif day % 3 == 1:
                git(path, "mv", rel, f"src/moved_{day}.py", day=day)
            else:
                target.write_text(f"def changed_{day}():\n    return 0\n")
                git(path, "add", ".", day=day)
        git(path, "commit", "-q", "--allow-empty", "-m", f"c{day}", day=day)
        ids.append(git(path, "rev-parse", "HEAD", day=day))
        files.append(git(path, "ls-files").splitlines())
    return ids, files


def write_sessions(
    path: Path, count: int, projects: int, commits: list[str], files: list[list[str]]
) -> None:
    """Coding sessions, each of one project and one kind of work, with the repository state it
    saw: a day's commit, and two of the files it held."""
    rng = random.Random(7)
    kinds = sorted(KINDS)
    with path.open("w") as handle:
        for index in range(count):
            things = " ".join(rng.choice(WORDS) for _ in range(6))
            kind = kinds[index % len(kinds)]
            day = (index // projects) % len(commits)  # each project's runs on every day
            edited, failed = rng.choice(files[day]), rng.choice(files[day])
            turns = [
                {"role": "user", "content": f"Fix the {things} handling."},
                {"role": "assistant", "action": f"edit {edited}"},
                # The last line, which the fake model quotes: the lesson names the file.
                {"role": "tool", "observation": f"error: {failed} failed"},
            ]
            repo = {
                "started": (START + timedelta(days=day, hours=1)).isoformat(),
                "files": [edited, failed],
            }
            if index % projects == PROJECT and index % 2:
                repo["commit"] = commits[day]  # as Codex logs name it; Claude Code's do not
            record = {
                "task_id": f"s{index}",
                "task": f"Fix the {things} handling in the {rng.choice(WORDS)} module.",
                "task_type": "coding",
                "project": f"github.com/bench/p{index % projects}",
                "kind": kind,
                "success": rng.random() < 0.4,
                "repo": repo,
                "turns": turns,
            }
            handle.write(json.dumps(record) + "\n")


def repository(path: Path, remote: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=False)
    return path


CHILD_ENV: dict[str, str] = {}
"""The environment the hook runs in (see the module's docstring)."""


def recall(
    corpus: Path, payload: dict[str, str], log: Path, limit: list[str] | None = None
) -> tuple[float, float, bytes]:
    """One hook call, cold (a new process): wall seconds, CPU seconds, stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [*COMMAND, "hooks", "recall", str(corpus), "--hook-log", str(log), *(limit or [])],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env=CHILD_ENV,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"hooks recall exited {done.returncode}: {done.stderr.decode()}")
    return wall, cpu, done.stdout


def timed(
    corpus: Path, payload: dict[str, str], log: Path, repeat: int, limit: list[str] | None
) -> tuple[str, list[tuple[float, float, bytes]]]:
    """`repeat` calls, and what their times were: the median wall and CPU, the fastest and
    slowest wall, the load average before and after."""
    load = os.getloadavg()[0]
    calls = [recall(corpus, payload, log, limit) for _ in range(repeat)]
    walls = [c[0] for c in calls]
    said = (
        f"{statistics.median(walls):.2f} s wall, {statistics.median(c[1] for c in calls):.2f} s "
        f"CPU (median of {repeat}; wall {min(walls):.2f} to {max(walls):.2f} s, first "
        f"{walls[0]:.2f} s; load {load:.1f} to {os.getloadavg()[0]:.1f})"
    )
    return said, calls


def verdict(wall: float, target: float, empty: bool = True) -> str:
    return f"target <= {target} s{', empty' if target == DAMAGED_TARGET else ''}: " + (
        "met" if wall <= target and empty else "NOT MET"
    )


def measured(
    name: str, corpus: Path, payload: dict[str, str], log: Path, repeat: int, target: float
) -> None:
    times, calls = timed(corpus, payload, log, repeat, LIMIT)
    out = calls[-1][2]
    said = "nothing" if not out else f"{len(out)} bytes"
    lessons = stale = checked = 0
    gone = "none"
    if out:
        context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        lessons = context.count("\n- **insight-")
        stale = context.count("  - STALE: ")
        checked = stale + context.count("  - Code: ")
        found = re.search(r"(\d+) lessons? of this project (?:are|is) left out", context)
        gone = found.group(1) if found else "none"
    wall = statistics.median(c[0] for c in calls)
    print(
        f"{name}: {times}; answer: {said}, {lessons} lessons ({checked} with a note on "
        f"today's code, {stale} stale; {gone} left out, their files gone); "
        f"{verdict(wall, target)}",
        flush=True,
    )


def damaged(name: str, corpus: Path, payload: dict[str, str], log: Path, repeat: int) -> None:
    lines = len(log.read_text().splitlines()) if log.exists() else 0
    times, calls = timed(corpus, payload, log, repeat, None)
    logged = log.read_text().splitlines()[lines:]
    line = next((text for text in logged if " ERROR " in text), "(no ERROR line)")
    errors = sum(" ERROR " in text for text in logged)
    answers = {c[2] for c in calls}
    said = "nothing" if answers == {b""} else repr(sorted(answers))
    print(
        f"{name}: {times}; answer: {said}; log ({errors} ERROR lines): "
        f"{line.split(' ERROR ', 1)[-1][:120]}; "
        f"{verdict(max(c[0] for c in calls), DAMAGED_TARGET, answers == {b''})} (slowest)",
        flush=True,
    )


def bearing_prompt(corpus: Path, files: list[str]) -> str:
    """A prompt that a lesson of the checkout's project bears on: the words of the title of
    its first lesson whose quoted files are all still in the checkout (`files`)."""
    runs: set[str] = set()
    for record in records_in(corpus / CATALOG):
        if isinstance(record, PastRun):
            if record.project == f"github.com/bench/p{PROJECT}":
                runs.add(record.step)
            continue
        item = record[1]
        if item.source_step in runs and set(item.quoted_files) <= set(files):
            words = item.title.removeprefix("Check the ")
            return f"Fix the {words} check that fails in the shelf module."
    raise SystemExit(f"no lesson of project p{PROJECT} names only files still in the checkout")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=40)
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="build here once, reuse it afterwards")
    parser.add_argument("--wikitrace", default=WIKITRACE, help="the command the hook runs")
    parser.add_argument(
        "--time-limit", type=float, help="the hook's --time-limit (a busy machine's: past 1 s)"
    )
    args = parser.parse_args()
    COMMAND[0] = args.wikitrace
    LIMIT.extend(["--time-limit", str(args.time_limit)] if args.time_limit else [])
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory(prefix="wikitrace-hook-bench-") as scratch:
        work = Path(scratch)
        CHILD_ENV.update(
            {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            XDG_CACHE_HOME=str(work / "cache"),
        )
        CHILD_ENV.setdefault("PYTHONPYCACHEPREFIX", str(work / "pycache"))
        app = work / "app"
        commits, files = checkout(app, f"git@github.com:bench/p{PROJECT}.git", args.commits)
        corpus = args.keep or work / "corpus"
        if not corpus.exists():
            runs = work / "runs.jsonl"
            write_sessions(runs, args.runs, args.projects, commits, files)
            started = time.perf_counter()
            llm = InstantModel()
            options = BuildOptions(
                inputs=[runs], output=corpus, model=llm.model, use_cache=False, mine=False
            )
            build_corpus(options, llm=llm)  # type: ignore[arg-type]
            print(f"built {args.runs} runs in {time.perf_counter() - started:.1f} s", flush=True)
        print(f"load average before: {os.getloadavg()}", flush=True)
        other = repository(work / "other", "git@github.com:bench/nobody.git")
        log = work / "hook.log"
        start = {"hook_event_name": "SessionStart", "session_id": "b", "cwd": str(app)}
        prompt = {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "b",
            "cwd": str(app),
            "prompt": "Fix the failing test of the mug handling in the shelf module.",
        }
        elsewhere = {**start, "cwd": str(other)}
        bearing = {**prompt, "prompt": bearing_prompt(corpus, files[-1])}
        repeat = args.repeat
        measured("SessionStart, project with runs", corpus, start, log, repeat, RECALL_TARGET)
        measured(
            "UserPromptSubmit, same project, no lesson bears on it",
            corpus,
            prompt,
            log,
            repeat,
            RECALL_TARGET,
        )
        measured(
            "UserPromptSubmit, same project, a lesson bears on it",
            corpus,
            bearing,
            log,
            repeat,
            RECALL_TARGET,
        )
        measured(
            "SessionStart, project without runs", corpus, elsewhere, log, repeat, RECALL_TARGET
        )

        broken = work / "broken"
        shutil.copytree(corpus.resolve(), broken, ignore=shutil.ignore_patterns("raw", "search"))
        for path in [broken, *broken.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (broken / "catalog.jsonl").write_bytes(b"\x00\xff{not json\n")
        damaged("damaged corpus (garbage catalog)", broken, start, log, repeat)
        for name in ("catalog.jsonl", "manifest.json"):
            (broken / name).unlink()
            os.mkfifo(broken / name)
        damaged("hung corpus (catalog and manifest FIFOs)", broken, start, log, repeat)
        damaged("missing corpus", work / "nowhere", start, log, repeat)
        print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
