"""How a group of options reaches a command as one typed value (`option_group`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

Command = TypeVar("Command", bound=Callable[..., Any])


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
