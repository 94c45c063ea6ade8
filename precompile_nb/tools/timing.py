"""Profile, the measuring primitives: wall time per step, a torch.profiler run, and the GPU time
of each record_function range (Note [GPU time of a range]). Shared by the artifact's profile
(profile.py) and the eager modules' (profile_eager.py).
"""
from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

_KERNEL_RANGE = "pcnb.kernel#"
_MODULE_RANGE = "pcnb.module#"
_STEP_RANGE = "pcnb.step"




def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _wall_seconds(call: Callable[[], Any], steps: int, warmup: int, cuda: bool) -> float:
    """The median wall time of one call, warmed up, with no profiler running and nothing
    instrumented (synchronized on CUDA): the step time the rows add up to. Medians here and
    for CPU kernel times: a busy machine stalls a call now and then, and one stall would
    otherwise move the mean of a few calls by more than the step takes."""
    for _ in range(warmup):
        call()
    _sync(cuda)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        call()
        _sync(cuda)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _per_step(calls: Sequence[float], steps: int) -> float:
    """Seconds per step from the times of every call: the median call times the calls per
    step (see _wall_seconds on medians)."""
    return statistics.median(calls) * len(calls) / steps if calls else 0.0


def _profiled(call: Callable[[], Any], steps: int, cuda: bool) -> Any:
    """torch.profiler over `steps` calls, each in a "pcnb.step" range."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    call()  # once more with the ranges in place, outside the profile
    _sync(cuda)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            with torch.profiler.record_function(_STEP_RANGE):
                call()
            _sync(cuda)
    return prof


# Note [GPU time of a range]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# The profiler links a GPU kernel to the CPU side in two ways at once (the innermost op, and
# the runtime call that launched it), so a record_function range's device_time_total counts
# an extern kernel (aten::mm -> cudaLaunchKernel -> the cuBLAS kernel) twice, and its
# `kernels` list can be empty. Instead each GPU event is matched to its launch call by the
# correlation id they share, and the launch call's CPU ancestors name the range. The GPU-side
# copies of record_function ranges (device events named like the range, spanning its first to
# last kernel) are skipped: they are no work of their own.


def _gpu_seconds(events: Sequence[Any], prefix: str) -> dict[str, float]:
    """GPU time per range named `prefix...`: each GPU kernel (or memcpy/memset) goes to the
    range around the CPU call that launched it. See Note [GPU time of a range]."""
    out: dict[str, float] = defaultdict(float)
    for owner, t in _gpu_by_owner(events, lambda e: e.name.startswith(prefix)).items():
        out[owner.name] += t
    return out


def _gpu_by_owner(events: Sequence[Any], is_owner: Callable[[Any], bool]) -> dict[Any, float]:
    """GPU seconds per CPU event: each GPU event goes to the nearest CPU ancestor of its launch
    call for which `is_owner` holds."""
    launches: dict[int, Any] = {}
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith("cu"):
            launches.setdefault(e.id, e)  # cudaLaunchKernel, cuLaunchKernelEx, cudaMemsetAsync
    out: dict[Any, float] = defaultdict(float)
    for e in events:
        if (e.device_type != torch.autograd.DeviceType.CUDA
                or getattr(e, "is_user_annotation", False) or e.name.startswith("pcnb.")):
            continue  # the GPU-side copy of a record_function range is no kernel
        owner = launches.get(e.id)
        while owner is not None and not is_owner(owner):
            owner = owner.cpu_parent
        if owner is not None:
            out[owner] += e.time_range.elapsed_us() / 1e6
    return out
