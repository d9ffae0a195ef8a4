"""What checking lessons against today's code costs a first message (tools/first_message_drift.py).

Makes a memory of --runs coding sessions over --projects projects (one lesson a run, naming one
of its run's files; the runs' commits spread over --commits commits of a temporary git
repository, some files of which later commits delete, rename or change), then renders the first
message for a task of the first project --repeat times without a checkout and with one, and
prints for each: the median wall time, the CPU time of this process and of its children (git)
per message, and the git calls made. The difference is what the checks cost. Asserts nothing.

    nice -n 10 python benchmarks/drift_bench.py [--runs 10000] [--projects 50] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wikitrace.corpus_schema.catalog import InsightEntry, PastRun
from wikitrace.tools.first_message_drift import check_code
from wikitrace.tools.memory import Memory

PROJECT = "github.com/acme/p0"


def git(repo: Path, *arguments: str, date: datetime) -> str:
    """A git command in `repo` as of `date`, with a fixed author, and no setting of the
    machine's: the same commit ids on every machine and run (hook_bench.py's too)."""
    stamp = date.isoformat()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.invalid",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.invalid",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *arguments],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    return done.stdout.strip()


def repository(repo: Path, commits: int, files: int, start: datetime) -> list[str]:
    """A repository of `files` files and `commits` commits, a day apart: each later commit
    deletes, renames or changes one file. The commits' ids, oldest first."""
    (repo / "src").mkdir(parents=True)
    for n in range(files):
        (repo / "src" / f"m{n}.py").write_text(f"def f{n}():\n    return {n}\n")
    git(repo, "init", "-q", "-b", "main", date=start)
    git(repo, "remote", "add", "origin", f"https://{PROJECT}.git", date=start)
    git(repo, "add", ".", date=start)
    git(repo, "commit", "-q", "-m", "first", date=start)
    ids = [git(repo, "rev-parse", "HEAD", date=start)]
    for n in range(1, commits):
        day = start + timedelta(days=n)
        target = repo / "src" / f"m{n % files}.py"
        if target.exists():
            if n % 3 == 0:
                git(repo, "rm", "-q", str(target.relative_to(repo)), date=day)
            elif n % 3 == 1:
                git(repo, "mv", str(target.relative_to(repo)), f"src/r{n}.py", date=day)
            else:
                target.write_text(f"def g{n}():\n    return 0\n")
                git(repo, "add", ".", date=day)
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{n}", date=day)
        ids.append(git(repo, "rev-parse", "HEAD", date=day))
    return ids


def memory(runs: int, projects: int, commits: list[str], files: int, start: datetime) -> Memory:
    past, lessons = [], []
    for n in range(runs):
        project = f"github.com/acme/p{n % projects}"
        step = f"step-{n + 1:05d}"
        at = n % len(commits)
        touched = [f"src/m{n % files}.py", f"src/m{(n + 1) % files}.py"]
        past.append(
            PastRun(
                step=step,
                task_id=str(n),
                task_type="coding",
                outcome="failure" if n % 2 else "success",
                task=f"Fix the flags of module {n % 97} in the parser",
                project=project,
                repo={
                    "commit": commits[at] if n % 2 else None,  # half the logs name no commit
                    "started": (start + timedelta(days=at, hours=1)).isoformat(),
                    "files": touched,
                },
            )
        )
        lessons.append(
            InsightEntry(
                id=f"insight-{n + 1:05d}",
                # Words of its own, so that no two lessons are near-duplicates (one group).
                title=f"Check {touched[0]} a{n} b{n} c{n} d{n} e{n}",
                task_type="coding",
                guideline=f"Run `f{n % files}` after editing {touched[0]}: g{n} h{n} i{n} j{n}.",
                applicability="When the parser's flags change.",
                source_step=step,
                source_outcome=past[-1].outcome,
                source_task_id=str(n),
            )
        )
    return Memory(Path("."), past, lessons, offline=False, leaders=list(range(runs)))


def measured(memory: Memory, checkout: Path | None, repeat: int) -> dict[str, float]:
    walls, cpu, children = [], [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started_cpu, started = time.process_time(), time.perf_counter()
        message = memory.first_message(
            "Fix the flags of module 3 in the parser",
            project=PROJECT,
            checkout=checkout,
            max_tokens=6000,
        )
        walls.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        children.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    own = [i for i, run in enumerate(memory.runs) if run.project == PROJECT]
    checked = check_code(memory, own, own, checkout) if checkout is not None else None
    return {
        "git_calls": checked.git_calls if checked else 0,
        "git_seconds": checked.seconds if checked else 0.0,
        "wall": statistics.median(walls),
        "cpu": statistics.median(cpu),
        "git_cpu": statistics.median(children),
        "noted": len(message.code) + len(message.left_out_gone),
        "stale": len(message.stale),
        "left_out": len(message.left_out_gone),
        "unchecked": message.code_unchecked is not None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=50)
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder) / "repo"
        commits = repository(repo, options.commits, options.files, start)
        loaded = memory(options.runs, options.projects, commits, options.files, start)
        loaded.first_message("warm up", project=PROJECT)  # rankers and groups, once
        print(
            f"{options.runs} runs, {options.projects} projects "
            f"({options.runs // options.projects} runs of the agent's), {options.commits} "
            f"commits; median of {options.repeat} messages; load {os.getloadavg()[0]:.2f}"
        )
        for name, checkout in (("no checkout", None), ("checked", repo)):
            row = measured(loaded, checkout, options.repeat)
            print(
                f"{name:12} wall {row['wall'] * 1000:7.1f} ms  cpu {row['cpu'] * 1000:7.1f} ms  "
                f"git cpu {row['git_cpu'] * 1000:6.1f} ms  git calls {row['git_calls']:2} "
                f"({row['git_seconds'] * 1000:.0f} ms)  lessons noted {row['noted']:4}  "
                f"stale {row['stale']:4}  left out {row['left_out']:4}  "
                f"unchecked {row['unchecked']}"
            )


if __name__ == "__main__":
    main()
