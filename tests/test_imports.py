"""The import graph: no cycle among wikitrace's modules or its packages (not even through the
imports only the type checker reads), and the commands that must start fast (`convert`, the
drill-down tools) load only what they use."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import make_run, run, write_runs

ROOT = Path(__file__).parent.parent
HEAVY = ("litellm", "jinja2", "bm25s", "numpy", "matplotlib", "mcp", "detect_secrets")
"""Third-party modules that take long to import; the model client, templates and search."""


def _modules() -> dict[str, Path]:
    """Every wikitrace module, by its dotted name, from the package map in pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: dict[str, Path] = {}
    for package, folder in config["tool"]["setuptools"]["package-dir"].items():
        for path in (ROOT / folder).glob("*.py"):
            found[package if path.name == "__init__.py" else f"{package}.{path.stem}"] = path
    return found


MODULES = _modules()
PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def _ancestors(name: str) -> list[str]:
    """The packages importing `name` runs first: wikitrace.compiler for wikitrace.compiler.build."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(2, len(parts))]


def _statements(tree: ast.AST, type_only: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level, in a function, in a branch; and
    those under `if TYPE_CHECKING:`, which only the type checker reads, when `type_only`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in [*(node.body if type_only else []), *node.orelse]:
                yield from _statements(ast.Module(body=[branch], type_ignores=[]), type_only)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        else:
            yield from _statements(node, type_only)


def _imports(name: str, type_only: bool = False) -> dict[str, int]:
    """The wikitrace modules `name` imports (a submodule's parent packages included), each
    with the line of the first statement that does; those only the type checker reads too
    when `type_only`."""
    base = name if name in PACKAGES else name.rpartition(".")[0]
    own = set(_ancestors(name)) | ({name} if name in PACKAGES else set())
    found: dict[str, int] = {}
    for node in _statements(ast.parse(MODULES[name].read_text()), type_only):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                parts = base.split(".")[: len(base.split(".")) - node.level + 1]
                source = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # `from P import m` imports the submodule P.m when there is one; else it reads a
            # name from P itself, which counts even when P is the importer's own package.
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
                for alias in node.names
            ]
        for target in targets:
            for module in [target, *(a for a in _ancestors(target) if a not in own)]:
                if module in MODULES and module != name:
                    found.setdefault(module, node.lineno)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


GRAPH = {name: _imports(name) for name in MODULES}
TYPED_GRAPH = {name: _imports(name, type_only=True) for name in MODULES}
"""GRAPH with the imports under `if TYPE_CHECKING:` too."""


def _package(name: str) -> str:
    return name if name in PACKAGES else name.rpartition(".")[0]


def test_the_analysis_sees_function_level_and_relative_imports() -> None:
    # A check that finds nothing because it reads nothing would pass forever.
    assert GRAPH["wikitrace.cli.convert"].keys() >= {
        "wikitrace.cli.input_options",  # from .input_options import ...
        "wikitrace.compiler.importers",  # inside the command's function
        "wikitrace.compiler",  # the package importing that submodule runs first
    }
    assert "wikitrace.transport.call_worker" in GRAPH["wikitrace.compiler.build"]
    demo = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(demo) == [["a", "b", "c"]]


def _module_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each cycle among modules, as its imports' file lines to look at."""
    cycles = _cycles({name: set(targets) for name, targets in graph.items()})
    return [[f"{m}:{graph[m][n]} -> {n}" for m in c for n in c if n in graph[m]] for c in cycles]


def test_no_module_imports_itself_through_others() -> None:
    assert _module_cycles(GRAPH) == []


def test_no_cycle_even_through_imports_for_the_type_checker() -> None:
    # A cycle that only `if TYPE_CHECKING:` closes still makes two modules one to read.
    seen = "wikitrace.tools.loaded_memory"
    assert seen in TYPED_GRAPH["wikitrace.tools.task_scope"]
    assert seen not in GRAPH["wikitrace.tools.task_scope"]
    assert _module_cycles(TYPED_GRAPH) == []


def test_no_package_imports_itself_through_others() -> None:
    # compiler.importers reading compiler.inputs while compiler imported compiler.importers
    # was one: a subpackage may use its siblings, not the package that holds it.
    graph: dict[str, set[str]] = {package: set() for package in PACKAGES}
    why: dict[tuple[str, str], str] = {}
    for name, targets in GRAPH.items():
        for target, line in targets.items():
            if _package(name) != _package(target):
                graph[_package(name)].add(_package(target))
                why.setdefault((_package(name), _package(target)), f"{name}:{line} -> {target}")
    cycles = _cycles(graph)
    assert not cycles, [[why[(a, b)] for a in c for b in c if (a, b) in why] for c in cycles]


FIRST_MESSAGE = (
    "wikitrace.tools.memory",
    "wikitrace.tools.first_message",
    "wikitrace.tools.task_scope",
)
"""What renders the agent's first message over a loaded memory: test-time code."""
WRITERS = ("wikitrace.compiler", "wikitrace.versions", "wikitrace.control", "wikitrace.search")
"""The packages that write a corpus, or that writing one uses."""


def _reached(name: str) -> set[str]:
    """Every module importing `name` runs, through any chain of imports."""
    seen: set[str] = set()
    waiting = [name]
    while waiting:
        for target in GRAPH[waiting.pop()]:
            if target not in seen:
                seen.add(target)
                waiting.append(target)
    return seen


def test_writing_a_corpus_never_imports_the_first_message() -> None:
    # The catalog and search a version is written with live in corpus_schema and search;
    # the first message reads what they wrote.
    writers = [name for name in MODULES if name.startswith(WRITERS)]
    assert "wikitrace.versions.finish" in writers and "wikitrace.search.rank" in writers
    direct = [f"{n}:{GRAPH[n][t]} -> {t}" for n in writers for t in FIRST_MESSAGE if t in GRAPH[n]]
    assert direct == []
    reached = [n for n in writers if "wikitrace.tools.memory" in _reached(n)]
    assert reached == []
    # And the check sees such an import where there is one.
    assert "wikitrace.tools.memory" in GRAPH["wikitrace.cli.use"]
    assert "wikitrace.tools.first_message" in _reached("wikitrace.cli.use")


def test_search_imports_only_corpus_schema() -> None:
    imported = {
        _package(target)
        for name in MODULES
        if name.startswith("wikitrace.search.")
        for target in GRAPH[name]
    }
    assert imported <= {"wikitrace.search", "wikitrace.corpus_schema"}, imported


def test_the_model_transport_imports_only_the_format() -> None:
    # Sending a request and reading the reply knows nothing of compiling or of reading a corpus.
    outside = [
        f"{name}:{line} -> {target}"
        for name, targets in GRAPH.items()
        if _package(name) == "wikitrace.transport"
        for target, line in targets.items()
        if _package(target) not in ("wikitrace.transport", "wikitrace.corpus_schema")
    ]
    assert outside == []


def test_the_drill_down_tool_is_one_file_a_corpus_carries_as_is(tmp_path: Path) -> None:
    # A corpus carries corpus_schema/drilldown.py as it is (versions/finish.py): it imports
    # nothing of ours, and the copies in a built corpus are that file byte for byte.
    tool = "wikitrace.corpus_schema.drilldown"
    assert GRAPH[tool].keys() <= {"wikitrace.corpus_schema"}  # its package runs first
    assert "wikitrace.corpus_schema.drilldown" in GRAPH["wikitrace.corpus_schema.turns"]
    assert "wikitrace.corpus_schema.drilldown" in GRAPH["wikitrace.cli.drill"]
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    assert run(["-q", "build", str(runs), "-o", str(tmp_path / "corpus")])[0] == 0
    source = MODULES[tool].read_bytes()
    for name in ("actions", "turn"):
        assert (tmp_path / "corpus" / "tools" / name).read_bytes() == source


def _loaded(code: str, tmp_path: Path) -> list[str]:
    """The modules a fresh interpreter holds after running `code` (whose output is dropped)."""
    listing = tmp_path / "modules.txt"
    script = f"{code}\nimport sys\nopen({str(listing)!r}, 'w').write(' '.join(sys.modules))\n"
    subprocess.run([sys.executable, "-c", script], capture_output=True, check=True, cwd=tmp_path)
    return listing.read_text().split()


def _cli(*argv: str) -> str:
    """Code running the command line as `wikitrace` would, bar the exit."""
    return textwrap.dedent(
        f"""
        from wikitrace.cli.main import main
        try:
            main({list(argv)!r})
        except SystemExit as stop:
            assert not stop.code, stop.code
        """
    )


def test_importing_the_convert_command_loads_nothing_heavy(tmp_path: Path) -> None:
    loaded = _loaded("import wikitrace.cli.convert", tmp_path)
    assert [name for name in (*HEAVY, "pydantic") if name in loaded] == []
    assert [name for name in loaded if name.startswith("wikitrace.compiler")] == []


def test_a_call_worker_starts_without_the_corpus_records(tmp_path: Path) -> None:
    """The call worker's modules (it starts while a build reads its inputs, and the build's
    first call waits for it): no pydantic, which the corpus's typed records need."""
    loaded = _loaded("import wikitrace.transport.call_worker", tmp_path)
    assert [name for name in (*HEAVY, "pydantic") if name in loaded] == []


def test_a_conversion_loads_the_readers_not_the_compiler(tmp_path: Path) -> None:
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    loaded = _loaded(_cli("convert", str(runs)), tmp_path)
    assert "wikitrace.compiler.importers.native" in loaded  # it did read logs
    # Only the reader of the format found: detection reads importers/sniffers.py alone.
    readers = ("tau", "chat", "swe", "claude_code", "react", "cursor", "repository")
    assert [m for m in readers if f"wikitrace.compiler.importers.{m}" in loaded] == []
    assert [name for name in HEAVY if name in loaded] == []
    unused = ("build", "compile", "produce", "mine", "offline", "judge")
    assert [m for m in unused if f"wikitrace.compiler.{m}" in loaded] == []
    # The declared settings the options are made from (constants only), but no client.
    assert "wikitrace.corpus_schema.setting_fields" in loaded
    assert [n for n in loaded if n.startswith("wikitrace.transport")] == []
    assert "wikitrace.prompts" not in loaded and "wikitrace.versions.finish" not in loaded


MAX_CONVERT_MODULES = 25
"""Issue 57: the wikitrace modules `wikitrace convert` loads (86 before: every command module,
every importer to tell a format, the corpus writer to tell a run's identity; then 31 for a
Claude Code session and 28 for a Codex one)."""

SESSIONS = ROOT / "tests/data/sessions"


@pytest.mark.parametrize(
    ("log", "code", "reader"),
    [
        (ROOT / "tests/data/tau-bench-airline-3runs.jsonl", 0, "native"),  # native JSON Lines
        (ROOT / "tests/data/tau-bench-original-2results.json", 0, "tau"),  # a reader of its own
        (None, 2, None),  # a file in no format wikitrace knows: refused
        # Coding agents' sessions: their reader, and the session's repository (project, kind
        # of work, files touched) read from the log.
        (SESSIONS / "claude-code/edge_cases.jsonl", 0, "claude_code"),
        (SESSIONS / "claude-code/minimal_showcase", 0, "claude_code"),  # with sub-agents
        (SESSIONS / "codex/codex_session.jsonl", 0, "codex"),
        (SESSIONS / "gemini-cli/gemini.jsonl", 0, "gemini"),
        (SESSIONS / "openhands-events/basic_gui_mode.json", 0, "openhands"),
    ],
)
def test_convert_loads_few_wikitrace_modules(
    tmp_path: Path, log: Path | None, code: int, reader: str | None
) -> None:
    if log is None:
        log = tmp_path / "notes.txt"
        log.write_text("hello\nworld\n")
    listing = tmp_path / "modules.txt"
    script = textwrap.dedent(
        f"""
        import sys
        from wikitrace.cli.main import main
        code = 0
        try:
            main(["convert", {str(log)!r}])
        except SystemExit as stop:
            code = stop.code or 0
        names = sorted(m for m in sys.modules if m.startswith("wikitrace"))
        open({str(listing)!r}, "w").write(f"{{code}}\\n" + "\\n".join(names))
        """
    )
    env = {**os.environ, "WIKITRACE_USER_SETTINGS": str(tmp_path / "none.toml")}
    subprocess.run([sys.executable, "-c", script], capture_output=True, cwd=tmp_path, env=env)
    given, *loaded = listing.read_text().splitlines()
    assert int(given) == code
    assert any(name.startswith("wikitrace.compiler.importers") for name in loaded)
    if reader is not None:
        assert f"wikitrace.compiler.importers.{reader}" in loaded
    if reader in ("claude_code", "codex", "gemini", "openhands"):
        assert "wikitrace.compiler.importers.repository" in loaded  # a session was read
    assert len(loaded) <= MAX_CONVERT_MODULES, loaded


def test_the_drill_down_commands_load_only_the_drill_down_tools(tmp_path: Path) -> None:
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    assert run(["-q", "build", str(runs), "-o", str(tmp_path / "corpus")])[0] == 0
    for command in (["actions", "corpus", "1"], ["turn", "corpus", "1", "1"]):
        loaded = _loaded(_cli(*command), tmp_path)
        assert "wikitrace.corpus_schema.drilldown" in loaded
        assert [name for name in (*HEAVY, "pydantic", "frontmatter") if name in loaded] == []
        assert [
            n for n in loaded if n.startswith(("wikitrace.compiler", "wikitrace.versions"))
        ] == []


def test_recall_at_a_session_s_start_loads_no_pydantic_nor_search(tmp_path: Path) -> None:
    """`hooks recall` runs at every session's start: it reads the payload and logs without the
    capture hook's payload models (pydantic), and has no task to rank, so no search index."""
    project = {"project": "github.com/acme/app", "kind": "fix-bug"}
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True, **project)])
    assert run(["-q", "build", str(runs), "-o", str(tmp_path / "corpus")])[0] == 0
    app = tmp_path / "app"
    subprocess.run(["git", "init", "-q", str(app)], check=True)
    remote = ["git", "-C", str(app), "remote", "add", "origin", "git@github.com:acme/app.git"]
    subprocess.run(remote, check=True)
    payload = f'{{"hook_event_name": "SessionStart", "cwd": "{app}"}}'.encode()
    log = tmp_path / "hook.log"
    stdin = f"import io, sys\nsys.stdin = io.TextIOWrapper(io.BytesIO({payload!r}))\n"
    # A time limit a busy machine meets: past it the hook exits at once, before the listing.
    recall = _cli("hooks", "recall", "corpus", "--hook-log", str(log), "--time-limit", "60")
    loaded = _loaded(stdin + recall, tmp_path)
    # Its project has runs here: the message was rendered (the offline build drew no lesson).
    assert "nothing recalled: no lesson applies" in log.read_text()
    assert "wikitrace.tools.first_message" in loaded
    heavy = ("pydantic", "numpy", "bm25s", "litellm", "wikitrace.cli.hook")
    assert [name for name in heavy if name in loaded] == []
