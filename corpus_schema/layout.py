"""Where every file of a corpus lives: the only place that spells a corpus path."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

FORMAT_NAME = "wikitrace-corpus"
FORMAT_VERSION = 2
"""2: an insight's or compilation's header holds short fields and names its `data` file (its
claims, evidence, counts, hypothesis and applicability, as JSON), which the page's body shows
once, as lines; 1: the header held them too, as JSON lines. Both are read (`read.read_page`);
a version made from one of format 1 keeps the pages it does not rewrite as they were."""
READ_FORMAT_VERSIONS = (1, 2)
"""The format versions this wikitrace reads."""
MIN_ID_WIDTH = 4
MAX_ID_WIDTH = 9
"""Ids have at most nine digits (`parse_step`): a manifest or tools/layout.json naming a wider
id is damaged or tampered with, and would have the tools pad ids to any length."""

MANIFEST = "manifest.json"
MANIFESTS_DIR = "manifests"
"""Where a version made from another keeps its ancestors' manifests (`manifests/v0003.json`,
the parent's manifest.json linked in): its own manifest lists only what changed since its
parent's (corpus_schema/manifest.py, `Manifest.parent_manifest`)."""
RAW_DIR = "raw"
COMPILATION_DIR = "compilation"
INSIGHT_DIR = "insight"
GATE_DIR = "gate"
DATA_DIR = "data"
"""What the tools read of a page but a person need not: `data/insight/insight-NNNN.json` and
`data/compilation/step-NNNN.json` (the page's header names it as `data`), kept out of the
layers' folders so that grepping them finds each fact once, on the page."""
"""Decisions of the admission gate and of monitoring, and the runs or reports behind them."""
INDEXED_LAYERS = (RAW_DIR, COMPILATION_DIR, INSIGHT_DIR)
"""The layers with an index of their own (`LAYER/_index.md`)."""
INDEX_NAME = "_index.md"
"""The index of the corpus (at its root) and of each layer."""
INDEX_PARTS = "_index"
"""A layer's folder of index parts, when its index has more rows than one page holds."""
RAW_METADATA_NAME = "metadata.md"
RAW_TURNS_NAME = "solver.full.jsonl"
RAW_TURN_INDEX_NAME = "solver.index.jsonl"
MINED_PATTERNS = f"{RAW_DIR}/_patterns.jsonl"
"""One line per run: the action patterns it shows and the turn of each (compiler/mine.py), so
that `add` mines across the whole corpus without reading every run again. Written whole by
versions before its pages (`mined_patterns_page`); still read."""
MINED_PATTERNS_PAGE_RUNS = 2048
"""Runs in a full page of the mined patterns: a full page never changes, so a version made
from another links its parent's full pages."""
MINED_TESTS = f"{RAW_DIR}/_contrast_tests.json"
"""What mining tested of each task type (corpus_schema/contrast_tests.py): every pattern's
p-value, so that `add` recounts only the task types its runs touch."""
CATALOG = "catalog.jsonl"
"""What test-time readers need of every run and shown insight, one JSON line each, written
when a version is made (catalog_build.py; read back by catalog.py), so that they read one
file, not every page."""
CATALOG_INDEX = "catalog-index.json"
"""Where each of the catalog's lines starts and which are each project's (catalog_index.py):
a reader of one project's runs and lessons reads their lines alone."""
CATALOG_RUNS = "catalog"
"""The folder of a catalog's runs (version 3), in pages of CATALOG_PAGE_RUNS:
`catalog/runs-0001.jsonl`, ... A full page never changes, so a version made from another
links its parent's full pages whose runs it keeps."""
CATALOG_PAGE_RUNS = 2048
"""Runs in a full page of a catalog."""


def mined_patterns_page(number: int) -> str:
    """Page `number` (from 1) of the mined patterns: `raw/_patterns-0001.jsonl`, ..., the
    runs in step order, MINED_PATTERNS_PAGE_RUNS a page."""
    return f"{RAW_DIR}/_patterns-{number:04d}.jsonl"


def mined_patterns_files(files: Iterable[str]) -> list[str]:
    """The files of a version's mined patterns among its `files`, in order: its pages, or
    the one file versions before them wrote (none: built before mining)."""
    prefix = f"{RAW_DIR}/_patterns-"
    pages = sorted(
        (rel for rel in files if rel.startswith(prefix) and rel.endswith(".jsonl")),
        key=lambda rel: int(rel[len(prefix) : -len(".jsonl")]),
    )
    if pages:
        return pages
    return [rel for rel in files if rel == MINED_PATTERNS]


def catalog_page_rel(number: int) -> str:
    """Page `number` (from 1) of a catalog's runs."""
    return f"{CATALOG_RUNS}/runs-{number:04d}.jsonl"


def is_catalog_page(rel: str) -> bool:
    """Whether `rel` is a page of a catalog's runs."""
    return rel.startswith(f"{CATALOG_RUNS}/")


def is_ranker_file(rel: str) -> bool:
    """Whether `rel` is a file of a saved ranker (`SEARCH_DIR`)."""
    return rel.startswith(f"{SEARCH_DIR}/")


SEARCH_DIR = "search"
"""BM25 indexes over the catalog's texts, written with it so that test-time readers load them
instead of building them (search/rank.py): `search/tasks/` and `search/insights/`, each with
`texts.json` (how many texts it ranks), its postings in pages and its stats (`counts.py`),
from which a query computes the scores (a version saved before the postings holds bm25s's
saved index and its word counts in pages instead)."""
TOOLS_DIR = "tools"
TOOLS_LAYOUT = f"{TOOLS_DIR}/layout.json"
TOOL_NAMES = ("actions", "turn")

# ASCII digits only, nothing around them: an Arabic-Indic one or ` 1` is no id.
_STEP_RE = re.compile(r"^(?:step-)?([0-9]{1,9})\Z")
_INSIGHT_RE = re.compile(r"^(?:insight-)?([0-9]{1,9})\Z")


def id_width(count: int) -> int:
    """Digits needed so that every id up to `count` sorts in numeric order."""
    return max(MIN_ID_WIDTH, len(str(max(count, 0))))


def step_id(step: int, width: int = MIN_ID_WIDTH) -> str:
    return f"step-{step:0{width}d}"


def insight_id(number: int, width: int = MIN_ID_WIDTH) -> str:
    return f"insight-{number:0{width}d}"


def decision_id(kind: str, number: int) -> str:
    """`gate-0003`, `monitor-0004`: a decision record under gate/, numbered across kinds."""
    return f"{kind}-{number:0{MIN_ID_WIDTH}d}"


def parse_step(text: str) -> int:
    """`step-0042`, `step-42` or `42` -> 42; anything else is a ValueError."""
    match = _STEP_RE.match(text)
    if not match:
        raise ValueError(f"not a step id: {text!r} (expected step-NNNN or a number)")
    return int(match.group(1))


def with_catalog(rel: str) -> bool:
    """Whether `rel` is the catalog or one of its rankers: what every version and view writes
    anew from its own pages, never takes from the version it is made from."""
    return rel in (CATALOG, CATALOG_INDEX) or rel.startswith((f"{SEARCH_DIR}/", f"{CATALOG_RUNS}/"))


def parse_insight(text: str) -> int:
    match = _INSIGHT_RE.match(text)
    if not match:
        raise ValueError(f"not an insight id: {text!r} (expected insight-NNNN or a number)")
    return int(match.group(1))


@dataclass(frozen=True)
class Layout:
    """Paths of one corpus, relative to its root (as links) or absolute (for I/O)."""

    root: Path
    step_width: int = MIN_ID_WIDTH
    insight_width: int = MIN_ID_WIDTH

    # Relative paths: what corpus files link to, so a corpus works wherever it is mounted.
    def step(self, step: int) -> str:
        return step_id(step, self.step_width)

    def insight(self, number: int) -> str:
        return insight_id(number, self.insight_width)

    def raw_dir_rel(self, step: int) -> str:
        return f"{RAW_DIR}/{self.step(step)}"

    def raw_metadata_rel(self, step: int) -> str:
        return f"{self.raw_dir_rel(step)}/{RAW_METADATA_NAME}"

    def raw_turns_rel(self, step: int) -> str:
        return f"{self.raw_dir_rel(step)}/{RAW_TURNS_NAME}"

    def raw_turn_index_rel(self, step: int) -> str:
        return f"{self.raw_dir_rel(step)}/{RAW_TURN_INDEX_NAME}"

    def tool_rel(self, name: str) -> str:
        return f"{TOOLS_DIR}/{name}"

    def compilation_rel(self, step: int) -> str:
        return f"{COMPILATION_DIR}/{self.step(step)}.md"

    def insight_rel(self, number: int) -> str:
        return f"{INSIGHT_DIR}/{self.insight(number)}.md"

    def insight_data_rel(self, number: int) -> str:
        return data_rel(self.insight_rel(number))

    def compilation_data_rel(self, step: int) -> str:
        return data_rel(self.compilation_rel(step))

    @staticmethod
    def index_rel(layer: str | None = None) -> str:
        return INDEX_NAME if layer is None else f"{layer}/{INDEX_NAME}"

    @staticmethod
    def index_part_rel(layer: str, name: str) -> str:
        return f"{layer}/{INDEX_PARTS}/{name}.md"

    @staticmethod
    def is_index(rel: str) -> bool:
        """The root index, a layer's index or a part of one: written anew by every version."""
        parts = rel.split("/")
        if len(parts) == 1:
            return rel == INDEX_NAME
        return parts[0] in INDEXED_LAYERS and (
            parts[1:] == [INDEX_NAME] or (len(parts) == 3 and parts[1] == INDEX_PARTS)
        )

    def path(self, rel: str) -> Path:
        return self.root / rel


def data_rel(page_rel: str) -> str:
    """The data file of a page: `insight/insight-0001.md` -> `data/insight/insight-0001.json`."""
    return f"{DATA_DIR}/{page_rel.removesuffix('.md')}.json"


def link(target_rel: str, from_rel: str, text: str | None = None) -> str:
    """A markdown link that shows the root-relative path and resolves from the linking file.

    Agents read the text (a path under the corpus root); markdown viewers follow the target.
    """
    depth = from_rel.count("/")
    href = "../" * depth + target_rel
    return f"[{text or target_rel}]({href})"
