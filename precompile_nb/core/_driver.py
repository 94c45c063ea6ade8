# ---- precompile_nb driver (copied verbatim into every artifact; imports only torch) ----
# The driver is the artifact's calling convention made executable: it checks the arguments
# against the metadata literal _PC_META, flattens the model(s) into graph inputs, calls the
# compiled graph, writes mutations back, rebuilds aliases and scatters gradients.
# See Note [one driver, two homes] in precompile_nb/core/emit.py.
import torch as _pc_torch
from torch.utils import _pytree as _pc_pytree

_PC_INVARIANTS = {
    1: "everything live is an input",
    2: "the runtime model matches the traced one structurally",
    3: "control flow and shapes are specialized to the example",
    4: "boundary effects are captured; uncapturable side effects are rejected",
    5: "backward is part of the computation",
    6: "dtype, device and (inductor) layout are specialized",
    7: "python_code and cache are trusted executable input",
}


def _pc_format_violation(what, invariant=None, stage=None, where=None, expected=None,
                         actual=None, hint=None):
    """One message a person can act on: what happened, the invariant, where, expected vs
    actual, and the fix."""
    lines = [what]
    if invariant is not None:
        lines.append(f"  invariant {invariant}: {_PC_INVARIANTS.get(invariant, '?')}")
    if stage is not None:
        lines.append(f"  stage:    {stage}")
    if where is not None:
        lines.append(f"  where:    {where}")
    if expected is not None or actual is not None:
        lines.append(f"  expected: {expected}")
        lines.append(f"  actual:   {actual}")
    if hint is not None:
        lines.append(f"  fix:      {hint}")
    return "\n".join(lines)


class PrecompileError(RuntimeError):
    """Raised when capture, lowering, load or a call breaks the precompile programming model.

    Structured fields (for tools): invariant (1-7 or None), stage ('capture', 'lower', 'load',
    'call'), where (argument path, parameter name, variable or graph node), expected, actual,
    hint (the fix), and extra (a dict of further details, e.g. graph node names, source lines).
    """

    def __init__(self, what, *, invariant=None, stage=None, where=None, expected=None,
                 actual=None, hint=None, extra=None):
        self.what = what
        self.invariant = invariant
        self.stage = stage
        self.where = where
        self.expected = expected
        self.actual = actual
        self.hint = hint
        self.extra = dict(extra or {})
        super().__init__(_pc_format_violation(what, invariant, stage, where, expected,
                                              actual, hint))


def _pc_describe(t):
    """The fields of a tensor that the artifact is specialized to, in the words of _PC_META."""
    return (f"shape={list(t.shape)} dtype={str(t.dtype).replace('torch.', '')} "
            f"device={t.device} stride={list(t.stride())}")


def _pc_decode_const(v):
    # dtypes and devices are stored as tagged lists so _PC_META stays a plain literal
    if isinstance(v, list) and len(v) == 2 and v[0] == "__torch.dtype__":
        return getattr(_pc_torch, v[1])
    if isinstance(v, list) and len(v) == 2 and v[0] == "__torch.device__":
        return _pc_torch.device(v[1])
    return v


# Note [module structure cache]
#   Invariant 2 is checked on every call, but re-deriving the model's tensors through
#   named_parameters()/named_buffers() (generators over named_modules, prefix strings, memo
#   sets) is most of a small model's per-call cost. So the driver remembers the *structure*
#   that walk saw last time -- per visited module its class and the key order of its
#   _modules/_parameters/_buffers dicts, plus which entries were None and which were the
#   same object as an earlier one (shared submodules, tied weights) -- and on each call
#   re-reads those dicts directly and checks all of it again. The walk's result is a pure
#   function of exactly that structure, so when it matches, the tensors read are the ones
#   named_parameters() + named_buffers() would give, under the same (already validated)
#   names; when anything differs (a new or removed parameter, a re-tied weight, a swapped
#   submodule, another model class) the driver takes the original walk, which raises the
#   precise error or, when the names still match, records the new structure. The plan holds
#   no reference to any model or tensor (only classes, key tuples and index patterns), so
#   it never keeps a model alive and serves every instance built the same way. A module
#   class that customises the walk (named_modules, named_parameters, named_buffers,
#   _named_members, __hash__/__eq__) or non-dict storage always takes the original walk.

_PC_NONE_ID = id(None)


def _pc_pattern(vals):
    """Identity pattern of a sequence: -1 for None, else the index of the first entry that
    is the same object (so tying and sharing are visible, but no object is retained)."""
    first = {}
    return tuple(-1 if v is None else first.setdefault(id(v), i) for i, v in enumerate(vals))


def _pc_module_plan(root):
    """The structure plan of `root` (see Note [module structure cache]), or None when it
    cannot be used for this model. Only called after the original walk accepted `root`."""
    Module = _pc_torch.nn.Module
    stock = (Module.named_modules, Module.named_parameters, Module.named_buffers,
             Module._named_members, Module.__hash__, Module.__eq__)
    types, mkeys, pkeys, bkeys, src = [], [], [], [], []
    cands, praw, braw = [root], [], []
    seen = {id(root)}

    def visit(mod, at):
        cls = type(mod)
        if (cls.named_modules, cls.named_parameters, cls.named_buffers, cls._named_members,
                cls.__hash__, cls.__eq__) != stock:
            return False
        dicts = (mod._modules, mod._parameters, mod._buffers)
        if any(type(d) is not dict for d in dicts):
            return False
        types.append(cls)
        src.append(at)
        mkeys.append(tuple(dicts[0]))
        pkeys.append(tuple(dicts[1]))
        bkeys.append(tuple(dicts[2]))
        praw.extend(dicts[1].values())
        braw.extend(dicts[2].values())
        children = list(dicts[0].values())
        base = len(cands)
        cands.extend(children)
        for j, child in enumerate(children):
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                if not visit(child, base + j):
                    return False
        return True

    if not visit(root, 0):
        return None
    mpat, ppat, bpat = _pc_pattern(cands), _pc_pattern(praw), _pc_pattern(braw)
    psel = tuple(i for i, k in enumerate(ppat) if k == i)
    bsel = tuple(i for i, k in enumerate(bpat) if k == i)
    # None for the all-distinct pattern: checked with one set instead of a full pattern
    plain = lambda pat: None if pat == tuple(range(len(pat))) else pat  # noqa: E731
    return (tuple(zip(types, src, mkeys, pkeys, bkeys)), plain(mpat), plain(ppat),
            plain(bpat), psel, bsel, len(ppat) == len(psel) and len(bpat) == len(bsel))


def _pc_plan_tensors(root, plan):
    """The tensors named_parameters() + named_buffers() give for `root`, read through the
    structure plan; None when `root`'s structure differs from the plan in any way."""
    visits, mpat, ppat, bpat, psel, bsel, all_selected = plan
    cands = [root]
    praw = []
    braw = []
    for cls, at, mk, pk, bk in visits:
        mod = cands[at]
        if type(mod) is not cls:
            return None
        # an empty dict stays empty: truthiness is cheaper than building a key tuple
        d = mod._modules
        if mk:
            if tuple(d) != mk:
                return None
            cands += d.values()
        elif d:
            return None
        d = mod._parameters
        if pk:
            if tuple(d) != pk:
                return None
            praw += d.values()
        elif d:
            return None
        d = mod._buffers
        if bk:
            if tuple(d) != bk:
                return None
            braw += d.values()
        elif d:
            return None
    # With no shared or None submodule in the plan, a submodule that became shared is
    # visited twice here, so its tensors would repeat and fail the tensor patterns below;
    # one with no tensors in its subtree names nothing either way. So only a plan with
    # sharing needs the module pattern itself.
    if mpat is not None and _pc_pattern(cands) != mpat:
        return None
    if ppat is None:
        ids = set(map(id, praw))
        if len(ids) != len(praw) or _PC_NONE_ID in ids:
            return None
    elif _pc_pattern(praw) != ppat:
        return None
    if bpat is None:
        if braw:
            ids = set(map(id, braw))
            if len(ids) != len(braw) or _PC_NONE_ID in ids:
                return None
    elif _pc_pattern(braw) != bpat:
        return None
    if all_selected:
        praw += braw
        return praw
    return [praw[i] for i in psel] + [braw[i] for i in bsel]


def _pc_batch_guard(flat):
    """One C++ check of every graph input at once -- exact type, dispatch keys, dtype,
    device, requires_grad, sizes and strides equal to `flat`'s (torch._C._dynamo.guards.
    TensorGuards, what Dynamo's guards used; present in torch 2.0-2.14). It accepts a
    subset of what the driver's own checks accept, so a pass skips them and a miss falls
    back to them. None where torch lacks it or it does not take these tensors."""
    try:
        from torch._C._dynamo.guards import TensorGuards
        guard = TensorGuards(*flat, dynamic_dims_sizes=[list(t.shape) for t in flat],
                             dynamic_dims_strides=[list(t.stride()) for t in flat])
        return guard.check if guard.check(*flat) else None
    except Exception:  # noqa: BLE001 - an optional fast path: the Python checks remain
        return None


def _pc_make_forward(meta, graph_call, error_class=None):
    """Build the artifact's forward(*args) from its metadata and its compiled graph."""
    Err = error_class or PrecompileError
    inputs = meta["inputs"]
    check_strides = meta["check_strides"]
    fn_name = meta["fn_name"]

    # Per graph input: (where, shape-or-None, dtype, device, stride-or-None, spec).
    # A shape of None means "some dims are dynamic": checked dim by dim.
    checks = []
    for spec in inputs:
        dyn = {int(d): b for d, b in spec.get("dynamic", {}).items()}
        shape = None if dyn else _pc_torch.Size(spec["shape"])
        stride = tuple(spec["stride"]) if (check_strides and not dyn) else None
        checks.append((spec["where"], shape, getattr(_pc_torch, spec["dtype"]),
                       _pc_torch.device(spec["device"]), stride, spec, dyn))
    # The hot-path form of the same checks: one tuple per input, compared in one go with
    # (t.shape, t.dtype, device, stride) -- device is t.is_cpu when every input is on the
    # CPU (exact there, and cheaper than building t.device), the stride None for the eager
    # backend. Only used when no input has a dynamic dim; any mismatch re-runs the full
    # checks, which raise the precise error.
    has_dynamic = any(c[1] is None for c in checks)
    all_cpu = all(c[3].type == "cpu" for c in checks)
    fast_checks = [(tuple(shape), dtype, True if all_cpu else device, stride)
                   for _, shape, dtype, device, stride, _, _ in checks] if not has_dynamic else []

    constants = [
        _pc_torch.tensor(c["data"], dtype=getattr(_pc_torch, c["dtype"]),
                         device=c["device"]).reshape(c["shape"])
        for c in meta["constants"]
    ]

    # Per positional argument: what it is and how it becomes graph inputs.
    arg_plan = []
    for a in meta["args"]:
        kind = a["kind"]
        if kind == "module":
            arg_plan.append((kind, a["path"], tuple(a["names"]), a["n_params"],
                             a.get("training")))
        elif kind == "pytree":
            leaves = [(lf["kind"], _pc_decode_const(lf.get("value"))) for lf in a["leaves"]]
            arg_plan.append((kind, a["path"], _pc_pytree.treespec_loads(a["spec"]), leaves,
                             a["leaf_paths"]))
        elif kind == "const":
            arg_plan.append((kind, a["path"], _pc_decode_const(a["value"])))
        else:  # "tensor"
            arg_plan.append((kind, a["path"]))
    nargs = len(arg_plan)
    plan_tensors = _pc_plan_tensors
    module_plan = _pc_module_plan

    mutations = [tuple(m) for m in meta["mutations"]]
    grads = [tuple(g) for g in meta["grads"]]
    out_meta = meta["outputs"]
    out_spec = _pc_pytree.treespec_loads(out_meta["spec"])
    out_leaves = []
    for lf in out_meta["leaves"]:
        k = lf["kind"]
        if k == "graph":
            out_leaves.append((0, lf["index"], None))
        elif k == "input":
            out_leaves.append((1, lf["index"], None))
        elif k == "alias":
            out_leaves.append((2, lf["index"], (lf["size"], lf["stride"], lf["offset"])))
        else:
            out_leaves.append((3, _pc_decode_const(lf["value"]), None))
    single_graph_output = (out_spec.is_leaf() and len(out_leaves) == 1
                           and out_leaves[0][0] == 0)
    device_types = sorted({_pc_torch.device(s["device"]).type for s in inputs} or {"cpu"})
    single_device_type = len(device_types) == 1
    is_autocast_enabled = _pc_torch.is_autocast_enabled
    # torch.no_grad() is exactly "remember is_grad_enabled(), set it False, restore it":
    # done inline (try/finally) it costs a tenth of the context manager (grad_mode.py).
    is_grad_enabled = _pc_torch.is_grad_enabled
    set_grad_enabled = _pc_torch._C._set_grad_enabled
    Tensor = _pc_torch.Tensor
    tensor_types = {Tensor, _pc_torch.nn.Parameter}  # exact types: skip isinstance
    Module = _pc_torch.nn.Module
    # the graph's `call` empties the list it is given (Inductor frees inputs early): pass
    # `flat` itself only when nothing reads it afterwards
    reuse_flat = not (constants or mutations or grads
                      or any(k in (1, 2) for k, _, _ in out_leaves))
    # one structure plan per module argument (Note [module structure cache]); None until
    # the first call, False where the model's classes customise the walk
    plans = [None] * nargs
    # The batch guard (_pc_batch_guard): built from the inputs of a call the full checks
    # accepted; rebuilt when a later accepted call differs in what only it looks at (e.g.
    # requires_grad), at most a few times, then the Python checks alone.
    guard = [None, 8]  # [check or None, rebuilds left]
    n_inputs = len(checks)  # the guard raises (TypeError) on another count

    def input_table(flat):
        # every graph input, expected vs actual: the explorer marks the rows that differ
        rows = []
        for j, x in enumerate(flat):
            sj = checks[j][5]
            exp = (f"shape={_pc_shape_str(sj)} dtype={sj['dtype']} device={sj['device']}"
                   + (f" stride={sj['stride']}" if checks[j][4] is not None else ""))
            act = _pc_describe(x) if isinstance(x, Tensor) else type(x).__name__
            ok = (isinstance(x, Tensor) and x.dtype == checks[j][2]
                  and x.device == checks[j][3]
                  and (checks[j][1] is None or x.shape == checks[j][1])
                  and (checks[j][4] is None or x.stride() == checks[j][4]))
            rows.append({"where": checks[j][0], "expected": exp, "actual": act,
                         "mismatch": not ok})
        return rows

    def fail_tensor(i, t, flat=None):
        where, shape, dtype, device, stride, spec, dyn = checks[i]
        if not isinstance(t, Tensor):
            raise Err(f"{fn_name}: {where} must be a tensor", invariant=6, stage="call",
                      where=where, expected="torch.Tensor", actual=type(t).__name__,
                      hint="pass the same kind of value as at capture")
        exp = (f"shape={_pc_shape_str(spec)} dtype={spec['dtype']} device={spec['device']}"
               + (f" stride={spec['stride']}" if stride is not None else ""))
        if t.dtype != dtype or t.device != device:
            inv, what, hint = 6, "dtype or device differs from the example", (
                f"convert it: {where}.to(device='{spec['device']}', "
                f"dtype=torch.{spec['dtype']}), or precompile again with such an example")
        elif stride is not None and t.shape == shape:
            inv, what, hint = 6, "memory layout (strides) differs from the example", (
                "the inductor artifact is specialized to the example's layout: pass "
                f"{where}.contiguous() (or the example's memory format), or use "
                "backend='eager' which accepts any layout")
        elif spec.get("kind") in ("param", "buffer"):
            inv, what = 2, "a model parameter/buffer has another shape than when traced"
            hint = ("build the model with the same configuration as at capture and load "
                    "your weights into it")
        else:
            inv, what = 3, "shape differs from the example"
            hint = ("shapes are specialized at capture: pass the example's shape, or mark the "
                    "dimension dynamic with torch._dynamo.decorators.mark_unbacked(t, dim) "
                    "before precompile (inductor backend)")
            if dyn:
                hint = ("only the dims marked dynamic may vary, within their bounds; "
                        + hint)
        raise Err(f"{fn_name}: {where}: {what}", invariant=inv, stage="call", where=where,
                  expected=exp, actual=_pc_describe(t), hint=hint,
                  extra={"inputs": input_table(flat)} if flat is not None else None)

    def check_all(flat):
        for i, t in enumerate(flat):
            c = checks[i]
            if c[1] is None:
                check_dynamic(i, t)
            elif (not isinstance(t, Tensor) or t.shape != c[1] or t.dtype != c[2]
                  or t.device != c[3] or (c[4] is not None and t.stride() != c[4])):
                fail_tensor(i, t, flat)

    def check_dynamic(i, t):
        where, _, dtype, device, _, spec, dyn = checks[i]
        if t.dtype != dtype or t.device != device or t.dim() != len(spec["shape"]):
            fail_tensor(i, t)
        for d, n in enumerate(t.shape):
            if d in dyn:
                lo, hi = dyn[d]
                if (lo is not None and n < lo) or (hi is not None and n > hi):
                    raise Err(f"{fn_name}: {where}: dynamic dim {d} out of its bounds",
                              invariant=3, stage="call", where=f"{where}.shape[{d}]",
                              expected=f"{lo} <= size <= {hi}", actual=n,
                              hint="pass a size inside the bounds given to mark_unbacked")
            elif n != spec["shape"][d]:
                fail_tensor(i, t)
        if check_strides and not t.is_contiguous():
            # invariant 6: with dynamic dims we specialize to contiguous layout
            raise Err(f"{fn_name}: {where}: memory layout differs from the example",
                      invariant=6, stage="call", where=where, expected="contiguous",
                      actual=_pc_describe(t), hint=f"pass {where}.contiguous()")

    def flatten_module(path, names, n_params, training, m):
        if not isinstance(m, Module):
            raise Err(f"{fn_name}: {path} must be an nn.Module", invariant=2, stage="call",
                      where=path, expected="torch.nn.Module", actual=type(m).__name__,
                      hint="pass the model (the same architecture as at capture)")
        named = list(m.named_parameters()) + list(m.named_buffers())
        if len(named) != len(names) or any(n != e for (n, _), e in zip(named, names)):
            got = [n for n, _ in named]
            diff = next((k for k, (a, b) in enumerate(zip(names, got)) if a != b),
                        min(len(names), len(got)))
            raise Err(f"{fn_name}: {path}: the model's parameters/buffers differ from the "
                      "traced model", invariant=2, stage="call", where=path,
                      expected=f"{len(names)} entries, #{diff} = "
                               f"{names[diff] if diff < len(names) else '(end)'}",
                      actual=f"{len(got)} entries, #{diff} = "
                             f"{got[diff] if diff < len(got) else '(end)'}",
                      hint="build the model exactly as at capture (same class, config and "
                           "weight tying) and load your weights into it")
        if training is not None and m.training != training:
            raise Err(f"{fn_name}: {path}: train/eval mode differs from the traced model",
                      invariant=3, stage="call", where=f"{path}.training",
                      expected=training, actual=m.training,
                      hint=f"call {path}.{'train' if training else 'eval'}() first, or "
                           "precompile the other mode too")
        return [t for _, t in named]

    def forward(*args):
        if len(args) != nargs:
            raise Err(f"{fn_name}: takes {nargs} positional arguments, got {len(args)}",
                      invariant=3, stage="call", where="arguments", expected=nargs,
                      actual=len(args), hint="call it as at capture, positionally")
        flat = []
        for k in range(nargs):
            plan = arg_plan[k]
            a = args[k]
            kind = plan[0]
            if kind == "tensor":
                flat.append(a)
            elif kind == "module":
                mplan = plans[k]
                tensors = plan_tensors(a, mplan) if mplan else None
                if tensors is None:  # first call, or the structure changed: the full walk
                    tensors = flatten_module(plan[1], plan[2], plan[3], plan[4], a)
                    if mplan is not False:  # False: this model class customises the walk
                        plans[k] = module_plan(a) or False
                elif plan[4] is not None and a.training != plan[4]:
                    flatten_module(plan[1], plan[2], plan[3], plan[4], a)  # raises
                flat += tensors
            elif kind == "pytree":
                leaves, spec = _pc_pytree.tree_flatten(a)
                if spec != plan[2]:
                    raise Err(f"{fn_name}: {plan[1]}: structure differs from the example",
                              invariant=3, stage="call", where=plan[1],
                              expected=str(plan[2]), actual=str(spec),
                              hint="pass the same nesting of lists/tuples/dicts as at capture")
                for (lk, lv), leaf, lpath in zip(plan[3], leaves, plan[4]):
                    if lk == "tensor":
                        flat.append(leaf)
                    elif type(leaf) is not type(lv) or leaf != lv:
                        raise Err(f"{fn_name}: {lpath}: non-tensor value differs from the "
                                  "one baked at capture", invariant=3, stage="call",
                                  where=lpath, expected=repr(lv), actual=repr(leaf),
                                  hint="non-tensor inputs are baked: pass the captured value, "
                                       "or precompile again with the new one (or pass it as "
                                       "a tensor)")
            elif type(a) is not type(plan[2]) or a != plan[2]:
                raise Err(f"{fn_name}: {plan[1]}: non-tensor value differs from the one baked "
                          "at capture", invariant=3, stage="call", where=plan[1],
                          expected=repr(plan[2]), actual=repr(a),
                          hint="non-tensor inputs are baked: pass the captured value, or "
                               "precompile again with the new one (or pass it as a tensor)")
        if has_dynamic:
            check_all(flat)
        elif guard[0] is None or len(flat) != n_inputs or not guard[0](*flat):
            for t, c in zip(flat, fast_checks):
                if not ((type(t) in tensor_types or isinstance(t, Tensor))
                        and (t.shape, t.dtype, t.is_cpu if all_cpu else t.device,
                             t.stride() if check_strides else None) == c):
                    check_all(flat)
                    break
            if guard[1] > 0:  # accepted: guard the next calls with one C++ check
                guard[1] -= 1
                guard[0] = _pc_batch_guard(flat)
        grad_was = is_grad_enabled()
        set_grad_enabled(False)
        try:
            # Ambient autocast would re-cast the graph's ops: the artifact is specialized, so
            # neutralise it (SPEC §4).
            if (is_autocast_enabled(device_types[0]) if single_device_type
                    else any(is_autocast_enabled(d) for d in device_types)):
                with _pc_torch.autocast(device_types[0], enabled=False):
                    outs = graph_call(flat if reuse_flat else flat + constants)
            else:
                outs = graph_call(flat if reuse_flat else flat + constants)
            for i, o in mutations:
                flat[i].copy_(outs[o])  # invariant 4: write mutations back
            for i, o in grads:  # invariant 5: accumulate like eager .backward()
                p = flat[i]
                if p.grad is None:
                    p.grad = outs[o]
                else:
                    p.grad += outs[o]
        finally:
            set_grad_enabled(grad_was)
        if single_graph_output:
            return outs[out_leaves[0][1]]
        res = []
        for k, v, extra in out_leaves:
            if k == 0:
                res.append(outs[v])
            elif k == 1:
                res.append(flat[v])
            elif k == 2:
                res.append(flat[v].as_strided(*extra))  # invariant 4: aliases stay aliases
            else:
                res.append(v)
        return _pc_pytree.tree_unflatten(res, out_spec)

    forward.__name__ = fn_name
    forward.__qualname__ = fn_name
    return forward


def _pc_shape_str(spec):
    dyn = spec.get("dynamic", {})
    return "[" + ", ".join(
        f"<dynamic {str(d)}>" if str(d) in dyn or d in dyn else str(n)
        for d, n in enumerate(spec["shape"])) + "]"
