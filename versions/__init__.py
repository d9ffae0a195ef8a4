"""Corpus versions: the store beside a corpus's pointer, a finished version read back, and the
making of new versions (built, added to, or derived by a gate or monitoring decision).

Between `corpus_schema` (the on-disk format, which this package writes) and the packages that
make versions (`compiler` compiles runs into them, `control` gates and monitors them).

Each name below is loaded from its module when first used: reading one part (a version read
back) does not load the making of versions, whose `finish` renders pages with the prompt
templates. A run's identity, which versions compare, is corpus_schema/identity.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wikitrace.corpus_schema import exports

if TYPE_CHECKING:
    from .derive import Derivation, count_decisions, derive_version, resolve_insight, write_view
    from .finish import finish_version, staging
    from .frozen import FrozenVersion
    from .store import (
        Store,
        abandon_build,
        begin_build,
        check_new_pointer,
        left_unrecorded,
        list_versions,
        open_store,
        publish_build,
        record_left,
        resumable,
        write_json,
    )
    from .without_tasks import ViewReport, leave_out

_HOMES = {
    "Derivation": "derive",
    "count_decisions": "derive",
    "derive_version": "derive",
    "resolve_insight": "derive",
    "write_view": "derive",
    "finish_version": "finish",
    "staging": "finish",
    "FrozenVersion": "frozen",
    "Store": "store",
    "abandon_build": "store",
    "begin_build": "store",
    "check_new_pointer": "store",
    "left_unrecorded": "store",
    "list_versions": "store",
    "open_store": "store",
    "publish_build": "store",
    "record_left": "store",
    "resumable": "store",
    "write_json": "store",
    "ViewReport": "without_tasks",
    "leave_out": "without_tasks",
}

__all__ = [
    "Derivation",
    "FrozenVersion",
    "Store",
    "ViewReport",
    "abandon_build",
    "begin_build",
    "check_new_pointer",
    "count_decisions",
    "derive_version",
    "finish_version",
    "leave_out",
    "left_unrecorded",
    "list_versions",
    "open_store",
    "publish_build",
    "record_left",
    "resolve_insight",
    "resumable",
    "staging",
    "write_json",
    "write_view",
]


__getattr__ = exports(__name__, _HOMES)
