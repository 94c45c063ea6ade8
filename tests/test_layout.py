"""The package layout is the architecture (see the folders' docstrings): the pipeline stages in
core/, what every artifact carries in runtime/, the tools over artifacts in tools/, the
renderers in viewers/. These tests read the source (no imports run) and fail when a change
breaks the layout: an import circle, a runtime module that reaches into the package, a stage
or a viewer that depends on a tool, a module or a function grown past what can be read."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "precompile_nb"
MAX_MODULE_LINES = 700  # runtime/driver.py is copied into every artifact whole: exempt
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = ["precompile_nb", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str) -> set[str]:
    """Every module of the package that `name` imports, at module level or inside a function
    (a lazy import closes a circle all the same, only later), with the packages whose
    __init__ Python runs on the way."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                   for stmt in block.body for n in ast.walk(stmt)}  # never run
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = (_resolve(name, path.name == "__init__.py", node.level, node.module)
                    if node.level else (node.module or ""))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for t in targets:
            parts = t.split(".")
            for k in range(1, len(parts) + 1):
                mod = ".".join(parts[:k])
                if mod in MODULES and not name.startswith(mod + ".") and mod != name:
                    out.add(mod)
    return out


GRAPH = {name: imports_of(name) for name in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in GRAPH:
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_circles():
    assert _cycles() == []


def test_the_circle_finder_finds_a_circle():
    GRAPH["precompile_nb.runtime.driver"].add("precompile_nb.runtime.convention")
    try:
        assert ["precompile_nb.runtime.convention", "precompile_nb.runtime.driver"] in _cycles()
    finally:
        GRAPH["precompile_nb.runtime.driver"].discard("precompile_nb.runtime.convention")


def test_what_every_artifact_carries_imports_nothing_else_of_the_package():
    for name in MODULES:
        if name.startswith("precompile_nb.runtime"):
            outside = {m for m in GRAPH[name] if not m.startswith("precompile_nb.runtime")
                       and m != "precompile_nb"}
            assert outside == set(), f"{name} imports {sorted(outside)}"


@pytest.mark.parametrize("layer", ["core", "runtime", "viewers"])
def test_stages_runtime_and_viewers_do_not_depend_on_the_tools(layer):
    for name in MODULES:
        if name.startswith(f"precompile_nb.{layer}"):
            tools = {m for m in GRAPH[name] if m.startswith("precompile_nb.tools")}
            assert tools == set(), f"{name} imports {sorted(tools)}"


def test_viewers_render_data_and_never_reach_the_compiler():
    for name in MODULES:
        if name.startswith("precompile_nb.viewers"):
            other = {m for m in GRAPH[name] if not m.startswith("precompile_nb.viewers")
                     and m != "precompile_nb"}
            assert other == set(), f"{name} imports {sorted(other)}"


def test_no_module_is_longer_than_can_be_read():
    long = {name: n for name, p in MODULES.items()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
            and name != "precompile_nb.runtime.driver"}
    assert long == {}


def test_no_function_is_longer_than_can_be_read():
    long = []
    for name, p in MODULES.items():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {n} lines")
    assert long == []
