"""What every command takes besides its own options: -v/-q after the command name too, and
--help-all, which shows the tuning options and the long description that --help leaves out;
and how options reach a command: made from the declared settings
(corpus_schema/setting_fields.py, `option`, `options`), a group of them as one typed value
(`option_group`).

`main.py` attaches these to each command as it is registered, so a new command has them
without asking. A command's help text may end its first screen with a line holding only
`\\f` (click's mark): what follows is shown by --help-all and in docs/cli.md.

Also an option whose help --help leaves out (`DetailedOption`), a declared setting with no
flag, set by a file or a variable only (`FileSetting`), and an old command name kept for a
release.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from wikitrace.corpus_schema.setting_fields import Setting

Command = TypeVar("Command", bound=Callable[..., Any])

COMMON = ("verbose", "quiet", "help_all")
"""The parameter names this module adds to every command."""


def plural(count: int, word: str) -> str:
    """`1 run`, `2 runs`: a count and its noun (regular plurals only)."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def set_verbosity(verbose: int, quiet: bool) -> None:
    """One stderr handler on wikitrace's logger, at the level -v (-vv) or -q asks for."""
    level = (
        logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    root = logging.getLogger("wikitrace")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def is_quiet() -> bool:
    """Whether -q was given (before the command name or after it)."""
    return bool(click.get_current_context().find_root().params.get("quiet"))


def _verbosity(ctx: click.Context, param: click.Parameter, value: int | bool) -> None:
    """-v or -q after the command: the same as before it (`wikitrace -v convert -v` is -vv)."""
    if not value or ctx.resilient_parsing:
        return
    root = ctx.find_root().params
    if param.name == "quiet":
        root["quiet"] = True
    else:
        root["verbose"] = int(root.get("verbose") or 0) + int(value)
    set_verbosity(int(root.get("verbose") or 0), bool(root.get("quiet")))


class DetailedOption(click.Option):
    """An option whose help has more than --help shows: `more` follows it with --help-all."""

    def __init__(self, *args: Any, more: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.more = more


def deprecated_command(command: click.Command, old: str, now: str) -> click.Command:
    """A command's old name, kept for a release so that scripts using it still work: hidden
    from --help and from the count of commands, it says on stderr, in one line, what it is
    now and then runs `command` as it is (same options, same output)."""
    alias = copy.copy(command)
    alias.name = old
    alias.hidden = True
    alias.params = list(command.params)
    run = command.callback
    assert run is not None

    @functools.wraps(run)
    def warn_then_run(*args: Any, **kwargs: Any) -> Any:
        click.echo(
            f"warning: `wikitrace {old}` is deprecated: it is now `wikitrace {now}`", err=True
        )
        return run(*args, **kwargs)

    alias.callback = warn_then_run
    return alias


def full_help(command: click.Command, ctx: click.Context) -> str:
    """The help with every option, hidden (tuning) ones included, and the whole description:
    what --help-all prints, and what a reference page should show."""
    shown = copy.copy(command)
    shown.help = (command.help or "").replace("\f", "", 1)
    params = []
    for param in command.params:
        if getattr(param, "hidden", False) or isinstance(param, DetailedOption):
            param = copy.copy(param)
            param.hidden = False  # type: ignore[attr-defined]
            if isinstance(param, DetailedOption) and param.more:
                param.help = f"{param.help} {param.more}"
        params.append(param)
    shown.params = params
    formatter = ctx.make_formatter()
    shown.format_help(ctx, formatter)
    format_file_settings(command, formatter)
    return formatter.getvalue().rstrip("\n")


def hidden_options(command: click.Command) -> list[click.Option]:
    """The options --help leaves out (the tuning ones, and deprecated spellings)."""
    return [p for p in command.params if isinstance(p, click.Option) and p.hidden]


def _help_all(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(full_help(ctx.command, ctx), color=ctx.color)
    ctx.exit()


def first_screen(text: str) -> str:
    """A command's help with only its summary (the first paragraph) and its examples before
    click's `\\f` mark, the other paragraphs after it: --help shows the few lines a person
    needs daily, --help-all and docs/cli.md the whole text."""
    shown, mark, rest = inspect.cleandoc(text).partition("\f")
    paragraphs = shown.strip("\n").split("\n\n")
    first = [paragraphs[0], *(p for p in paragraphs[1:] if p.startswith("\b\nExample"))]
    moved = [p for p in paragraphs[1:] if p not in first]
    if not moved:
        return inspect.cleandoc(text)
    after = "\n\n".join(moved) + (f"\n\n{rest.strip(chr(10))}" if mark else "")
    return "\n\n".join(first) + "\n\f\n\n" + after


def attach(command: click.Command) -> click.Command:
    """Give `command` (and each command of a group) -v, -q and, when it hides something,
    --help-all, and lay out its help as `first_screen` says. Returns it."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            attach(sub)
        return command
    if command.help:
        command.help = first_screen(command.help)
    have = {p.name for p in command.params}
    if "verbose" not in have:
        command.params.append(
            click.Option(
                ["-v", "--verbose"],
                count=True,
                expose_value=False,
                callback=_verbosity,
                help="More detail on stderr (-vv: debug).",
            )
        )
    if "quiet" not in have:
        command.params.append(
            click.Option(
                ["-q", "--quiet"],
                is_flag=True,
                expose_value=False,
                callback=_verbosity,
                help="Only errors on stderr.",
            )
        )
    hidden = len(hidden_options(command)) + len(file_settings(command))
    more = "\f" in (command.help or "") or any(
        isinstance(p, DetailedOption) and p.more for p in command.params
    )
    if (hidden or more) and "help_all" not in have:
        command.params.append(
            click.Option(
                ["--help-all"],
                is_flag=True,
                is_eager=True,
                expose_value=False,
                callback=_help_all,
                help="Show every option and all the text, and exit.",
            )
        )
    return command


# --- options made from declarations, and groups of options as one value ---------------------


def option_group(
    options: list[Callable[[Any], Any]], name: str, make: Callable[[dict[str, Any]], Any]
) -> Callable[[Command], Command]:
    """A decorator adding `options` to a command, which receives `make(values)` as `name`."""

    def decorate(function: Command) -> Command:
        keys: list[str] = []

        @functools.wraps(function)
        def command(*args: Any, **kwargs: Any) -> Any:
            values = {key: kwargs.pop(key) for key in keys}
            return function(*args, **{name: make(values)}, **kwargs)

        wrapped: Any = command
        for option in reversed(options):
            wrapped = option(wrapped)
        # The parameter names the group added: the newest entries of click's list.
        keys.extend(p.name for p in wrapped.__click_params__[-len(options) :] if p.name)
        return wrapped  # type: ignore[no-any-return]

    return decorate


def _type(setting: Setting) -> Any:
    """The click type of a setting's value."""
    bounded = setting.low is not None or setting.high is not None
    ends = {"min_open": setting.low_open, "max_open": setting.high_open}
    if setting.kind == "int":
        low, high = (None if end is None else int(end) for end in (setting.low, setting.high))
        return click.IntRange(low, high, **ends) if bounded else int
    if setting.kind == "float":
        return click.FloatRange(setting.low, setting.high, **ends) if bounded else float
    if setting.kind == "choice":
        return click.Choice(list(setting.choices))
    if setting.kind == "path":
        return click.Path(
            path_type=Path,
            file_okay=setting.path_is != "dir",
            dir_okay=setting.path_is != "file",
            exists=setting.exists,
        )
    return None


class FileSetting(click.Parameter):
    """A declared setting with no command-line flag (a tuning or test knob): its value comes
    from its environment variable, a settings file's key (click's default_map) or its
    default, checked by its type as an option's is. --help does not list it; --help-all and
    docs/settings.md do."""

    param_type_name = "setting"

    def __init__(self, setting: Setting, **kwargs: Any) -> None:
        super().__init__([setting.param], envvar=setting.variable, **kwargs)
        self.key = setting.key
        self.more = setting.more
        self.shown_default = None if setting.kind == "flag" else setting.default

    def _parse_decls(self, decls: Any, expose_value: bool) -> tuple[str, list[str], list[str]]:
        return str(decls[0]), [], []

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        """Nothing: the command line cannot give it."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return f"setting {self.key!r} (a settings file's key, or ${self.envvar})"

    def record(self) -> tuple[str, str]:
        """Its line in --help-all: the key and variable, then the help and default."""
        text = f"{self.help} {self.more}".strip()
        if isinstance(self.shown_default, bool):
            text += f" [default: {str(self.shown_default).lower()}]"
        elif self.shown_default is not None:
            text += f" [default: {self.shown_default}]"
        return f"{self.key} (${self.envvar})", text


def file_settings(command: click.Command) -> list[FileSetting]:
    """The settings of `command` that only a file or a variable sets."""
    return [p for p in command.params if isinstance(p, FileSetting)]


FILE_SETTINGS = "Settings with no flag (a settings file's key, or the variable)"
"""The heading --help-all and docs/cli.md list them under."""


def format_file_settings(command: click.Command, formatter: click.HelpFormatter) -> None:
    """`command`'s settings with no flag, as a section of its help (when it has any)."""
    found = file_settings(command)
    if found:
        with formatter.section(FILE_SETTINGS):
            formatter.write_dl([setting.record() for setting in found])


def option(setting: Setting, **extra: Any) -> Callable[[Any], Any]:
    """The click option of `setting` (a `FileSetting` when it has no flag); `extra` adds what
    only click knows (a callback, or the choices of a choice the declaration leaves to the
    CLI)."""
    if not setting.on_command_line:
        return _file_setting(setting, **extra)
    kwargs: dict[str, Any] = {"help": setting.help, "hidden": setting.hidden}
    if setting.kind == "flag":
        kwargs["is_flag"] = True
    else:
        kind = _type(setting)
        if kind is not None:
            kwargs["type"] = kind
        if setting.default is not None:
            kwargs.update(default=setting.default, show_default=True)
    for name in ("metavar", "envvar"):
        if getattr(setting, name) is not None:
            kwargs[name] = getattr(setting, name)
    if setting.multiple:
        kwargs["multiple"] = True
    if setting.required:
        kwargs["required"] = True
    if setting.more:
        kwargs.update(cls=DetailedOption, more=setting.more)
    kwargs.update(extra)
    return click.option(*setting.flags, setting.param, **kwargs)


def _file_setting(setting: Setting, **extra: Any) -> Callable[[Any], Any]:
    # One value each: a repeatable setting keeps its flag (a variable would need a separator).
    assert not setting.multiple, setting.key
    kind = _type(setting)
    kwargs: dict[str, Any] = {"help": setting.help}
    if setting.kind in ("flag", "switch"):
        kind = click.BOOL
        kwargs["default"] = bool(setting.default)
    elif setting.default is not None:
        kwargs["default"] = setting.default
    if kind is not None:
        kwargs["type"] = kind
    kwargs.update(extra)

    def decorate(function: Any) -> Any:
        param = FileSetting(setting, **kwargs)  # one for each command, as click.option makes
        if isinstance(function, click.Command):
            function.params.append(param)
        else:
            if not hasattr(function, "__click_params__"):
                function.__click_params__ = []
            function.__click_params__.append(param)
        return function

    return decorate


def options(
    settings: tuple[Setting, ...],
    name: str,
    make: Callable[[dict[str, Any]], Any],
    extra: dict[str, dict[str, Any]] | None = None,
) -> Callable[[Command], Command]:
    """A group of declared settings as one typed value `name` (see option_group); `extra` maps
    a setting's key to what `option` adds to it."""
    added = extra or {}
    return option_group([option(s, **added.get(s.key, {})) for s in settings], name, make)
