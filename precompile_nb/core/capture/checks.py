"""Capture, the invariant checks on the traced graph: nothing live baked (invariant 1), no
data-dependent reads and no uncapturable effects (invariants 3 and 4).
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ...runtime.convention import Constant
from .. import _compat
from ..errors import PrecompileError, Problems, fn_name, user_frame

if TYPE_CHECKING:
    from .lifting import _Lifted


# Constants created inside fn (torch.tensor([...])) are carried as literals up to this size;
# anything larger is almost surely live data that should be an input (invariant 1).
MAX_LITERAL_NUMEL = 4096


def _source_line(owner: Any, token: str) -> str | None:
    """'file:line: code' of the first line of `owner`'s source that mentions `token` (where
    the user's code reads a tensor it should have passed in)."""
    try:
        lines, start = inspect.getsourcelines(owner)
        path = inspect.getsourcefile(owner) or "<source>"
    except (OSError, TypeError):
        return None
    pat = re.compile(rf"(?<![\w.]){re.escape(token)}\b" if "." not in token
                     else re.escape(token))
    for k, ln in enumerate(lines):
        code = ln.split("#")[0]
        if pat.search(code) and not code.lstrip().startswith(("def ", "class ")):
            return f"{path}:{start + k}: {ln.strip()}"
    return None


def _add_module(found: dict[int, tuple[str, str, str | None]], m: torch.nn.Module,
                where: str, fix: str, src: str | None) -> None:
    """Each parameter and buffer of `m`, fn reaching it around its arguments."""
    for n, t in list(m.named_parameters()) + list(m.named_buffers()):
        found.setdefault(id(t), (f"{where}, its {n}", fix, src))


def _external_tensors(fn: Callable, example_inputs: Sequence[Any],
                      names: list[str]) -> dict[int, tuple[str, str, str | None]]:
    """Tensors fn can reach without them being inputs: id -> (where, fix, source line)."""
    found: dict[int, tuple[str, str, str | None]] = {}

    def add(obj: Any, var: str, where: str, fix: str, owner: Any) -> None:
        if isinstance(obj, torch.Tensor):
            found.setdefault(id(obj), (where, fix, _source_line(owner, var)))
        elif isinstance(obj, torch.nn.Module):
            _add_module(found, obj, where, f"pass `{var}` to fn as a positional argument "
                        "instead of closing over it", _source_line(owner, var))

    def scan_function(f: Any, depth: int) -> None:
        code = getattr(f, "__code__", None)
        if code is None or depth > 2:
            return
        tensor_fix = ("pass `{v}` to fn as an argument (or register it on the model with "
                      "register_buffer / nn.Parameter)")
        for var, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            add(v, var, f"closure variable '{var}'", tensor_fix.format(v=var), f)
            scan_function(v, depth + 1)
        g = getattr(f, "__globals__", {})
        co_names = set(code.co_names)
        for c in code.co_consts:
            if inspect.iscode(c):
                co_names |= set(c.co_names)
        for var in co_names:
            if var in g:
                add(g[var], var, f"global '{var}'", tensor_fix.format(v=var), f)
        for k, v in enumerate(getattr(f, "__defaults__", None) or ()):
            add(v, f"default #{k}", f"default argument #{k}",
                "pass it explicitly as an argument", f)

    owner = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module):  # precompile(model, x) or precompile(model.forward, x)
        _add_module(found, owner, f"fn ({type(owner).__name__}) itself",
                    "pass the model as an argument: precompile(lambda m, *args: m(*args), "
                    "model, *example_inputs); the artifact then takes the model at every call",
                    None)
    scan_function(fn, 0)
    for i, a in enumerate(example_inputs):
        if isinstance(a, torch.nn.Module):
            _module_attribute_tensors(a, names[i], found)
    return found


def _module_attribute_tensors(a: torch.nn.Module, name: str,
                              found: dict[int, tuple[str, str, str | None]]) -> None:
    """Tensors a module holds outside its parameters and buffers: plain attributes, and the
    values of dicts and lists it keeps (a cache an earlier eager call filled)."""
    for mpath, sub in a.named_modules():
        registered = set(sub._parameters) | set(sub._buffers)
        for k, v in vars(sub).items():
            full = ".".join(p for p in (name, mpath, k) if p)
            if isinstance(v, torch.Tensor) and k not in registered:
                found[id(v)] = (
                    f"plain module attribute {full} (not a registered parameter or buffer)",
                    f"register it: self.register_buffer('{k}', tensor) or "
                    f"self.{k} = nn.Parameter(tensor)",
                    _source_line(type(sub).forward, f"self.{k}"))
            elif isinstance(v, (dict, list)) and not k.startswith("_forward") and k not in (
                    "_parameters", "_buffers", "_modules"):
                items = v.items() if isinstance(v, dict) else enumerate(v)
                for key, t in items:
                    if isinstance(t, torch.Tensor):
                        found.setdefault(id(t), (
                            f"{full}[{key!r}], a tensor kept in a module's {type(v).__name__} "
                            "(a cache filled by an earlier call?)",
                            f"if it is a cache, empty it before precompile ({full}.clear()): "
                            "capture then computes it inside the graph from the parameters; "
                            "if it is data, register it as a buffer",
                            _source_line(type(sub).forward, f"self.{k}")))


def _has_storage(t: torch.Tensor) -> bool:
    """True where `t`'s storage holds every element it views."""
    if t.numel() == 0:
        return True
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    return t.untyped_storage().nbytes() >= (last + 1) * t.element_size()


def _check_constants(gm: torch.fx.GraphModule, fn: Callable, example_inputs: Sequence[Any],
                     names: list[str], L: _Lifted, P: Problems) -> list[Constant]:
    """Invariant 1. Tensor constants in the trace are either small tensors fn created itself
    (kept as literals and lifted to inputs) or live data fn reached around its arguments
    (rejected, all of them named at once)."""
    const_nodes = [n for n in gm.graph.nodes if n.op == "get_attr"
                   and isinstance(getattr(gm, n.target, None), torch.Tensor)]
    if not const_nodes:
        return []
    external = _external_tensors(fn, example_inputs, names)
    bad, keep = [], []
    for n in const_nodes:
        t = getattr(gm, n.target)
        hit = external.get(id(t)) or (external.get(id(t._base)) if t._base is not None else None)
        only_fresh = all(u.target is torch.ops.aten.lift_fresh_copy.default for u in n.users)
        # a tensor whose storage was freed (resized to 0, as FSDP2 frees its buffers) cannot
        # be read without a SIGSEGV: never a literal
        finite = _has_storage(t) and (t.is_floating_point() is False
                                      or bool(torch.isfinite(t).all()))
        # a one-element constant fn cannot reach is a literal it made, also where it was not
        # made through lift_fresh (`torch.tensor(k)` inside a torch.jit.script helper)
        literal = only_fresh or t.numel() <= 1
        if hit is None and literal and t.numel() <= MAX_LITERAL_NUMEL and finite:
            keep.append(n)
        else:
            where, fix, src = hit or (
                f"a tensor constant of shape {list(t.shape)} (graph node {n.name})",
                "make it an input: pass it to fn or register it on the model", None)
            users = [u.name for u in n.users]
            stack = next((u.meta.get("stack_trace") for u in n.users
                          if u.meta.get("stack_trace")), None)
            bad.append((where, fix, t, users, src or user_frame(stack)))
    if bad and P.collect:  # the dry-run checker: one finding per offender
        for where, fix, t, users, src in bad:
            P.add(PrecompileError(
                f"{fn_name(fn)} reads a tensor that is not an input", invariant=1,
                stage="capture", where=where, expected="an argument or a registered "
                "parameter/buffer", actual=f"baked constant shape={list(t.shape)} "
                f"dtype={t.dtype}", hint=fix,
                extra={"offenders": [where], "nodes": users, "source": src}))
        return []
    if bad:
        where, fix, t, users, src = bad[0]
        raise PrecompileError(
            f"{fn_name(fn)} reads {len(bad)} tensor(s) that are not inputs; they would be "
            "baked into the artifact as constants", invariant=1, stage="capture", where=where,
            expected="every tensor fn reads arrives as an argument or a registered "
                     "parameter/buffer of a module argument",
            actual=f"baked constant shape={list(t.shape)} dtype={t.dtype}"
                   + ("; also: " + "; ".join(b[0] for b in bad[1:]) if len(bad) > 1 else ""),
            hint=fix,
            extra={"offenders": [b[0] for b in bad],
                   "nodes": [u for b in bad for u in b[3]],
                   "source": src})
    return _lift_literals(gm, keep)


def _lift_literals(gm: torch.fx.GraphModule, keep: list[torch.fx.Node]) -> list[Constant]:
    """The small literals fn created, lifted into placeholders after the inputs (the artifact
    carries their values in the convention)."""
    specs = []
    last_ph = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]
    for k, n in enumerate(keep):
        t = getattr(gm, n.target)
        with gm.graph.inserting_after(last_ph):
            ph = gm.graph.placeholder(f"_pc_const{k}")
        last_ph = ph
        ph.meta = dict(n.meta)
        ph.meta["val"] = _fake_like(gm, t)
        n.replace_all_uses_with(ph)
        gm.graph.erase_node(n)
        delattr(gm, n.target)
        specs.append(Constant(shape=tuple(t.shape), dtype=str(t.dtype).replace("torch.", ""),
                                  device=str(t.device), data=t.detach().cpu().tolist()))
    return specs


def _fake_like(gm: torch.fx.GraphModule, t: torch.Tensor) -> Any:
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    return mode.from_tensor(t) if mode is not None else t


def _check_nodes(gm: torch.fx.GraphModule, fn: Callable, P: Problems,
                 data_guards: bool = False) -> None:
    """Side-effecting ops (invariant 4) and values read into Python (invariant 3; with data
    guards, a value read is a graph value like any other, its branches checked: Note [data
    guards])."""
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if _compat.has_effects(n.target):
            P.add(PrecompileError(
                f"{fn_name(fn)} calls a side-effecting op that cannot be captured",
                invariant=4, stage="capture", where=f"graph node {n.name} ({n.target})",
                expected="pure tensor ops and in-place updates of inputs/buffers",
                actual=str(n.target), hint="move the side effect (printing, logging, "
                "effectful custom ops) outside fn",
                extra={"nodes": [n.name],
                       "source": user_frame(n.meta.get("stack_trace"))}))
        if n.target is torch.ops.aten._local_scalar_dense.default and not data_guards:
            P.add(PrecompileError(
                f"{fn_name(fn)} reads a tensor's value into Python (.item())", invariant=3,
                stage="capture", where=user_frame(n.meta.get("stack_trace"))
                or f"graph node {n.name}",
                expected="no data-dependent Python values", actual=".item() / .tolist()",
                hint="keep the value a tensor (e.g. x * t instead of x * t.item())",
                extra={"nodes": [n.name],
                       "source": user_frame(n.meta.get("stack_trace"))}))
