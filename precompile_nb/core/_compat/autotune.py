"""torch internals of autotuning one compiled CUDA graph at several sizes (Note [a configuration
per size] in core/tuning.py): Inductor's autotuner keeps one configuration per Triton kernel and
frees the others; here it is run once per size, each kernel's choice and size arguments are
recorded, and its configurations are given back before the next size; and the run itself
(autotune_now). Checked on 2.11 (H200) and, for the names patched, 2.13 and 2.15.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch


class SizeChoice(NamedTuple):
    """What one multi-configuration Triton kernel chose in one run of the graph."""

    numel: dict[str, int]  # its size arguments in that run: {"xnumel": 4096, "r0_numel": 64}
    record: dict[str, Any]  # the launch record of the configuration chosen (_launch_record)


# what CachingAutotuner.autotune_to_one_config calls to free the configurations it did not
# choose (2.13-2.15; absent on 2.11, which only drops them from `launchers`)
_RELEASES = ("_release_static_launchers_except", "_prune_compile_results_to_launcher")


@contextlib.contextmanager
def tuning_at_sizes(kernel_vars: Sequence[str],
                    ) -> Iterator[Callable[[Callable[[], None], bool], dict[str, SizeChoice]]]:
    """Inside: `tune(run, keep_all)` calls `run()` (one call of the graph compiled just before,
    inside recording_triton_launchers) and returns {kernel variable: SizeChoice} for each
    kernel that chose among several configurations in it. With `keep_all`, every kernel has
    all its configurations again afterwards, so the next run tunes anew; without it, the
    run is Inductor's own (it keeps the one chosen, writes its best_config)."""
    from torch._inductor.runtime import triton_heuristics as th

    from .inductor import _launch_record, module_of_kernels

    module = module_of_kernels(kernel_vars) if kernel_vars else None
    var_of = {id(getattr(module, v)): v for v in kernel_vars} if module is not None else {}
    cls = th.CachingAutotuner
    seen: dict[int, tuple[Any, list, tuple]] = {}
    own_run = "run" in cls.__dict__  # 2.11-2.15 define it on the class itself
    original_run = cls.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if id(self) not in seen:  # its first launch in this run decides its configuration
            seen[id(self)] = (self, list(self.launchers),
                              tuple(a if type(a) is int else None for a in args))
        return original_run(self, *args, **kwargs)

    def tune(call: Callable[[], None], keep_all: bool) -> dict[str, SizeChoice]:
        seen.clear()
        kept = {n: cls.__dict__[n] for n in _RELEASES if keep_all and n in cls.__dict__}
        for n in kept:
            setattr(cls, n, lambda self, *a, **k: None)
        try:
            call()
            out = {}
            for key, (tuner, before, ints) in seen.items():
                if len(before) < 2 or key not in var_of:
                    continue
                rec = _launch_record(tuner, th, "")
                if "why" not in rec:
                    out[var_of[key]] = SizeChoice(
                        {n: a for n, a in zip(rec["def_args"], ints)
                         if a is not None and "numel" in n}, rec)
            return out
        finally:
            for n, f in kept.items():
                setattr(cls, n, f)
            if keep_all:
                for tuner, before, _ in seen.values():
                    tuner.launchers = before

    cls.run = run
    try:
        yield tune
    finally:
        if own_run:
            cls.run = original_run
        else:
            del cls.run


def autotune_now(compiled: Callable, example_inputs: Sequence[Any],
                 shapes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
                 values: Sequence[Any] = ()) -> None:
    """Run a freshly compiled CUDA graph once, inside its private compile cache, so that
    Inductor's autotuner benchmarks every multi-config Triton kernel now and writes its
    choice (`<kernel>.best_config`, 2.11-2.14: CachingAutotuner with autotune_local_cache)
    next to the kernel in the cache the artifact ships: neither load nor the first call
    benchmarks anything. Inputs are copies of `values` (the example's, Note [tuning on the
    example's values] in lower.py) laid out with each input's (shape, stride) from `shapes`
    (the example's, concrete where the fake input's are symbolic); where a value is None or
    not a plain tensor of that shape, dtype and device, a stand-in (random floats, zero
    integers: valid indices)."""
    args = []
    for k, (t, (shape, stride)) in enumerate(zip(example_inputs, shapes)):
        real = torch.empty_strided(shape, stride, dtype=t.dtype, device=t.device)
        v = values[k].detach() if k < len(values) and isinstance(values[k], torch.Tensor) \
            else None
        if (v is not None and type(v) is torch.Tensor and tuple(v.shape) == tuple(shape)
                and v.dtype == t.dtype and v.device == real.device):
            args.append(real.copy_(v))
        else:
            args.append(real.normal_() if real.is_floating_point() else real.zero_())
    with torch.no_grad():
        compiled(*args)
    torch.cuda.synchronize()
