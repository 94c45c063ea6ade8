"""Stage 3: emit(captured, lowered) -> python_code.

python_code is one self-contained module (needs only torch), in this order:
  header comment   what it is, how to call it, that it holds no weights
  graph            `call(args)`: Inductor's generated module, or the captured ATen graph
  metadata         `_PC_META = {...}`: the calling convention as plain literals; for Inductor,
                   `_PC_WARM = {...}`: which cached library serves which C++ kernel, and where
                   each extern kernel lives in torch (Note [warm load] in core/warm.py)
  driver           checks arguments, flattens models, calls the graph, writes back
Each section starts with a marker line `# ==== [precompile_nb:NAME] ====`.

Note [one driver, two homes]
  The driver is real code in `runtime/violation.py` (PrecompileError and its message) and
  `runtime/driver.py` (the records, their decoder, the call), imported by the package and
  copied verbatim, the one after the other, into every artifact, so an artifact exec'd
  where precompile_nb is not installed behaves exactly like one loaded through
  precompile.load. The metadata literal is the single source of truth: the driver is built
  from it at exec time, and load reads it back by AST without executing anything.
"""
from __future__ import annotations

import pprint
from pathlib import Path

import torch

from ..runtime import driver, violation
from ..runtime.convention import (
    ARTIFACT_FORMAT,
    ARTIFACT_VERSION,
    META_NAME,
    SECTIONS,
    ConstArg,
    Convention,
    ModuleArg,
    OptimArg,
    PytreeArg,
)
from . import warm
from .schemas import Captured, Lowered
from .tuning import tuning_record

# what every artifact runs: PrecompileError's section, then the driver (which the package
# imports from violation.py, Note [a load imports no driver] in load.py)
DRIVER_SOURCE = "\n\n".join(Path(m.__file__).read_text(encoding="utf-8").rstrip()
                              for m in (violation, driver)) + "\n"


def marker(name: str) -> str:
    return f"# ==== [precompile_nb:{name}] ===="


def metadata(lw: Lowered) -> dict:
    """The metadata literal: the header (format, version, backend, torch) and the calling
    convention's literal (see runtime/convention.py)."""
    return {"format": ARTIFACT_FORMAT, "version": ARTIFACT_VERSION, "backend": lw.backend,
            "torch": torch.__version__, **lw.convention.to_literal()}


def _signature(conv: Convention) -> str:
    parts = []
    for a in conv.args:
        if isinstance(a, ModuleArg):
            parts.append(f"{a.path}: nn.Module ({a.n_params} params, "
                         f"{len(a.names) - a.n_params} buffers)")
        elif isinstance(a, PytreeArg):
            parts.append(f"{a.path}: container of {len(a.leaves)} leaves")
        elif isinstance(a, ConstArg):
            parts.append(f"{a.path} = {a.value!r} (baked)")
        elif isinstance(a, OptimArg):
            n = sum(len(q.keys) for g in a.groups for q in g.params)
            parts.append(f"{a.path}: {a.name} ({sum(len(g.params) for g in a.groups)} params, "
                         f"{n} state tensors)")
        elif a.same_as >= 0:
            parts.append(f"{a.path}: the same tensor as {conv.inputs[a.same_as].where}")
        else:
            s = next(i for i in conv.inputs if i.where == a.path)
            parts.append(f"{a.path}: tensor {list(s.shape)} {s.dtype} {s.device}")
    return ", ".join(parts)


def emit(c: Captured, lw: Lowered) -> str:
    """Assemble the artifact's source. See the module docstring for its layout."""
    meta = metadata(lw)
    args = ", ".join(a.path if a.path.isidentifier() else f"arg{i}"
                     for i, a in enumerate(lw.convention.args))
    header = [
        f"# precompile_nb artifact: `{c.fn_name}`, compiled ahead of time "
        f"(backend={lw.backend}, torch {torch.__version__}).",
        "# Self-contained: needs only torch. It holds NO weights: pass the model(s) at every "
        "call.",
        f"# Call: ns = {{}}; exec(python_code, ns); result = ns['forward']({args})",
        f"#   or: f = precompile_nb.precompile.load(python_code, cache); result = f({args})",
        f"# Arguments (positional): {_signature(lw.convention)}",
        "# Executing this file runs code: only load artifacts you trust (invariant 7).",
        "",
    ]
    body = [
        marker("graph"), lw.source.rstrip(), "",
        marker("metadata"), f"{META_NAME} = " + pprint.pformat(meta, width=100, sort_dicts=False),
        "", *_warm_section(lw),
        marker("driver"), DRIVER_SOURCE.rstrip(), "",
        f"forward = _pc_make_forward({META_NAME}, call, "
        "globals().get('__precompile_error__'))", "",
    ]
    return "\n".join(header + body)


def _warm_section(lw: Lowered) -> list[str]:
    """The _PC_WARM literal (Note [warm load]), or nothing when the module has no kernel."""
    tuning = lw.tuning
    record = (warm.record(lw.source, lw.files, dict(lw.launches),
                          tuning.by_size if tuning is not None else None)
              if lw.backend == "inductor" else None)
    if record is None:
        return []
    if tuning is not None and tuning.at and tuning.at[0]:  # Note [a configuration per size]
        tuned = tuning_record(tuning)
        record["autotuned_at"], record["autotuned_kernels"] = tuned["at"], tuned["kernels"]
        if tuned["skipped"]:
            record["tuning_skipped"] = tuned["skipped"]
    return [f"{warm.WARM_NAME} = " + pprint.pformat(record, width=100, sort_dicts=False), ""]


def section_lines(python_code: str) -> dict[str, int]:
    """1-based line of each section marker, for the source viewer's jump list."""
    out = {}
    for k, ln in enumerate(python_code.splitlines(), start=1):
        for name in SECTIONS:
            if ln == marker(name):
                out[name] = k
    return out
