"""Where a command may write a folder: never inside a corpus or a store of its versions
(`check_output`), and over an existing one only with --force (`check_destination`)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from .errors import CorpusError, InputError
from .history import HISTORY, STORE_SUFFIX, VERSION_RE
from .layout import FORMAT_NAME, MANIFEST


def is_corpus(path: Path) -> bool:
    """True for a folder whose manifest says it is a wikitrace corpus."""
    manifest = path / MANIFEST
    if path.is_symlink() or not manifest.is_file():
        return False
    try:
        return bool(orjson.loads(manifest.read_bytes()).get("format") == FORMAT_NAME)
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return False


def is_empty_dir(path: Path) -> bool:
    """A folder (not a link to one) with nothing in it."""
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def check_output(dest: Path, option: str = "--output") -> None:
    """Refuse to write the folder `dest` inside a corpus or inside a corpus's store of versions
    (`NAME.versions/`): a version is frozen (its manifest lists every file; once anything is
    added, `verify` fails and `add` and `view` refuse it), and a store holds only what
    wikitrace puts there. Links are followed (`CORPUS/site` is inside the version CORPUS
    points at), except `dest`'s own name: a link there is what gets replaced, never its target.
    `dest` may itself be a corpus (a view replaced with --force), but not a store's version.
    Every command that writes a folder checks its output here."""
    if dest.is_symlink():
        target = Path(os.path.realpath(dest.parent)) / dest.name
    else:
        target = Path(os.path.realpath(dest))
    corpus: Path | None = None
    store: Path | None = None
    for folder in (target, *target.parents):
        if folder.name.endswith(STORE_SUFFIX) and _is_store(folder):
            store = folder
        elif corpus is None and folder != target and is_corpus(folder):
            corpus = folder
    if store is None and corpus is None:
        return
    frozen = "frozen: writing there makes `wikitrace verify` fail and `add` and `view` refuse it"
    if store is not None:
        pointer = store.with_name(store.name.removesuffix(STORE_SUFFIX))
        where = (
            f"the version {corpus.name} of the corpus {pointer} ({frozen})"
            if corpus is not None and corpus.parent == store
            else f"{store}, the store of the corpus {pointer}'s versions (it holds only what "
            "wikitrace puts there)"
        )
        outside = store.parent
    else:
        assert corpus is not None
        where, outside = f"the corpus {corpus} ({frozen})", corpus.parent
    raise InputError(
        f"{dest} is inside {where}; write outside the corpus and its versions, e.g. "
        f"{given(option, outside / _outside_name(dest))}",
        field=option,
    )


def given(option: str, path: Path) -> str:
    """How a user gives `path` to `option`: `-o PATH`, `--flag PATH`, or, for a setting with
    no flag, a settings file's line (`cache-dir = "PATH"`)."""
    if option == "--output":
        return f"-o {path}"
    return f"{option} {path}" if option.startswith("-") else f'{option} = "{path}"'


def _outside_name(dest: Path) -> str:
    name = Path(os.path.abspath(dest)).name
    return name if name and not name.endswith(STORE_SUFFIX) else "wikitrace-output"


def _is_store(folder: Path) -> bool:
    """A folder of corpus versions: a history, a version, or the pointer beside naming it."""
    try:
        if (folder / HISTORY).is_file():
            return True
        pointer = folder.with_name(folder.name.removesuffix(STORE_SUFFIX))
        if pointer.is_symlink() and os.readlink(pointer).startswith(folder.name + "/"):
            return True
        with os.scandir(folder) as entries:
            return any(
                VERSION_RE.match(entry.name) and is_corpus(Path(entry.path)) for entry in entries
            )
    except OSError:
        return False


def check_destination(dest: Path, *, force: bool) -> None:
    """Refuse a destination that holds something: anything without force, a non-corpus ever."""
    if dest.exists() or dest.is_symlink():
        if not force:
            raise CorpusError(f"{dest} already exists; use --force to replace it")
        if not is_corpus(dest) and not is_empty_dir(dest):
            raise CorpusError(
                f"{dest} exists and is not a wikitrace corpus; --force only replaces a corpus, "
                "so choose another --output"
            )
