"""Reading a finished corpus back: typed headers of every layer, with errors that name the file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler
from pydantic import BaseModel, ValidationError

from .errors import CorpusError, first_problem
from .layout import COMPILATION_DIR, INSIGHT_DIR, RAW_DIR, RAW_METADATA_NAME, parse_insight
from .records import CompilationHeader, CompilationSummary, InsightHeader, RawHeader

Header = TypeVar("Header", bound=BaseModel)


class _FastYAML(YAMLHandler):
    """libyaml's loader reads the same YAML several times faster than the pure-Python one."""

    def load(self, fm: str, **kwargs: Any) -> Any:
        kwargs.setdefault("Loader", getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        return yaml.load(fm, **kwargs)


_HANDLER = _FastYAML()


@dataclass
class Page(Generic[Header]):
    """One corpus file: its typed header, its markdown body, its path under the root."""

    rel: str
    header: Header
    body: str


def read_page(root: Path, rel: str, model: type[Header]) -> Page[Header]:
    path = root / rel
    try:
        metadata, content = frontmatter.parse(path.read_text(encoding="utf-8"), handler=_HANDLER)
    except FileNotFoundError:
        raise CorpusError(f"{rel} is missing from the corpus at {root}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise CorpusError(f"{path}: cannot read its header ({error})") from None
    if not metadata:
        raise CorpusError(f"{path}: no frontmatter header (is this a wikitrace corpus file?)")
    try:
        header = model.model_validate(metadata)
    except ValidationError as error:
        where, message = first_problem(error)
        raise CorpusError(f"{path}: header field '{where}': {message}") from None
    return Page(rel=rel, header=header, body=content)


def _numbered(folder: Path, prefix: str, suffix: str) -> list[str]:
    names = [p.name for p in folder.glob(f"{prefix}*{suffix}")] if folder.is_dir() else []
    return sorted(names, key=lambda name: int(name[len(prefix) : len(name) - len(suffix)]))


def runs(root: Path) -> Iterator[Page[RawHeader]]:
    """Every raw run's metadata, in step order."""
    for name in _numbered(root / RAW_DIR, "step-", ""):
        yield read_page(root, f"{RAW_DIR}/{name}/{RAW_METADATA_NAME}", RawHeader)


def compilations(root: Path) -> Iterator[Page[CompilationHeader]]:
    for name in _numbered(root / COMPILATION_DIR, "step-", ".md"):
        yield read_page(root, f"{COMPILATION_DIR}/{name}", CompilationHeader)


def compilation_summaries(root: Path) -> Iterator[Page[CompilationSummary]]:
    """Every compilation's header without its claims, several times faster than compilations().

    `claims` is the header's last field (render.with_frontmatter keeps the model's order), so
    the header is cut where it starts and the claims are never parsed. The body is left empty.
    """
    for name in _numbered(root / COMPILATION_DIR, "step-", ".md"):
        rel = f"{COMPILATION_DIR}/{name}"
        path = root / rel
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CorpusError(f"{path}: cannot read it ({error})") from None
        end = text.find("\n---\n", 4)
        if not text.startswith("---\n") or end == -1:
            raise CorpusError(f"{path}: no frontmatter header (is this a wikitrace corpus file?)")
        header = text[4:end]
        cut = header.find("\nclaims:")
        try:
            metadata = _HANDLER.load(header if cut == -1 else header[:cut])
            summary = CompilationSummary.model_validate(metadata)
        except yaml.YAMLError as error:
            raise CorpusError(f"{path}: cannot read its header ({error})") from None
        except ValidationError as error:
            where, message = first_problem(error)
            raise CorpusError(f"{path}: header field '{where}': {message}") from None
        yield Page(rel=rel, header=summary, body="")


def insights(root: Path) -> Iterator[Page[InsightHeader]]:
    for name in _numbered(root / INSIGHT_DIR, "insight-", ".md"):
        yield read_page(root, f"{INSIGHT_DIR}/{name}", InsightHeader)


def insight(root: Path, ident: str) -> Page[InsightHeader]:
    """One insight by id (`insight-0007` or `7`)."""
    try:
        number = parse_insight(ident)
    except ValueError as error:
        raise CorpusError(str(error)) from None
    for name in _numbered(root / INSIGHT_DIR, "insight-", ".md"):
        if int(name[len("insight-") : -len(".md")]) == number:
            return read_page(root, f"{INSIGHT_DIR}/{name}", InsightHeader)
    raise CorpusError(f"no insight {ident} in {root} (see {INSIGHT_DIR}/_index.md)")


def task_text(page: Page[RawHeader]) -> str:
    """The task of a raw run, from the body of its metadata.md (see render.raw_metadata)."""
    body = page.body
    start = body.find(_TASK_HEADING)
    end = body.rfind(_TURNS_HEADING)
    if start == -1 or end == -1 or end < start:
        raise CorpusError(f"{page.rel}: no '## Task' section")
    return body[start + len(_TASK_HEADING) : end].strip()


_TASK_HEADING = "## Task\n\n"
_TURNS_HEADING = "\n## Turns\n"


def guideline(page: Page[InsightHeader]) -> str:
    """The guideline of an insight, from the body of its page (see render.insight)."""
    body = page.body
    start = body.find(_GUIDELINE)
    end = body.find(_APPLIES, start)
    if start == -1 or end == -1:
        raise CorpusError(f"{page.rel}: no '**Guideline.**' paragraph")
    return body[start + len(_GUIDELINE) : end].strip()


_GUIDELINE = "**Guideline.** "
_APPLIES = "\n\n**Applies when.** "
