"""%%precompile driven through a real IPython InteractiveShell.

Everything uses the eager backend (about a second per cell) except the two Inductor tests.
"""
from __future__ import annotations

import html
import os

import pytest
import torch
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from precompile_nb import PrecompileError, precompile
from precompile_nb.magics import PrecompileMagics, PrecompileResult
from tests.core.test_profile import kernel_work

SETUP = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 3)
x = torch.randn(2, 4)
"""

FORWARD = "def f(model, x):\n    return model(x)\n"


@pytest.fixture
def ip():
    shell = InteractiveShell.instance()
    if "precompile_nb" not in shell.extension_manager.loaded:
        shell.run_line_magic("load_ext", "precompile_nb")
    shell.run_cell(SETUP)
    yield shell
    shell.reset(new_session=False)  # the next test starts from an empty namespace


@pytest.fixture
def shown(ip, monkeypatch):
    """The display bundles the shell publishes (report, explorer) as {mime: data} dicts."""
    bundles: list[dict] = []
    monkeypatch.setattr(ip.display_pub, "publish",
                        lambda data, metadata=None, *args, **kwargs: bundles.append(data))
    return bundles


def explorers(bundles: list[dict]) -> list[str]:
    return [b["text/html"] for b in bundles if "pcnb-violation" in b.get("text/html", "")]


def test_load_ext_registers_the_cell_magic_and_the_error_handler(ip):
    assert ip.find_cell_magic("precompile") is not None
    assert PrecompileError in ip.custom_exceptions


def test_magic_help_lists_every_option(ip):
    doc = ip.find_cell_magic("precompile").__doc__
    assert "%%precompile [--backend {inductor,eager}]" in doc
    for option in ("--dynamic ARG:DIM[=LO..HI][,...]", "--name N", "--out VAR", "--save DIR",
                   "--quiet", "--profile [STEPS]", "--tune-sizes N[,N...]", "NAME"):
        assert option in doc


def test_magic_binds_the_compiled_function_under_its_name(ip):
    ip.run_cell_magic("precompile", "--backend eager", FORWARD)
    f, model, x = ip.user_ns["f"], ip.user_ns["model"], ip.user_ns["x"]
    assert callable(f) and f.__precompile_meta__["fn_name"] == "f"
    torch.testing.assert_close(f(model, x), model(x))
    plain = f.__wrapped__
    assert plain is not f and plain.__code__.co_filename != f.__code__.co_filename
    torch.testing.assert_close(plain(model, x), model(x))
    # a precompiled callable checks its inputs; the plain function would not
    with pytest.raises(PrecompileError, match="shape differs"):
        f(model, torch.randn(5, 4))


def test_training_step_accumulates_grads_on_the_model_like_eager(ip):
    ip.run_cell("import copy\nmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), "
                "torch.nn.ReLU(), torch.nn.Linear(8, 2))\nref = copy.deepcopy(model)")
    ip.run_cell_magic("precompile", "--backend eager",
                      "def step(model, x):\n    loss = model(x).pow(2).mean()\n"
                      "    loss.backward()\n    return loss\n")
    step, model, ref, x = (ip.user_ns[k] for k in ("step", "model", "ref", "x"))
    assert all(p.grad is None for p in model.parameters())  # precompiling ran nothing for real
    for _ in range(2):  # twice: grads accumulate
        torch.testing.assert_close(step(model, x), step.__wrapped__(ref, x))
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad)


def test_out_binds_a_result_with_the_pair_the_callable_and_the_report(ip):
    ip.run_cell_magic("precompile", "--backend eager --out r --quiet", FORWARD)
    r = ip.user_ns["r"]
    assert isinstance(r, PrecompileResult)
    assert r.fn is ip.user_ns["f"]
    assert r.python_code.startswith("# precompile_nb artifact: `f`")
    assert isinstance(r.cache, bytes) and len(r.cache) == r.report["cache"]["bytes"]
    assert [s for s, _ in r.report["stages"]] == ["capture", "lower", "emit", "pack",
                                                  "load check"]
    assert r.report["cache"]["load"] is not None  # the load check's stats are in the report
    page = r.to_html()
    assert page.startswith("<!doctype html>")
    assert '<span class="k">def</span>' in page  # the source, highlighted
    for inp in r.report["inputs"]:
        assert f"<td><code>{inp['where']}</code></td>" in page
    assert [i["where"] for i in r.report["inputs"]] == ["model.weight", "model.bias", "x"]
    assert r._repr_html_().startswith('<div class="pcnb"')
    assert repr(r).startswith("<PrecompileResult f: precompiled f (backend eager, cpu)")


def test_save_writes_a_pair_that_loads_and_runs(ip, tmp_path):
    out = tmp_path / "artifacts"
    ip.run_cell_magic("precompile", f"--backend eager --quiet --out r --save {out}", FORWARD)
    # no temporary files left (the store's lock file for concurrent savers may stay)
    assert sorted(f for f in os.listdir(out) if f != ".f.lock") == ["f.cache", "f.py"]
    code = (out / "f.py").read_text()
    cache = (out / "f.cache").read_bytes()
    assert code == ip.user_ns["r"].python_code and cache == ip.user_ns["r"].cache
    with pytest.warns(UserWarning, match="executes python_code"):
        g = precompile.load(code, cache)
    model, x = ip.user_ns["model"], ip.user_ns["x"]
    torch.testing.assert_close(g(model, x), model(x))


def test_a_save_dir_that_cannot_be_made_loses_no_compile(ip, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    bad = tmp_path / "file" / "artifacts"
    with pytest.raises(UsageError, match=r"--save .*the compiled result is kept in `r`"):
        ip.run_cell_magic("precompile", f"--backend eager --quiet --out r --save {bad}",
                          FORWARD)
    model, x = ip.user_ns["model"], ip.user_ns["x"]
    torch.testing.assert_close(ip.user_ns["f"](model, x), model(x))
    ip.user_ns["r"].save(tmp_path / "elsewhere")  # what the error says to do
    assert (tmp_path / "elsewhere" / "f.py").exists()


def test_result_save_replaces_an_older_pair(ip, tmp_path):
    ip.run_cell_magic("precompile", "--backend eager --quiet --out r", FORWARD)
    (tmp_path / "f.py").write_text("stale")
    (tmp_path / "f.cache").write_bytes(b"stale")
    code_path, cache_path = ip.user_ns["r"].save(tmp_path)
    assert open(code_path).read() == ip.user_ns["r"].python_code
    assert open(cache_path, "rb").read() == ip.user_ns["r"].cache


def test_name_binds_the_compiled_function_under_another_name(ip):
    ip.run_cell_magic("precompile", "--backend eager --quiet --name fast", FORWARD)
    fast, f = ip.user_ns["fast"], ip.user_ns["f"]
    assert fast.__wrapped__ is f  # the def itself stays the plain function
    assert not hasattr(f, "__precompile_meta__")


def test_names_on_the_magic_line_choose_the_example_inputs(ip):
    ip.run_cell("net = torch.nn.Linear(4, 2)\nbatch = torch.randn(6, 4)")
    ip.run_cell_magic("precompile", "net batch --backend eager --quiet --out r",
                      "def f(m, inp):\n    return m(inp)\n")
    assert [i["where"] for i in ip.user_ns["r"].report["inputs"]] == ["m.weight", "m.bias",
                                                                      "inp"]
    assert ip.user_ns["r"].report["inputs"][-1]["shape"] == [6, 4]


def test_missing_example_input_is_a_usage_error_listing_what_exists(ip):
    with pytest.raises(UsageError) as e:
        ip.run_cell_magic("precompile", "--backend eager", "def f(model, y):\n    return y\n")
    msg = str(e.value)
    assert "no variable 'y'" in msg and "argument 'y' of f()" in msg
    assert "models/tensors available: model, x" in msg
    assert "\n" not in msg
    assert "f" not in ip.user_ns  # nothing was bound


@pytest.mark.parametrize("line, words", [
    ("--backend tpu", "invalid choice: 'tpu'"),
    ("--bogus", "unrecognized arguments: --bogus"),
    ("--dynamic x", "--dynamic takes ARG:DIM"),
    ("--dynamic nope:0", "'nope' is not an input"),
    ("--dynamic model:0", "'model' is a Linear, not a tensor"),
    ("--dynamic x:2", "'x' has 2 dimension(s)"),
    ("--out 3r", "--out takes a Python name"),
    ("--tune-sizes 1,x", "--tune-sizes takes sizes like 1,256"),
    ("model --backend eager", "f() takes 2 positional argument(s), the magic line names 1"),
    ("model x x --backend eager", "the magic line names 3"),
])
def test_bad_options_are_one_line_usage_errors(ip, line, words):
    with pytest.raises(UsageError) as e:
        ip.run_cell_magic("precompile", line, FORWARD)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_cell_without_a_function_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="defines no function"):
        ip.run_cell_magic("precompile", "--backend eager", "y = model(x)\n")


def test_failing_capture_raises_shows_the_explorer_and_keeps_previous_names(ip, shown,
                                                                             capsys):
    ip.run_cell("v = torch.randn(3)\nW = torch.randn(3)")
    ip.run_cell_magic("precompile", "--backend eager --quiet", "def g(v):\n    return v * 2\n")
    before = ip.user_ns["g"]
    with pytest.raises(PrecompileError) as e:
        ip.run_cell_magic("precompile", "--backend eager", "def g(v):\n    return v * W\n")
    assert e.value.invariant == 1 and "global 'W'" in e.value.where
    assert ip.user_ns["g"] is before  # the failed cell bound nothing
    torch.testing.assert_close(before(ip.user_ns["v"]), ip.user_ns["v"] * 2)
    (page,) = explorers(shown)
    assert "Invariant 1 broken: everything live is an input" in page
    assert "global &#x27;W&#x27;" in page and "pass `W` to fn" in html.unescape(page)
    assert "[precompile] capture … failed" in capsys.readouterr().out


def test_cell_that_raises_after_its_def_keeps_previous_names(ip):
    ip.run_cell_magic("precompile", "--backend eager --quiet", FORWARD)
    before = ip.user_ns["f"]
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("precompile", "--backend eager", FORWARD + "1 / 0\n")
    assert ip.user_ns["f"] is before


def test_a_failing_magic_cell_shows_the_explorer_once_then_one_line(ip, shown, capsys):
    ip.run_cell("W = torch.randn(2, 4)")
    result = ip.run_cell("%%precompile --backend eager\ndef h(x):\n    return x * W\n")
    assert isinstance(result.error_in_exec, PrecompileError)
    assert len(explorers(shown)) == 1
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "PrecompileError" in ln]
    assert lines == ["PrecompileError: h reads 1 tensor(s) that are not inputs; they would be "
                     "baked into the artifact as constants (invariant 1, stage capture; "
                     "details in the explorer above)"]
    assert "magics.py" not in out and "Traceback" not in out  # no frames of our own


def test_calling_with_a_wrong_shape_in_a_later_cell_shows_the_explorer_with_the_graph(
        ip, shown, capsys):
    ip.run_cell_magic("precompile", "--backend eager --quiet --out r", FORWARD)
    result = ip.run_cell("f(model, torch.randn(5, 4))")
    assert isinstance(result.error_in_exec, PrecompileError)
    (page,) = explorers(shown)
    assert "Invariant 3 broken" in page
    assert '<td class="pcnb-mismatch">[2, 4]</td><td class="pcnb-mismatch">[5, 4]</td>' in page
    x_node = next(n["name"] for n in ip.user_ns["r"].report["graph"]["nodes"]
                  if n["op"] == "placeholder" and n["target"] == "x")
    assert f"highlighted: {x_node}" in page
    assert "shape differs from the example" in capsys.readouterr().out


def test_a_call_error_traceback_shows_the_users_line_not_the_artifacts_checks(
        ip, shown, capsys):
    ip.run_cell_magic("precompile", "--backend eager --quiet", FORWARD)
    ip.run_cell("y = f(model, torch.randn(5, 4))  # the user's call")
    out = capsys.readouterr().out
    assert "the user's call" in out and "shape differs from the example" in out
    assert "_pc_" not in out and "precompile_nb artifact" not in out
    assert "__tracebackhide__" not in out


def test_without_the_extension_ipython_hides_all_but_the_raising_driver_frame(ip, capsys):
    ip.run_cell("from precompile_nb import precompile\n" + FORWARD
                + "f = precompile.load(*precompile(f, model, x, backend='eager'))")
    ip.run_line_magic("unload_ext", "precompile_nb")
    try:
        ip.run_cell("y = f(model, torch.randn(5, 4))  # the user's call")
    finally:
        ip.run_line_magic("load_ext", "precompile_nb")
    out = capsys.readouterr().out
    assert "the user's call" in out and "shape differs from the example" in out
    assert "skipping hidden 3 frame" in out
    for checker in ("_pc_check(", "_pc_check_all(", "in forward"):
        assert checker not in out


def test_the_report_is_shown_unless_quiet(ip, shown, capsys):
    ip.run_cell_magic("precompile", "--backend eager", FORWARD)
    out = capsys.readouterr().out
    assert "[precompile] capture …" in out and "[precompile] load check …" in out
    (report,) = shown
    assert report["text/plain"].startswith("precompiled f (backend eager, cpu)")
    assert 'id="' in report["text/html"] and "Invariants</label>" in report["text/html"]
    shown.clear()
    ip.run_cell_magic("precompile", "--backend eager --quiet", FORWARD)
    assert shown == [] and capsys.readouterr().out == ""


def test_in_a_kernel_the_report_is_a_live_widget_with_static_html_alongside(ip, shown,
                                                                          monkeypatch):
    from precompile_nb.viewers import widgets

    monkeypatch.setattr(widgets, "has_widget_frontend", lambda: True)
    ip.run_cell_magic("precompile", "--backend eager --out r", FORWARD)
    report = shown[-1]  # the progress widget came first
    assert "application/vnd.jupyter.widget-view+json" in report
    assert "Invariants</label>" in report["text/html"]  # for nbconvert, GitHub, reopening
    shown.clear()
    ip.run_cell("r")  # the result object shows the same report
    assert "application/vnd.jupyter.widget-view+json" in shown[-1]


class _Kernel:
    """A stand-in for ipykernel's kernel: what it records of the running execute_request."""

    def __init__(self, allow_stdin: bool) -> None:
        self._allow_stdin = allow_stdin


def test_a_kernel_run_by_nbconvert_shows_the_static_report_and_no_widget(ip, shown,
                                                                        monkeypatch):
    # nbclient (nbconvert --execute, papermill) runs cells with allow_stdin=False and saves
    # widget state, and nbconvert would then export a widget view that is blank offline
    monkeypatch.setattr(ip, "kernel", _Kernel(allow_stdin=False), raising=False)
    ip.run_cell_magic("precompile", "--backend eager --out r", FORWARD)
    assert shown, "the magic displayed nothing"
    assert not any("application/vnd.jupyter.widget-view+json" in b for b in shown)
    assert "Invariants</label>" in shown[-1]["text/html"]
    assert "Summary</label>" in shown[-1]["text/html"]


def test_a_kernel_run_by_an_interactive_frontend_shows_the_widget(ip, shown, monkeypatch):
    monkeypatch.setattr(ip, "kernel", _Kernel(allow_stdin=True), raising=False)
    ip.run_cell_magic("precompile", "--backend eager --out r", FORWARD)
    assert "application/vnd.jupyter.widget-view+json" in shown[-1]
    assert "Invariants</label>" in shown[-1]["text/html"]


def test_unload_removes_the_magic_and_the_error_handler(ip):
    ip.run_line_magic("unload_ext", "precompile_nb")
    try:
        assert ip.find_cell_magic("precompile") is None
        assert PrecompileError not in ip.custom_exceptions
        assert "PrecompileMagics" not in ip.magics_manager.registry
    finally:
        ip.run_line_magic("load_ext", "precompile_nb")
    assert isinstance(ip.magics_manager.registry["PrecompileMagics"], PrecompileMagics)


def test_inductor_report_lists_the_generated_kernels(ip):
    ip.run_cell("model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())")
    ip.run_cell_magic("precompile", "--out r --quiet",
                      "def f(model, x):\n    return model(x) * 2\n")
    r, f, model, x = (ip.user_ns[k] for k in ("r", "f", "model", "x"))
    torch.testing.assert_close(f(model, x), model(x) * 2)
    assert r.report["backend"] == "inductor"
    generated = [k for k in r.report["kernels"] if k["line"]]
    assert generated and all(k["kind"] in ("cpp", "triton") for k in generated)
    assert "aten.relu" in generated[0]["fused_ops"]
    page = r.to_html()
    for k in generated:
        assert f'-L-{k["line"]}"><code>{k["name"]}</code></a>' in page
    assert r.report["cache"]["tag"]["files"] > 0
    assert r.report["cache"]["load"]["cache_files"] == r.report["cache"]["tag"]["files"]


def test_dynamic_dimension_accepts_other_sizes_and_leaves_the_example_unmarked(ip):
    from precompile_nb.core import _compat

    ip.run_cell_magic("precompile", "--dynamic x:0 --out r --quiet",
                      "def f(model, x):\n    return model(x).relu()\n")
    r, f, model, x = (ip.user_ns[k] for k in ("r", "f", "model", "x"))
    assert r.report["inputs"][-1]["dynamic"] == {"0": [None, None]}
    for batch in (2, 7):
        y = torch.randn(batch, 4)
        torch.testing.assert_close(f(model, y), model(y).relu())
    marks = _compat.dim_marks(x)  # the notebook's tensor carries no mark
    assert marks.dynamic == {} and marks.unbacked == {}


def test_tune_sizes_reach_precompile_and_a_size_outside_the_range_is_its_error(ip, shown):
    ip.run_cell_magic("precompile", "--dynamic x:0=2..64 --tune-sizes 2,64 --out r --quiet",
                      "def f(model, x):\n    return model(x).relu()\n")
    torch.testing.assert_close(ip.user_ns["f"](ip.user_ns["model"], torch.ones(5, 4)),
                               ip.user_ns["model"](torch.ones(5, 4)).relu())
    with pytest.raises(PrecompileError, match="tune_sizes"):
        ip.run_cell_magic("precompile", "--dynamic x:0=2..64 --tune-sizes 128 --quiet",
                          "def g(model, x):\n    return model(x).relu()\n")


@pytest.mark.cuda
def test_on_cuda_the_magic_runs_the_gpu_pipeline_and_lists_triton_kernels(ip, tmp_path):
    ip.run_cell("model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.LayerNorm(128),"
                " torch.nn.GELU()).cuda()\nx = torch.randn(32, 64, device='cuda')")
    ip.run_cell_magic("precompile", f"--out r --quiet --save {tmp_path}",
                      "def f(model, x):\n    return model(x).softmax(-1)\n")
    r, f, model, x = (ip.user_ns[k] for k in ("r", "f", "model", "x"))
    torch.testing.assert_close(f(model, x), model(x).softmax(-1))
    assert r.report["device"].startswith("cuda")
    triton = [k for k in r.report["kernels"] if k["kind"] == "triton"]
    assert triton and all(k["line"] > 0 for k in triton)
    page = r.to_html()
    assert triton[0]["name"] in page
    print("triton kernels:", [k["name"] for k in triton])


def test_check_mode_reports_every_problem_without_compiling_or_binding(ip, shown):
    ip.run_cell("W = torch.randn(3)\nf = 'before'")
    ip.run_cell_magic("precompile", "--check --out rep",
                      "def f(model, x, k=2):\n    torch.ops.aten._print('hi')\n"
                      "    return model(x) * W\n")
    rep = ip.user_ns["rep"]
    assert not rep.ok
    invariants = sorted(f.invariant for f in rep.errors)
    assert invariants == [1, 4]
    assert ip.user_ns["f"] != "before" and not hasattr(ip.user_ns["f"], "__wrapped__")
    page = next(b["text/html"] for b in shown if "pcnb-check" in b.get("text/html", ""))
    assert "global &#x27;W&#x27;" in page and "_print" in page and "2 error(s)" in page


def test_call_time_explorer_shows_every_input_with_the_mismatch_marked(ip, shown):
    ip.run_cell_magic("precompile", "--backend eager --quiet", FORWARD)
    ip.run_cell("f(model, torch.randn(5, 4))")
    page = explorers(shown)[-1]
    assert "Every input of the call" in page
    for where in ("model.weight", "model.bias", "x"):
        assert f"<code>{where}</code>" in page
    assert page.count('class="pcnb-mismatch"') >= 1 and "shape=[5, 4]" in page


def test_save_leaves_only_the_pair_in_the_directory(ip, tmp_path):
    # nothing else: no lock file, no temporary files, also after a second save over the first
    out = tmp_path / "artifacts"
    for _ in range(2):
        ip.run_cell_magic("precompile", f"--backend eager --quiet --save {out}", FORWARD)
        assert sorted(os.listdir(out)) == ["f.cache", "f.py"]
    with pytest.warns(UserWarning, match="executes python_code"):
        g = precompile.load((out / "f.py").read_text(), (out / "f.cache").read_bytes())
    model, x = ip.user_ns["model"], ip.user_ns["x"]
    torch.testing.assert_close(g(model, x), model(x))


def test_compiler_warnings_go_into_the_report_not_into_the_progress_line(ip, shown, capsys):
    ip.run_cell("import warnings\n"
                "def noisy(model, x):\n"
                "    warnings.warn('a note from the compiler', UserWarning)\n"
                "    return model(x)\n")
    ip.run_cell_magic("precompile", "--backend eager --out r",
                      "def f(model, x):\n    return noisy(model, x)\n")
    r = ip.user_ns["r"]
    assert r.report["warnings"] == ["UserWarning: a note from the compiler"]
    assert "a note from the compiler" not in capsys.readouterr().err
    assert "Compiler warnings" in r.to_html() and "a note from the compiler" in r.to_html()


# ---- diff and profile ---------------------------------------------------------------------

STEP = ("def step(model, x):\n    loss = model(x).pow(2).mean()\n    loss.backward()\n"
        "    return loss.detach()\n")


def test_precompile_diff_compares_two_results_by_name(ip):
    ip.run_cell_magic("precompile", "--backend eager --out narrow --quiet", FORWARD)
    ip.run_cell("model = torch.nn.Linear(4, 5)")
    ip.run_cell_magic("precompile", "--backend eager --out wide --quiet", FORWARD)
    d = ip.run_line_magic("precompile_diff", "narrow wide")
    assert not d.same
    assert {c.where: c.fields for c in d.data.inputs} == {"model.weight": ("shape",),
                                                         "model.bias": ("shape",)}
    assert d.data.code_diff[:2] == ("--- narrow.py", "+++ wide.py")
    page = d._repr_html_()
    assert "diff <code>narrow</code> → <code>wide</code>" in page
    assert repr(d).startswith("<PrecompileDiff narrow -> wide: 2 input(s) differ")
    # the same result against itself: nothing to show
    same = ip.user_ns["narrow"].diff(ip.user_ns["narrow"])
    assert same.same and same.data.code_diff == ()


def test_a_diff_saves_as_an_offline_page_like_a_result(ip, tmp_path):
    ip.run_cell_magic("precompile", "--backend eager --out narrow --quiet", FORWARD)
    ip.run_cell("model = torch.nn.Linear(4, 5)")
    ip.run_cell_magic("precompile", "--backend eager --out wide --quiet", FORWARD)
    page = ip.run_line_magic("precompile_diff", "narrow wide").to_html()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<title>precompile diff: narrow -&gt; wide</title>" in page
    assert "diff <code>narrow</code> → <code>wide</code>" in page
    assert "+++ wide.py" in page
    (tmp_path / "diff.html").write_text(page, encoding="utf-8")  # what a user does with it


def test_precompile_diff_of_something_else_is_a_usage_error_naming_the_results(ip):
    ip.run_cell_magic("precompile", "--backend eager --out r --quiet", FORWARD)
    with pytest.raises(UsageError, match="'x' is a Tensor, not a PrecompileResult .*: r$"):
        ip.run_line_magic("precompile_diff", "r x")
    with pytest.raises(UsageError, match="'nope' is not defined"):
        ip.run_line_magic("precompile_diff", "r nope")
    with pytest.raises(UsageError, match="takes two names"):
        ip.run_line_magic("precompile_diff", "r")


def test_profile_option_shows_the_report_once_with_a_profile_tab(ip, shown):
    ip.run_cell("model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), "
                "torch.nn.Linear(8, 2))")
    ip.run_cell_magic("precompile", "--backend eager --out r --profile 2", STEP)
    r = ip.user_ns["r"]
    profile = r.report["profile"]
    modules = {m["module"]: m for m in profile["modules"]}
    assert profile["steps"] == 2
    work = kernel_work(profile["kernels"], r.report["graph"]["nodes"])
    assert {("model.0", "forward"), ("model.2", "forward")} <= work, work
    assert {m for m, part in work if part == "backward"}, work
    assert modules["(unattributed)"] == profile["modules"][-1]
    attributed = sum(m["seconds"] for m in profile["modules"][:-1])
    # what is left of the step, or nothing: never negative, on a busy machine too
    assert modules["(unattributed)"]["seconds"] == pytest.approx(
        max(0.0, profile["step_seconds"] - attributed))
    assert sum(m["seconds"] for m in profile["modules"]) == pytest.approx(max(
        profile["step_seconds"], attributed))
    assert modules["model.0"]["eager_forward_seconds"] is not None  # beside the eager forward
    reports = [b for b in shown if "Invariants</label>" in b.get("text/html", "")]
    assert len(reports) == 1  # shown once, after profiling
    html_out = reports[0]["text/html"]
    assert ">Profile</label>" in html_out
    assert "profile of <code>step</code>" in html_out and "(unattributed)" in html_out
    assert "The graph coloured by time" in html_out
    # the model's gradients are as the cell left them: profiling ran the step for real
    assert all(p.grad is None for p in ip.user_ns["model"].parameters())


def test_profile_option_with_zero_steps_is_a_usage_error(ip):
    with pytest.raises(UsageError, match="--profile takes a number of steps >= 1, got 0"):
        ip.run_cell_magic("precompile", "--backend eager --profile 0", FORWARD)


def test_result_profile_runs_later_on_other_inputs(ip):
    ip.run_cell_magic("precompile", "--backend eager --out r --quiet", FORWARD)
    r, model = ip.user_ns["r"], ip.user_ns["model"]
    p = r.profile(model, torch.randn(2, 4), steps=2, eager=False)
    assert p.data.steps == 2 and p.data.eager_step_seconds is None
    assert {m.module for m in p.data.modules} == {"model", "(unattributed)"}
    assert "profile of <code>f</code>" in p._repr_html_()
    assert r.report["profile"]["steps"] == 2
