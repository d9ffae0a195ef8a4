"""The files and symbols a lesson's text or its quotes name: what recall checks against
today's code (tools/first_message_drift.py). The standard library only.

A name is taken from text a model or a log wrote, so it is a candidate, never a path to open:
recall keeps only those that are plain paths inside the repository (`safe_path`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NAMED_FILES = 20
"""The most files kept of one lesson's quotes: a quoted test run may list hundreds."""

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_FILE = re.compile(
    r"(?<![\w@$%/.-])"  # not in the middle of a longer word or path
    r"((?:\.{0,2}/)?(?:[\w@+-][\w@+.-]*/)*"  # folders
    r"(?:[\w@+-][\w@+-]*(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,9}"  # a name with an extension
    r"|Makefile|Dockerfile|Justfile|Gemfile|Rakefile|Procfile))"
    r"(?![\w/])"
)
"""A file as text names it: `src/a.py`, `./a.py`, `a.py`, `docs/Makefile`."""
_MAY_NAME_FILE = re.compile(
    r"[\w@+-]\.[A-Za-z]|Makefile|Dockerfile|Justfile|Gemfile|Rakefile|Procfile"
)
"""What every text `_FILE` finds a file in holds (a name's last character, a dot and a
letter; or a plain name): most lessons hold none, and this is a tenth of `_FILE`'s time."""
_NOT_FILES = re.compile(
    r"^(?:e\.g|i\.e|etc|vs|v?\d[\d.]*[a-z]*)$"  # abbreviations and version numbers
    r"|\.(?:com|org|net|io|dev)$",  # host names
    re.IGNORECASE,
)
_SYMBOL = re.compile(r"`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)(?:\(\))?`")
"""A symbol a lesson names in backquotes: `parse_args`, `Memory.load()`."""
_PLAIN_NAMES = frozenset(["Makefile", "Dockerfile", "Justfile", "Gemfile", "Rakefile", "Procfile"])
_EXTENSIONS = frozenset(
    str.split(
        "py pyi ipynb js jsx mjs cjs ts tsx go rs java kt kts scala rb php c h cc cpp hpp cs swift "
        "m mm ex exs erl hs ml clj lua pl r jl dart vue svelte sh bash zsh fish ps1 bat sql proto "
        "md rst txt toml yaml yml json jsonl ini cfg conf lock xml html htm css scss less "
        "gradle cmake mk tf hcl nix env"
    )
)
"""Extensions a name without a folder must have to count as a file (`a.py`), so that a
dotted symbol (`Memory.load`) does not."""
_SAFE = re.compile(r"^(?!-)[\w@+.-]+(?:/[\w@+.-]+)*$")


def named_files(texts: Iterable[str], limit: int = NAMED_FILES) -> list[str]:
    """The files `texts` name, in order, each once, at most `limit` (see _FILE)."""
    found: dict[str, None] = {}
    for text in texts:
        if not _MAY_NAME_FILE.search(text):
            continue
        for match in _FILE.finditer(_URL.sub(" ", text)):
            name = match.group(1).removeprefix("./").rstrip(".")
            stem = name.rsplit("/", 1)[-1]
            if "/" not in name and _NOT_FILES.search(stem):
                continue
            if "/" not in name and not _is_file_name(stem):
                continue  # `Memory.load` is a symbol; `a.py` and `Makefile` are files
            found.setdefault(name, None)
            if len(found) >= limit:
                return list(found)
    return list(found)


def _is_file_name(name: str) -> bool:
    return name in _PLAIN_NAMES or name.rsplit(".", 1)[-1].lower() in _EXTENSIONS


def named_symbols(text: str) -> list[str]:
    """The symbols `text` names in backquotes, each once: `Memory.load()` -> `Memory.load`.
    A backquoted file name is not a symbol."""
    found: dict[str, None] = {}
    for match in _SYMBOL.finditer(text):
        name = match.group(1)
        if not _is_file_name(name):
            found.setdefault(name, None)
    return list(found)


def safe_path(name: str) -> str | None:
    """`name` as a path inside a repository, or None when it is not a plain relative path:
    absolute, with `..`, `.git`, a leading `-` (which git would read as an option), empty
    parts or characters a path of code does not have."""
    text = name.strip().removeprefix("./")
    if not text or len(text) > 400 or not _SAFE.match(text):
        return None
    parts = text.split("/")
    if any(part in ("", ".", "..", ".git") or part.startswith("-") for part in parts):
        return None
    return text
