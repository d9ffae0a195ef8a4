"""Folders made from a corpus (a skill, a site): written beside their destination, then moved
into place whole, and replaced only when an earlier export of the same kind wrote them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import orjson

from .destination import check_output, is_empty_dir
from .errors import CorpusError
from .writing import remove_tree

EXPORT_MARKER = ".wikitrace-export"
"""A file in every folder `wikitrace export skill` or `wikitrace site` writes: what it is and
which corpus version it shows, so `--force` replaces only such a folder."""


@contextlib.contextmanager
def staged_export(dest: Path, kind: str, *, force: bool) -> Iterator[Path]:
    """Write a folder made from a corpus (a skill, a site) beside `dest`, then move it into
    place whole: an interrupted export leaves `dest` as it was. An existing `dest` is replaced
    only with `force`, and only when an earlier export of the same kind wrote it; never inside a
    corpus or its store (`check_output`)."""
    check_output(dest)
    if dest.exists() or dest.is_symlink():
        marker = dest / EXPORT_MARKER
        ours = not dest.is_symlink() and marker.is_file()
        if ours:
            try:
                ours = orjson.loads(marker.read_bytes()).get("kind") == kind
            except (OSError, orjson.JSONDecodeError, AttributeError):
                ours = False
        if not force:
            raise CorpusError(f"{dest} already exists; use --force to replace it")
        if not ours and not is_empty_dir(dest):
            raise CorpusError(
                f"{dest} exists and is not a {kind} wikitrace wrote; --force only replaces "
                "one, so choose another folder"
            )
    partial = dest.with_name(f".{dest.name}.partial")
    remove_tree(partial)
    partial.mkdir(parents=True)
    try:
        yield partial
        old = dest.with_name(f".{dest.name}.old")
        remove_tree(old)
        if dest.exists():
            dest.rename(old)
        partial.rename(dest)
        remove_tree(old)
    except BaseException:
        remove_tree(partial)
        raise
