"""Progress on stderr for long work: a bar on a terminal; a line every tenth of the way (or
every 30 s) when stderr is a file or a pipe, so logs stay short and scripts can follow."""

from __future__ import annotations

import sys
import time
from typing import Any

import click


class Progress:
    """Called with (done, total); `line` is a format with {done} and {total}."""

    def __init__(self, line: str, *, bar: str, quiet: bool = False) -> None:
        self._line = line
        self._label = bar
        self._quiet = quiet
        self._bar: Any = None
        self._tty = sys.stderr.isatty()
        self._last_line = 0.0
        self._last_decile = -1

    def __call__(self, done: int, total: int) -> None:
        if self._quiet:
            return
        if self._tty:
            if self._bar is None:
                self._bar = click.progressbar(length=total, label=self._label, file=sys.stderr)
                self._bar.__enter__()
            self._bar.update(done - self._bar.pos)
            return
        decile = done * 10 // max(total, 1)
        now = time.monotonic()
        if decile != self._last_decile or now - self._last_line > 30 or done == total:
            self._last_decile, self._last_line = decile, now
            click.echo(self._line.format(done=done, total=total), err=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def agent_runs(*, quiet: bool) -> Progress:
    """`agent runs N/M`: the user's agent, run by update and gate."""
    return Progress("agent runs {done}/{total}", bar="agent runs", quiet=quiet)
