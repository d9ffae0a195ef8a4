"""docs/architecture.md against the code: every file its folder tables name exists, every
module of each package is named in its row, and the import arrows are the imports."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
_PATH = re.compile(r"[\w.-]+(/[\w.-]+)*/?")
_FILE = re.compile(r".*(/|\.(py|md|jsonl|json|toml|j2|txt))$|.+/.+")
"""A backquoted name that is a file or folder (`raw.py`, `importers/`, `.ci/run`), not code
(`format_turn`, `Derivation.record`)."""


def _package_dirs() -> dict[str, Path]:
    """Dotted package name -> its folder, from pyproject.toml's package map."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    dirs = config["tool"]["setuptools"]["package-dir"]
    return {name: ROOT / folder for name, folder in dirs.items()}


PACKAGE_DIRS = _package_dirs()
TOP = {name.split(".")[1]: path for name, path in PACKAGE_DIRS.items() if name.count(".") == 1}
"""Each top-level package (`compiler`) and its folder."""


def section(title: str, page: str | None = None) -> str:
    """The text of the page's section `title`, up to the next one."""
    text = PAGE.read_text(encoding="utf-8") if page is None else page
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str) -> dict[str, str]:
    """The rows of the table in `text` whose first cell is quoted: that cell -> the rest."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            first, _, rest = line.strip("| ").partition("|")
            rows[first.strip().strip("`")] = rest
    return rows


def named_paths(text: str) -> list[str]:
    """The files and folders `text` names in backquotes."""
    names = re.findall(r"`([^`\s]+)`", text)
    return [name for name in names if _PATH.fullmatch(name) and _FILE.fullmatch(name)]


def missing_files(rows: dict[str, str], root: Path = ROOT) -> list[str]:
    """Each path a row names that is neither in the row's folder nor at the root."""
    return [
        f"{folder}: {name}"
        for folder, text in rows.items()
        for name in [folder, *named_paths(text)]
        if not ((root / folder / name).exists() or (root / name).exists())
    ]


def unnamed_modules(rows: dict[str, str]) -> list[str]:
    """Each module and sub-package of a top-level package that its row does not name (a name
    counts in the row of the folder it is in: `corpus_schema/turns.py` in the tools row names
    no module of tools)."""
    unnamed = []
    for package, folder in sorted(TOP.items()):
        text = rows.get(f"{package}/", "")
        named = {(folder / name).resolve() for name in named_paths(text)}
        modules = [path for path in folder.glob("*.py") if path.name != "__init__.py"]
        subpackages = [path for path in PACKAGE_DIRS.values() if path.parent == folder]
        for path in sorted(modules + subpackages):
            if path.resolve() not in named:
                unnamed.append(str(path.relative_to(ROOT)))
    return unnamed


def arrows(text: str) -> dict[str, set[str]]:
    """The import arrows of the page's code block: package -> the packages it imports from
    (a note in parentheses dropped; `every package below`: all the others)."""
    block = text.split("```\n", 2)[1]
    found: dict[str, set[str]] = {}
    for line in block.splitlines():
        left, _, right = line.partition("->")
        targets = {part.strip() for part in re.sub(r"\([^)]*\)", "", right).split(",")}
        for package in (name.strip() for name in left.split(",")):
            found[package] = set() if right.strip() == "nothing of ours" else targets
    for package, targets in found.items():
        if targets == {"every package below"}:
            found[package] = set(TOP) - {package}
    return found


def package_imports() -> dict[str, set[str]]:
    """Package -> the other packages its modules import from (`TYPE_CHECKING` imports too, as
    the page's shell loop counts them)."""
    found: dict[str, set[str]] = {package: set() for package in TOP}
    for package, folder in TOP.items():
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue  # a relative import stays inside its package (test_imports.py)
                for name in names:
                    parts = name.split(".")
                    if parts[0] == "wikitrace" and len(parts) > 1 and parts[1] in TOP:
                        found[package].add(parts[1])
        found[package].discard(package)
    return found


def test_every_file_the_folder_tables_name_exists() -> None:
    for title in ("Folders and their import names", "Beside the packages"):
        rows = table_rows(section(title))
        assert rows, f"no table rows found in '{title}'"
        assert missing_files(rows) == []


def test_every_module_is_named_in_its_package_row() -> None:
    rows = table_rows(section("Folders and their import names"))
    assert set(TOP) <= {folder.rstrip("/") for folder in rows}
    assert unnamed_modules(rows) == []


def test_the_import_arrows_are_the_imports() -> None:
    drawn = arrows(section("Which way imports go"))
    assert set(drawn) == set(TOP)
    assert drawn == package_imports()


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    page = (
        "# A\n\n## Folders and their import names\n\n| folder | import | owns |\n|---|---|---|\n"
        "| `compiler/` | `wikitrace.compiler` | `raw.py`, `gone.py`, `importers/`, "
        "`Derivation.record`, `format_turn`, `corpus_schema/turns.py` |\n\n## Next\n"
    )
    rows = table_rows(section("Folders and their import names", page))
    assert named_paths(rows["compiler/"]) == [
        "raw.py",
        "gone.py",
        "importers/",
        "corpus_schema/turns.py",
    ]
    assert missing_files(rows) == ["compiler/: gone.py"]
    unnamed = unnamed_modules(rows)
    assert "compiler/build.py" in unnamed and "compiler/raw.py" not in unnamed
    assert "compiler/importers" not in unnamed and "tools/memory.py" in unnamed
    block = "\n```\ncli -> every package below\ntools -> search (a, note), corpus_schema\n```\n"
    drawn = arrows(block)
    assert drawn["tools"] == {"search", "corpus_schema"}
    assert drawn["cli"] == set(TOP) - {"cli"}
    assert "corpus_schema" in package_imports()["search"]
