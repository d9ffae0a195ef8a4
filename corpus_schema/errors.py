"""Exceptions that carry a message a user can act on; the CLI turns them into exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic is not imported to raise an error: the CLI starts without it
    from pydantic import ValidationError


def first_problem(error: ValidationError) -> tuple[str, str]:
    """The dotted field path and the message of a validation error's first problem."""
    first = error.errors()[0]
    return ".".join(str(part) for part in first["loc"]), first["msg"]


class WikitraceError(Exception):
    """Base of every error wikitrace reports to a user (never shown as a traceback)."""

    exit_code = 1


class InputError(WikitraceError):
    """Bad input: names the file, line (or position) and field, and says what to do."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        at: str | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.at = at
        """Where in the file when it has no lines to count: a JSON path, a zip member, a byte."""
        self.field = field
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
            if self.at is not None:
                where += f" at {self.at}"
            where += ": "
        field = f"field '{self.field}': " if self.field else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}{field}{self.message}{hint}"

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "at": self.at,
            "field": self.field,
            "message": self.message,
            "hint": self.hint,
        }


class CorpusError(WikitraceError):
    """A corpus folder that is missing, unreadable, locked or not in the expected format."""

    exit_code = 1

    @classmethod
    def no_folder(cls, root: object) -> CorpusError:
        """What is said of a corpus whose folder is not there."""
        return cls(f"{root} is not a folder (expected a wikitrace corpus)")
