"""`search/tasks/lines.bin` (`LineCounts`): how many distinct tasks each line is in, kept with
the tasks' ranker, so that an add counts the lines of the tasks it adds alone and knows whether
the lines left out as common (search/rank.py, without_boilerplate) changed."""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import damaged

LINES = "lines.bin"
"""The tasks' ranker's line counts, in its folder beside its postings pages."""
LINES_VERSION = 1
"""What the file's header says after `_MAGIC`; a file of another version is not read (the
lines are counted anew from every task)."""
_MAGIC = b"WTLINES\x00"
_HEAD = struct.Struct("<8sIII")
"""The magic, the version, the distinct texts and the lines counted."""


def key_of(text: str) -> int:
    """A text's or a line's stable digest (blake2b, 8 bytes, little-endian): the same in every
    process, where Python's `hash` of a str is not."""
    data = text.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


@dataclass(frozen=True)
class LineCounts:
    """The distinct texts counted (their `key_of`, ascending) and each line counted (its
    `key_of`, ascending) with how many of those texts hold it (numpy arrays)."""

    texts: Any
    """uint64, ascending, no repeat."""
    lines: Any
    """uint64, ascending, no repeat."""
    counts: Any
    """uint32, one per line, from 1 to the number of texts."""

    def dumps(self) -> bytes:
        import numpy as np

        return b"".join(
            (
                _HEAD.pack(_MAGIC, LINES_VERSION, len(self.texts), len(self.lines)),
                np.asarray(self.texts, dtype="<u8").tobytes(),
                np.asarray(self.lines, dtype="<u8").tobytes(),
                np.asarray(self.counts, dtype="<u4").tobytes(),
            )
        )


def load_line_counts(path: Path) -> LineCounts | None:
    """The line counts at `path`; None when there are none (a ranker saved before them) or
    they are of another version; CorpusError naming the file when they are damaged."""
    import numpy as np

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise damaged(path, error) from None
    try:
        if len(data) < _HEAD.size:
            raise ValueError("shorter than its header")
        magic, version, texts, lines = _HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise ValueError("not a file of line counts")
        if version != LINES_VERSION:
            return None
        if len(data) != _HEAD.size + 8 * texts + 12 * lines:
            raise ValueError(
                f"{len(data)} bytes, where its header says {texts} texts, {lines} lines"
            )
        at = _HEAD.size
        held = np.frombuffer(data, dtype="<u8", count=texts, offset=at)
        keys = np.frombuffer(data, dtype="<u8", count=lines, offset=at + 8 * texts)
        counts = np.frombuffer(data, dtype="<u4", count=lines, offset=at + 8 * (texts + lines))
        if np.any(held[1:] <= held[:-1]) or np.any(keys[1:] <= keys[:-1]):
            raise ValueError("its digests are not in ascending order")
        if lines and (int(counts.min()) < 1 or int(counts.max()) > texts):
            raise ValueError(f"a line's count is not one of its {texts} texts")
    except ValueError as error:
        raise damaged(path, error) from None
    return LineCounts(texts=held, lines=keys, counts=counts)
