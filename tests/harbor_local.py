"""What the Harbor tests share: a corpus of two Terminal-Bench tasks' past runs, and a local
Harbor environment (a folder as the task container's root, each command run in a chroot of it
in its own mount namespace) so a real Harbor job runs without Docker."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from wikitrace.compiler import BuildOptions, build_corpus

from helpers import FakeLLM, good_answer, make_run, write_runs

OWN = "OWN-TASK-LESSON: the lost commit is 7a3c2f1."
OTHER = "Write files with printf, not echo -e: it keeps the newline as asked."


def _compiled(messages: list[dict[str, Any]]) -> str:
    prompt = messages[0]["content"]
    answer = json.loads(good_answer(prompt))
    if "insights" in answer:
        own = "lost my last commit" in prompt
        answer["insights"] = [
            {
                "title": "The lost commit" if own else "printf for exact file contents",
                "guideline": OWN if own else OTHER,
                "applicability": "Terminal tasks.",
                "supporting_claims": [1],
            }
        ]
    return json.dumps(answer)


def harbor_corpus(root: Path) -> Path:
    """Past runs of two Terminal-Bench tasks as Harbor names them: fix-git and hello-world;
    each failed and left a lesson (OWN for fix-git, OTHER for hello-world)."""

    def past(task_id: str, task: str, action: str) -> dict[str, Any]:
        return make_run(
            task_id,
            task=task,
            task_type="terminal-bench",
            turns=[
                {"role": "user", "content": task},
                {"role": "assistant", "action": action, "observation": "Wrong result."},
            ],
        )

    runs = write_runs(
        root / "runs.jsonl",
        [
            past("terminal-bench/hello-world", "Create hello.txt in /app.", "echo -e hi > a"),
            past("terminal-bench/fix-git", "I lost my last commit in /app/repo.", "git log"),
        ],
    )
    llm = FakeLLM(answer=_compiled)
    options = BuildOptions(
        inputs=[runs], output=root / "corpus", model=llm.model, cache_dir=root / "cache", mine=False
    )
    build_corpus(options, llm=llm)
    return root / "corpus"


BINDS = ("usr", "bin", "lib", "lib64", "sbin", "etc")
"""The host's system folders, bound into the root for each command (read-only)."""


def can_chroot() -> bool:
    """Whether this machine lets a local environment run: root, with mount namespaces."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


@functools.cache
def local_environment_class() -> type:
    """A Harbor environment on this machine (import path `harbor_local:LocalEnvironment`)."""
    from harbor.environments.base import BaseEnvironment, ExecResult

    class LocalEnvironment(BaseEnvironment):
        @staticmethod
        def type() -> str:
            return "wikitrace-test-local"

        def _validate_definition(self) -> None:
            return None

        def _root(self) -> Path:
            root: Path | None = getattr(self, "root_dir", None)
            if root is None:
                root = Path(tempfile.mkdtemp(prefix="harbor-root-"))
                for name in ("tmp", "app", "proc", "logs/agent", "logs/verifier"):
                    (root / name).mkdir(parents=True, exist_ok=True)
                for name in BINDS:
                    host = Path("/") / name
                    if host.is_symlink():
                        (root / name).symlink_to(host.readlink())
                    elif host.is_dir():
                        (root / name).mkdir()
                self.root_dir = root
            return root

        def _here(self, path: str) -> Path:
            return self._root() / path.lstrip("/")

        async def start(self, force_build: bool) -> None:
            self._root()

        async def stop(self, delete: bool) -> None:
            if delete and getattr(self, "root_dir", None) is not None:
                subprocess.run(["chmod", "-R", "u+w", str(self.root_dir)], check=False)
                shutil.rmtree(self.root_dir, ignore_errors=True)

        async def upload_file(self, source_path: Path | str, target_path: str) -> None:
            self._here(target_path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source_path, self._here(target_path))

        async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
            shutil.copytree(source_dir, self._here(target_dir), dirs_exist_ok=True)

        async def download_file(self, source_path: str, target_path: Path | str) -> None:
            Path(target_path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self._here(source_path), target_path)

        async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
            shutil.copytree(self._here(source_dir), target_dir, dirs_exist_ok=True)

        async def exec(
            self,
            command: str,
            cwd: str | None = None,
            env: dict[str, str] | None = None,
            timeout_sec: int | None = None,
            user: str | int | None = None,
        ) -> ExecResult:
            root = self._root()
            binds = "".join(
                f"mount --bind -o ro /{name} {root}/{name} && "
                for name in BINDS
                if (Path("/") / name).is_dir() and not (Path("/") / name).is_symlink()
            )
            inner = (f"cd {shlex.quote(cwd)} && " if cwd else "") + command
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
            script = (
                f"{binds}mount -t proc proc {root}/proc && exec chroot {root} /usr/bin/env -i "
                f"PATH=/usr/local/bin:/usr/bin:/bin HOME=/root {exports} "
                f"bash -c {shlex.quote(inner)}"
            )
            process = await asyncio.create_subprocess_exec(
                "unshare",
                "-m",
                "--propagation",
                "private",
                "bash",
                "-c",
                script,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(process.communicate(), timeout_sec)
            return ExecResult(
                stdout=out.decode(errors="replace"),
                stderr=err.decode(errors="replace"),
                return_code=process.returncode if process.returncode is not None else -1,
            )

    return LocalEnvironment


def __getattr__(name: str) -> type:
    # Harbor imports the environment by its path; the class needs harbor, imported late.
    if name == "LocalEnvironment":
        return local_environment_class()
    raise AttributeError(name)
