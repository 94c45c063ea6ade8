"""The zoo's table: what a merged row shows when its torch.compile columns come from an
earlier run, and which steady columns a row reports (benchmarks/zoo/run.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.zoo import run as R  # noqa: E402

_EARLIER = {"model": "mixtral", "workload": "train", "backend": "inductor", "status": "error",
            "error_type": "PrecompileError", "error": "lower failed", "error_stage": "precompile",
            "tc_status": "ok", "tc_rel_err": 0.116, "tc_cold_s": 153.0, "tc_warm_s": 66.7,
            "steady_eager_tc_s": 0.056, "steady_tc_s": 0.078}
_LATER = {"model": "mixtral", "workload": "train", "backend": "inductor", "status": "ok",
          "rel_err": 0.12, "precompile_s": 120.0, "steady_eager_s": 0.05, "steady_nb_s": 0.024}


def test_a_row_without_a_baseline_keeps_the_earlier_rows_and_is_judged_against_it():
    merged = R._with_baseline_of(dict(_LATER), dict(_EARLIER), "zoo_h200_full/all")
    assert merged["status"] == "ok" and merged["rel_err"] == 0.12  # the later run's own
    assert merged["tc_rel_err"] == 0.116 and merged["tc_from"] == "zoo_h200_full/all"
    assert "error" not in merged  # the earlier run's error is not carried over
    # 0.12 is over the 0.01 bound alone, within 2x torch.compile's 0.116
    assert R._status(_LATER).startswith("MISMATCH") and R._status(merged) == "ok"


def test_a_row_with_its_own_baseline_keeps_it():
    own = {**_LATER, "tc_status": "ok", "tc_rel_err": 0.5}
    assert R._with_baseline_of(dict(own), dict(_EARLIER), "x")["tc_rel_err"] == 0.5
    assert R._with_baseline_of(dict(_LATER), None, "x") == _LATER


def test_the_steady_columns_come_from_the_runs_alone_where_the_row_has_them():
    row = {**_LATER, **{k: v for k, v in _EARLIER.items() if k.startswith(("tc_", "steady"))}}
    line = R.render([row]).splitlines()[2]
    assert "0.48x" in line and "*" not in line  # 0.024/0.05, contended, no mark
    alone = {**row, "warm_steady_eager_s": 0.05, "warm_steady_nb_s": 0.02,
             "warm_steady_eager_tc_s": 0.05, "warm_steady_tc_s": 0.04}
    line = R.render([alone]).splitlines()[2]
    assert "| 0.40x | 0.50x* |" in line  # (0.02/0.05) / (0.04/0.05), marked as measured alone
    # one process timing all three wins over both: nb/tc is then the direct ratio, even
    # where eager ran at another speed in the processes apart
    together = {**alone, "together_steady_eager_s": 0.04, "together_steady_nb_s": 0.02,
                "together_steady_tc_s": 0.025}
    line = R.render([together]).splitlines()[2]
    assert "| 0.50x | 0.80x\u2020 |" in line, line


def test_a_row_without_warm_starts_keeps_the_earlier_rows():
    earlier = {**_LATER, "nb_warm_s": 1.1, "tc_warm_s": 6.8, "load_path": "warm",
               "warm_steady_nb_s": 0.02}
    later = {**_LATER, "precompile_s": 90.0, "together_steady_nb_s": 0.02}
    merged = R._with_warm_of(dict(later), earlier, "zoo_h200_alone3")
    assert merged["precompile_s"] == 90.0 and merged["together_steady_nb_s"] == 0.02
    assert merged["nb_warm_s"] == 1.1 and merged["load_path"] == "warm"
    assert merged["warm_from"] == "zoo_h200_alone3"
    own = {**later, "nb_warm_s": 0.9}
    assert R._with_warm_of(dict(own), earlier, "x") == own  # its own warm start stays


def test_a_together_run_measures_each_compiled_case_once_at_the_end(tmp_path):
    """parallel.py --together: after main and tc of a case both compiled, its one-process
    steady state is queued once, reading torch.compile's cache (warm)."""
    import argparse

    from benchmarks.zoo import parallel as P
    args = argparse.Namespace(backend="inductor", device="cuda", size="real", warm=False,
                              alone=False, together=True, compile_baseline=True, resume=None)
    plan = P.Plan(args, [("gpt2", "infer")], tmp_path)
    case = ("gpt2", "infer")
    plan.done(case, "main", {"status": "ok"})
    assert plan.later == []  # torch.compile's side has not compiled yet
    plan.done(case, "tc", {"tc_status": "ok"})
    assert plan.later == [(case, "together")]
    plan.done(case, "tc", {"tc_status": "ok"})  # a phase reported again queues nothing more
    assert plan.later == [(case, "together")]
    assert plan.env(case, "together")["TORCHINDUCTOR_CACHE_DIR"] == \
        plan.rows[case]["tc_cache_dir"]


def test_a_resumed_run_does_the_warm_starts_the_earlier_run_left(tmp_path):
    """parallel.py --resume OUT after a call cut at its deadline: the compiles that finished
    are not run again, their warm starts are (torch.compile's from the cache its cold run
    filled), and a warm start that ran is not repeated."""
    from benchmarks.zoo import parallel as P
    left = {**_LATER, "tc_status": "ok", "tc_cold_s": 1.0, "tc_cache_dir": "/c/tc",
            "load_path": "not run (time)", "tcwarm_status": R.NOT_RUN}
    ran = {**left, "model": "gpt2", "nb_warm_s": 0.3, "tc_warm_s": 5.0}
    (tmp_path / "results.json").write_text(__import__("json").dumps([left, ran]))
    import argparse
    args = argparse.Namespace(backend="inductor", device="cuda", size="real", warm=True,
                              alone=True, compile_baseline=True, resume=str(tmp_path))
    plan = P.Plan(args, [("mixtral", "train"), ("gpt2", "train")], tmp_path)
    assert plan.heap == []  # both compiles of both cases ran
    # (gpt2's warm starts ran; eager's first call alone, which it lacks, is still to come)
    assert sorted(plan.later) == [(("gpt2", "train"), "eagerfirst"),
                                  (("mixtral", "train"), "eagerfirst"),
                                  (("mixtral", "train"), "nbwarm"),
                                  (("mixtral", "train"), "tcwarm")]
    assert plan.env(("mixtral", "train"), "tcwarm")["TORCHINDUCTOR_CACHE_DIR"] == "/c/tc"


def test_a_run_can_name_one_workload_of_a_model():
    from benchmarks.zoo import parallel as P
    assert P._cases("qwen2:infer,gpt2", "infer,train") == [
        ("qwen2", "infer"), ("gpt2", "infer"), ("gpt2", "train")]


def test_a_resumed_run_with_another_out_is_refused_before_it_runs_anything(tmp_path, capsys):
    """The warm starts read the pairs under OUT/work: resuming into another OUT looked for
    them there and lost every warm start (FileNotFoundError per case, seen on the H200)."""
    from benchmarks.zoo import parallel as P
    (tmp_path / "a").mkdir()
    with pytest.raises(SystemExit):
        P.main(["--out", str(tmp_path / "b"), "--resume", str(tmp_path / "a"), "--warm"])
    assert "must be the --out of this run too" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_a_run_alone_times_eagers_first_call_in_its_own_process_beside_each_warm_start(
        tmp_path):
    """parallel.py --warm --alone: eager's own first call, in a fresh process, is queued with
    the case's warm start, and the table holds the warm start against it; without --alone
    (warm starts timed among the compiles) it is not measured."""
    import argparse

    from benchmarks.zoo import parallel as P
    case = ("gpt2", "train")
    for alone, expected in ((True, [(case, "nbwarm"), (case, "eagerfirst")]),
                            (False, [])):
        args = argparse.Namespace(backend="inductor", device="cuda", size="real", warm=True,
                                  alone=alone, compile_baseline=False, resume=None)
        plan = P.Plan(args, [case], tmp_path)
        plan.done(case, "main", {"status": "ok", "rel_err": 0.0})
        assert plan.later == expected
    row = {**_LATER, "nb_warm_s": 0.5, "eager_first_alone_s": 0.5, "load_path": "warm"}
    over = {**row, "model": "bart", "nb_warm_s": 1.2}
    text = R.render([row, over])
    assert text.splitlines()[2].endswith("| warm | 0.5 | 1.00x |")
    assert text.splitlines()[3].endswith("| warm | 0.5 | 2.40x |")
    assert "warm nb / eager 1st <= 1.1x: 1 of 2 cases" in text
    # a resumed run does the eager first call its earlier run left, and not one it did
    (tmp_path / "results.json").write_text(__import__("json").dumps([
        {**_LATER, "model": "gpt2", "eager_first_alone_s": 0.5},
        {**_LATER, "model": "bart", "eagerfirst_status": R.NOT_RUN}]))
    args = argparse.Namespace(backend="inductor", device="cuda", size="real", warm=True,
                              alone=True, compile_baseline=False, resume=str(tmp_path))
    plan = P.Plan(args, [("gpt2", "train"), ("bart", "train")], tmp_path)
    assert sorted(plan.later) == [(("bart", "train"), "eagerfirst"),
                                  (("bart", "train"), "nbwarm"), (("gpt2", "train"), "nbwarm")]


def test_the_table_names_a_full_collection_inside_a_timed_window(tmp_path):
    """A warm start or eager's first call that the cyclic collector's full collection landed
    in is named with its pause (the GcClock of the phase), the others are not."""
    hit = {**_LATER, "nb_warm_s": 0.9, "eager_first_alone_s": 0.7,
           "nb_warm_gc_s": {"0": 0.001, "2": 0.21}, "eager_first_gc_s": {"0": 0.002}}
    quiet = {**_LATER, "model": "gpt2", "nb_warm_s": 0.4, "eager_first_alone_s": 0.5,
             "nb_warm_gc_s": {"1": 0.003}, "eager_first_gc_s": {}}
    R.write_report([hit, quiet], tmp_path)
    md = (tmp_path / "results.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("a full collection"))
    assert "mixtral train warm nb 210 ms" in line and "gpt2" not in line
    assert "eager 1st" not in line
    merged = R._with_warm_of({**_LATER}, hit, "earlier")  # a merge keeps the phase's clocks
    assert merged["nb_warm_gc_s"] == hit["nb_warm_gc_s"]
    assert merged["eager_first_gc_s"] == hit["eager_first_gc_s"]


def test_the_collector_clock_counts_a_collection_by_its_generation():
    import gc
    with R.GcClock() as clock:
        gc.collect()
    assert set(clock.s) == {"2"} and clock.s["2"] > 0
    seen = dict(clock.s)
    gc.collect()  # closed: no longer counted
    assert clock.s == seen
