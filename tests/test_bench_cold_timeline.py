"""benchmarks/cold_timeline.py: a cold start's wall time split into phases from stack samples
(stack_sampler.py), imports named by the package whose body runs, waits by what they wait in."""
from __future__ import annotations

import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import cold_timeline  # noqa: E402
from stack_sampler import StackSampler, _short  # noqa: E402


def test_frames_are_named_by_package_path():
    assert _short("/x/lib/python3.12/site-packages/torch/_inductor/graph.py") \
        == "torch/_inductor/graph.py"
    assert _short("/usr/lib/python3.11/threading.py") == "threading.py"
    assert _short("/work/main/precompile_nb/core/lower.py") == "precompile_nb/core/lower.py"


def test_an_import_is_named_by_the_outermost_library_module_being_imported():
    stack = ["sympy/core/basic.py:<module>", "<frozen importlib._bootstrap>:_find_and_load",
             "torch/_inductor/graph.py:<module>",
             "<frozen importlib._bootstrap>:_find_and_load",
             "precompile_nb/core/lower.py:<module>",
             "<frozen importlib._bootstrap>:_find_and_load", "measure.py:main"]
    assert cold_timeline.phase(stack) == "import torch/_inductor"


def test_a_wait_names_what_it_waits_in_and_work_names_its_innermost_phase():
    waiting = ["threading.py:wait", "concurrent/futures/_base.py:result",
               "precompile_nb/core/_compat/parallel.py:join", "torch/_inductor/graph.py:run"]
    assert cold_timeline.phase(waiting) == "wait (precompile_nb)"
    working = ["triton/compiler/compiler.py:compile", "torch/_inductor/codecache.py:load",
               "precompile_nb/core/lower.py:lower"]
    assert cold_timeline.phase(working) == "triton compile"


def test_sampled_region_is_summarized_by_phase(tmp_path):
    def busy_in_a_frame_named_fx():  # no Python frame under it (a sample there would be a
        end = time.perf_counter() + 0.3  # phase of its own, splitting the stretch)
        while time.perf_counter() < end:
            sum(range(1000))

    busy_in_a_frame_named_fx.__code__ = busy_in_a_frame_named_fx.__code__.replace(
        co_filename="/site-packages/torch/fx/made_up.py")
    sampler = StackSampler(interval=0.005).start()
    busy_in_a_frame_named_fx()
    sampler.stop().dump(str(tmp_path / "s.json"))
    summary = cold_timeline.summarize_run(str(tmp_path / "s.json"))
    assert max(summary["main"], key=summary["main"].get) == "fx"
    assert [seg[0] for seg in summary["segments"]] == ["fx"]  # one stretch, nothing else


def test_parts_count_a_main_thread_sample_for_every_part_whose_frames_it_holds(tmp_path):
    import json

    names = ["precompile_nb/core/_compat/inductor.py:inner", "precompile_nb/core/lower.py:x",
             "triton/runtime/build.py:_build", "torch/_inductor/x.py:make_launcher",
             "precompile_nb/core/_compat/straight_to_inductor.py:decomposed"]
    samples = [[0.1, 0, [2, 3, 0, 1]],  # gcc for a launcher inside Inductor, in the lowering
               [0.2, 0, [0, 1]],  # Inductor alone
               [0.3, 1, [4, 1]],  # another thread: not counted
               [0.4, 0, [4, 1]]]  # the decomposition trace
    path = tmp_path / "w_nb_0.json"
    path.write_text(json.dumps({"names": names, "samples": samples}))
    got = cold_timeline.parts_of(str(path))
    assert got["Inductor's compile of the graph"] == 0.27  # 2 of 3 main samples, 0.4 s
    assert got["  of which: gcc building Triton's launchers"] == 0.13
    assert got["the decomposition trace before Inductor"] == 0.13
    assert got["all of the lowering"] == 0.4 and got["the capture's trace"] == 0.0
