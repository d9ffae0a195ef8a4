"""What the fork server of a build's workers (compiler/workers.py) imports, and makes once
for all of them before they are forked: the redaction rules and their automaton, which each
worker's Redactor would otherwise make for itself (about 0.2 s of CPU a worker), and the
modules the finish's pages are made with. Imported by the fork server only."""

from __future__ import annotations

from wikitrace.search import saved  # noqa: F401  (the rankers' pages, counted by the workers)

from . import layers, layers_mined  # noqa: F401  (the mined lessons' pages, made by the workers)
from .redact_match import SecretMatcher

SecretMatcher()
