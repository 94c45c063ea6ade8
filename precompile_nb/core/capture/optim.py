"""Capture, an optimizer argument (Note [optimizer at the boundary] in runtime/driver.py).

A torch.optim.Optimizer passed to fn is lifted like a model: each parameter it steps must be
a tensor of a model (or tensor) argument before it; its state tensors and tensor
hyperparameters become graph inputs; its other hyperparameters are baked and checked per
call. While fn runs under make_fx the optimizer is swapped onto the traced tensors (its own
param_groups, state, step and zero_grad are put back after), its step() is traced as
torch.compile traces it (`_compat.optimizer_step_tracing`: the step count stays a tensor,
capturable math), and what the traced step did to the state is checked.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ...runtime.convention import OptimArg, OptimGroup, OptimParam
from .. import _compat
from ..errors import PrecompileError, Problems

if TYPE_CHECKING:
    from .lifting import _Lifted

_LITERALS = (bool, int, float, str, type(None))
# the optimizers whose first step creates its state as zeros (and step 0): an empty state
# is then initialised as zeros, at capture for the trace and by the driver at a call
_ZERO_INIT = ("torch.optim.sgd.SGD", "torch.optim.adam.Adam", "torch.optim.adamw.AdamW")


@dataclasses.dataclass
class _OptimLift:
    """How flat_fn rebuilds one optimizer on the traced tensors."""

    # per group: [(param input, {state key: input})], {tensor hyperparameter: input}
    groups: list[tuple[list[tuple[int, dict[str, int]]], dict[str, int]]]
    arg: int  # the positional argument
    path: str


def is_optimizer(a: Any) -> bool:
    return isinstance(a, torch.optim.Optimizer)


def _class_name(opt: torch.optim.Optimizer) -> str:
    return f"{type(opt).__module__}.{type(opt).__qualname__}"


def _lift_optimizer(L: _Lifted, opt: torch.optim.Optimizer, path: str, i: int,
                    P: Problems) -> None:
    _refuse_options(opt, path, P)
    lift = _OptimLift(groups=[], arg=i, path=path)
    records = []
    for j, g in enumerate(opt.param_groups):
        params, recs = [], []
        for m, p in enumerate(g["params"]):
            k = L.index.get(id(p))
            if k is None:
                _param_not_lifted(path, j, m, P)
                continue
            keys = _lift_state(L, opt, p, path, L.specs[k].where, i, P)
            params.append((k, keys))
            recs.append(OptimParam(input=k, keys=tuple(keys)))
        names, values, tensors = _lift_hyper(L, g, f"{path}.param_groups[{j}]", i, P)
        lift.groups.append((params, tensors))
        records.append(OptimGroup(params=tuple(recs), names=tuple(names),
                                  values=tuple(values), tensors=tuple(tensors)))
    L.args.append(OptimArg(path=path, module=type(opt).__module__,
                           name=type(opt).__qualname__, groups=tuple(records),
                           zero_init=_class_name(opt) in _ZERO_INIT, grads_cleared=False))
    L.rebuild.append(("optim", lift))


def _refuse_options(opt: torch.optim.Optimizer, path: str, P: Problems) -> None:
    for j, g in enumerate(opt.param_groups):
        for key in ("fused", "differentiable"):
            if g.get(key):
                P.add(PrecompileError(
                    f"{path} was built with {key}=True, which precompile does not trace",
                    invariant=4, stage="capture", where=f"{path}.param_groups[{j}]['{key}']",
                    expected=f"{key}=False or None", actual=True,
                    hint="build it with the default for-loop or foreach=True implementation: "
                         "the whole step is compiled into one graph either way"))
                return


def _param_not_lifted(path: str, j: int, m: int, P: Problems) -> None:
    P.add(PrecompileError(
        f"{path} steps a tensor that is not a parameter of a model argument before it",
        invariant=1, stage="capture", where=f"{path}.param_groups[{j}]['params'][{m}]",
        expected="a parameter of a model passed to fn before the optimizer",
        actual="a tensor fn does not take",
        hint="pass the model(s) first and the optimizer after them: "
             "def step(model, opt, x, y), with opt built over model.parameters()"))


def _add(L: _Lifted, t: torch.Tensor, where: str, kind: str, i: int, P: Problems) -> int:
    k = len(L.tensors)
    L.index.setdefault(id(t), k)
    L.tensors.append(t)
    L.specs.append(L.spec(t, where, kind, i, P))
    return k


def _lift_state(L: _Lifted, opt: torch.optim.Optimizer, p: torch.Tensor, path: str,
                pwhere: str, i: int, P: Problems) -> dict[str, int]:
    """The graph inputs of one parameter's state, key by key; an empty state as the zeros
    the optimizer's first step creates (never written into the user's optimizer)."""
    where = f"{path}.state[{pwhere}]"
    state = opt.state.get(p) or _zero_state(opt, p, where, P)
    keys = {}
    for key, v in state.items():
        if not isinstance(v, torch.Tensor) or not isinstance(key, str):
            P.add(PrecompileError(
                f"{where}[{key!r}] is not a tensor", invariant=3, stage="capture",
                where=f"{where}[{key!r}]", expected="optimizer state made of tensors",
                actual=type(v).__name__,
                hint="precompile supports optimizers whose state is tensors (SGD, Adam, "
                     "AdamW, ...); keep this optimizer's step outside fn"))
            continue
        keys[key] = _add(L, v, f"{where}['{key}']", "state", i, P)
    return keys


def _zero_state(opt: torch.optim.Optimizer, p: torch.Tensor, where: str,
                P: Problems) -> dict[str, torch.Tensor]:
    """The state the optimizer's own first step creates for `p` (its _init_group), where
    that is zeros; else a refusal naming the fix."""
    g = next(g for g in opt.param_groups if any(q is p for q in g["params"]))
    name = _class_name(opt)
    if name == "torch.optim.sgd.SGD":
        if g["momentum"] == 0:
            return {}
        if g["dampening"] == 0:  # its first step copies grad; zeros * momentum + grad is it
            return {"momentum_buffer": torch.zeros_like(p, memory_format=torch.preserve_format)}
    elif name in _ZERO_INIT:
        on_device = g.get("capturable") or g.get("fused")
        zeros = lambda: torch.zeros_like(p, memory_format=torch.preserve_format)  # noqa: E731
        state = {"step": torch.zeros((), dtype=_compat.optimizer_scalar_dtype(),
                                     device=p.device if on_device else "cpu"),
                 "exp_avg": zeros(), "exp_avg_sq": zeros()}
        if g.get("amsgrad"):
            state["max_exp_avg_sq"] = zeros()
        return state
    P.add(PrecompileError(
        f"{where} is empty: the optimizer has not made its state yet", invariant=1,
        stage="capture", where=where, expected="the optimizer's state (its tensors are inputs)",
        actual="no state",
        hint="run one eager step first (loss.backward(); opt.step(); opt.zero_grad()), or load "
             "its state_dict, then precompile"))
    return {}


def _lift_hyper(L: _Lifted, g: dict, where: str, i: int, P: Problems
                ) -> tuple[list[str], list[Any], dict[str, int]]:
    """A group's hyperparameters: tensors become graph inputs, the rest is baked."""
    names, values, tensors = [], [], {}
    for key, v in g.items():
        if key == "params":
            continue
        at = f"{where}['{key}']"
        if isinstance(v, torch.Tensor):
            tensors[key] = _add(L, v, at, "hyper", i, P)
        elif _bakeable(v):
            names.append(key)
            values.append(list(v) if isinstance(v, tuple) else v)
        else:
            P.add(PrecompileError(
                f"{at} is a {type(v).__name__}, which cannot be baked", invariant=3,
                stage="capture", where=at,
                expected="a finite float/int/bool/str/None, a tuple of them, or a tensor",
                actual=f"{type(v).__name__}: {v!r:.80}",
                hint="give the optimizer plain numbers, or a tensor (a graph input) for a "
                     "value that changes (lr=torch.tensor(1e-3))"))
    return names, values, tensors


def _bakeable(v: Any) -> bool:
    """A hyperparameter the artifact can write as a literal and compare per call."""
    if isinstance(v, tuple):
        return all(_bakeable(x) for x in v if not isinstance(x, tuple)) and not any(
            isinstance(x, tuple) for x in v)
    return isinstance(v, _LITERALS) and not (isinstance(v, float) and not math.isfinite(v))


@contextlib.contextmanager
def traced_optimizer(opt: torch.optim.Optimizer, lift: _OptimLift,
                     ws: Sequence[torch.Tensor], state: dict[str, Any],
                     P: Problems) -> Iterator[None]:
    """`opt` on the traced tensors while fn runs: param_groups and state rebuilt on them,
    step() traced as torch.compile traces it, zero_grad() watched for whether it comes
    before any gradient is read. Everything of `opt` is put back after."""
    saved = dict(vars(opt))
    groups, tstate = _swapped(opt, lift, ws)
    step, zero_grad = opt.step, opt.zero_grad
    seen: dict[str, Any] = {"step": False, "cleared": None}
    annotation = {"pc_role": "optimizer", "pc_module": lift.path}

    def traced_step(*args: Any, **kwargs: Any) -> Any:
        seen["step"] = True
        with _compat.optimizer_step_tracing(annotation):
            return step(*args, **kwargs)

    def traced_zero_grad(*args: Any, **kwargs: Any) -> Any:
        if seen["cleared"] is None:
            seen["cleared"] = not seen["step"] and all(
                p.grad is None for g in groups for p in g["params"])
        return zero_grad(*args, **kwargs)

    opt.param_groups, opt.state = groups, tstate
    opt.step, opt.zero_grad = traced_step, traced_zero_grad
    try:
        yield
        _check_state(lift, ws, tstate, P)
        state.setdefault("optim_cleared", {})[lift.arg] = bool(seen["cleared"])
    finally:
        vars(opt).clear()
        vars(opt).update(saved)


def _swapped(opt: torch.optim.Optimizer, lift: _OptimLift, ws: Sequence[torch.Tensor]
             ) -> tuple[list[dict], collections.defaultdict]:
    groups = []
    tstate: collections.defaultdict = collections.defaultdict(dict)
    for g, (params, tensors) in zip(opt.param_groups, lift.groups):
        ng = dict(g)
        ng["params"] = [ws[k] for k, _ in params]
        for name, k in tensors.items():
            # a tensor lr that requires grad takes SGD's tensor path (addcmul), not .item();
            # the step runs under no_grad, so no gradient ever reaches it
            ng[name] = ws[k].requires_grad_(True) if ws[k].is_floating_point() else ws[k]
        if "capturable" in ng:  # the step count stays a tensor (as torch.compile does)
            ng["capturable"] = True
        groups.append(ng)
        for k, keys in params:
            tstate[ws[k]] = {key: ws[i] for key, i in keys.items()}
    return groups, tstate


def _check_state(lift: _OptimLift, ws: Sequence[torch.Tensor], tstate: dict,
                 P: Problems) -> None:
    """The traced step must update the state it was given in place: a new or replaced
    state tensor would be a value the artifact cannot hand back."""
    for params, _ in lift.groups:
        for k, keys in params:
            got = tstate.get(ws[k], {})
            if set(got) != set(keys) or any(got[key] is not ws[i] for key, i in keys.items()):
                P.add(PrecompileError(
                    f"{lift.path}.step() replaced or added state tensors", invariant=4,
                    stage="capture", where=f"{lift.path}.state",
                    expected=f"state {sorted(keys)} updated in place",
                    actual=f"state {sorted(got)}",
                    hint="run one eager step first so the optimizer's state exists, then "
                         "precompile"))
                return


def finish_args(args: Sequence[Any], state: dict[str, Any]) -> tuple[Any, ...]:
    """The optimizer arguments with what the trace saw (does fn clear grads first)."""
    cleared = state.get("optim_cleared", {})
    return tuple(a._replace(grads_cleared=cleared.get(i, False))
                 if isinstance(a, OptimArg) else a for i, a in enumerate(args))
