"""Prompt templates (package data) and the one jinja2 environment that renders them."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
import jinja2.meta
import jinja2.sandbox

TEMPLATE_DIR = Path(__file__).parent
COMPILE_SUCCESS = "compile-success.j2"
COMPILE_FAILURE = "compile-failure.j2"
RETRY_INVALID = "retry-invalid.j2"
REPAIR_QUOTES = "repair-quotes.j2"
NARROW = "narrow.j2"
HYPOTHESIZE = "hypothesize.j2"
JUDGE = "judge.j2"
ATTRIBUTE = "attribute.j2"
DRILLDOWNS = "drilldowns.j2"
SUPERSEDE = "supersede.j2"


class _Sandbox(jinja2.sandbox.SandboxedEnvironment):
    """jinja2's sandbox, its answer for each kind of object and attribute name kept: whether
    an attribute is safe depends on them alone (`is_internal_attribute` reads the object's
    type and the name), and a compile prompt reads some fifty attributes of each run's turns,
    each checked anew by jinja2 (some 0.02 ms of a prompt's 0.25: docs/scale.md)."""

    KEPT = 4096

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._safe: dict[tuple[type, str], bool] = {}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        kind = type(obj)
        if obj.__class__ is not kind:  # says it is of another class: isinstance would believe it
            return super().is_safe_attribute(obj, attr, value)
        safe = self._safe.get((kind, attr))
        if safe is None:
            if len(self._safe) >= self.KEPT:
                self._safe.clear()
            safe = self._safe[kind, attr] = super().is_safe_attribute(obj, attr, value)
        return safe


@functools.lru_cache(maxsize=8)
def environment(user_dir: Path | None = None, compiled: Path | None = None) -> jinja2.Environment:
    """Templates from `user_dir` first (a user may override any of them), then ours. One
    environment a folder per process: it keeps each template compiled once (about 0.1 s each),
    which a first message per sample or per MCP call would otherwise pay again. Sandboxed: a
    template folder (a cloned repository's, say) reaches no Python attribute that runs code.
    `compiled`: a folder of the user's own where each template, compiled once, is kept for the
    next process (a hook's recall, a new process at every prompt: `CompiledTemplates`)."""
    loaders: list[jinja2.BaseLoader] = []
    if user_dir is not None:
        loaders.append(jinja2.FileSystemLoader(user_dir))
    loaders.append(jinja2.FileSystemLoader(TEMPLATE_DIR))
    made = _Sandbox(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        # Loaded once: a template edited while a build runs would not match the hash the
        # corpus records for it (and checking each file's time costs a stat a render).
        auto_reload=False,
    )
    if compiled is not None and (cache := CompiledTemplates.at(compiled, made)) is not None:
        made.bytecode_cache = cache
    return made


class CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """Templates compiled once, kept in a folder of the user's own for the next process: jinja2
    finds a template's file by its name and keeps it only while its source is the same (a
    checksum) and jinja2 and Python are (its magic); the file's name also holds the settings
    the environment compiles with. A file that cannot be read or written is compiled anew:
    the cache never stops a render."""

    @classmethod
    def at(cls, folder: Path, made: jinja2.Environment) -> CompiledTemplates | None:
        """The cache in `folder`, made (for the user alone) if missing; None when it cannot be
        made, or is not the user's alone: what it holds is loaded as code."""
        try:
            folder.mkdir(mode=stat.S_IRWXU, parents=True, exist_ok=True)
            found = os.lstat(folder)
        except OSError:
            return None
        if (
            not stat.S_ISDIR(found.st_mode)
            or found.st_uid != os.getuid()
            or stat.S_IMODE(found.st_mode) & (stat.S_IRWXG | stat.S_IRWXO)
        ):
            return None
        settings = repr(
            (
                jinja2.__version__,
                type(made).__qualname__,
                made.undefined.__qualname__,
                made.autoescape,
                made.keep_trailing_newline,
                made.trim_blocks,
                made.lstrip_blocks,
                made.newline_sequence,
                made.optimized,
                made.block_start_string,
                made.variable_start_string,
                made.comment_start_string,
                made.line_statement_prefix,
            )
        )
        key = hashlib.sha256(settings.encode()).hexdigest()[:16]
        return cls(str(folder), f"%s-{key}.jinja")

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def source_hash(env: jinja2.Environment, name: str) -> str:
    """sha256 over a template's source and every template it extends or includes."""
    digest = hashlib.sha256()
    pending, seen = [name], set()
    while pending:
        current = pending.pop(0)
        if current in seen:
            continue
        seen.add(current)
        assert env.loader is not None
        source, _, _ = env.loader.get_source(env, current)
        digest.update(current.encode() + b"\0" + source.encode() + b"\0")
        pending += sorted(
            ref for ref in jinja2.meta.find_referenced_templates(env.parse(source)) if ref
        )
    return digest.hexdigest()
