"""Turns trajectories into corpus files: input reading, redaction, offline and LLM compilation.

The names below are this package's public face. Each is loaded from its module when first
used, so that a command needing one part (`wikitrace convert` reads logs with `importers`)
does not load the rest: the build stages, the prompt templates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wikitrace.corpus_schema import exports

if TYPE_CHECKING:
    from .add import add_runs, add_version, supersede_added
    from .build import build_corpus
    from .compile import CompileError, CompileLimits
    from .offline import OFFLINE_MODEL
    from .report import BuildOptions, BuildReport

_HOMES = {
    "add_runs": "add",
    "add_version": "add",
    "build_corpus": "build",
    "supersede_added": "add",
    "CompileError": "compile",
    "CompileLimits": "compile",
    "OFFLINE_MODEL": "offline",
    "BuildOptions": "report",
    "BuildReport": "report",
}

__all__ = [
    "OFFLINE_MODEL",
    "BuildOptions",
    "BuildReport",
    "CompileError",
    "CompileLimits",
    "add_runs",
    "add_version",
    "build_corpus",
    "supersede_added",
]


__getattr__ = exports(__name__, _HOMES)
