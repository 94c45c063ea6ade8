"""torch internals of autotuning one compiled CUDA graph at several sizes (Note [a configuration
per size] in core/tuning.py): Inductor's autotuner keeps one configuration per Triton kernel and
frees the others; here it is run once per size, each kernel's choice and size arguments are
recorded, and its configurations are given back before the next size. Checked on 2.11 (H200)
and, for the names patched, 2.13 and 2.15.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple


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
                rec = _launch_record(tuner, th)
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
