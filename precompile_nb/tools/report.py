"""What a precompile run recorded, as one JSON-able dict: the edge between the core and the
viewers (viewers render this dict and never call the compiler).

    data = report_data(artifact, load_stats=f.__precompile_load__)
    data = error_data(exc)       # a PrecompileError as plain data, for the explorer
"""
from __future__ import annotations

from typing import Any

import torch

from ..runtime.violation import _PC_INVARIANTS
from ..core.cache import read_tag
from ..runtime.convention import ModuleArg, OptimArg, attribute_where, mesh_text
from ..core.emit import section_lines
from ..core.errors import PrecompileError
from ..core.schemas import Artifact
from ..core.tuning import tuning_record

REPORT_VERSION = 1


def report_data(art: Artifact, *, load_stats: dict | None = None) -> dict[str, Any]:
    c, lw = art.captured, art.lowered
    conv = lw.convention
    grads_in = {g.input for g in conv.grads}
    mutated = set(c.mutated) | {w.input for w in conv.mutations}
    inputs, weights = _input_rows(c.inputs, conv, grads_in, mutated)
    devices = sorted({s.device for s in c.inputs}) or ["cpu"]
    sections = section_lines(art.python_code)
    tag = None
    if art.cache:
        t, _ = read_tag(art.cache)
        tag = {"format": t.format, "version": t.version, "backend": t.backend, "torch": t.torch,
               "code_hash": t.code_hash, "files": t.n_files}
    return {
        "report_version": REPORT_VERSION,
        "fn_name": c.fn_name,
        "backend": lw.backend,
        "device": devices[0] if len(devices) == 1 else ", ".join(devices),
        "torch": torch.__version__,
        "inputs": inputs,
        # baked arguments, then the models' attributes fn read (both checked per call)
        "baked": [{"where": w, "value": repr(v)} for w, v in c.baked + _attributes_read(conv)],
        "weights": weights,
        "outputs": [lf.to_literal() for lf in conv.outputs],
        "grads": [c.inputs[g.input].where for g in conv.grads],
        # only meaningful when fn runs a backward at all
        "no_grad_params": [s.where for i, s in enumerate(c.inputs)
                           if s.kind == "param" and i not in grads_in] if grads_in else [],
        "mutated": [c.inputs[i].where for i in sorted(mutated) if i < len(c.inputs)],
        "aliased_outputs": [{"output": o, "input": c.inputs[a.index].where}
                            for o, a in c.aliases],
        # conditions on dynamic sizes the graph was captured under, checked on every call
        "guards": [{"text": g.text, "source": g.source} for g in conv.guards],
        # where a CUDA graph was autotuned (Note [a configuration per size]); None: not tuned
        "autotuning": tuning_record(lw.tuning) if lw.tuning is not None else None,
        "stages": [[n, round(s, 4)] for n, s in art.stage_seconds],
        "compiled_in": _compiled_in(lw.split),
        # C++ kernel builds and Triton kernels taken from earlier precompiles, and compiled
        # (Notes [C++ kernels built once], [Triton kernels compiled once]), Triton kernels
        # compiled on threads (Note [kernels on threads while the workers start]); None: none
        # of these (the eager backend, or every kept store switched off)
        "kernel_builds": dict(lw.builds) if any(lw.builds.values()) else None,
        "rewrites": _rewrite_rows(lw.rewrites, c.nodes),  # graph rewrites before Inductor
        "python_code": art.python_code,
        "python_code_bytes": len(art.python_code.encode("utf-8")),
        "sections": sections,
        "cache": {"bytes": len(art.cache), "tag": tag, "load": load_stats},
        "graph": {"nodes": [{"name": n.name, "op": n.op, "target": n.target,
                             "args": list(n.args), "shape": list(n.shape) if n.shape is not None
                             else None, "dtype": n.dtype, "role": n.role, "module": n.module,
                             "stack": n.stack} for n in c.nodes]},
        "kernels": [{"name": k.name, "kind": k.kind, "fused_ops": list(k.fused_ops),
                     "source_nodes": list(k.source_nodes),
                     "line": (k.line + sections.get("graph", 0)) if k.line else 0}
                    for k in lw.kernels],
        "optimizers": _optimizer_rows(c, lw),
        "invariants": invariant_checklist(art),
        "violation": None,
    }


def _compiled_in(split: Any) -> dict[str, Any] | None:
    """How many pieces Inductor compiled the graph in at once, and why (Note [a graph compiled
    in pieces]); in one piece, why AOTAutograd traced it first, "" if it did not (Note [one
    trace between capture and Inductor]; None: in pieces), how many views it lowered as
    reshapes (Note [a view the decompositions made impossible]), its convolutions' layout and
    what decided it (None: no convolution, or in pieces). None: the eager backend."""
    if split is None:
        return None
    return {"pieces": split.count, "why": split.why, "seconds": round(split.seconds, 4),
            "workers": [list(w) for w in split.workers], "aot_autograd": split.aot_autograd,
            "views_as_reshapes": split.views_as_reshapes,
            "conv_layout": list(split.conv_layout) if split.conv_layout else None}


def _rewrite_rows(rewrites: Any, nodes: Any) -> list[dict[str, Any]]:
    """Per node that precompile rewrote before Inductor saw the graph (e.g. Note [1x1
    convolutions as matrix products]): the rewrite, the node, its op, module and shape."""
    by_name = {n.name: n for n in nodes}
    rows = []
    for what, names in rewrites.items():
        for name in names:
            n = by_name.get(name)
            rows.append({"rewrite": what, "node": name, "target": n.target if n else "",
                         "module": n.module if n else "",
                         "shape": list(n.shape) if n and n.shape is not None else None})
    return rows


def _optimizer_rows(c: Any, lw: Any) -> list[dict[str, Any]]:
    """Per optimizer argument: its class, hyperparameters (baked or graph inputs), state
    inputs, and the part of the step that is its own: graph nodes (role "optimizer",
    module = the argument) and the kernels made of them."""
    rows = []
    for a in lw.convention.args:
        if not isinstance(a, OptimArg):
            continue
        nodes = [n.name for n in c.nodes if n.role == "optimizer" and n.module == a.path]
        own = set(nodes)
        rows.append({
            "path": a.path, "class": f"{a.module}.{a.name}",
            "params": sum(len(g.params) for g in a.groups),
            "state_inputs": [c.inputs[q.input].where + f" {list(q.keys)}"
                             for g in a.groups for q in g.params],
            "baked": [{n: repr(v) for n, v in zip(g.names, g.values)} for g in a.groups],
            "tensor_hyperparameters": [list(g.tensors) for g in a.groups],
            "zero_init": a.zero_init, "grads_cleared": a.grads_cleared,
            "graph_nodes": nodes,
            "kernels": [k.name for k in lw.kernels if own & set(k.source_nodes)],
        })
    return rows


def _input_rows(specs: Any, conv: Any, grads_in: set[int], mutated: set[int],
                ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One row per graph input, and the weights' totals (tensors, elements, bytes)."""
    inputs = []
    n_elem = n_bytes = n_weights = 0
    for i, s in enumerate(specs):
        if s.kind in ("param", "buffer"):
            n_weights += 1
            numel = 1
            for d in s.shape:
                numel *= d
            n_elem += numel
            n_bytes += numel * torch.empty((), dtype=getattr(torch, s.dtype)).element_size()
        inputs.append({
            "index": i, "where": s.where, "kind": s.kind, "shape": list(s.shape),
            "dynamic": {str(d): list(b) for d, b in s.dynamic.items()}, "dtype": s.dtype,
            "device": s.device, "stride": list(s.stride), "requires_grad": s.requires_grad,
            "gets_grad": i in grads_in, "mutated": i in mutated,
            "dtensor": _dtensor_row(s.dtensor, conv.meshes),
        })
    return inputs, {"tensors": n_weights, "elements": n_elem, "bytes": n_bytes}


def _dtensor_row(layout: Any, meshes: tuple) -> dict[str, Any] | None:
    """A DTensor input's placements, mesh and global shape (its row's shape is the local
    shard the graph takes)."""
    if layout is None:
        return None
    mesh = meshes[layout.mesh]
    return {"placements": list(layout.placements),
            "mesh": mesh_text(mesh.device_type, mesh.shape, mesh.dim_names),
            "shape": list(layout.shape),
            "stride": list(layout.stride), "groups": list(mesh.groups)}


def invariant_checklist(art: Artifact) -> list[dict[str, Any]]:
    """The seven invariants for this artifact: enforced (checked here or per call), the
    caller's responsibility, or not applicable."""
    c, lw = art.captured, art.lowered
    dyn = [s.where for s in c.inputs if s.dynamic]
    rows = [
        (1, "enforced", "capture found no closed-over tensor or plain module attribute; "
                        f"{len(c.inputs)} tensors are graph inputs"),
        (2, "enforced", "parameter/buffer names, order, tying, shapes, dtypes and devices "
                        "are checked on every call"),
        (3, "enforced" if not c.baked else "caller",
         ("shapes are checked per call" + (f"; dynamic: {', '.join(dyn)}" if dyn else "")
          + (f"; {len(lw.convention.guards)} guard(s) on dynamic sizes checked per call"
             if lw.convention.guards else "")
          + "; Python control flow was specialized to the example"
          + (f"; {len(lw.convention.data_guards)} branch(es) on tensor data kept as the "
             "example took them, checked inside the graph on every call (data guards: "
             + "; ".join(dict.fromkeys(g.source or g.expr for g in lw.convention.data_guards))
             + ")" if lw.convention.data_guards else "")
          + (f"; baked non-tensor values (checked per call): "
             f"{', '.join(w for w, _ in c.baked)}" if c.baked else ""))),
        (4, "enforced", (f"{len(c.mutated)} mutated input(s)/buffer(s) written back; "
                         f"{len(c.aliases)} result(s) alias inputs")),
        (5, "enforced" if lw.convention.grads else "n/a",
         (f"gradients accumulate into .grad of {len(lw.convention.grads)} tensor(s)"
          if lw.convention.grads
          else "fn runs no backward")),
        (6, "enforced", "dtype and device checked per call"
         + ("; strides (layout) checked per call" if lw.convention.check_strides else
            "; eager backend accepts any layout")),
        (7, "caller", "python_code is code: load only pairs you trust; the cache's tag "
                      "(code_hash, backend, torch build) is verified on load"),
    ]
    return [{"number": n, "title": _PC_INVARIANTS[n], "status": st, "detail": d}
            for n, st, d in rows]


def error_data(e: PrecompileError) -> dict[str, Any]:
    """A PrecompileError as plain data for the violation explorer."""
    return {
        "what": e.what, "invariant": e.invariant,
        "title": _PC_INVARIANTS.get(e.invariant) if e.invariant else None,
        "stage": e.stage, "where": e.where,
        "expected": _plain(e.expected),
        "actual": _plain(e.actual),
        "hint": e.hint, "extra": {k: v if isinstance(v, (str, int, float, list, dict,
                                                         type(None))) else repr(v)
                                  for k, v in e.extra.items()},
        "message": str(e),
    }


def _plain(v: Any) -> Any:
    """expected/actual as JSON-able data: a dict of fields stays a dict (the explorer shows
    it field by field), scalars stay scalars, anything else becomes its str."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)


def _attributes_read(conv: Any) -> tuple[tuple[str, Any], ...]:
    """(where, value) of each model attribute fn read (Note [module attributes read])."""
    return tuple((attribute_where(a.path, r), r.value)
                 for a in conv.args if isinstance(a, ModuleArg) for r in a.attrs)
