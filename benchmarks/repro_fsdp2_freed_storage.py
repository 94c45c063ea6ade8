"""Why tracing a fully_shard (FSDP2) model crashed the process (SIGSEGV, torch 2.13, 2 gloo
ranks), reduced to what happens. Not a benchmark: a repro, kept for the record.

    python benchmarks/repro_fsdp2_freed_storage.py           # exits 139 (SIGSEGV) on 2.13

The chain, measured on 2.13 with a Python trace of every call before the crash:
  1. after one eager step FSDP2 is lazily initialised; its pre-forward hook then all-gathers
     into buffers FSDP2 owns and, after use, frees them by resizing their storage to 0 bytes
     (FSDPParam.free_unsharded_param -> free_storage: storage.resize_(0)), keeping the
     tensors;
  2. run inside a make_fx trace, those hooks hand the trace FSDP2's real buffers, which the
     graph records as constants (real tensors read by the computation);
  3. precompile's invariant-1 check then looked at each constant's values (isfinite), and a
     tensor of 2**20 elements over a 0-byte storage is read out of bounds: SIGSEGV.

Whose bug: mostly ours (step 2: running FSDP2's eager hooks inside a trace, and step 3:
reading a tensor without checking that its storage holds it); torch lets any op read past a
storage resized to 0 without a check (a documented "unsafe" state that FSDP2 and
torch.compile rely on), which is what turns it into a crash instead of an error. precompile
now keeps FSDP2's hooks out of the trace (Note [data parallel in the graph] in
precompile_nb/core/capture/data_parallel.py) and never reads a constant whose storage does not
hold it (capture/checks.py, _has_storage).

The last step alone, without torch.distributed:
"""
import torch

t = torch.randn(1 << 20)
t.untyped_storage().resize_(0)  # what FSDP2 does to an unsharded buffer it frees
print("numel", t.numel(), "storage bytes", t.untyped_storage().nbytes(), flush=True)
print(bool(torch.isfinite(t).all()))  # reads 4 MiB past the end: SIGSEGV on 2.13
