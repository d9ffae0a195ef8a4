"""How runs name the code project they worked in (RunRecord.project): one key for every log
format and for what a user types (`prompt --project`), so that one repository is one project
however its remote, folder or worktree was written.

A project is the repository: its git remote (`host/owner/repo`) when the log names one or
the folder's repository on this machine has one; else the name of the repository's main
folder (a git worktree belongs to its main repository: read from its `.git` file when the
folder exists here, recognised from the common worktree layouts when it does not); else the
folder's name. A temporary folder (/tmp/..., Python's `tmpXXXXXXXX`) is no project. A user's
alias map (`[projects]` in the user's settings file) joins the rest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

_REMOTE = re.compile(r"^(?:[a-z+]+://)?(?:[^@/]+@)?([^:/]+)[:/](.+?)(?:\.git)?$")
_TEMP_ROOTS = re.compile(
    r"^(?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)(?:/|$)"
    r"|[\\/]AppData[\\/]Local[\\/]Temp(?:[\\/]|$)",
    re.IGNORECASE,
)
"""Folders under these are temporary: a session run there worked in no project."""
_TEMP_NAME = re.compile(r"^(?:tmp[a-z0-9_]{8}|pytest-of-.+|pytest-\d+)$")
"""Python's mkdtemp names and pytest's: a folder made for one run."""
_WORKTREES_OF = re.compile(r"^(.+)[-.]worktrees?$", re.IGNORECASE)
"""A sibling folder holding a repository's worktrees: `app-worktrees/x`, `app.worktrees/x`."""
_WORKTREES = frozenset(["worktrees", ".worktrees", "worktree", ".worktree", "trees"])
"""A folder inside a repository (or its `.claude`, `.git`) holding its worktrees."""
_TOOL_HOMES = frozenset([".claude", ".git", ".codex", ".cursor", ".conductor", ".gemini"])
"""Folders of tools that keep worktrees under a repository's own folder."""
_CONFIG_BYTES = 1 << 16
"""The most of a `.git` file or config that is read: they are small."""


def project_named(given: str) -> str | None:
    """A project as a user names it (`prompt --project`): an existing folder is the project
    it holds (`project_at`), anything else a remote or a folder's name (`normal_project`)."""
    folder = Path(given).expanduser()
    return project_at(folder) if folder.is_dir() else normal_project(given)


def repository_at(folder: Path) -> str | None:
    """The repository a folder on this machine is in (from the folder up), as a project key:
    the remote `origin` (or the first remote) of its main repository, else the main folder's
    name; None when no `.git` is found. A worktree's `.git` file names its main repository
    (`gitdir: /main/.git/worktrees/x`, and `commondir`)."""
    try:
        folder = folder.resolve()
    except (OSError, RuntimeError):
        return None
    for place in (folder, *folder.parents):
        dot_git = place / ".git"
        try:
            if dot_git.is_dir():
                return _from_git_dir(dot_git, place)
            if dot_git.is_file():
                return _from_git_file(dot_git, place)
        except OSError:
            return None
    return None


def project_at(folder: Path) -> str | None:
    """The project a folder on this machine is in: its repository (`repository_at`), else
    the folder's path read as a log's (`project_of_folder`)."""
    return repository_at(folder) or project_of_folder(str(folder))


def _from_git_dir(git_dir: Path, main: Path) -> str:
    remote = _remote_in(git_dir / "config")
    return remote or main.name or str(main)


def _from_git_file(dot_git: Path, place: Path) -> str:
    """A worktree's or a submodule's `.git` file: `gitdir: PATH`."""
    found = re.match(r"gitdir:\s*(.+?)\s*$", _small_text(dot_git), re.MULTILINE)
    if not found:
        return place.name
    git_dir = Path(found.group(1))
    if not git_dir.is_absolute():
        git_dir = place / git_dir
    common = git_dir
    commondir = git_dir / "commondir"
    if commondir.is_file():
        common = Path(_small_text(commondir).strip())
        if not common.is_absolute():
            common = git_dir / common
    elif git_dir.parent.name == "worktrees":
        common = git_dir.parent.parent
    common = Path(_normal(common))
    main = common.parent if common.name == ".git" else place
    return _remote_in(common / "config") or main.name or str(main)


def _normal(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):
        return str(path)


def _small_text(path: Path) -> str:
    """The start of a small file; OSError for anything but a regular file (a log names the
    folder: a FIFO or a device there must not block or flood the build)."""
    if not path.is_file():
        raise OSError(f"{path}: not a regular file")
    with path.open("rb") as handle:
        return handle.read(_CONFIG_BYTES).decode(errors="replace")


def _remote_in(config: Path) -> str | None:
    """The URL of remote `origin` in a git config, else of its first remote, as a key."""
    try:
        text = _small_text(config)
    except OSError:
        return None
    remotes = re.findall(r'\[remote "([^"]+)"\]([^\[]*)', text)
    remotes.sort(key=lambda remote: remote[0] != "origin")
    for _, body in remotes:
        url = re.search(r"^\s*url\s*=\s*(\S+)", body, re.MULTILINE)
        if url:
            return normal_project(url.group(1))
    return None


def project_of_folder(path: str) -> str | None:
    """The project of a working folder a log names: its repository when the folder, or the
    main checkout of a worktree in a common layout (`app-worktrees/x`, `app/.worktrees/x`,
    `app/.claude/worktrees/x`, `.codex/worktrees/ID/app`), is on this machine; else None for
    a temporary folder; else that main folder's name; else the folder's last name."""
    text = path.strip().rstrip("/\\")
    parts = [part for part in re.split(r"[/\\]", text) if part]
    if not parts:
        return None
    layout = _layout_repository(parts)
    if text.startswith("/"):
        # A worktree removed since may still have its main checkout here.
        here = [Path(text)] + ([Path("/", *layout[1])] if layout and layout[1] else [])
        for folder in here:
            found = repository_at(folder) if folder.is_dir() else None
            if found is not None:
                return found
    if _TEMP_ROOTS.search(text) or any(_TEMP_NAME.match(part) for part in parts):
        return None
    return layout[0] if layout is not None else parts[-1]


def _layout_repository(parts: list[str]) -> tuple[str, list[str] | None] | None:
    """The main repository of a worktree path in a common layout, if it is one: its folder's
    name, and its path's parts when the layout says where it is."""
    for at, part in enumerate(parts):
        if part.lower() in _WORKTREES and at + 1 < len(parts) and at > 0:
            before = parts[at - 1]
            if before == ".codex" and at + 2 < len(parts):  # ~/.codex/worktrees/<id>/<repo>
                return parts[at + 2], None
            if before in _TOOL_HOMES:
                return (parts[at - 2], parts[: at - 1]) if at > 1 else None
            return before, parts[:at]
        sibling = _WORKTREES_OF.match(part)
        if sibling and at + 1 < len(parts):
            return sibling.group(1), [*parts[:at], sibling.group(1)]
        if part.lower() == "workspaces" and at > 0 and parts[at - 1].lower() == "conductor":
            return (parts[at + 1], None) if at + 1 < len(parts) else None
    return None


def claude_folder_project(name: str) -> str | None:
    """The project of a Claude Code project folder's name (`-home-me-app`: the working folder
    with every `/` and `.` written `-`): the folder it encodes when one on this machine does
    (its repository), else read as a path whose dashes were all slashes."""
    if not name.startswith("-") or len(name) < 2:
        return None
    decoded = _existing_folder(name)
    if decoded is not None:
        return project_at(decoded)
    return project_of_folder("/" + name[1:].replace("-", "/"))


def _existing_folder(name: str, limit: int = 2_000) -> Path | None:
    """The existing folder whose Claude Code name is `name`, tried from the root one name at
    a time (a `-` is a `/`, or a `-`, `.` or `_` of a name): at most `limit` folders read."""
    pieces = name[1:].split("-")
    tried = 0
    stack: list[tuple[Path, int]] = [(Path("/"), 0)]
    while stack and tried < limit:
        folder, used = stack.pop()
        if used == len(pieces):
            return folder
        for end in range(len(pieces), used, -1):
            for joiner in ("-", ".", "_"):
                tried += 1
                child = folder / joiner.join(pieces[used:end])
                if child.is_dir():
                    stack.append((child, end))
                if end - used == 1:
                    break
    return None


def gemini_key(folder: Path) -> str:
    """How runs of Gemini CLI are keyed when their log names no folder: its project hash,
    the sha256 of the folder it ran in (`project_of`)."""
    return "gemini:" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]


def folder_aliases(folder: Path, project: str) -> dict[str, str]:
    """Keys that are `project` when working in `folder`: the Gemini CLI hashes of the folder
    and of each folder above it up to its repository's root (Gemini CLI names a project by
    the folder it was started in)."""
    try:
        folder = folder.resolve()
    except (OSError, RuntimeError):
        return {}
    found: dict[str, str] = {}
    for place in (folder, *folder.parents):
        found[gemini_key(place)] = project
        if (place / ".git").exists():
            break
    else:
        return {gemini_key(folder): project}
    return found


def normal_project(given: str) -> str:
    """A project as runs are keyed by it: a git remote as host/owner/repo (ssh or https, with
    or without .git), a folder as its last name (`prompt --project .` names the current one)."""
    text = given.strip().rstrip("/\\")
    remote = _REMOTE.match(text)
    if remote and "." in remote.group(1) and not re.match(r"^[A-Za-z]:", text):
        return f"{remote.group(1).lower()}/{remote.group(2)}"
    return re.split(r"[/\\]", text)[-1] or text


def short_name(key: str) -> str:
    """A project key's repository name: `app` for `github.com/me/app` and for `app`."""
    return key.rsplit("/", 1)[-1].lower()


def matching_projects(
    given: str, known: Iterable[str], aliases: Mapping[str, str] | None = None
) -> frozenset[str]:
    """The project keys of `known` (the runs') that are the project a user named (`given`,
    a key): the same key; a remote and a folder's name of the same repository (a bare name
    matches any remote of that repository's name; two remotes must be equal); or keys
    the alias map (`aliases`: a key or name -> the project it is) makes one."""
    canonical = _canonical(aliases or {})
    want = canonical(given)
    found = set()
    for key in known:
        have = canonical(key)
        either_bare = "/" not in have or "/" not in want
        if have == want or (either_bare and short_name(have) == short_name(want)):
            found.add(key)
    return frozenset(found)


def _canonical(aliases: Mapping[str, str]) -> Callable[[str], str]:
    table = {normal_project(k).lower(): normal_project(v) for k, v in aliases.items()}

    def canonical(key: str) -> str:
        key, seen = normal_project(key), 0
        while key.lower() in table and seen < 8:  # a chain of aliases, not a loop
            key, seen = table[key.lower()], seen + 1
        return key

    return canonical
