"""Progress of the user's agent runs (update, gate)."""

from __future__ import annotations

import click


class RunProgress:
    """`agent runs N/M` on stderr every tenth of the way."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        decile = done * 10 // max(total, 1)
        if not self.quiet and (decile != self.last or done == total):
            self.last = decile
            click.echo(f"agent runs {done}/{total}", err=True)
