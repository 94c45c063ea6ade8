"""Hand-made viewer data for the tests: the two recorded reports and synthetic graphs. Plain
data only: nothing here builds anything with torch."""
from __future__ import annotations

import copy
import json
import pathlib
import re

DATA = pathlib.Path(__file__).parent / "data"

# a node statement of graph_to_dot's output (edges contain "->")
NODE_RE = re.compile(r'^\s*"(?:n|module):[^"\n]*" \[', re.M)


def load_report(name: str) -> dict:
    return json.loads((DATA / f"report_{name}.json").read_text())


def node(name, *, target="aten.add.Tensor", args=(), role="compute", module="",
         op="call_function", shape=(2, 3), dtype="float32"):
    return {"name": name, "op": op, "target": target, "args": list(args),
            "shape": None if shape is None else list(shape), "dtype": dtype, "role": role,
            "module": module, "stack": None}


def layered_graph(n_modules: int, ops_per_module: int, *, prefix: str = "layers") -> list[dict]:
    """An input, then a chain of modules `prefix.K` of `ops_per_module` ops each, shaped like
    an ATen graph: each op reads the previous one, the module's weight is read by its first
    op, and every 10th op also reads the op 10 before it (a residual), then an output."""
    nodes = [node("x", op="placeholder", target="x", role="input")]
    prev = "x"
    for m in range(n_modules):
        mod = f"{prefix}.{m}"
        w = f"w{m}"
        nodes.append(node(w, op="placeholder", target=f"{mod}.weight", role="param"))
        for k in range(ops_per_module):
            name = f"op{m}_{k}"
            args = [prev, w] if k == 0 else [prev]
            if k >= 10 and k % 10 == 0:
                args.append(f"op{m}_{k - 10}")
            nodes.append(node(name, args=args, module=mod,
                              role="compute" if k % 2 else "gradient"))
            prev = name
    nodes.append(node("output", op="output", target="output", args=[prev], role="output",
                      shape=None, dtype=None))
    return nodes


def node_count(dot: str) -> int:
    return len(NODE_RE.findall(dot))


def with_changes(data: dict, **changes) -> dict:
    out = copy.deepcopy(data)
    out.update(changes)
    return out
