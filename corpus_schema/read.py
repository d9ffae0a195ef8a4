"""Reading a finished corpus back: typed headers of every layer, with errors that name the file."""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import frontmatter
import orjson
import yaml
from frontmatter.default_handlers import YAMLHandler
from pydantic import BaseModel, ValidationError

from .errors import CorpusError, InputError, first_problem
from .layout import COMPILATION_DIR, INSIGHT_DIR, RAW_DIR, RAW_METADATA_NAME, parse_insight
from .records import Claim, CompilationHeader, CompilationSummary, InsightHeader, RawHeader
from .render import unescape

Header = TypeVar("Header", bound=BaseModel)


# What render writes on a header line: a bare word (render._PLAIN, never a YAML keyword), or
# JSON. Of JSON's numbers, only the forms YAML 1.1 reads as numbers too.
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*\Z")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+(?:e[-+][0-9]+)?)?\Z")
_KEY = re.compile(r"[a-z_][a-z0-9_]*\Z")
_YAML_WORDS = frozenset(("y", "n", "yes", "no", "on", "off", "true", "false", "null"))


def written_header(text: str) -> dict[str, Any] | None:
    """A header exactly as render.with_frontmatter writes it (`key: value` a line, each value
    a bare word or JSON), read without a YAML parser; None for anything else (edited by hand,
    or another writer), which the YAML parser then reads."""
    fields: dict[str, Any] = {}
    for line in text.strip("\n").split("\n"):
        key, sep, value = line.partition(": ")
        if not sep or not _KEY.match(key) or key in fields:
            return None
        first = value[:1]
        if first in ('"', "[", "{") or value in ("true", "false", "null") or _NUMBER.match(value):
            try:
                fields[key] = orjson.loads(value)
            except orjson.JSONDecodeError:
                return None
        elif _BARE.match(value) and value.lower() not in _YAML_WORDS:
            fields[key] = value
        else:
            return None
    return fields


class _FastYAML(YAMLHandler):
    """Headers wikitrace wrote are read as the JSON lines they are (written_header), many
    times faster than YAML; any other header by libyaml's loader."""

    def load(self, fm: str, **kwargs: Any) -> Any:
        fast = written_header(fm)
        if fast is not None:
            return fast
        kwargs.setdefault("Loader", getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        return yaml.load(fm, **kwargs)


_HANDLER = _FastYAML()


@dataclass
class Page(Generic[Header]):
    """One corpus file: its typed header, its markdown body, its path under the root."""

    rel: str
    header: Header
    body: str


def contained(root: Path, rel: str, *, resolved: bool = False) -> Path:
    """`root/rel`, refused unless it stays inside the corpus once links are resolved.

    Paths come from inside a corpus (headers, layout.json), and a corpus may be hostile.
    `resolved`: `root` is its real path already, resolved once by a caller that reads many
    pages of one version (not kept beyond that: a corpus pointer moves with each version).
    """
    # os.path rather than pathlib: this runs for every page a reader opens.
    base = os.fspath(root) if resolved else os.path.realpath(root)
    path = os.path.realpath(os.path.join(base, rel))
    if os.path.isabs(rel) or not (path == base or path.startswith(base.rstrip(os.sep) + os.sep)):
        raise CorpusError(f"{rel!r} leads outside the corpus at {root}; refusing to read it")
    return Path(path)


def read_page(root: Path, rel: str, model: type[Header], *, resolved: bool = False) -> Page[Header]:
    path = contained(root, rel, resolved=resolved)
    try:
        metadata, content = frontmatter.parse(path.read_text(encoding="utf-8"), handler=_HANDLER)
    except FileNotFoundError:
        raise CorpusError(f"{rel} is missing from the corpus at {root}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise CorpusError(f"{path}: cannot read its header ({error})") from None
    data = metadata.get("data")
    fields = _data_fields(root, data, path, resolved) if isinstance(data, str) else None
    return Page(rel=rel, header=_header(path, metadata, fields, model), body=content)


def page_of(rel: str, text: str, data: str | None, model: type[Header]) -> Page[Header]:
    """A page as `read_page` reads it, from its text and its data file's (`data`; None for a
    page of format 1): a page its writer still holds, not yet written."""
    try:
        metadata, content = frontmatter.parse(text, handler=_HANDLER)
        fields = orjson.loads(data) if data is not None else None
    except (yaml.YAMLError, orjson.JSONDecodeError) as error:
        raise CorpusError(f"{rel}: cannot read its header ({error})") from None
    return Page(rel=rel, header=_header(Path(rel), metadata, fields, model), body=content)


def _header(path: Path, metadata: dict[str, Any], fields: Any, model: type[Header]) -> Header:
    """A page's header (its data file's `fields` with it, for format 2), checked."""
    if not metadata:
        raise CorpusError(f"{path}: no frontmatter header (is this a wikitrace corpus file?)")
    if fields is not None:  # format 2: the fields the header leaves to its data file
        if not isinstance(fields, dict):
            raise CorpusError(f"{path}: its data file is not a JSON object")
        metadata = {**fields, **metadata}
    try:
        return model.model_validate(metadata)
    except ValidationError as error:
        where, message = first_problem(error)
        raise CorpusError(f"{path}: header field '{where}': {message}") from None


def _data_fields(root: Path, rel: str, page: Path, resolved: bool) -> dict[str, Any]:
    """The fields a page's data file holds (layout.data_rel), for its header."""
    path = contained(root, rel, resolved=resolved)
    try:
        fields = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise CorpusError(
            f"{page}: header field 'data' names {rel}, which is missing from the corpus at "
            f"{root}; run `wikitrace verify` on it"
        ) from None
    except (OSError, orjson.JSONDecodeError) as error:
        raise CorpusError(f"{path}: cannot read it as JSON ({error})") from None
    if not isinstance(fields, dict):
        raise CorpusError(f"{path}: expected a JSON object (the data of {page.name})")
    return fields


def _numbered(folder: Path, prefix: str, suffix: str) -> Iterator[str]:
    """Names `prefix` + digits + `suffix` in `folder`, by number; anything else (a stray
    `insight-0001 copy.md`) is not part of the corpus and `verify` names it. A folder of a
    million names is listed as one 8-byte number each (its value and its width), not a
    million strings."""
    pattern = re.compile(re.escape(prefix) + r"([0-9]{1,9})" + re.escape(suffix) + r"\Z")
    found = array("q")
    if folder.is_dir():
        with os.scandir(folder) as entries:
            for entry in entries:
                match = pattern.match(entry.name)
                if match:
                    digits = match.group(1)
                    # By number, then the longer spelling first (as the names sort).
                    found.append(int(digits) * 16 + 15 - len(digits))
    ordered = array("q", sorted(found))
    del found
    for code in ordered:
        number, width = code // 16, 15 - code % 16
        yield f"{prefix}{number:0{width}d}{suffix}"


def numbered(root: Path, layer: str) -> Iterator[str]:
    """The pages of a layer, in order, without reading them: `raw/step-0001/metadata.md`,
    `compilation/step-0001.md` or `insight/insight-0001.md`."""
    if layer == RAW_DIR:
        for name in _numbered(root / RAW_DIR, "step-", ""):
            yield f"{RAW_DIR}/{name}/{RAW_METADATA_NAME}"
        return
    prefix = "insight-" if layer == INSIGHT_DIR else "step-"
    for name in _numbered(root / layer, prefix, ".md"):
        yield f"{layer}/{name}"


def _layer(root: Path, layer: str, model: type[Header]) -> Iterator[Page[Header]]:
    """Every page of a layer, in its order."""
    base = Path(os.path.realpath(root))  # once, not for every page (see `contained`)
    for rel in numbered(base, layer):
        yield read_page(base, rel, model, resolved=True)


def runs(root: Path) -> Iterator[Page[RawHeader]]:
    """Every raw run's metadata, in step order."""
    return _layer(root, RAW_DIR, RawHeader)


def compilations(root: Path) -> Iterator[Page[CompilationHeader]]:
    return _layer(root, COMPILATION_DIR, CompilationHeader)


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
    return _layer(root, INSIGHT_DIR, InsightHeader)


def insight(root: Path, ident: str) -> Page[InsightHeader]:
    """One insight by id (`insight-0007` or `7`)."""
    try:
        number = parse_insight(ident)
    except ValueError as error:
        raise InputError(str(error)) from None
    for name in _numbered(root / INSIGHT_DIR, "insight-", ".md"):
        if int(name[len("insight-") : -len(".md")]) == number:
            return read_page(root, f"{INSIGHT_DIR}/{name}", InsightHeader)
    raise CorpusError(f"no insight {ident} in {root} (see {INSIGHT_DIR}/_index.md)")


def task_text(page: Page[RawHeader]) -> str:
    """The task of a raw run, from the body of its metadata.md (see raw_pages.raw_metadata)."""
    body = page.body
    start = body.find(_TASK_HEADING)
    end = body.rfind(_TURNS_HEADING)
    if start == -1 or end == -1 or end < start:
        raise CorpusError(f"{page.rel}: no '## Task' section")
    return _unfence(body[start + len(_TASK_HEADING) : end].strip())


def _unfence(text: str) -> str:
    """The text of a block `render.verbatim` wrote (a corpus from before it: as it is)."""
    first, _, rest = text.partition("\n")
    fence = first.removesuffix("text")
    if len(fence) < 3 or fence.strip("`") or not rest.endswith(fence):
        return text
    return rest[: -len(fence)].removesuffix("\n")


_TASK_HEADING = "## Task\n\n"
_TURNS_HEADING = "\n## Turns\n"


def guideline(page: Page[InsightHeader]) -> str:
    """The guideline of an insight, from the body of its page (see insight_pages.insight_files)."""
    body = page.body
    start = body.find(_GUIDELINE)
    end = body.find(_APPLIES, start)
    if start == -1 or end == -1:
        raise CorpusError(f"{page.rel}: no '**Guideline.**' paragraph")
    # Format 2 wraps the paragraph: each line escaped on its own (render.wrapped).
    return " ".join(unescape(body[start + len(_GUIDELINE) : end]).split())


_GUIDELINE = "**Guideline.** "
_APPLIES = "\n\n**Applies when.** "


def backed(claims: Sequence[Claim], numbers: list[int]) -> bool:
    """Whether a verified quote backs the claims an insight rests on (all, if it names none)."""
    return backed_by(claim_backing(claims), numbers)


def claim_backing(claims: Sequence[Claim]) -> list[bool]:
    """For each claim of a compilation, whether a verified quote backs it: all `backed`
    needs of the compilation."""
    return [any(evidence.verified for evidence in claim.evidence) for claim in claims]


def backed_by(backing: Sequence[bool], numbers: list[int]) -> bool:
    """`backed`, from the compilation's `claim_backing`."""
    chosen = [backing[n - 1] for n in numbers if 1 <= n <= len(backing)]
    return any(chosen or backing)
