"""Prompt templates (package data) and the one jinja2 environment that renders them."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import jinja2
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


@functools.lru_cache(maxsize=8)
def environment(user_dir: Path | None = None) -> jinja2.Environment:
    """Templates from `user_dir` first (a user may override any of them), then ours. One
    environment a folder per process: it keeps each template compiled once (about 0.1 s each),
    which a first message per sample or per MCP call would otherwise pay again. Sandboxed: a
    template folder (a cloned repository's, say) reaches no Python attribute that runs code."""
    loaders: list[jinja2.BaseLoader] = []
    if user_dir is not None:
        loaders.append(jinja2.FileSystemLoader(user_dir))
    loaders.append(jinja2.FileSystemLoader(TEMPLATE_DIR))
    return jinja2.sandbox.SandboxedEnvironment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        # Loaded once: a template edited while a build runs would not match the hash the
        # corpus records for it (and checking each file's time costs a stat a render).
        auto_reload=False,
    )


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
