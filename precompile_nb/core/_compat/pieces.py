"""torch internals of compiling a graph in pieces (Note [a graph compiled in pieces] in
core/pieces.py): kernel names kept apart between the pieces' compiles, the pieces' Inductor
modules joined into one, and that module loaded the way Inductor loads its own (checked on
2.13 and 2.15 on CPU, 2.11 on the H200).
"""
from __future__ import annotations

import ast
import contextlib
import io
import tokenize
from collections.abc import Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def kernel_names_tagged(tag: str) -> Iterator[None]:
    """While Inductor compiles one piece: every kernel it names carries `tag` before its
    number (`triton_poi_fused_add_p1_0`, `cpp_fused_mul_p1_3`), so that the kernels of the
    pieces, compiled in separate processes, never share a name in the joined module
    (2.11-2.15: PythonWrapperCodegen.next_kernel_suffix numbers the kernels of one graph)."""
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    original = PythonWrapperCodegen.next_kernel_suffix

    def tagged(self: Any) -> str:
        return f"{tag}_{original(self)}"

    PythonWrapperCodegen.next_kernel_suffix = tagged
    try:
        yield
    finally:
        PythonWrapperCodegen.next_kernel_suffix = original


def _is_kernel(stmt: ast.stmt) -> bool:
    """`name = async_compile.<kind>(...)`: one kernel of Inductor's module."""
    v = stmt.value if isinstance(stmt, ast.Assign) else None
    return (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
            and isinstance(v.func.value, ast.Name) and v.func.value.id == "async_compile")


def _is_wait(stmt: ast.stmt) -> bool:
    v = stmt.value if isinstance(stmt, ast.Expr) else None
    return (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
            and v.func.attr == "wait" and isinstance(v.func.value, ast.Name)
            and v.func.value.id == "async_compile")


class _Module:
    """One piece's Inductor module cut into its parts (2.11-2.15 layout: header, kernels,
    `async_compile.wait(globals())`, `del async_compile`, then what defines `call`)."""

    def __init__(self, source: str) -> None:
        lines = source.splitlines(keepends=True)
        body = ast.parse(source).body
        wait = next((i for i, s in enumerate(body) if _is_wait(s)), None)
        if wait is None:
            raise ValueError("a piece's module has no async_compile.wait(globals())")
        ends = [0] + [s.end_lineno or s.lineno for s in body]
        # each statement with the comments above it, as Inductor wrote them
        text = ["".join(lines[ends[i]:ends[i + 1]]) for i in range(len(body))]
        self.header = [t for s, t in zip(body[:wait], text) if not _is_kernel(s)]
        self.kernels = [(s.targets[0].id, t) for s, t in zip(body[:wait], text)  # type: ignore
                        if _is_kernel(s)]
        rest = wait + 1
        if rest < len(body) and isinstance(body[rest], ast.Delete):
            rest += 1
        self.tail = "".join(lines[ends[rest]:])


def _indented(tail: str) -> str:
    """`tail` one level in, refused where a string spans lines (its text would change)."""
    for tok in tokenize.generate_tokens(io.StringIO(tail).readline):
        if tok.type == tokenize.STRING and tok.start[0] != tok.end[0]:
            raise ValueError("a piece's `call` holds a string over several lines")
    return "".join("    " + ln if ln.strip() else ln for ln in tail.splitlines(keepends=True))


def join_modules(sources: Sequence[str], calls: Sequence[str], top: str) -> str:
    """One module from the pieces' Inductor modules: one header (each distinct statement once),
    every piece's kernels, one wait, then each piece's own definitions inside a function that
    returns its `call`, bound to `calls[k]`, then `top` (the `call` that runs the pieces)."""
    mods = [_Module(s) for s in sources]
    seen: set[str] = set()
    header = []
    for m in mods:
        for t in m.header:
            if t.strip() not in seen:
                seen.add(t.strip())
                header.append(t)
    names: set[str] = set()
    kernels = []
    for m in mods:
        for name, t in m.kernels:
            if name in names:
                raise ValueError(f"two pieces define the kernel {name}")
            names.add(name)
            kernels.append(t)
    parts = ["".join(header).rstrip() + "\n\n", "".join(kernels).rstrip() + "\n\n",
             "async_compile.wait(globals())\ndel async_compile\n"]
    for m, name in zip(mods, calls):
        parts.append(f"\n\ndef _pc_{name}():\n{_indented(m.tail).rstrip()}\n"
                     f"    return call\n\n\n{name} = _pc_{name}()\n")
    parts.append("\n\n" + top)
    return "".join(parts)


def load_module(source: str) -> Any:
    """Load a module Inductor could have written, as Inductor loads its own (2.11-2.15:
    PyCodeCache.load writes it into the compile's cache dir and imports it); its kernels come
    from that cache dir."""
    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.load(source)


def fake_inputs(metas: Sequence[tuple[tuple[int, ...], tuple[int, ...], Any, Any]]) -> list[Any]:
    """Fake tensors of these (shape, stride, dtype, device), one fake mode for all, for a
    graph compiled in another process than the one that traced it (2.11-2.15)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        out = [torch.empty_strided(shape, stride, dtype=dtype, device=device)
               for shape, stride, dtype, device in metas]
    del mode
    return out


@contextlib.contextmanager
def compile_dirs(inductor_dir: str | None, triton_dir: str | None) -> Iterator[None]:
    """Inductor and Triton write into these cache dirs (another process's private compile
    dirs) while inside, with Inductor's in-memory caches cleared on the way in and out, as
    torch._inductor.utils.fresh_cache does for a dir of its own (2.11-2.15)."""
    import os

    from torch._inductor.utils import clear_caches

    saved = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    for k, v in zip(saved, (inductor_dir, triton_dir)):
        if v:
            os.environ[k] = v
    clear_caches()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        clear_caches()


def warm_inductor(device: str) -> None:
    """Compile a tiny graph on `device` in a throwaway cache dir, so that Inductor's
    one-time set-up (imports, decompositions, pattern tables, the kernel-compile pool's first
    job) is done before a real graph arrives (Note [piece workers start with the capture])."""
    import torch

    from .inductor import inductor_compile, private_compile_cache

    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.ops.aten.mul.Tensor, (x, 2.0))
    g.output((g.call_function(torch.ops.aten.sum.default, (y,)),))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    try:
        with private_compile_cache():
            inductor_compile(gm, fake_inputs([((64,), (1,), torch.float32,
                                               torch.device(device))]))
    except Exception:  # noqa: BLE001 - only a head start: the piece's compile reports its own
        pass
