"""benchmarks/run.py --first-calls: eager's first call and the warm start measured several
times in turn, and the ratio taken of their medians, so one slow or fast process does not
decide the 1.1x target."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _run_module():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_run_for_tests", BENCH / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _measured(eager: float, warm: float) -> dict:
    return {"eager": {"first_call_s": eager},
            "nb_load_cache": {"load_s": 0.01, "first_call_s": warm - 0.01, "total_s": warm}}


def test_more_samples_are_taken_in_turn_and_the_ratio_is_of_the_medians():
    run = _run_module()
    m = _measured(0.300, 0.100)  # the first eager process was slow: one sample would say 0.33
    order = []
    more = iter([{"first_call_s": 0.100}, {"total_s": 0.105},
                 {"first_call_s": 0.098}, {"total_s": 0.104}])

    def again(mode):
        order.append(mode)
        return next(more)

    for _ in range(2):
        run._first_call_again("tiny_mlp", m, again)
    assert order == ["eager", "nb_load_cache"] * 2
    seconds, ratios = run.derive(m)
    assert seconds["eager_first_call"] == 0.100
    assert seconds["nb_load_first_call_cache"] == 0.104
    assert abs(ratios["load_cache_vs_eager_first"] - 1.04) < 1e-9


def test_no_more_samples_where_a_first_measurement_failed():
    run = _run_module()
    m = {"eager": {"error": "timeout"}, "nb_load_cache": {"total_s": 0.1}}
    run._first_call_again("tiny_mlp", m, lambda mode: {"first_call_s": 1.0, "total_s": 1.0})
    assert "more" not in m["nb_load_cache"]
    assert run.derive(m)[0]["nb_load_first_call_cache"] == 0.1


def test_a_merge_keeps_the_fastest_sample_and_not_one_runs_medians():
    run = _run_module()
    a = _measured(0.120, 0.110)
    a["eager"]["more"] = [0.200, 0.210]
    b = _measured(0.130, 0.100)
    meta = {"date": "d", "device": "cuda"}
    merged = run.merge([{"meta": meta, "workloads": {"tiny_mlp": {"description": "",
                                                                   "measurements": a}}},
                        {"meta": meta, "workloads": {"tiny_mlp": {"description": "",
                                                                   "measurements": b}}}])
    eager = merged["workloads"]["tiny_mlp"]["measurements"]["eager"]
    assert eager["first_call_s"] == 0.120 and "more" not in eager
    assert run.derive(merged["workloads"]["tiny_mlp"]["measurements"])[0][
        "eager_first_call"] == 0.120
