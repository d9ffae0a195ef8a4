"""The on-disk format of a wikitrace corpus: records, paths, rendering, manifest and verify.

This package owns the format and imports nothing from the rest of wikitrace. Each name below
is loaded from its module when first used (PEP 562: `exports`, which the `compiler` and
`versions` packages use too), so that reading one part (an error class, a path) does not load
the typed records (pydantic) or the rendering.
"""

from __future__ import annotations

import sys

# typing costs more to import than the drill-down tools (drilldown.py, a module of this
# package that a corpus carries as is): mypy only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .errors import CorpusError, InputError, WikitraceError
    from .layout import FORMAT_NAME, FORMAT_VERSION, Layout, id_width, parse_insight, parse_step
    from .manifest import Manifest, VerifyReport, verify
    from .records import (
        JUDGED,
        Claim,
        Compilation,
        Evidence,
        InsightDraft,
        PromptRef,
        RunRecord,
        ToolCall,
        Turn,
        is_judged,
    )

_HOMES = {
    "CorpusError": "errors",
    "InputError": "errors",
    "WikitraceError": "errors",
    "FORMAT_NAME": "layout",
    "FORMAT_VERSION": "layout",
    "Layout": "layout",
    "id_width": "layout",
    "parse_insight": "layout",
    "parse_step": "layout",
    "Manifest": "manifest",
    "VerifyReport": "manifest",
    "verify": "manifest",
    "JUDGED": "records",
    "Claim": "records",
    "Compilation": "records",
    "Evidence": "records",
    "InsightDraft": "records",
    "PromptRef": "records",
    "RunRecord": "records",
    "ToolCall": "records",
    "Turn": "records",
    "is_judged": "records",
}

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "JUDGED",
    "Claim",
    "Compilation",
    "CorpusError",
    "Evidence",
    "InputError",
    "InsightDraft",
    "Layout",
    "Manifest",
    "PromptRef",
    "RunRecord",
    "ToolCall",
    "Turn",
    "VerifyReport",
    "WikitraceError",
    "id_width",
    "is_judged",
    "parse_insight",
    "parse_step",
    "verify",
]


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


__getattr__ = exports(__name__, _HOMES)
