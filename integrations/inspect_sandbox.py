"""The corpus copied into one inspect_ai sample's sandbox, and removed after it.

The view a sample may read (`views.view_for`) goes in as one tar stream (one `write_file`
and one `exec`, whatever the corpus's size), read-only; where the sandbox lets root mount, a
read-only bind mount over it stops root too. A local sandbox is the host itself: each sample's
copy goes into its own working folder (which inspect removes after the sample), never into a
folder every sample shares, but the agent runs as the host user and can read whatever that
user can (the corpus itself included), and nothing stops it writing as root.
"""

from __future__ import annotations

import functools
import io
import os
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from .views import loaded

READ_ONLY_MOUNT = "mount"
"""`read_only` when a read-only bind mount holds the copy: root cannot write to it either."""
READ_ONLY_MODES = "permissions"
"""`read_only` when only file modes hold it: root (or the files' owner) can write to it."""

_EXTRACT = (
    'set -e; if [ -e "$1" ]; then echo "$1 exists already" >&2; rm -f "$2"; exit 1; fi; '
    'mkdir -p "$1"; tar -xf "$2" -C "$1" --no-same-owner; rm -f "$2"; chmod -R a-w "$1"'
)
_BIND = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"'
_REMOVE = 'umount "$1" 2>/dev/null; chmod -R u+w "$1" 2>/dev/null; rm -rf "$1"'


def is_local(box: Any) -> bool:
    """Whether `box` is inspect's local sandbox (the host, shared by every sample)."""
    try:
        from inspect_ai.util._sandbox.local import LocalSandboxEnvironment
    except ImportError:
        return False
    try:  # sandbox() hands out a proxy; as_type looks through it
        box.as_type(LocalSandboxEnvironment)
    except TypeError:
        return False
    return True


async def place(box: Any, mount: str) -> str:
    """Where this sample's copy goes: `mount`, or in a local sandbox the folder of that name in
    the sample's own working folder (a path on the host no other sample is given)."""
    if not mount.startswith("/") or mount.rstrip("/") == "":
        raise ValueError(f"mount {mount!r}: expected an absolute folder other than /")
    if not is_local(box):
        return mount.rstrip("/")
    result = await box.exec(["pwd"])
    if not result.success:
        raise RuntimeError(f"pwd in the local sandbox: {result.stderr.strip()}")
    return str(PurePosixPath(result.stdout.strip()) / (PurePosixPath(mount).name or "corpus"))


@functools.lru_cache(maxsize=4)
def archive(root: str) -> tuple[bytes, int]:
    """The files the corpus's manifest lists, as an uncompressed tar (the drill-down tools
    executable, every file read-only), and how many; epochs of one task share it."""
    memory = loaded(root)
    buffer = io.BytesIO()
    count = 0
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(memory.files):
            source = memory.root / rel
            if not source.is_file():
                continue
            info = tarfile.TarInfo(rel)
            data = source.read_bytes()
            info.size = len(data)
            info.mode = 0o555 if os.access(source, os.X_OK) else 0o444
            tar.addfile(info, io.BytesIO(data))
            count += 1
    return buffer.getvalue(), count


async def copy_view(box: Any, view: Path, mount: str) -> tuple[int, str]:
    """Copy the corpus at `view` into `box` at `mount`; returns the files copied and how the
    copy is kept read-only (`READ_ONLY_MOUNT` or `READ_ONLY_MODES`)."""
    data, count = archive(str(view))
    stream = f"{mount.rstrip('/')}.wikitrace.tar"
    await box.write_file(stream, data)
    result = await box.exec(["sh", "-c", _EXTRACT, "sh", mount, stream])
    if not result.success:
        raise RuntimeError(
            f"cannot unpack the corpus at {mount} in the sandbox: {result.stderr.strip()} "
            "(the sandbox user must be able to create it: choose a mount it can write)"
        )
    if is_local(box):  # never mount over the host's folders
        return count, READ_ONLY_MODES
    bound = await box.exec(["sh", "-c", _BIND, "sh", mount])
    return count, READ_ONLY_MOUNT if bound.success else READ_ONLY_MODES


async def remove_copy(box: Any, mount: str) -> None:
    """The sample's copy gone (unmounted first when it was bound)."""
    await box.exec(["sh", "-c", _REMOVE, "sh", mount])


__all__ = ["READ_ONLY_MODES", "READ_ONLY_MOUNT", "archive", "copy_view", "place", "remove_copy"]
