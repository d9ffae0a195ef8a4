"""Size limits that keep the code easy to take over (checked on every package folder).

No module over 600 lines, no class over 250, no function over 80 lines, unless its docstring
says why ("Long because ..."). McCabe complexity over 20 is ruff's C901 (pyproject.toml sets the
limit); a `# noqa: C901` is allowed only on a function whose docstring says "Complex because".
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES = 600
CLASS_LINES = 250
FUNCTION_LINES = 80
LONG = "Long because"
COMPLEX = "Complex because"
_NOQA_C901 = re.compile(r"#\s*noqa:[^#\n]*\bC901\b")


def package_folders() -> list[Path]:
    """The folders pyproject.toml installs as wikitrace's packages."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [ROOT / folder for folder in config["tool"]["setuptools"]["package-dir"].values()]


def modules() -> Iterator[Path]:
    for folder in package_folders():
        yield from sorted(folder.glob("*.py"))


def _says(node: ast.AST, phrase: str) -> bool:
    assert isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    return phrase in (ast.get_docstring(node) or "")


def _lines(node: ast.AST) -> int:
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def oversized(path: Path, root: Path = ROOT) -> Iterator[str]:
    """Each part of one module over its limit whose docstring does not say why."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    name = path.relative_to(root)
    count = len(text.splitlines())
    if count > MODULE_LINES and not _says(tree, LONG):
        yield f"{name}: {count} lines (module limit {MODULE_LINES})"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and _lines(node) > CLASS_LINES and not _says(node, LONG):
            yield f"{name}:{node.lineno} class {node.name}: {_lines(node)} lines"
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and _lines(node) > FUNCTION_LINES
            and not _says(node, LONG)
        ):
            yield f"{name}:{node.lineno} {node.name}: {_lines(node)} lines"


def unexplained_complexity(path: Path, root: Path = ROOT) -> Iterator[str]:
    """Each `# noqa: C901` on a function whose docstring does not say why it is complex."""
    text = path.read_text(encoding="utf-8")
    marked = {number for number, line in enumerate(text.splitlines(), 1) if _NOQA_C901.search(line)}
    if not marked:
        return
    defined = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            # The noqa sits on the `def` line, or on the closing line of a long signature.
            assert node.body
            for number in range(node.lineno, node.body[0].lineno):
                defined[number] = node
    for number in sorted(marked):
        node = defined.get(number)
        if node is None or not _says(node, COMPLEX):
            yield f"{path.relative_to(root)}:{number}: noqa C901 without '{COMPLEX}' in a docstring"


def test_every_package_folder_is_checked() -> None:
    found = {folder.name for folder in package_folders()}
    assert {"cli", "compiler", "corpus_schema", "tools"} <= found
    assert all(folder.is_dir() for folder in package_folders())


def test_no_module_class_or_function_over_its_limit() -> None:
    problems = [problem for path in modules() for problem in oversized(path)]
    assert not problems, "\n".join(problems)


def test_complexity_limit_is_on_and_exceptions_say_why() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lint = config["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"] and lint["mccabe"]["max-complexity"] == 20
    problems = [problem for path in modules() for problem in unexplained_complexity(path)]
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES))
    long = tmp_path / "long.py"
    long.write_text(f"def f():\n{body}\n", encoding="utf-8")
    assert [p.split(": ", 1)[1] for p in oversized(long, tmp_path)] == [
        f"{FUNCTION_LINES + 1} lines"
    ]
    long.write_text(f'def f():\n    """Long because a table."""\n{body}\n', encoding="utf-8")
    assert list(oversized(long, tmp_path)) == []
    marked = tmp_path / "marked.py"
    marked.write_text("def f(x):  # noqa: C901\n    return x\n", encoding="utf-8")
    assert len(list(unexplained_complexity(marked, tmp_path))) == 1
    marked.write_text(
        'def f(x):  # noqa: C901\n    """Complex because a parser."""\n    return x\n',
        encoding="utf-8",
    )
    assert list(unexplained_complexity(marked, tmp_path)) == []
