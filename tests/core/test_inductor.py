"""The inductor backend on CPU: generated kernels, the cache that makes loading compile nothing,
layouts, dynamic dims, and everything the eager backend guarantees."""
from __future__ import annotations

import copy
import inspect
import json
import os
import re
import tempfile
from pathlib import Path

import pytest
import torch

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import cache as cache_mod
from tests.conftest import run_fresh, run_threads
from tests.core.models import assert_sgd_matches_eager, bn_mlp, mlp, train_step

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("fresh_load_child.py")


def fresh_load(tmp: Path, code: str, cache: bytes, model, args, ref, mode: str,
               env: dict | None = None) -> dict:
    """Load the pair in a fresh process with empty compiler caches; returns the child's
    report (see fresh_load_child.py)."""
    (tmp / "art.py").write_text(code)
    (tmp / "art.cache").write_bytes(cache)
    torch.save({"model": model, "args": args, "ref": ref}, tmp / "ref.pt")
    empty = tempfile.mkdtemp(dir=tmp)
    full_env = {"TORCHINDUCTOR_CACHE_DIR": empty,
                "TRITON_CACHE_DIR": os.path.join(empty, "triton")}
    full_env.update(env or {})
    r = run_fresh(f"import runpy, sys; sys.argv = ['c', {str(tmp)!r}, {mode!r}]; "
                  f"runpy.run_path({str(CHILD)!r}, run_name='__main__')", env=full_env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def mlp_pair():
    m, x = mlp(), torch.randn(5, 8)
    code, cache = precompile(lambda m, x: m(x), m, x)
    return m, x, code, cache


def test_inductor_artifact_matches_eager_and_inlines_generated_kernels(mlp_pair):
    m, x, code, cache = mlp_pair
    f = precompile.load(code, cache)
    torch.testing.assert_close(f(m, x), m(x))
    m2 = mlp(3)
    torch.testing.assert_close(f(m2, x), m2(x))
    assert "async_compile.cpp_pybinding" in code and "def call(" in code
    assert len(cache) > 1000


def test_fresh_process_load_with_cache_compiles_nothing(mlp_pair, tmp_path):
    m, x, code, cache = mlp_pair
    ref = m(x).detach()
    warm = fresh_load(tmp_path, code, cache, m, (x,), ref, "cache")
    assert warm["match"] and warm["load"]["used"]
    assert warm["cpp_builds"] == 0, warm  # no C++ compiler run at all
    # nor any other process -- no compile workers, no per-ISA probe processes (the probes
    # dlopen the cache's probe libraries in this process) -- but the compiler's version
    # query that Inductor puts in every C++ kernel's cache key (`g++ --version` / `-v`)
    others = [p for p in warm["processes"] if not p.endswith(("'--version']", "'-v']"))]
    assert others == [], warm["processes"]
    cold = fresh_load(tmp_path, code, cache, m, (x,), ref, "nocache")
    assert cold["match"] and cold["cpp_builds"] > 0  # the counter does count compiles
    print(f"fresh-process load+first call: warm {warm['seconds']:.2f}s, "
          f"cold {cold['seconds']:.2f}s")


def test_fresh_process_load_on_the_compile_path_with_cache_builds_nothing(mlp_pair, tmp_path):
    # kernels are compiled with Inductor's precompiled header (Note [precompiled header]);
    # a load that asks Inductor for them (an artifact without kernel records) finds them in
    # the cache without building or even preprocessing that header, on a machine without it
    from tests.core.test_warm_path import without_warm_record

    m, x, code, cache = mlp_pair
    old_code, old_cache = without_warm_record(code, cache)
    (tmp_path / "tmp").mkdir()
    r = fresh_load(tmp_path, old_code, old_cache, m, (x,), m(x).detach(), "cache",
                   env={"TMPDIR": str(tmp_path / "tmp")})
    assert r["match"] and r["load"]["used"] and r["load"]["path"] == "compile", r["load"]
    assert r["cpp_builds"] == 0, r


def test_artifacts_compiled_later_in_a_busy_process_still_load_compiling_nothing(tmp_path):
    # Inductor probes the CPU's vector ISA once per process and remembers the answer: an
    # artifact compiled after a torch.compile (probes already done) or after another artifact
    # must still ship the probe binaries a fresh process builds before any C++ kernel.
    r = run_fresh(f"""
        import warnings; warnings.simplefilter("ignore")
        import torch
        from tests.core.models import mlp
        from precompile_nb import precompile
        m, x = mlp(), torch.randn(5, 8)
        torch.compile(lambda t: (t * 2).sin())(x)  # the user's own compile probes first
        precompile(lambda m, x: m(x).relu(), m, x)
        code, cache = precompile(lambda m, x: (m(x) * 3).tanh(), m, x)
        open({str(tmp_path / 'b.py')!r}, "w").write(code)
        open({str(tmp_path / 'b.cache')!r}, "wb").write(cache)
        torch.save((m, x), {str(tmp_path / 'mx.pt')!r})
    """, cwd=str(ROOT), env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "busy")})
    assert r.returncode == 0, r.stderr[-3000:]
    m, x = torch.load(tmp_path / "mx.pt", weights_only=False)
    warm = fresh_load(tmp_path, (tmp_path / "b.py").read_text(),
                      (tmp_path / "b.cache").read_bytes(), m, (x,),
                      (m(x) * 3).tanh().detach(), "cache")
    assert warm["match"] and warm["cpp_builds"] == 0, warm


def test_python_code_runs_alone_without_precompile_nb(mlp_pair, tmp_path):
    m, x, code, _ = mlp_pair
    (tmp_path / "a.py").write_text(code)
    torch.save({"m": m, "x": x, "ref": m(x).detach()}, tmp_path / "ref.pt")
    r = run_fresh(f"""
        import sys; sys.modules["precompile_nb"] = None
        import torch
        d = torch.load({str(tmp_path / 'ref.pt')!r}, weights_only=False)
        ns = {{}}
        exec(open({str(tmp_path / 'a.py')!r}).read(), ns)
        print("OK", torch.allclose(ns["forward"](d["m"], d["x"]), d["ref"], atol=1e-6))
        try:  # the structured error of the artifact's own copy (runtime/violation.py)
            ns["forward"](d["m"], d["x"][:, :3])
        except Exception as e:
            print("ERR", type(e).__name__, e.invariant, e.stage, e.hint is not None)
    """, env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "OK True" in r.stdout
    assert "ERR PrecompileError 3 call True" in r.stdout, r.stdout


def test_layout_mismatch_is_a_precompile_error_before_any_kernel_runs(mlp_pair):
    m, x, code, cache = mlp_pair
    f = precompile.load(code, cache)
    xt = torch.randn(8, 5).t()  # same shape, transposed strides
    with pytest.raises(PrecompileError) as ei:
        f(m, xt)
    e = ei.value
    assert e.invariant == 6 and e.where == "x"
    assert e.expected["stride"] == [8, 1] and e.actual["stride"] == [1, 5]
    assert ".contiguous()" in e.hint
    m2 = copy.deepcopy(m)
    m2[0].weight.data = m2[0].weight.data.t().contiguous().t()  # weights' layout too
    with pytest.raises(PrecompileError) as ei:
        f(m2, x)
    assert ei.value.where == "m.0.weight" and ei.value.invariant == 6


def test_ambient_state_does_not_change_the_result(mlp_pair):
    m, x, code, cache = mlp_pair
    f = precompile.load(code, cache)
    want = f(m, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(f(m, x), want)
    with torch.no_grad():
        torch.testing.assert_close(f(m, x), want)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.testing.assert_close(f(m, x), want)
    finally:
        torch.set_default_dtype(old)


def test_a_graph_without_tensor_inputs_is_lowered_and_loads():
    """Nothing but factories and baked numbers: no input carries a fake mode to lower in."""
    code, cache = precompile(lambda n: torch.arange(6.0).reshape(2, 3) * n + 1, 3)
    f = precompile.load(code, cache)
    assert torch.equal(f(3), torch.arange(6.0).reshape(2, 3) * 3 + 1)
    code, cache = precompile(lambda: torch.ones(4).cumsum(0))
    assert torch.equal(precompile.load(code, cache)(), torch.arange(1.0, 5.0))


def test_training_step_with_batchnorm_matches_eager_over_sgd_steps():
    m_ref, x = bn_mlp(), torch.randn(6, 8)
    f = precompile.load(*precompile(train_step, copy.deepcopy(m_ref), x))
    m_art = assert_sgd_matches_eager(f, m_ref, x, steps=3, tol=1e-5)
    assert int(m_art[1].num_batches_tracked) == 3


def test_mutation_and_aliasing_under_inductor():
    def fn(x, acc):
        acc.add_(x.sum(0))
        return (x * 2).relu(), x.t(), x

    x, acc = torch.randn(4, 3), torch.zeros(3)
    code, cache = precompile(fn, x.clone(), acc.clone())
    f = precompile.load(code, cache)
    acc_ref = acc.clone()
    out, xt, same = f(x, acc)
    fn(x.clone(), acc_ref)
    torch.testing.assert_close(acc, acc_ref)
    torch.testing.assert_close(out, (x * 2).relu())
    assert same is x
    xt[0, 1] = 99.0  # the transposed result is still a view of x
    assert x[1, 0] == 99.0


def test_unbacked_dim_serves_every_size_and_checks_bounds():
    m = mlp()
    x = torch.randn(5, 8)
    # torch 2.11's mark_unbacked takes no bounds; from 2.13 on they are checked per call
    has_bounds = "max" in inspect.signature(torch._dynamo.decorators.mark_unbacked).parameters
    if has_bounds:
        torch._dynamo.decorators.mark_unbacked(x, 0, min=1, max=128)
    else:
        torch._dynamo.decorators.mark_unbacked(x, 0)
    code, cache = precompile(lambda m, x: m(x).softmax(-1), m, x)
    f = precompile.load(code, cache)
    for n in (1, 7, 33, 100):
        xi = torch.randn(n, 8)
        torch.testing.assert_close(f(m, xi), m(xi).softmax(-1))
    if has_bounds:
        with pytest.raises(PrecompileError) as ei:
            f(m, torch.randn(200, 8))
        assert ei.value.where == "x.shape[0]" and "128" in ei.value.expected
    with pytest.raises(PrecompileError) as ei:
        f(m, torch.randn(7, 9))  # only the marked dim may vary
    assert ei.value.invariant == 3


def test_branching_on_an_unbacked_dim_fails_at_capture_naming_it():
    def fn(m, x):
        return m(x) if x.shape[0] > 3 else m(x) * 2

    x = torch.randn(5, 8)
    torch._dynamo.decorators.mark_unbacked(x, 0)
    with pytest.raises(PrecompileError) as ei:
        precompile(fn, mlp(), x)
    e = ei.value
    assert e.invariant == 3 and e.stage == "capture"
    assert "x.shape[0]" in e.what and "test_inductor.py" in e.where


def test_precompile_from_two_threads_with_inductor():
    xs = [torch.randn(4, 4), torch.randn(4, 4)]
    out = [None, None]

    def work(i):
        out[i] = precompile.load(*precompile(lambda x: (x + i).relu(), xs[i]))

    errors = run_threads(2, work)
    assert not errors
    for i in range(2):
        torch.testing.assert_close(out[i](xs[i]), (xs[i] + i).relu())


def test_a_load_beside_another_threads_precompile_stays_on_the_warm_path(monkeypatch):
    """Note [a load's cache dirs are read once]: while another thread precompiles, its
    private compile dir is the process's TORCHINDUCTOR_CACHE_DIR and is deleted after. A load
    planned then named its kernel library in that dir and fell back to compiling."""
    import threading

    from precompile_nb.core import _compat, warm

    x = torch.randn(4, 4)
    code, cache = precompile(lambda x: (x * 3).sigmoid(), x)
    entered, planned, release = threading.Event(), threading.Event(), threading.Event()

    def other_precompile():  # what precompile holds while it lowers
        with _compat.GLOBAL_LOCK, _compat.private_compile_cache():
            entered.set()
            release.wait(30)

    real_plan = warm.plan

    def spy(*a, **k):
        planned.set()
        return real_plan(*a, **k)

    monkeypatch.setattr(warm, "plan", spy)
    loaded = {}
    other = threading.Thread(target=other_precompile)
    other.start()
    assert entered.wait(30)
    loader = threading.Thread(target=lambda: loaded.update(f=precompile.load(code, cache)))
    loader.start()
    planned.wait(3)  # without the note, the load plans now, inside the other's private dir
    release.set()
    other.join(30)
    loader.join(60)
    f = loaded["f"]
    assert f.__precompile_load__["path"] == "warm", f.__precompile_load__["reason"]
    torch.testing.assert_close(f(x), (x * 3).sigmoid())


def compile_pool_at_capture(device: str, tmp: Path, env: dict | None = None,
                            ops: int = 2) -> dict:
    """In a fresh process: precompile a function of about `ops` operations on `device` and
    report whether Inductor's Triton compile pool existed when the capture began, how many
    import jobs its workers were handed, whether the build ended workers it forked (Note
    [compile workers forked for a build]), and the result's match."""
    code = f"""
        import json, torch
        import precompile_nb.core.capture as cap
        from torch._inductor.async_compile import AsyncCompile
        from precompile_nb import precompile
        from precompile_nb.core import _compat
        seen = {{"jobs": 0, "forked": False}}
        real, start = cap.capture, _compat.start_compile_workers
        from precompile_nb.core._compat import compile_pool
        at_lowering, end = _compat.workers_for_graph, _compat.end_build_workers
        def spy(*a, **k):
            seen["pool"] = AsyncCompile.process_pool.cache_info().currsize > 0
            return real(*a, **k)
        def counted(*a):
            jobs = (at_lowering if a else start)(*a)
            seen["jobs"] += jobs
            return jobs
        def ended():
            seen["forked"] |= compile_pool.forked_worker_count() > 0
            end()
        cap.capture, _compat.start_compile_workers = spy, counted
        _compat.workers_for_graph, _compat.end_build_workers = counted, ended
        def fn(x):
            for _ in range({ops} // 2):
                x = (x.sin() * 2).softmax(-1)
            return x
        x = torch.randn(64, 32, device={device!r})
        code, cache = precompile(fn, x)
        f = precompile.load(code, cache)
        seen["match"] = bool(torch.allclose(f(x), fn(x)))
        print(json.dumps(seen))
    """
    r = run_fresh(code, env={"TORCHINDUCTOR_CACHE_DIR": str(tmp / "ind"),
                             "TORCHINDUCTOR_COMPILE_THREADS": "2", "TORCH_WARM_POOL": "1",
                             **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_cpu_precompile_starts_no_triton_compile_workers(tmp_path):
    """Note [compile workers start with the capture]: only a GPU example starts the pool
    (C++ kernels do not use it); where Triton is installed (the torch 2.15 leg) a CPU
    precompile must not spawn idle worker processes."""
    pytest.importorskip("triton")
    seen = compile_pool_at_capture("cpu", tmp_path, ops=80)
    assert seen == {"pool": False, "jobs": 0, "forked": False, "match": True}, seen


def test_a_load_takes_its_literals_from_the_cache_and_the_text_gives_the_same(mlp_pair):
    # Note [the literals in the cache]: the metadata and warm record ride in the cache; a
    # cache without them loads the same artifact from the text
    m, x, code, cache = mlp_pair
    f = precompile.load(code, cache)
    assert f.__precompile_load__["literals"] == "cache"
    files = cache_mod.read_files(cache, cache_mod.read_tag(cache)[1])
    entries = [(root, rel) for root, rel, _ in files if rel.endswith(".literals.marshal")]
    assert len(entries) == 1 and entries[0][0] == cache_mod.BYTECODE_ROOT
    without = cache_mod.pack(code, "inductor", tuple((root, rel, bytes(data))
                                                    for root, rel, data in files
                                                    if (root, rel) not in entries))
    g = precompile.load(code, without)
    assert g.__precompile_load__["literals"] == "text"
    assert g.__precompile_meta__ == f.__precompile_meta__
    assert f.__precompile_load__["path"] == g.__precompile_load__["path"] == "warm"
    for h in (f, g):
        torch.testing.assert_close(h(m, x), m(x))


def test_bytecode_compiled_under_another_name_still_runs_and_shows_its_lines(mlp_pair):
    # a cache of an older precompile_nb compiled python_code under a generic name: the load
    # renames its code objects to the name the lines are held by, and runs them
    import linecache
    import marshal

    m, x, code, cache = mlp_pair
    files = cache_mod.read_files(cache, cache_mod.read_tag(cache)[1])
    old = marshal.dumps(compile(code, "<precompile_nb artifact>", "exec", dont_inherit=True))
    repacked = cache_mod.pack(code, "inductor", tuple(
        (root, rel, old if rel.endswith(".marshal") and not rel.endswith(".literals.marshal")
         else bytes(data)) for root, rel, data in files))
    f = precompile.load(code, repacked)
    assert f.__precompile_load__["bytecode"] and f.__precompile_load__["path"] == "warm"
    assert f.__code__.co_filename.startswith("<precompile_nb artifact fn ")
    assert linecache.getline(f.__code__.co_filename,
                             f.__code__.co_firstlineno).strip().startswith("def forward")
    torch.testing.assert_close(f(m, x), m(x))


def test_an_edited_metadata_is_named_before_the_cache_it_no_longer_matches(mlp_pair):
    # the cache is read ahead of the text only when its tag names this python_code: an edited
    # text is checked as always, and its metadata error comes first
    _, _, code, cache = mlp_pair
    edited = re.sub(r"'version': \d+", "'version': 999", code, count=1)
    assert edited != code
    with pytest.raises(PrecompileError, match="unknown artifact format") as ei:
        precompile.load(edited, cache)
    assert ei.value.invariant == 7


def test_two_loads_of_one_artifact_share_its_lines_while_either_lives(mlp_pair):
    # Note [one source name a python_code]: the cache's bytecode runs under the name the
    # lines are held by; a traceback through the second load still shows them after the
    # first is gone, and they go with the last
    import gc
    import linecache
    import traceback

    m, x, code, cache = mlp_pair
    f, g = precompile.load(code, cache), precompile.load(code, cache)
    name = g.__code__.co_filename
    assert f.__code__.co_filename == name and g.__precompile_load__["bytecode"]
    del f
    gc.collect()
    assert linecache.getline(name, 1).startswith("# precompile_nb artifact")
    with pytest.raises(PrecompileError) as ei:
        g(m, torch.randn(5, 9))  # a wrong shape: the driver raises inside the artifact
    frames = [fs for fs in traceback.extract_tb(ei.value.__traceback__) if fs.filename == name]
    assert frames and all(fs.line for fs in frames)  # each artifact frame shows its line
    del g, ei  # the traceback's frames hold the artifact's namespace, and so its forward
    gc.collect()
    assert name not in linecache.cache


def _cat_then_reshape(k):
    # an empty cache concatenated with a transposed key, then reshaped (Hugging Face's BLOOM):
    # ATen's cat returns it contiguous, Inductor's decomposition a clone with k's strides
    past = torch.zeros(2, 4, 0, 8)
    return torch.cat([past, k.transpose(1, 2)], dim=2).reshape(8, -1, 8) * 2


@pytest.mark.parametrize("straight", ["1", "0"])
def test_a_view_the_decompositions_made_impossible_is_lowered_as_eagers_reshape(
        straight, monkeypatch):
    # Note [a view the decompositions made impossible]: precompiling it raised
    # "Cannot view a tensor with shape ..." at the lowering, on both routes to Inductor
    from precompile_nb.core import build

    monkeypatch.setenv("PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR", straight)
    k = torch.randn(2, 16, 4, 8)
    art = build(_cat_then_reshape, k)
    assert art.lowered.split.views_as_reshapes == 1
    f = precompile.load(art.python_code, art.cache)
    torch.testing.assert_close(f(k), _cat_then_reshape(k), rtol=0, atol=0)
    assert "view" in [n.target.__name__.split(".")[0] for n in art.captured.graph.graph.nodes
                      if n.op == "call_function"]  # the captured graph keeps its view


def test_a_view_something_writes_into_stays_a_view_when_the_others_become_reshapes():
    # Note [a view the decompositions made impossible]: a write through a reshape's copy would
    # not reach its base, so views that are written (or a view of them is) are left alone
    from torch.fx.experimental.proxy_tensor import make_fx

    from precompile_nb.core._compat.view_or_copy import views_as_reshapes

    def f(x, y):
        x.view(16).add_(1)
        y.view(2, 8).view(16).mul_(2)
        return (x * 2).view(4, 4)

    gm = make_fx(f)(torch.randn(4, 4), torch.randn(16))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    with views_as_reshapes(gm) as count:
        during = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert count == 1 and during.count("aten.reshape.default") == 1
    assert during[-1] == "aten.reshape.default"  # the one nothing writes
    assert [str(n.target) for n in gm.graph.nodes if n.op == "call_function"] == targets


def _relative_table_interpolated(table):
    # BEiT's relative-position table, interpolated to the window on every call
    sub = table.reshape(1, 5, 5, -1).permute(0, 3, 1, 2)
    return torch.nn.functional.interpolate(sub, size=(7, 7), mode="bilinear").flatten(1) * 2


def upsampling_checked(device: str, train: bool) -> str:
    """BEiT's interpolation precompiled on `device` (as a training step: its gradient) and its
    loaded artifact checked against eager; returns python_code."""
    table = torch.randn(25, 4, device=device, requires_grad=train)
    fn = (lambda t: _relative_table_interpolated(t).square().sum().backward()) if train \
        else _relative_table_interpolated
    code, cache = precompile(fn, table)
    f = precompile.load(code, cache)
    if not train:
        torch.testing.assert_close(f(table), fn(table))
        return code
    f(table)
    got, table.grad = table.grad, None
    fn(table)
    torch.testing.assert_close(got, table.grad)
    return code


@pytest.mark.parametrize("train", [False, True])
def test_bilinear_upsampling_is_generated_code_as_torch_compile_makes_it(train):
    # Note [the upsampling torch.compile decomposes]: the capture records
    # aten.upsample_bilinear2d.default, which Inductor called as an ATen fallback whose
    # strides its fake kernel gets wrong on CUDA (BEiT failed there); now it is decomposed
    code = upsampling_checked("cpu", train)
    # no ATen call in the forward: Inductor's own kernels (a training step's backward calls
    # ATen's upsample_bilinear2d_backward, as torch.compile's does not: not decomposed there)
    assert "aten.upsample_bilinear2d.default" not in code
