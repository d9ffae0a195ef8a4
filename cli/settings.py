"""Settings from a file: option values a project keeps instead of typing them each time.

Where: the file `--config PATH` names; else `wikitrace.toml` in the working directory; else
the `[tool.wikitrace]` table of the working directory's `pyproject.toml`. The first found is
read, the others never. A key is an option's name without its dashes (`max-output-tokens`,
`no-mine`, `call-worker = false`; `_` for `-` is accepted); a top-level key applies to every
command that has that option, a table (`[build]`, `[gate]`, `[export.skill]`) to one command,
and wins over a top-level key. Paths are relative to the working directory.

What wins: the command line, then an option's environment variable (those that name one),
then this file, then `--profile` (given on the command line or in this file), then the
built-in default. The file's values reach click as its `default_map`, so `--help` shows
them as the defaults.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

import click

from .common import COMMON

FILE_NAME = "wikitrace.toml"
PYPROJECT = "pyproject.toml"
PROJECTS = "projects"
"""The table of the user's settings file that joins names to projects (`user_projects`)."""
USER_FILE_ENV = "WIKITRACE_USER_SETTINGS"
"""Where the user's settings file is, when not $XDG_CONFIG_HOME/wikitrace/wikitrace.toml."""


class SettingsError(click.ClickException):
    """A settings file that cannot be used: exit 2, as for any bad input."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def find(config: Path | None, folder: Path) -> tuple[Path, str, dict[str, Any]] | None:
    """The settings file to read, what its settings are called in messages, and its table."""
    if config is not None:
        table = _read(config, str(config))
        if config.name != PYPROJECT:
            return config, str(config), table
        if "wikitrace" not in table.get("tool", {}):
            raise SettingsError(f"{config} has no [tool.wikitrace] table")
        return config, f"{config} [tool.wikitrace]", table["tool"]["wikitrace"]
    if (folder / FILE_NAME).is_file():
        return folder / FILE_NAME, FILE_NAME, _read(folder / FILE_NAME, FILE_NAME)
    if (folder / PYPROJECT).is_file():
        tool = _read(folder / PYPROJECT, PYPROJECT).get("tool", {})
        if isinstance(tool, dict) and isinstance(tool.get("wikitrace"), dict):
            return folder / PYPROJECT, f"{PYPROJECT} [tool.wikitrace]", tool["wikitrace"]
    return None


def _read(path: Path, name: str) -> dict[str, Any]:
    """The file's table; `name` is how messages call it (relative to the working directory)."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{name}: not valid TOML: {error}") from None
    except OSError as error:
        raise SettingsError(f"{name}: cannot read it: {error.strerror or error}") from None


def key_of(option: click.Option) -> str:
    """The name an option has in the file: its long flag without the dashes."""
    longs = [flag for flag in option.opts if flag.startswith("--")]
    return (longs[0] if longs else option.opts[0]).lstrip("-")


def settable(command: click.Command) -> dict[str, click.Option]:
    """The options of `command` a file may set, by their name in the file."""
    return {
        key_of(p): p
        for p in command.params
        if isinstance(p, click.Option) and p.name not in COMMON and p.name != "help"
    }


def default_map(group: click.Group, config: Path | None, folder: Path) -> dict[str, Any] | None:
    """click's default_map for `group`'s commands from the settings file, checked: an unknown
    table, key or value is an error naming the file, the table and the key."""
    found = find(config, folder)
    if found is None:
        return None
    _, where, table = found
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
            raise SettingsError(f"{said}: give a list ([...]): --{key} may be given more than once")
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


def user_file() -> Path:
    """The user's own settings file: $WIKITRACE_USER_SETTINGS, else
    $XDG_CONFIG_HOME/wikitrace/wikitrace.toml (~/.config/wikitrace/wikitrace.toml)."""
    given = os.environ.get(USER_FILE_ENV)
    if given:
        return Path(given).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "wikitrace" / FILE_NAME


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
