"""The on-disk format of a wikitrace corpus: records, paths, rendering, manifest and verify.

This package owns the format and imports nothing from the rest of wikitrace.
"""

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
