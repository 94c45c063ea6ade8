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

Note [warm CUDA load]
  A CUDA module asks `async_compile.triton(name, source)` for each Triton kernel; Inductor
  then imports Triton's compiler, looks the kernel up in Triton's cache (hashing Triton's own
  sources) and builds a launcher. But what a launch needs is small: the cubin, the kernel's
  symbol, its warps and shared memory, its argument types, and the grid as a function of the
  sizes. After precompile's autotuning each kernel has exactly one binary, so precompile
  records those for it (`_compat.triton_launch_records`, the same values Inductor's static
  launcher uses) with the cubin's path in the shipped Triton cache, in `_PC_WARM
  ["triton_kernels"]`. At load, `async_compile.triton` returns a `_WarmTritonKernel` whose
  `run(*args, stream=)` is a generated function: Inductor's grid expressions, then one call
  of torch's static CUDA launcher (torch._C._StaticCudaLauncher); a kernel tuned to another
  configuration at another size (Note [a configuration per size] in tuning.py) gets a
  launcher per configuration and picks one by the launch's size. The warm path is refused,
  with the reason, when a kernel was not autotuned at precompile (a graph with collectives),
  needs what that launcher lacks (TMA, launch attributes), or the GPU's compute capability is
  not the one the cubins were built for.
"""
from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import json
import keyword
import os
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal

from . import _compat

WARM_NAME = "_PC_WARM"
_INDUCTOR = "torch._inductor"
_TRITON_NAMES = frozenset({"triton", "tl"})  # what `import triton(.language as tl)` binds


def kernel_digest(argtypes: list[str], source: str) -> str:
    """The key of one C++ kernel in _PC_WARM: sha256 of its argtypes and source."""
    return hashlib.sha256(json.dumps([list(argtypes), source]).encode("utf-8")).hexdigest()


def triton_digest(name: str, source: str) -> str:
    """The key of one Triton kernel in _PC_WARM: sha256 of its name and source."""
    return hashlib.sha256(json.dumps(["triton", name, source]).encode("utf-8")).hexdigest()


# ---- at precompile (emit) ---------------------------------------------------------------------


def triton_kernel_vars(source: str) -> list[str]:
    """The variables Inductor's module `source` binds to `async_compile.triton(...)`."""
    return [var for var, *_ in _scan(ast.parse(source).body).triton]


def record(source: str, files: tuple[tuple[str, str, bytes], ...],
           launches: dict[str, dict[str, Any]] | None = None,
           by_size: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any] | None:
    """The _PC_WARM literal for Inductor's module `source` whose compiled files are `files`:
    {"cpp_kernels": [{"name", "sha256", "binary"}], "extern_kernels": {name: torch path}} and,
    for a CUDA module, "triton_kernels": [{"var", "sha256", "cubin", launch fields...}] from
    `launches` (_compat.triton_launch_records) and "triton_skipped": {var: why}; a kernel
    tuned to several configurations by size (`by_size`, Note [a configuration per size] in
    tuning.py) has "by_size": {"numel": [size args], "buckets": [{"upto", "cubin", launch
    fields...}]}, left out where a bucket's cubin is not in `files`. A kernel
    whose binary is not among `files`, or an extern kernel that is not a torch op, is left out
    (load then says so and compiles). None when the module uses none of them and imports
    nothing of torch._inductor; a module of fallback ops alone (a fused op Inductor does not
    lower, Note [fused inference fast paths]) gets an empty record, so it loads warm too."""
    calls = _scan(ast.parse(source).body)
    if not calls.imports and not calls.cpp and not calls.externs and not calls.triton:
        return None
    cpp_files = {data: rel for root, rel, data in files
                 if root == "inductor" and rel.endswith(".cpp")}
    rels = {rel for root, rel, _ in files if root == "inductor"}
    kernels = []
    for name, _, argtypes, src in calls.cpp:
        whole = _compat.cpp_binding_source(argtypes, src)
        rel = cpp_files.get(whole.encode("utf-8")) if whole is not None else None
        if rel is not None and rel[:-len(".cpp")] + ".so" in rels:
            kernels.append({"name": name, "sha256": kernel_digest(argtypes, src),
                            "binary": rel[:-len(".cpp")] + ".so"})
    externs = {n: loc for n in sorted(calls.externs)
               if (loc := _compat.extern_kernel_location(n)) is not None}
    out: dict[str, Any] = {"cpp_kernels": kernels, "extern_kernels": externs}
    out["module"] = _summary(calls)
    if calls.triton:
        cubins = _cubins_by_hash(files)
        launched, skipped = [], {}
        for var, _, name, src in calls.triton:
            rec = (launches or {}).get(var) or {"why": "no launch record was made for it"}
            rel = cubins.get(str(rec.get("hash")))
            if "why" in rec or rel is None:
                skipped[var] = str(rec.get("why", "the cache holds no cubin for it"))
                continue
            entry = {"var": var, "sha256": triton_digest(name, src), "cubin": rel,
                     **{k: rec[k] for k in _LAUNCH_FIELDS}}
            buckets = _size_buckets((by_size or {}).get(var), cubins)
            if buckets is not None:
                entry["by_size"] = buckets
            launched.append(entry)
        out["triton_kernels"], out["triton_skipped"] = launched, skipped
    return out


_LAUNCH_FIELDS = ("function", "num_warps", "shared", "arg_types", "scratch", "def_args",
                  "call_args", "grid", "device", "cc")


def _size_buckets(tuned: Mapping[str, Any] | None, cubins: dict[str, str],
                  ) -> dict[str, Any] | None:
    """One kernel's size buckets as _PC_WARM holds them, or None (not tuned by size, or a
    bucket's cubin missing: then the example's choice serves every size)."""
    if not tuned:
        return None
    buckets = []
    for b in tuned["buckets"]:
        rel = cubins.get(str(b["record"].get("hash")))
        if rel is None:
            return None
        buckets.append({"upto": b["upto"], "cubin": rel,
                        **{k: b["record"][k] for k in _LAUNCH_FIELDS}})
    return {"numel": list(tuned["numel"]), "buckets": buckets}


def _cubins_by_hash(files: tuple[tuple[str, str, bytes], ...]) -> dict[str, str]:
    """Triton's hash of each compiled kernel -> the cubin's path in the Triton cache. Each
    kernel has a directory holding <name>.json (its metadata, with "hash") and <name>.cubin,
    where Triton may shorten a long kernel name: matched by directory, not by name."""
    cubin_in = {rel.rsplit("/", 1)[0]: rel for root, rel, _ in files
                if root == "triton" and rel.endswith(".cubin") and "/" in rel}
    out = {}
    for root, rel, data in files:
        base = rel.rsplit("/", 1)[-1]
        if root != "triton" or not rel.endswith(".json") or base.startswith("__grp__"):
            continue
        try:
            digest = json.loads(data).get("hash")
        except (ValueError, AttributeError):
            continue
        if isinstance(digest, str) and rel.rsplit("/", 1)[0] in cubin_in:
            out[digest] = cubin_in[rel.rsplit("/", 1)[0]]
    return out


# ---- at load ------------------------------------------------------------------------------------


class _Calls:
    """What the graph section of python_code asks of torch._inductor (and Triton). (Plain
    classes here, in load.py and cache.py: a NamedTuple costs ~0.3 ms to make when a load
    imports its module, on the 2-core development machine.)"""

    __slots__ = ("imports", "cpp", "uses", "externs", "triton", "triton_used", "called")

    def __init__(self, imports: list[tuple[str, tuple[str, ...]]],
                 cpp: list[tuple[str, str, list[str] | None, str | None]], uses: set[str],
                 externs: set[str], triton: list[tuple[str, str, str | None, str | None]],
                 triton_used: set[str], called: set[str]) -> None:
        self.imports = imports  # (module, names) of every torch._inductor import
        # (variable, kernel_digest, argtypes, source) per cpp_pybinding call
        self.cpp = cpp
        self.uses = uses  # attributes read off `async_compile`
        self.externs = externs  # attributes read off `extern_kernels`
        # (variable, triton_digest, kernel name, source) per triton call
        self.triton = triton
        self.triton_used = triton_used  # `triton` / `tl` read anywhere but their imports
        self.called = called  # of _MARKERS, those called as functions

    # (argtypes and sources are None in a _Calls read back from _PC_WARM["module"])


class WarmPlan:
    """How load runs python_code: "warm" (no compiler; `imports` answers the module's
    torch._inductor imports) or "compile" (Inductor as usual), and why. `needs`: the cache
    files (root, relative path) the warm path reads, the only ones load installs for it
    (Note [install what is read])."""

    __slots__ = ("path", "reason", "imports", "needs", "cubins")

    def __init__(self, path: Literal["warm", "compile"], reason: str,
                 imports: dict[str, dict[str, Any]] | None,
                 needs: frozenset[tuple[str, str]] = frozenset(),
                 cubins: dict[str, Any] | None = None) -> None:
        self.path, self.reason, self.imports, self.needs = path, reason, imports, needs
        # the cubins load hands the warm path as bytes instead of installing them, by relative
        # path (Note [cubins from memory] in load.py); filled by load before the module runs
        self.cubins = cubins

    def __repr__(self) -> str:
        return f"WarmPlan(path={self.path!r}, reason={self.reason!r})"


def _scan(body: list[ast.stmt]) -> _Calls:
    calls = _Calls([], [], set(), set(), [], set(), set())
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
            elif isinstance(node, ast.Name) and node.id in _TRITON_NAMES:
                calls.triton_used.add(node.id)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in _MARKERS):
                calls.called.add(node.func.id)
            if isinstance(node, ast.Assign) and _is_compile_call(node.value, "cpp_pybinding"):
                args = node.value.args  # type: ignore[attr-defined]
                name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
                argtypes, src = _literal_kernel(args)
                calls.cpp.append((name, kernel_digest(argtypes, src), argtypes, src))
            elif isinstance(node, ast.Assign) and _is_compile_call(node.value, "triton"):
                args = node.value.args  # type: ignore[attr-defined]
                var = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
                kname, src = _literal_strings(args[:2])
                calls.triton.append((var, triton_digest(kname, src), kname, src))
    return calls


_MARKERS = frozenset({"start_graph", "end_graph"})


def _summary(calls: _Calls) -> dict[str, Any]:
    """_PC_WARM["module"]: what _scan found in the module, so that a load whose cache matched
    python_code (the cache's tag holds python_code's sha256: the module is the one scanned)
    plans without walking the module's syntax tree (the largest part of a warm load's time)."""
    return {"imports": [[m, list(n)] for m, n in calls.imports],
            "cpp": [[v, d] for v, d, _, _ in calls.cpp], "uses": sorted(calls.uses),
            "externs": sorted(calls.externs), "triton": [[v, d] for v, d, _, _ in calls.triton],
            "triton_used": sorted(calls.triton_used), "called": sorted(calls.called)}


def recorded_calls(warm: Any) -> _Calls | None:
    """The _Calls that _summary recorded in _PC_WARM, or None (none, or malformed)."""
    m = warm.get("module") if isinstance(warm, dict) else None
    try:
        return _Calls(imports=[(str(mod), tuple(map(str, names))) for mod, names in m["imports"]],
                      cpp=[(str(v), str(d), None, None) for v, d in m["cpp"]],
                      uses=set(map(str, m["uses"])), externs=set(map(str, m["externs"])),
                      triton=[(str(v), str(d), None, None) for v, d in m["triton"]],
                      triton_used=set(map(str, m["triton_used"])),
                      called=set(map(str, m["called"])))
    except (TypeError, KeyError, ValueError):
        return None


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


def _literal_strings(args: list[ast.expr]) -> tuple[str, str]:
    """(kernel name, source) of an async_compile.triton call; ("", "") if not str literals."""
    try:
        name, src = (ast.literal_eval(a) for a in args)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return "", ""
    return (name, src) if isinstance(name, str) and isinstance(src, str) else ("", "")


def _is_compile_call(node: ast.expr, method: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == method and len(node.args) >= 2
            and (method != "cpp_pybinding" or len(node.args) == 2))


def plan(graph: list[ast.stmt] | _Calls, warm: Any, *, cache_used: bool, no_cache_reason: str,
         cached_files: set[str], cached_triton: set[str] = frozenset(),
         triton_dir: str = "") -> WarmPlan:
    """Decide how to run python_code whose graph-section statements are `graph` and whose
    _PC_WARM literal is `warm` (None if absent), given whether the cache was installed, the
    relative paths of the inductor and triton files it holds, and the directory its triton
    files were installed in. `graph` may be the module's calls already (recorded_calls)."""
    calls = graph if isinstance(graph, _Calls) else _scan(graph)
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
    # the cache dir only where a C++ kernel is read from it: finding the default one imports
    # getpass and probes the temporary dir (~0.8 ms, and no CUDA graph has a C++ kernel)
    root = _compat.light_inductor_cache_dir() if calls.cpp else ""
    binaries: dict[str, tuple[str, str]] = {}
    for name, digest, _, _ in calls.cpp:
        rel = recorded.get(digest)
        if not isinstance(rel, str) or rel not in cached_files:
            return WarmPlan("compile", f"the cache holds no recorded binary for kernel {name}",
                            None)
        key = rel.rsplit("/", 1)[-1].split(".", 1)[0]  # Inductor's module name: <key>.kernel
        binaries[digest] = (os.path.join(root, *rel.split("/")), key)
    triton: dict[str, tuple[dict[str, Any], str]] = {}
    if calls.triton:
        why, triton = _triton_plan(calls, warm, cached_triton, triton_dir)
        if why is not None:
            return WarmPlan("compile", why, None)
    ops = {}
    for name in sorted(calls.externs):
        try:
            ops[name] = _compat.resolve_torch_path(str(externs[name]))
        except (KeyError, AttributeError, RuntimeError):  # ops namespaces raise either
            return WarmPlan("compile", f"extern kernel {name} is not a torch op of this build "
                            f"({externs.get(name, 'it lives in torch._inductor')})", None)
    cubins: dict[str, Any] = {}
    imports = _compat.warm_module_attrs(lambda: _WarmAsyncCompile(binaries, triton, cubins),
                                        types.SimpleNamespace(**ops))
    what = [f"{len(binaries)} C++ kernel(s) loaded directly"] if binaries else []
    if triton:
        sized = sum("by_size" in rec for rec, _ in triton.values())
        what.append(f"{len(triton)} Triton kernel(s) launched from their cubins"
                    + (f" ({sized} with a configuration per size)" if sized else ""))
    if not what:  # every operation one of torch's (a CUDA graph of matmuls and attention)
        what = [f"no compiled kernel, {len(ops)} torch op(s) called directly"]
    needs = frozenset({("inductor", recorded[d]) for d in binaries}
                      | {("triton", rec["cubin"]) for rec, _ in triton.values()}
                      | {("triton", b["cubin"]) for rec, _ in triton.values()
                         for b in rec.get("by_size", {}).get("buckets", ())})
    return WarmPlan("warm", f"cache in place: {', '.join(what)}, no compiler", imports, needs,
                    cubins)


def _unserved(calls: _Calls, warm: Any) -> str | None:
    """Why the warm path cannot serve a module (with its cache in place), or None."""
    for module, names in calls.imports:
        extra = set(names) - _compat.WARM_IMPORTS.get(module, frozenset())
        if not names or extra:
            what = f"{module}.{sorted(extra)[0]}" if extra else module
            return f"the module imports {what}, which the warm path does not serve"
    other = sorted(calls.uses - {"cpp_pybinding", "wait", "triton"})
    if other:
        return f"the module calls async_compile.{other[0]}, which the warm path does not serve"
    if calls.triton_used:
        return (f"the module uses `{sorted(calls.triton_used)[0]}` outside its kernels, which "
                "needs Triton itself")
    marker = sorted(calls.called & _MARKERS)
    if marker:
        return f"the module calls {marker[0]} (compiled with profile_bandwidth)"
    if not isinstance(warm, dict):
        return "python_code records no kernel binaries (_PC_WARM): made by an older precompile_nb"
    return None


def _triton_plan(calls: _Calls, warm: dict[str, Any], cached: set[str], triton_dir: str,
                 ) -> tuple[str | None, dict[str, tuple[dict[str, Any], str]]]:
    """(why not, {}) or (None, {triton_digest: (launch record, cubin path)})."""
    if "triton_kernels" not in warm:
        return "python_code records no Triton launches: made by an older precompile_nb", {}
    skipped = warm.get("triton_skipped")
    skipped = skipped if isinstance(skipped, dict) else {}
    by_digest = {k.get("sha256"): k for k in warm["triton_kernels"] if isinstance(k, dict)}
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for var, digest, _, _ in calls.triton:
        rec = by_digest.get(digest)
        if rec is None:
            why = skipped.get(var, "no launch record matches its source")
            return f"Triton kernel {var} is compiled at load: {why}", {}
        bad = _malformed_launch(rec)
        if bad is not None:
            return f"the launch record of Triton kernel {var} is malformed ({bad})", {}
        if rec["cubin"] not in cached:
            return f"the cache holds no cubin for Triton kernel {var}", {}
        if "by_size" in rec:
            bad = _malformed_buckets(rec, cached)
            if bad is not None:
                return f"the size buckets of Triton kernel {var} are malformed ({bad})", {}
            rec = {**rec, "by_size": {**rec["by_size"], "buckets": [
                {**b, "path": os.path.join(triton_dir, *b["cubin"].split("/"))}
                for b in rec["by_size"]["buckets"]]}}
        out[digest] = (rec, os.path.join(triton_dir, *rec["cubin"].split("/")))
    why = _compat.can_launch_cubins()
    if why is not None:
        return why, {}
    for cc, device in sorted({(r["cc"], r["device"]) for r, _ in out.values()}):
        have = _compat.cuda_capability(device)
        if have != cc:
            return (f"the cubins were built for compute capability {cc // 10}.{cc % 10}, "
                    f"GPU {device} of this process is {have // 10}.{have % 10}"), {}
    return None, out


_GRID_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant,
               ast.IfExp, ast.Compare, ast.Call, ast.operator, ast.unaryop, ast.cmpop)


def _malformed_launch(rec: dict[str, Any]) -> str | None:
    """What is wrong with one launch record, or None: the launcher is generated code, so
    its names must be identifiers and its grid plain arithmetic on them (and max)."""
    for key, kind in (("function", str), ("num_warps", int), ("shared", int),
                      ("arg_types", str), ("scratch", int), ("def_args", list),
                      ("call_args", list), ("grid", dict), ("device", int), ("cc", int),
                      ("cubin", str)):
        if not isinstance(rec.get(key), kind) or isinstance(rec.get(key), bool):
            return f"{key} is not a {kind.__name__}"
    names = [*rec["def_args"], *rec["call_args"]]
    if not all(isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n)
               and n not in _LAUNCHER_NAMES for n in names):
        return "an argument name is not an identifier of its own"
    if not set(rec["call_args"]) <= set(rec["def_args"]):
        return "a call argument is not a parameter"
    if len(rec["arg_types"]) != len(rec["call_args"]) + rec["scratch"]:
        return "argument types and arguments differ in number"
    grid = rec["grid"]
    known = set(rec["def_args"])
    lines = [*grid.get("prefix", ()), *(f"grid_{i} = {grid.get(k)}" for i, k in
                                        enumerate("xyz"))]
    for line in lines:
        target, eq, expr = str(line).partition(" = ")
        names = _grid_expr_names(expr)
        if isinstance(names, str):
            return f"grid line {line!r} {names}"
        if not eq or not target.isidentifier() or target in _LAUNCHER_NAMES - {
                "grid_0", "grid_1", "grid_2"} or not names <= known | {"max"}:
            return f"grid line {line!r} is not arithmetic on the arguments"
        known.add(target)
    return None


def _malformed_buckets(rec: dict[str, Any], cached: set[str]) -> str | None:
    """What is wrong with a kernel's size buckets (Note [a configuration per size]), or None:
    each bucket a well-formed launch of the same arguments, its cubin in the cache, sizes
    ascending and the last open; the size arguments among the kernel's parameters."""
    sized = rec["by_size"]
    numel, buckets = sized.get("numel"), sized.get("buckets")
    if not isinstance(numel, list) or not isinstance(buckets, list) or not buckets:
        return "no size arguments or no buckets"
    if not numel or not set(numel) <= set(rec["def_args"]) or any(
            str(a).startswith("_") for a in rec["def_args"]):
        return "its size arguments are not parameters of the kernel"
    last = 0
    for k, b in enumerate(buckets):
        bad = _malformed_launch(b) if isinstance(b, dict) else "not a record"
        if bad is not None:
            return f"bucket {k}: {bad}"
        if b["def_args"] != rec["def_args"] or b["cubin"] not in cached:
            return f"bucket {k} takes other arguments or its cubin is not in the cache"
        upto = b.get("upto")
        if (upto is None) != (k == len(buckets) - 1) or (
                upto is not None and (type(upto) is not int or upto < last)):
            return f"bucket {k} has no ascending size bound"
        last = upto or last
    return None


@functools.lru_cache(maxsize=4096)
def _grid_expr_names(expr: str) -> frozenset[str] | str:
    """The names one grid expression reads, or what is wrong with it: it must be plain
    integer arithmetic (and max). Parsed once per process: the same expression in another
    kernel, or in a second load, costs a lookup."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return "does not parse"
    names = set()
    for n in ast.walk(tree):
        if (not isinstance(n, _GRID_NODES)
                or (isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name)
                                                     and n.func.id == "max"))
                or (isinstance(n, ast.Constant) and type(n.value) is not int)):
            return "is not arithmetic on the arguments"
        if isinstance(n, ast.Name):
            names.add(n.id)
    return frozenset(names)


# what the generated launcher itself binds (`launcher`): no argument may shadow them
_LAUNCHER_NAMES = frozenset({"_launch", "_function", "_num_warps", "_shared", "_arg_types",
                             "_profiler", "_record", "_name", "grid_0", "grid_1", "grid_2",
                             "stream", "max", "launcher"})


class _WarmAsyncCompile:
    """Stands in for torch._inductor.async_compile.AsyncCompile in a warm load: each
    cpp_pybinding imports the library the cache installed, each triton loads the recorded
    cubin (plan found every one)."""

    def __init__(self, binaries: dict[str, tuple[str, str]],
                 triton: dict[str, tuple[dict[str, Any], str]], cubins: dict[str, Any]) -> None:
        self._binaries = binaries  # by kernel_digest
        self._triton = triton  # by triton_digest
        self._cubins = cubins  # WarmPlan.cubins

    def cpp_pybinding(self, argtypes: list[str], source_code: str) -> Callable:
        path, key = self._binaries[kernel_digest(argtypes, source_code)]
        return _compat.load_cpp_kernel(path, key)

    def triton(self, kernel_name: str, source_code: str, *args: Any,
               **kwargs: Any) -> _WarmTritonKernel:
        rec, path = self._triton[triton_digest(kernel_name, source_code)]
        return _WarmTritonKernel(rec, path, self._cubins)

    def wait(self, scope: dict[str, Any]) -> None:
        return None  # every kernel above was loaded when it was defined


class _WarmTritonKernel:
    """Stands in for Inductor's CachingAutotuner of one Triton kernel on the warm path:
    `run(*args, stream=)` computes the grid as Inductor's launcher does and launches the
    cached cubin with torch's static CUDA launcher (Note [warm CUDA load])."""

    def __init__(self, rec: dict[str, Any], path: str, cubins: dict[str, Any]) -> None:
        self.name = rec["function"]
        if "by_size" in rec:
            self.run = sized_launcher(rec["def_args"], rec["by_size"], cubins)
            return
        self.run = launcher(rec, _load_cubin(rec, path, cubins))


def _load_cubin(rec: dict[str, Any], path: str, cubins: dict[str, Any]) -> Any:
    """The kernel handle of a launch record's cubin: from the bytes load kept in memory
    (Note [cubins from memory] in load.py), else from the installed file at `path`."""
    data = cubins.get(rec["cubin"])
    if data is not None:
        return _compat.load_cubin_bytes(data, rec["function"], rec["shared"], rec["device"])
    return _compat.load_cubin(path, rec["function"], rec["shared"], rec["device"])


def sized_launcher(def_args: list[str], sized: dict[str, Any],
                   cubins: dict[str, Any] | None = None) -> Callable[..., None]:
    """The launcher of a kernel with a configuration per size (Note [a configuration per
    size] in tuning.py): the product of its size arguments picks the bucket, whose own
    launcher runs its cubin. Checked by _malformed_buckets."""
    params = ", ".join([*def_args, "stream"])
    lines = [f"def sized({params}):", f"    _n = {' * '.join(sized['numel'])}"]
    scope: dict[str, Any] = {"__builtins__": {}}
    for k, b in enumerate(sized["buckets"]):
        scope[f"_l{k}"] = launcher(b, _load_cubin(b, b["path"], cubins or {}))
        call = f"return _l{k}({params})"
        lines += ([f"    {call}"] if b["upto"] is None else
                  [f"    if _n <= {int(b['upto'])}:", f"        {call}"])
    exec(compile("\n".join(lines), "<precompile_nb sized launcher>", "exec"), scope)  # noqa: S102
    return scope["sized"]


def launcher(rec: dict[str, Any], function: Any) -> Callable[..., None]:
    """The generated `launcher(<def args>, stream)` of one launch record (checked by
    _malformed_launch): grid expressions as Inductor's, then the static launcher's call with
    the non-constexpr arguments and a None per scratch buffer; inside a profiler range named
    after the kernel while a profiler runs (as Inductor's CachingAutotuner does)."""
    args = [*rec["call_args"], *["None"] * rec["scratch"]]
    packed = "(" + ", ".join(args) + ("," if len(args) == 1 else "") + ")"
    launch = ("_launch(_function, grid_0, grid_1, grid_2, _num_warps, _shared, _arg_types, "
              f"{packed}, stream)")
    grid = rec["grid"]
    lines = [f"def launcher({', '.join([*rec['def_args'], 'stream'])}):",
             *(f"    {p}" for p in grid.get("prefix", ())),
             *(f"    grid_{i} = {grid[k]}" for i, k in enumerate("xyz")),
             "    if _profiler._is_profiler_enabled:",
             "        with _record(_name):",
             f"            {launch}",
             "        return",
             f"    {launch}"]
    scope: dict[str, Any] = {
        "__builtins__": {"max": max}, "_launch": _compat.launch_cubin(),
        "_function": function, "_num_warps": rec["num_warps"], "_shared": rec["shared"],
        "_arg_types": rec["arg_types"], "_profiler": _compat.profiler_module(),
        "_record": _compat.record_function_fast(), "_name": rec["function"]}
    exec(compile("\n".join(lines), f"<precompile_nb launcher {rec['function']}>", "exec"),  # noqa: S102
         scope)
    return scope["launcher"]


def builtins_for(imports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`__builtins__` for the namespace python_code runs in: the real builtins, with an
    `__import__` that answers `from <module> import <name>` for the modules in `imports`, and
    `import <top>(.<sub>)` for a top-level module in it (`triton`), and passes every other
    import through. Only code executed in that namespace sees it."""
    real = builtins.__import__

    def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        if level == 0 and fromlist:
            served = imports.get(name)
        elif level == 0:
            served = imports.get(name.partition(".")[0])
        else:
            served = None
        if served is None:
            return real(name, globals, locals, fromlist, level)
        return types.SimpleNamespace(**served)

    return {**builtins.__dict__, "__import__": _import}
