"""A package's public names, each loaded from its module when first used (PEP 562)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs more to import than the drill-down tools: mypy only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def exports(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: a name in `homes` is imported from the
    submodule named there, and kept as an ordinary attribute from then on (so that a test may
    replace it); importing one part of the package then loads only what that part needs."""
    namespace = sys.modules[package].__dict__

    def load(name: str) -> Any:
        import importlib  # here: importing a package need not load it (the drill-down tools)

        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return load
