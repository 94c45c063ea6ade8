"""Stage 5, the warm path of load: run an artifact's compiled kernels without the compiler.

Note [warm load]
  Inductor's generated CPU module imports torch._inductor (async_compile, select_algorithm,
  ...) and asks `async_compile.cpp_pybinding(argtypes, source)` for each C++ kernel. That
  hashes the source under a key that holds the C++ compiler's version (a `g++ --version`
  process), runs the CPU ISA probes, then imports the cached library; importing
  torch._inductor alone pulls in torch._dynamo and sympy. A warm load needs none of it: the
  cache holds every library, verified byte for byte.

  So precompile records, next to the calling convention, which cached library serves which
  kernel (by the sha256 of its argtypes and source) and where each `extern_kernels.<name>`
  lives in torch (`_PC_WARM`, see `record`). At load, `plan` checks that the cache is in
  place and that the module asks for nothing else from torch._inductor than what
  `_compat.WARM_IMPORTS` lists; then python_code is executed with an `__import__` of its own
  (in its namespace's `__builtins__`, nothing global) that answers those imports with light
  objects: an AsyncCompile whose cpp_pybinding imports the recorded library, and a namespace
  of the torch ops Inductor calls. python_code itself is unchanged: run alone (only torch
  installed), or without a matching cache, it imports Inductor and compiles as before.
  The path taken and why are in `forward.__precompile_load__` ("path", "reason").
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import json
import os
import types
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from . import _compat

WARM_NAME = "_PC_WARM"
_INDUCTOR = "torch._inductor"


def kernel_digest(argtypes: list[str], source: str) -> str:
    """The key of one C++ kernel in _PC_WARM: sha256 of its argtypes and source."""
    return hashlib.sha256(json.dumps([list(argtypes), source]).encode("utf-8")).hexdigest()


# ---- at precompile (emit) ---------------------------------------------------------------------


def record(source: str, files: tuple[tuple[str, str, bytes], ...]) -> dict[str, Any] | None:
    """The _PC_WARM literal for Inductor's module `source` whose compiled files are `files`:
    {"cpp_kernels": [{"name", "sha256", "binary"}], "extern_kernels": {name: torch path}}.
    A kernel whose library is not among `files`, or an extern kernel that is not a torch op,
    is left out (load then says so and compiles). None when the module uses neither."""
    calls = _scan(ast.parse(source).body)
    if not calls.cpp and not calls.externs:
        return None
    cpp_files = {data: rel for root, rel, data in files
                 if root == "inductor" and rel.endswith(".cpp")}
    rels = {rel for root, rel, _ in files if root == "inductor"}
    kernels = []
    for name, argtypes, src in calls.cpp:
        whole = _compat.cpp_binding_source(argtypes, src)
        rel = cpp_files.get(whole.encode("utf-8")) if whole is not None else None
        if rel is not None and rel[:-len(".cpp")] + ".so" in rels:
            kernels.append({"name": name, "sha256": kernel_digest(argtypes, src),
                            "binary": rel[:-len(".cpp")] + ".so"})
    externs = {n: loc for n in sorted(calls.externs)
               if (loc := _compat.extern_kernel_location(n)) is not None}
    return {"cpp_kernels": kernels, "extern_kernels": externs}


# ---- at load ------------------------------------------------------------------------------------


class _Calls(NamedTuple):
    """What the graph section of python_code asks of torch._inductor."""

    imports: list[tuple[str, tuple[str, ...]]]  # (module, names) of every torch._inductor import
    cpp: list[tuple[str, list[str], str]]  # (variable, argtypes, source) per cpp_pybinding call
    uses: set[str]  # attributes read off `async_compile`
    externs: set[str]  # attributes read off `extern_kernels`


class WarmPlan(NamedTuple):
    """How load runs python_code: "warm" (no compiler; `imports` answers the module's
    torch._inductor imports) or "compile" (Inductor as usual), and why."""

    path: Literal["warm", "compile"]
    reason: str
    imports: dict[str, dict[str, Any]] | None


def _scan(body: list[ast.stmt]) -> _Calls:
    calls = _Calls([], [], set(), set())
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_INDUCTOR):
                calls.imports.append((node.module, tuple(a.name for a in node.names)))
            elif isinstance(node, ast.Import):
                calls.imports.extend((a.name, ()) for a in node.names
                                     if a.name.startswith(_INDUCTOR))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "async_compile":
                    calls.uses.add(node.attr)
                elif node.value.id == "extern_kernels":
                    calls.externs.add(node.attr)
            if isinstance(node, ast.Assign) and _is_pybinding(node.value):
                args = node.value.args  # type: ignore[attr-defined]
                name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
                calls.cpp.append((name, *_literal_kernel(args)))
    return calls


def _literal_kernel(args: list[ast.expr]) -> tuple[list[str], str]:
    """(argtypes, source) of a cpp_pybinding call; ([], "") if they are not plain literals
    (never recorded at precompile, so plan refuses the warm path for it)."""
    try:
        argtypes, src = ast.literal_eval(args[0]), ast.literal_eval(args[1])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return [], ""
    if (not isinstance(src, str) or not isinstance(argtypes, list)
            or not all(isinstance(t, str) for t in argtypes)):
        return [], ""
    return argtypes, src


def _is_pybinding(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "cpp_pybinding" and len(node.args) == 2)


def plan(graph: list[ast.stmt], warm: Any, *, cache_used: bool, no_cache_reason: str,
         cached_files: set[str]) -> WarmPlan:
    """Decide how to run python_code whose graph-section statements are `graph` and whose
    _PC_WARM literal is `warm` (None if absent), given whether the cache was installed and
    the relative paths of the inductor files it holds."""
    calls = _scan(graph)
    if not calls.imports:
        return WarmPlan("warm", "nothing to compile: the module does not use torch._inductor",
                        {})
    why_not = no_cache_reason if not cache_used else _unserved(calls, warm)
    if why_not is not None:
        return WarmPlan("compile", why_not, None)
    recorded = {k.get("sha256"): k.get("binary") for k in warm.get("cpp_kernels", ())
                if isinstance(k, dict)}
    externs = warm.get("extern_kernels")
    externs = externs if isinstance(externs, dict) else {}
    root = _compat.light_inductor_cache_dir()
    binaries: dict[tuple[tuple[str, ...], str], tuple[str, str]] = {}
    for name, argtypes, src in calls.cpp:
        rel = recorded.get(kernel_digest(argtypes, src))
        if not isinstance(rel, str) or rel not in cached_files:
            return WarmPlan("compile", f"the cache holds no recorded binary for kernel {name}",
                            None)
        key = rel.rsplit("/", 1)[-1].split(".", 1)[0]  # Inductor's module name: <key>.kernel
        binaries[(tuple(argtypes), src)] = (os.path.join(root, *rel.split("/")), key)
    ops = {}
    for name in sorted(calls.externs):
        try:
            ops[name] = _compat.resolve_torch_path(str(externs[name]))
        except (KeyError, AttributeError, RuntimeError):  # ops namespaces raise either
            return WarmPlan("compile", f"extern kernel {name} is not a torch op of this build "
                            f"({externs.get(name, 'it lives in torch._inductor')})", None)
    imports = _compat.warm_module_attrs(lambda: _WarmAsyncCompile(binaries),
                                        types.SimpleNamespace(**ops))
    return WarmPlan("warm", f"cache in place: {len(binaries)} C++ kernel(s) loaded directly, "
                    "no compiler", imports)


def _unserved(calls: _Calls, warm: Any) -> str | None:
    """Why the warm path cannot serve a module (with its cache in place), or None."""
    for module, names in calls.imports:
        extra = set(names) - _compat.WARM_IMPORTS.get(module, frozenset())
        if not names or extra:
            what = f"{module}.{sorted(extra)[0]}" if extra else module
            return (f"the module imports {what}, which the warm path does not serve (only "
                    "cached C++ kernels are loaded directly so far)")
    other = sorted(calls.uses - {"cpp_pybinding", "wait"})
    if other:
        return f"the module calls async_compile.{other[0]}, which the warm path does not serve"
    if not isinstance(warm, dict):
        return "python_code records no kernel binaries (_PC_WARM): made by an older precompile_nb"
    return None


class _WarmAsyncCompile:
    """Stands in for torch._inductor.async_compile.AsyncCompile in a warm load: each
    cpp_pybinding imports the library the cache installed (plan found every one)."""

    def __init__(self, binaries: dict[tuple[tuple[str, ...], str], tuple[str, str]]) -> None:
        self._binaries = binaries

    def cpp_pybinding(self, argtypes: list[str], source_code: str) -> Callable:
        path, key = self._binaries[(tuple(argtypes), source_code)]
        return _compat.load_cpp_kernel(path, key)

    def wait(self, scope: dict[str, Any]) -> None:
        return None  # every kernel above was loaded when it was defined


def builtins_for(imports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`__builtins__` for the namespace python_code runs in: the real builtins, with an
    `__import__` that answers `from <module> import <name>` for the modules in `imports`
    and passes every other import through. Only code executed in that namespace sees it."""
    real = builtins.__import__

    def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        served = imports.get(name) if level == 0 and fromlist else None
        if served is None:
            return real(name, globals, locals, fromlist, level)
        return types.SimpleNamespace(**served)

    return {**builtins.__dict__, "__import__": _import}
