"""What an action did to files, as mining sees coding work (compiler/mine_patterns.py): the
files it read, edited in place or wrote whole, and whether it ran tests, from an editing
tool's arguments (Claude Code's Read/Edit/Write, OpenHands' str_replace_editor, Gemini's
read_file/replace/write_file, Codex's apply_patch) or a shell command (`nl -ba f | sed -n`,
`sed -i ... f`, `cat <<'EOF' > f`, `pytest`, ...). A guess from the text of the call: what it
cannot tell, it leaves out."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class FileWork:
    reads: tuple[str, ...] = ()
    edits: tuple[str, ...] = ()
    """Files changed in place (an edit of part of a file)."""
    writes: tuple[str, ...] = ()
    """Files written whole (created, or overwritten)."""
    test: bool = False
    """It ran tests."""


NO_FILES = FileWork()

_READ_TOOLS = frozenset({"read", "read_file", "view", "open_file", "view_file", "cat"})
_EDIT_TOOLS = frozenset(
    {"edit", "multiedit", "replace", "str_replace", "edit_file", "search_replace", "notebookedit"}
)
_WRITE_TOOLS = frozenset({"write", "write_file", "create_file", "create"})
_EDITOR_TOOLS = frozenset(
    {"str_replace_editor", "str_replace_based_edit_tool", "file_editor", "text_editor", "editor"}
)
_PATH_KEYS = ("file_path", "path", "filename", "target_file", "notebook_path", "absolute_path")
_PATCH_FILE = re.compile(r"^\*\*\* (Update|Add) File: (.+)$", re.MULTILINE)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n.*?\n\s*\2\s*(?=\n|$)", re.DOTALL)
_SEGMENT = re.compile(r"&&|\|\||;|\||\n")
_REDIRECT = re.compile(r"(>>?)\s*([^\s;&|<>]+)")
_REDIRECTION = re.compile(r"\d?>>?\s*\S+")
_SHELL_SYNTAX = re.compile(r"[\"'\\\x0b\x0c\x1c-\x1f]")
"""What makes shlex split a word otherwise than str.split does: a quote, a backslash, or a
whitespace character that shlex does not split on."""
_READERS = frozenset({"cat", "nl", "head", "tail", "less", "more", "grep", "rg", "view"})
_TEST_PROGRAMS = frozenset(
    {"pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "rspec", "phpunit"}
)
_TEST_SUBCOMMANDS = frozenset({"go", "cargo", "npm", "yarn", "pnpm", "make", "mix", "dotnet"})


def _path(text: str) -> str | None:
    """A file path as the run wrote it, made comparable: quotes, `./` and a workspace root
    dropped (`/workspace/a/b.py` and `a/b.py` are one file when the run used both)."""
    path = text.strip().strip("'\"")
    if not path or path.startswith("-") or any(c in path for c in "*?{}$<>|"):
        return None
    path = path.removeprefix("./")
    for root in ("/workspace/", "/testbed/", "/repo/", "/app/", "/code/"):
        if path.startswith(root):
            path = path[len(root) :]
    return path or None


def _looks_like_file(word: str) -> bool:
    name = word.rsplit("/", 1)[-1]
    return "." in name.strip(".") and not word.startswith(("-", "s/", "'s/", '"s/'))


def _arguments(given: Any) -> dict[str, Any]:
    if isinstance(given, str):
        try:
            given = orjson.loads(given)
        except orjson.JSONDecodeError:
            return {"input": given}
    return given if isinstance(given, dict) else {}


def call_files(name: str, given: Any) -> FileWork:
    """What an editing tool's call did to files."""
    tool = name.lower()
    arguments = _arguments(given)
    if tool == "apply_patch":
        return _patch(" ".join(str(v) for v in arguments.values() if isinstance(v, str)))
    paths = tuple(
        p for key in _PATH_KEYS if isinstance(v := arguments.get(key), str) if (p := _path(v))
    )
    if not paths:
        return NO_FILES
    if tool in _EDITOR_TOOLS:
        command = str(arguments.get("command", ""))
        if command == "view":
            return FileWork(reads=paths)
        if command == "create":
            return FileWork(writes=paths)
        return FileWork(edits=paths)
    if tool in _READ_TOOLS:
        return FileWork(reads=paths)
    if tool in _EDIT_TOOLS:
        return FileWork(edits=paths)
    if tool in _WRITE_TOOLS:
        return FileWork(writes=paths)
    return NO_FILES


def _patch(text: str) -> FileWork:
    edits: list[str] = []
    writes: list[str] = []
    for kind, name in _PATCH_FILE.findall(text):
        path = _path(name)
        if path:
            (edits if kind == "Update" else writes).append(path)
    return FileWork(edits=tuple(edits), writes=tuple(writes))


def _words(segment: str) -> list[str]:
    if segment.isascii() and _SHELL_SYNTAX.search(segment) is None:
        return segment.split()  # what shlex.split gives, some ten times faster
    try:
        return shlex.split(segment)
    except ValueError:  # an unclosed quote: split on spaces
        return segment.split()


def _is_test(words: list[str]) -> bool:
    program = words[0].rsplit("/", 1)[-1]
    if program.startswith("python") and len(words) > 2 and words[1] == "-m":
        program = words[2]
    if program in _TEST_PROGRAMS or "runtests" in program or program == "unittest":
        return True
    if program in _TEST_SUBCOMMANDS and "test" in words[1:3]:
        return True
    if program.startswith("python") and len(words) > 1:
        script = words[1].rsplit("/", 1)[-1]
        return script.startswith("test") and script.endswith(".py")
    return False


def shell_files(command: str) -> FileWork:
    """What a shell command did to files: `sed -i`/`perl -pi` edit in place, a redirection
    `>` writes a file whole (`>>` edits it), `cat`/`nl`/`head`/`tail`/`grep`/`sed -n` read,
    and a test runner (pytest, `go test`, `npm test`, `python test_x.py`, ...) runs tests."""
    if "*** Update File:" in command or "*** Add File:" in command:
        return _patch(command)
    # A here-document's body is data, not commands.
    text = _HEREDOC.sub(lambda m: m.group(3), command) if "<<" in command else command
    reads: list[str] = []
    edits: list[str] = []
    writes: list[str] = []
    test = False
    for segment in _SEGMENT.split(text):
        redirects = ">" in segment
        for target in _REDIRECT.findall(segment) if redirects else ():
            path = _path(target[1])
            if path and path != "/dev/null" and not path.startswith("&"):
                (edits if target[0] == ">>" else writes).append(path)
        unredirected = _REDIRECTION.sub(" ", segment) if redirects else segment
        words = [w for w in _words(unredirected) if w]
        while words and words[0] in ("sudo", "timeout", "env", "time", "cd"):
            words = words[1:] if words[0] != "cd" else []
        if not words:
            continue
        test = test or _is_test(words)
        program = words[0].rsplit("/", 1)[-1]
        if program not in ("sed", "perl") and program not in _READERS:
            continue  # no file it names is read or edited
        files = [p for w in words[1:] if _looks_like_file(w) and (p := _path(w))]
        if program in ("sed", "perl") and any(w.startswith("-i") or w == "-pi" for w in words):
            edits += files
        elif program == "sed" or program in _READERS:
            reads += files
    return FileWork(tuple(reads), tuple(edits), tuple(writes), test)
