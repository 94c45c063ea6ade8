"""Note [kernels queue for starting workers]: during a GPU lowering, kernels go to Inductor's
compile workers while those still start, and handing them over never waits on the pipe to the
workers. Checked here on the real pool class with CPU jobs; the GPU compile that uses it is
in tests/core/test_cuda.py (every CUDA precompile goes through it)."""
from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

pytest.importorskip("torch._inductor.compile_worker.subproc_pool")
from torch._inductor.async_compile import AsyncCompile  # noqa: E402
from torch._inductor.compile_worker.subproc_pool import SubprocPool  # noqa: E402

from precompile_nb.core import _compat  # noqa: E402

PAYLOAD = 256 * 1024  # 40 of these are far more than a pipe holds (64 KiB on Linux)


@pytest.fixture
def pool():
    p = SubprocPool(2)
    try:
        yield p
    finally:
        p.shutdown()


def test_hand_over_returns_while_the_pipe_is_held_and_every_job_comes_back(pool):
    """The pool's writer lock is held (as a full pipe to a sidecar still importing torch holds
    a writer): Inductor's own submit would wait; inside the block every submit returns a
    future at once, and once the pipe moves every job's result is right."""
    if not hasattr(pool, "write_lock"):
        pytest.skip("this torch's SubprocPool has no writer lock to hold")
    futures: list[Future] = []

    def hand_over():
        for i in range(40):
            futures.append(pool.submit(len, bytes(PAYLOAD + i)))

    with _compat.kernels_queue_for_workers(True):
        with pool.write_lock:
            t = threading.Thread(target=hand_over, daemon=True)
            t.start()
            t.join(120)  # a hang guard: without the feeder this thread waits for the lock
            handed_over = not t.is_alive()
        results = [f.result(timeout=300) for f in futures]
    assert handed_over, "submitting a kernel waited for the pipe to the compile workers"
    assert results == [PAYLOAD + i for i in range(40)]


def test_outside_the_block_submit_is_inductors_own(pool):
    with _compat.kernels_queue_for_workers(True):
        pass
    assert SubprocPool.submit is SubprocPool.__dict__["submit"]
    assert pool.submit(len, b"abc").result(timeout=300) == 3


def test_a_kernel_goes_to_workers_that_are_starting_only_inside_the_block(pool, monkeypatch):
    """While the workers' readiness job is pending, Inductor compiles here; inside the block
    the kernel goes to them, unless PRECOMPILE_NB_POOL_QUEUE=0 or their sidecar is gone."""
    monkeypatch.setattr(AsyncCompile, "process_pool", staticmethod(lambda: pool))
    monkeypatch.setattr(AsyncCompile, "_ready_future", Future())
    assert not AsyncCompile.use_process_pool()
    with _compat.kernels_queue_for_workers(True):
        assert AsyncCompile.use_process_pool()
    assert not AsyncCompile.use_process_pool()
    with _compat.kernels_queue_for_workers(False):
        assert not AsyncCompile.use_process_pool()
    monkeypatch.setenv("PRECOMPILE_NB_POOL_QUEUE", "0")
    with _compat.kernels_queue_for_workers(True):
        assert not AsyncCompile.use_process_pool()
    monkeypatch.delenv("PRECOMPILE_NB_POOL_QUEUE")
    pool.process.kill()
    pool.process.wait(60)
    with _compat.kernels_queue_for_workers(True):
        assert not AsyncCompile.use_process_pool()


def test_a_job_the_pool_refuses_fails_its_future_not_the_feeder(pool):
    """A pool that was shut down refuses jobs: the future says so, and later jobs of another
    pool are still handed over."""
    pool.shutdown()
    with _compat.kernels_queue_for_workers(True):
        refused = pool.submit(len, b"x")
        with pytest.raises(Exception):
            refused.result(timeout=300)
        other = SubprocPool(2)
        try:
            assert other.submit(len, b"xy").result(timeout=300) == 2
        finally:
            other.shutdown()
