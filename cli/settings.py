"""Settings from files: option values a user or a project keeps instead of typing them.

Where, from lowest to highest: the user's own file (`user_file()`, trusted), then a project's
file, found in the working folder or the nearest parent that has one (`wikitrace.toml`, else
the `[tool.wikitrace]` table of `pyproject.toml`). A project's file is read only once the user
trusts it (`wikitrace trust`, which records its path and hash: a changed file is untrusted
again), and even then only its safe keys (`REFUSED` lists the others and why). `--config PATH`
names a file to read instead of the project's, as the user's own (the user named it). A key is
an option's name without its dashes (`max-output-tokens`, `no-mine`, `fast-path = false`; `_`
for `-` is accepted); a top-level key applies to every command that has that option, a table
(`[build]`, `[gate]`, `[export.skill]`) to one command, and wins over a top-level key. Paths are
relative to the working directory.

What wins: the command line, then an option's environment variable (those that name one),
then the project's file, then the user's, then `--profile` (given on the command line or in a
file), then the built-in default. The files' values reach click as its `default_map`, so
`--help` shows them as the defaults. Every run that finds a settings file says on stderr, in
one line, which it read and which it ignored and why (`Sources.line`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import (
    SETTINGS,
)

from .common import COMMON, FileSetting

FILE_NAME = "wikitrace.toml"
PYPROJECT = "pyproject.toml"
USER_FILE_ENV = "WIKITRACE_USER_SETTINGS"
"""Where the user's settings file is, when not $XDG_CONFIG_HOME/wikitrace/wikitrace.toml."""
FROM_HOOK = "--from-hook"
SETTINGS_META = "wikitrace.settings"
"""The click context's note of the settings files read (or why none was): the hook logs it."""
PROJECTS = "projects"
"""A table of the user's file that is no command's (which project a name is)."""

REFUSED: dict[str, str] = {s.key: s.refused for s in SETTINGS if s.refused is not None}
"""Keys a project's settings file may not set, trusted or not, and why: a cloned repository
must not run its code, send the user's runs or keys elsewhere, switch redaction off, write
over the user's files or read theirs. The user's own file and the command line may."""
SAFE: frozenset[str] = frozenset(s.key for s in SETTINGS if s.refused is None)
"""Keys a trusted project's file may set: tuning, what to print, which built-in choice."""


class SettingsError(click.ClickException):
    """A settings file that cannot be used: exit 2, as for any bad input."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


MAX_BYTES = 1 << 20
"""A settings file larger than this is no settings file (and is not read into memory)."""
TRUST_FILE = "trusted.json"
"""In the user's settings folder: the project files the user trusts, each with its hash."""


@dataclass(frozen=True)
class SettingsFile:
    """A settings file found: where, and what messages call it; read only when `load`ed (a
    project's file that is not trusted is never parsed)."""

    path: Path
    where: str

    def load(self) -> dict[str, Any]:
        """Its table (a pyproject.toml's [tool.wikitrace])."""
        table = _read(self.path, self.where.removesuffix(" [tool.wikitrace]"))
        if self.path.name != PYPROJECT:
            return table
        tool = table.get("tool", {})
        if not isinstance(tool, dict) or not isinstance(tool.get("wikitrace"), dict):
            raise SettingsError(f"{self.path} has no [tool.wikitrace] table")
        return dict(tool["wikitrace"])


@dataclass
class Sources:
    """The settings files a run found: those read and those ignored (with why)."""

    read: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def line(self) -> str | None:
        """One line for stderr, or None when no settings file was found."""
        parts = [f"read {', '.join(self.read)}"] if self.read else []
        parts += [f"ignored {', '.join(self.ignored)}"] if self.ignored else []
        return f"settings: {'; '.join(parts)}" if parts else None


def _config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "wikitrace"


def user_file() -> Path:
    """The user's own settings file: $WIKITRACE_USER_SETTINGS, else
    $XDG_CONFIG_HOME/wikitrace/wikitrace.toml (~/.config/wikitrace/wikitrace.toml)."""
    given = os.environ.get(USER_FILE_ENV)
    return Path(given).expanduser() if given else _config_dir() / FILE_NAME


def trust_file() -> Path:
    """Where the trusted project files are recorded ($XDG_CONFIG_HOME/wikitrace/trusted.json)."""
    return _config_dir() / TRUST_FILE


def file_hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(_bytes(path, str(path))).hexdigest()


def trusted() -> dict[str, str]:
    """The project files the user trusts: absolute path -> the hash it had then."""
    path = trust_file()
    if not path.is_file():
        return {}
    try:
        import orjson

        data = orjson.loads(_bytes(path, str(path)))
        files = data["files"]
        assert isinstance(files, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise SettingsError(
            f"{path}: not a list of trusted files; remove it and trust each folder again"
        ) from None
    return {str(k): str(v) for k, v in files.items()}


def project_file(folder: Path) -> SettingsFile | None:
    """A project's settings file: in `folder` or the nearest parent that has one."""
    for place in (folder.absolute(), *folder.absolute().parents):
        own = place / FILE_NAME
        if own.is_file():
            return SettingsFile(own, _shown(own, folder))
        pyproject = place / PYPROJECT
        if pyproject.is_file() and _has_our_table(pyproject):
            return SettingsFile(pyproject, f"{_shown(pyproject, folder)} [tool.wikitrace]")
    return None


def _has_our_table(pyproject: Path) -> bool:
    """Whether a pyproject.toml has a [tool.wikitrace] table (one that does not parse but
    names it counts: trusted, its error is shown; untrusted, it is ignored unparsed)."""
    try:
        data = _bytes(pyproject, str(pyproject))
    except SettingsError:  # unreadable or over the limit: no settings of ours
        return False
    if b"wikitrace" not in data:
        return False
    try:
        tool = tomllib.loads(data.decode("utf-8")).get("tool", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return b"tool.wikitrace" in data
    return isinstance(tool, dict) and isinstance(tool.get("wikitrace"), dict)


def _shown(path: Path, folder: Path) -> str:
    """A path as messages give it: relative to the working folder when under it."""
    try:
        return str(path.relative_to(folder.absolute()))
    except ValueError:
        return str(path)


def named_file(config: Path) -> SettingsFile:
    """The file `--config` names (a pyproject.toml: its [tool.wikitrace] table)."""
    where = f"{config} [tool.wikitrace]" if config.name == PYPROJECT else str(config)
    return SettingsFile(config, where)


def find(config: Path | None, folder: Path) -> tuple[Path, str, dict[str, Any]] | None:
    """The project's settings file (or the one `config` names), what messages call it, and
    its table, trusted or not."""
    found = named_file(config) if config is not None else project_file(folder)
    return None if found is None else (found.path, found.where, found.load())


def _bytes(path: Path, name: str) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as error:
        raise SettingsError(f"{name}: cannot read it: {error.strerror or error}") from None
    if len(data) > MAX_BYTES:
        raise SettingsError(f"{name}: over {MAX_BYTES >> 20} MB: no settings file")
    return data


def _read(path: Path, name: str) -> dict[str, Any]:
    """The file's table; `name` is how messages call it (relative to the working directory)."""
    try:
        return tomllib.loads(_bytes(path, name).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SettingsError(f"{name}: not valid TOML: {error}") from None


def key_of(option: click.Option | FileSetting) -> str:
    """The name an option has in the file: its long flag without the dashes (a setting with
    no flag: its key)."""
    if isinstance(option, FileSetting):
        return option.key
    longs = [flag for flag in option.opts if flag.startswith("--")]
    return (longs[0] if longs else option.opts[0]).lstrip("-")


def settable(command: click.Command) -> dict[str, click.Option | FileSetting]:
    """The options of `command` a file may set, and its settings with no flag, by their name
    in the file."""
    return {
        key_of(p): p
        for p in command.params
        if isinstance(p, (click.Option, FileSetting)) and p.name not in COMMON and p.name != "help"
    }


def default_map(group: click.Group, config: Path | None, folder: Path) -> dict[str, Any] | None:
    """click's default_map for `group`'s commands from the settings files (see `settings`)."""
    return settings(group, config, folder)[0]


def shipped(group: click.Group, path: Path, where: str, only: str | None = None) -> dict[str, Any]:
    """click's default_map from a settings file shipped with wikitrace (a `--profile`), read
    and checked as the user's own are; with `only`, that command's table and the top-level
    keys alone (for a command run on its own, `group` holding it alone)."""
    table = _read(path, where)
    if only is not None:
        table = {k: v for k, v in table.items() if k == only or not isinstance(v, dict)}
    return _map(group, table, where)


def settings(
    group: click.Group, config: Path | None, folder: Path
) -> tuple[dict[str, Any] | None, Sources]:
    """click's default_map for `group`'s commands from the user's file and the project's (or
    the one `config` names), checked: an unknown table, key or value is an error naming the
    file, the table and the key. An untrusted project file, and a trusted one's unsafe keys,
    are left out and listed in the Sources."""
    sources = Sources()
    maps: list[dict[str, Any]] = []
    user = user_file()
    if user.is_file():
        maps.append(_map(group, _read(user, str(user)), str(user), skip=frozenset({PROJECTS})))
        sources.read.append(str(user))
    found = named_file(config) if config is not None else project_file(folder)
    if found is not None and config is not None:
        maps.append(_map(group, found.load(), found.where))
        sources.read.append(found.where)
    elif found is not None:
        known = trusted().get(str(found.path.absolute()))
        if known is None or known != file_hash(found.path):
            why = "this folder is not trusted" if known is None else "changed since trusted"
            sources.ignored.append(f"{found.where} ({why}: `wikitrace trust` reads its safe keys)")
        else:
            every = {key for _, command in _commands(group) for key in settable(command)}
            table, refused = _safe_part(found.load(), every, ())
            maps.append(_map(group, table, found.where))
            not_its = ", ".join(f"{key} ({why})" for key, why in refused)
            sources.read.append(found.where + (f", but not its {not_its}" if refused else ""))
    if not maps:
        return None, sources
    merged: dict[str, Any] = {}
    for mapped in maps:  # the project's over the user's
        _merge(merged, mapped)
    return merged, sources


def _safe_part(
    table: dict[str, Any], every: set[str], path: tuple[str, ...]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A project file's table without the keys it may not set, and those keys with why."""
    kept: dict[str, Any] = {}
    refused: list[tuple[str, str]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            kept[key], more = _safe_part(value, every, (*path, key))
            refused += more
        elif _key(key) in every and _key(key) not in SAFE:
            label = f"[{'.'.join(path)}] {key}" if path else key
            refused.append((label, REFUSED.get(_key(key), "it is not known to be safe")))
        else:
            kept[key] = value
    return kept, refused


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _map(
    group: click.Group, table: dict[str, Any], where: str, skip: frozenset[str] = frozenset()
) -> dict[str, Any]:
    table = {k: v for k, v in table.items() if k not in skip}
    shared = {k: v for k, v in table.items() if not isinstance(v, dict)}
    every = {key for _, command in _commands(group) for key in settable(command)}
    for key in shared:
        if _key(key) not in every:
            raise SettingsError(
                f"{where}: no command has a setting {key!r}{_near(_key(key), every)}; a top-level "
                "key is an option of some command, a table a command's name "
                f"({', '.join(sorted(group.commands))})"
            )
    return _group_map(group, table, {_key(k): v for k, v in shared.items()}, where, ())


def _group_map(
    group: click.Group,
    table: dict[str, Any],
    shared: dict[str, Any],
    where: str,
    path: tuple[str, ...],
) -> dict[str, Any]:
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    for name in tables:
        if name == PROJECTS and not path:
            raise SettingsError(
                f"{where}: [{PROJECTS}] is read only from the user's settings file "
                f"({user_file()}): a file in the working folder is not trusted to say which "
                "project is which"
            )
        if name not in group.commands:
            label = f"[{'.'.join((*path, name))}]"
            raise SettingsError(
                f"{where}: {label} is no command{_near(name, set(group.commands))}; the "
                f"tables are: {', '.join(sorted(group.commands))}"
            )
    mapped: dict[str, Any] = {}
    for name, command in group.commands.items():
        own = tables.get(name, {})
        default = getattr(command, "default_command", None)
        if default is not None:
            # `[lift] json = true` is for `wikitrace lift RESULTS...`, the group's own command.
            parts = {k: v for k, v in own.items() if isinstance(v, dict)}
            scalars = {k: v for k, v in own.items() if not isinstance(v, dict)}
            own = {**parts, default: {**scalars, **parts.get(default, {})}}
        if isinstance(command, click.Group):
            mapped[name] = _group_map(command, own, shared, where, (*path, name))
        else:
            mapped[name] = _command_map(command, own, shared, where, (*path, name))
    return mapped


def _command_map(
    command: click.Command,
    table: dict[str, Any],
    shared: dict[str, Any],
    where: str,
    path: tuple[str, ...],
) -> dict[str, Any]:
    options = settable(command)
    label = f"[{'.'.join(path)}]"
    values: dict[str, tuple[str, Any]] = {
        key: ("", value) for key, value in shared.items() if key in options
    }
    for key, value in table.items():
        if _key(key) not in options:
            raise SettingsError(
                f"{where}: {label} has no setting {key!r}{_near(_key(key), set(options))}; "
                f"the settings of `{' '.join(path)}` are: {', '.join(sorted(options))}"
            )
        values[_key(key)] = (label, value)
    ctx = click.Context(command, info_name=path[-1])
    mapped: dict[str, Any] = {}
    for key, (table_label, value) in values.items():
        option = options[key]
        said = f"{where}: {table_label + ' ' if table_label else ''}{key}"
        if option.multiple and not isinstance(value, list):
            raise SettingsError(f"{said}: give a list ([...]): it takes several values")
        try:
            option.type_cast_value(ctx, value)
        except click.BadParameter as error:
            raise SettingsError(f"{said}: {error.format_message()}") from None
        assert option.name is not None
        mapped[option.name] = value
    return mapped


def _commands(group: click.Group) -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found.extend(((name, *path), sub) for path, sub in _commands(command))
        else:
            found.append(((name,), command))
    return found


def _key(key: str) -> str:
    return key.replace("_", "-")


def _near(key: str, names: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def user_projects() -> dict[str, str]:
    """The `[projects]` table of the user's settings file: a name, remote or folder -> the
    project it is (`"spotter-a0y" = "spotter"`); empty when there is no such file or table.
    Only the user's file is read: one in the working folder could make another project's
    lessons pass for this one's."""
    path = user_file()
    if not path.is_file():
        return {}
    table = _read(path, str(path)).get(PROJECTS, {})
    if not isinstance(table, dict):
        raise SettingsError(f'{path}: [{PROJECTS}] must be a table of name = "project"')
    for name, project in table.items():
        if not isinstance(project, str) or not project.strip():
            raise SettingsError(
                f"{path}: [{PROJECTS}] {name}: give the project it is, as a string "
                '(`"spotter-a0y" = "spotter"`)'
            )
    return {str(name): str(project) for name, project in table.items()}


def trust(
    group: click.Group, folder: Path, *, remove: bool = False
) -> tuple[SettingsFile, list[tuple[str, str]]]:
    """Record (or with `remove`, forget) the project settings file found from `folder`, with
    its hash, as the user's say that its safe keys may be read; the keys it has that are still
    refused, with why. Raises SettingsError when no project file is found."""
    from wikitrace.corpus_schema.writing import atomic_write

    found = project_file(folder)
    if found is None:
        raise SettingsError(
            f"no {FILE_NAME} or [tool.wikitrace] table of {PYPROJECT} in {folder.absolute()} "
            "or a folder above it: nothing to trust"
        )
    refused: list[tuple[str, str]] = []
    if not remove:  # a file that does not parse is not trusted
        every = {name for _, command in _commands(group) for name in settable(command)}
        refused = _safe_part(found.load(), every, ())[1]
    files = trusted()
    key = str(found.path.absolute())
    if remove:
        files.pop(key, None)
    else:
        files[key] = file_hash(found.path)
    import orjson

    store = trust_file()
    store.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "files": dict(sorted(files.items()))}
    atomic_write(store, orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    return found, refused
