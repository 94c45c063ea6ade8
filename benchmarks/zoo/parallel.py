"""Run zoo cases many at a time under one overall deadline, and always write the table.

    python benchmarks/zoo/parallel.py --out OUT [--jobs N] [--deadline S] [--warm]
        [--no-compile-baseline] [--models a,b] [--workloads infer,train] [run.py options]

Each case's phases (run.py's main, tc, with --warm nbwarm / tcwarm, with --warm --alone also
eagerfirst) are separate units of work: main and tc of one case run at the same time (they do
not depend on each other), a warm phase right after the phase it loads from. The units run
longest first (estimated from the last recorded precompile times: CPU tiny where known, else
the H200's), N at a time, each its own process group. At the deadline (seconds from the start)
every phase still running is killed and every unit not started is left: their cells read "not
run (time)" in the table, so no case is ever missing from it. OUT/results.md and
OUT/results.json are rewritten after every unit, with every case (those still to come as "not
run (time)"), so even a run killed from outside leaves a complete table of what finished.
`--resume PREVIOUS_OUT` keeps a previous run's rows and runs only the phases it did not (a
second call for what the first left), the warm starts of its compiles included (same OUT, which
it refuses otherwise, and same machine: they read its artifacts and torch.compile caches).

benchmarks/zoo/cpu_run.sh is the many-core CPU run (inductor, tiny, CUDA hidden).
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.zoo import run as R  # noqa: E402

_RESULTS = REPO / "benchmarks" / "zoo" / "results"
# precompile seconds recorded per case, most relevant first (a later file fills only the gaps)
COST_FILES = [_RESULTS / "cpu_inductor" / "results.json", _RESULTS / "cpu_data_guards" /
              "results.json", _RESULTS / "cpu_tiny" / "results.json", R._COSTS]
# a phase that follows another (the warm loads), the one it needs ok, and the key its result
# has; eagerfirst (eager's first call in a fresh process) only with --alone, where it is timed
# with nothing else on the machine, as the warm start it is held against
AFTER = {"nbwarm": ("main", "status", "nb_warm_s"), "tcwarm": ("tc", "tc_status", "tc_warm_s"),
         "eagerfirst": ("main", "status", "eager_first_alone_s")}


def _follows(a, phase: str) -> bool:
    return a.warm and (phase != "eagerfirst" or a.alone)


def known_costs(files=COST_FILES) -> dict[tuple[str, str], float]:
    """(model, workload) -> recorded inductor precompile seconds, from the first file that has
    the case."""
    out: dict[tuple[str, str], float] = {}
    for f in files:
        if not Path(f).exists():
            continue
        for r in json.loads(Path(f).read_text()):
            key = (r["model"], r["workload"])
            if r.get("backend") == "inductor" and r.get("precompile_s") and key not in out:
                out[key] = float(r["precompile_s"])
    return out


def cost(case: tuple[str, str], known: dict) -> float:
    """Estimated seconds of one phase of the case: its recorded precompile time; a training
    step without a record 2x its inference's; else 60."""
    m, w = case
    if case in known:
        return known[case]
    return 2 * known[(m, "infer")] if w == "train" and (m, "infer") in known else 60.0


def _row(a, m: str, w: str) -> dict:
    row = {"model": m, "workload": w, "backend": a.backend, "device": a.device, "size": a.size,
           "status": R.NOT_RUN}
    if a.compile_baseline:
        row["tc_status"] = R.NOT_RUN
    return row


class Plan:
    """The units of work, a heap of (-estimated seconds, order, case, phase), and each case's
    row as its phases finish."""

    def __init__(self, a, cases: list[tuple[str, str]], out: Path):
        self.a, self.out, self.lock = a, out, threading.Lock()
        known = known_costs()
        self.rows = {c: _row(a, *c) for c in cases}
        self.heap: list = []
        self.later: list = []  # --alone: the warm phases, each measured alone, at the end
        self.cost = {c: cost(c, known) for c in cases}
        done = self._resumed(a.resume)
        phases = ["main"] + (["tc"] if a.compile_baseline else [])
        for i, c in enumerate(sorted(cases, key=lambda c: -self.cost[c])):
            for p in phases:
                if (c, p) not in done:
                    heapq.heappush(self.heap, (-self.cost[c], 2 * i + (p == "tc"), c, p))
        self.cache_base = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/tmp/zoo_inductor")) \
            / f"zoo-par-{a.device}-{a.backend}-{a.size}-{int(time.time())}"

    def _resumed(self, resume: str | None) -> set:
        """With --resume DIR: the rows of DIR/results.json are kept, and each phase that ran
        there (main, tc: its status is not "not run (time)") is not run again."""
        done: set = set()
        if not resume:
            return done
        for r in json.loads((Path(resume) / "results.json").read_text()):
            c = (r["model"], r["workload"])
            if c not in self.rows or r.get("backend") != self.a.backend:
                continue
            row = self.rows[c]
            if r.get("status") != R.NOT_RUN:
                done.add((c, "main"))
                row.update({k: v for k, v in r.items() if not R.is_baseline_key(k)})
            if "tc_status" in r and r["tc_status"] != R.NOT_RUN:
                done.add((c, "tc"))
                row.update({k: v for k, v in r.items() if R.is_baseline_key(k)})
            for nxt, (prev, key, got) in AFTER.items():  # a warm start the earlier run left
                if _follows(self.a, nxt) and (c, prev) in done and row.get(key) == "ok" and \
                        row.get(f"{nxt}_status", R.NOT_RUN) == R.NOT_RUN and got not in row:
                    self._queue_warm(c, nxt)
            self._queue_together(c)
        return done

    def _queue_warm(self, case: tuple[str, str], phase: str) -> None:
        if self.a.alone:  # after every compile, each measured alone (run_alone)
            self.later.append((case, phase))
        else:  # right after: its cost is the phase it follows (it is short)
            heapq.heappush(self.heap, (-1e9, 0, case, phase))

    def take(self):
        with self.lock:
            return heapq.heappop(self.heap)[2:] if self.heap else None

    def done(self, case: tuple[str, str], phase: str, res: dict) -> None:
        with self.lock:
            row = self.rows[case]
            if phase == "tc":
                row.pop("tc_status", None)
            row.update(res)
            if phase == "tc":  # its warm start, maybe in a --resume run, reads this cache
                row["tc_cache_dir"] = self.env(case, phase)["TORCHINDUCTOR_CACHE_DIR"]
            for nxt, (prev, key, _) in AFTER.items():
                if _follows(self.a, nxt) and prev == phase and row.get(key) == "ok":
                    self._queue_warm(case, nxt)
            if phase in ("main", "tc"):
                self._queue_together(case)
            self.write()

    def _queue_together(self, case: tuple[str, str]) -> None:
        """--together: once main and tc both compiled the case, its one-process steady state
        (run.py's together phase), measured alone at the end like --alone's warm starts."""
        row = self.rows[case]
        if getattr(self.a, "together", False) and row.get("status") == "ok" and \
                row.get("tc_status") == "ok" and "together_steady_nb_s" not in row and \
                (case, "together") not in self.later:
            self.later.append((case, "together"))

    def write(self) -> None:
        order = {m: i for i, m in enumerate(_registry_models())}
        rows = sorted(self.rows.values(), key=lambda r: (order.get(r["model"], 99),
                                                         r["model"], r["workload"]))
        if self.a.warm:  # a warm start still to come (or cut) says so in the path column
            for r in rows:
                if r.get("status") == "ok" and "nb_warm_s" not in r and \
                        "nbwarm_status" not in r:
                    r["load_path"] = R.NOT_RUN
        R.write_report(rows, self.out)
        (self.out / "rows").mkdir(exist_ok=True)
        for r in rows:
            (self.out / "rows" / f"{r['model']}__{r['workload']}.json").write_text(
                json.dumps(r, indent=1, default=str))

    def env(self, case: tuple[str, str], phase: str) -> dict:
        tag = f"{case[0]}__{case[1]}"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get(
            "PYTHONPATH", "").split(os.pathsep) if p])
        sub = {"main": "nb", "tc": "tc", "nbwarm": "nbwarm", "tcwarm": "tc",
               "eagerfirst": "eagerfirst", "together": "tc"}[phase]
        env["TORCHINDUCTOR_CACHE_DIR"] = str(self.cache_base / tag / sub)
        if phase in ("tcwarm", "together") and self.rows[case].get("tc_cache_dir"):
            env["TORCHINDUCTOR_CACHE_DIR"] = self.rows[case]["tc_cache_dir"]
        return env


def _registry_models() -> list[str]:
    from benchmarks.zoo.models import REGISTRY
    return list(REGISTRY)


def _cases(models: str, workloads: str) -> list[tuple[str, str]]:
    """--models a,b:train,c with --workloads infer,train: a and c with every workload, b with
    train alone (the cases of one run need not be a full product)."""
    out = []
    for m in [m for m in models.split(",") if m] or _registry_models():
        name, _, only = m.partition(":")
        out += [(name, w) for w in (only or workloads).split(",") if w]
    return out


def workers(n: int, plan: Plan, deadline: float, take, gate: Path | None = None) -> None:
    """n threads, each running the units `take()` gives until it gives None or the deadline
    comes; returns when every one has ended."""
    def work() -> None:
        while time.time() < deadline - 1:
            unit = take()
            if unit is None:
                return
            run_unit(plan, *unit, deadline, gate)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, n))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_unit(plan: Plan, case: tuple[str, str], phase: str, deadline: float,
             gate: Path | None = None) -> None:
    work = plan.out / "work" / f"{case[0]}__{case[1]}"
    work.mkdir(parents=True, exist_ok=True)
    res = R._run_phase(plan.a, case[0], case[1], phase, work, plan.env(case, phase), deadline,
                       gate)
    plan.done(case, phase, res)


def run_alone(plan: Plan, deadline: float) -> None:
    """--alone: the warm starts (each with its steady state) and eager's first calls after
    every compile, --alone-jobs processes at a time through one gate (gate.py): each measures
    with every other one asleep, their setups overlap."""
    order = {c: i for i, c in enumerate(plan.rows)}
    units = sorted(plan.later, key=lambda u: (order[u[0]], u[1]))
    units.reverse()  # popped from the end: the registry's order
    lock = threading.Lock()

    def take():
        with lock:
            return units.pop() if units else None

    workers(plan.a.alone_jobs, plan, deadline, take, plan.out / "alone.gate")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                   help="phases at a time (default: every core)")
    p.add_argument("--deadline", type=float, default=480.0,
                   help="seconds from the start after which nothing runs (default 480)")
    p.add_argument("--warm", action="store_true",
                   help="also the fresh-process warm starts (nbwarm, tcwarm)")
    p.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false")
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="inductor", choices=["inductor", "eager"])
    p.add_argument("--size", default="tiny", choices=["tiny", "real"])
    p.add_argument("--models", default="",
                   help="a,b (every workload of --workloads) or a:train (that one alone)")
    p.add_argument("--workloads", default="infer,train")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--rounds", type=int, default=5, help="steady-state calls (0: skip)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per phase (default: the deadline)")
    p.add_argument("--no-data-guards", dest="data_guards", action="store_false")
    p.add_argument("--together", action="store_true",
                   help="after both compiles, each case's steady state in one process timing "
                        "eager, precompile_nb and torch.compile in turn (each alone, at "
                        "the end)")
    p.add_argument("--alone", action="store_true",
                   help="with --warm: after every compile, the warm starts, each measured "
                        "alone with its steady state (the table's steady columns then), and "
                        "eager's first call in a fresh process (the table's warm nb / eager "
                        "1st)")
    p.add_argument("--alone-jobs", type=int, default=4,
                   help="--alone's processes at a time: each measures alone (the others "
                        "asleep, gate.py), their setups overlap (default 4; 1: one at a time)")
    p.add_argument("--resume", default=None,
                   help="a previous OUT: keep its rows, run only the phases it did not run")
    p.add_argument("--list", action="store_true", help="print the cases, longest first")
    a = p.parse_args(argv)
    if a.resume and Path(a.resume).resolve() != Path(a.out).resolve():
        # the warm starts read the pairs under OUT/work: another OUT would look for them there
        p.error(f"--resume {a.resume} must be the --out of this run too (the warm starts "
                f"read that run's artifacts from OUT/work); got --out {a.out}")
    t0 = time.time()
    deadline = t0 + a.deadline
    a.timeout = a.timeout or a.deadline
    a.steady_warm = a.alone
    cases = _cases(a.models, a.workloads)
    plan = Plan(a, cases, Path(a.out))
    if a.list:
        for c in sorted(cases, key=lambda c: -plan.cost[c]):
            print(*c, f"{plan.cost[c]:.0f}")
        return
    plan.out.mkdir(parents=True, exist_ok=True)
    plan.write()
    print(f"{len(cases)} cases, {len(plan.heap)} phases, {a.jobs} at a time, deadline "
          f"{a.deadline:.0f} s", flush=True)
    workers(a.jobs, plan, deadline, plan.take)
    run_alone(plan, deadline)
    plan.write()
    late = sum(r.get("status") == R.NOT_RUN for r in plan.rows.values())
    print(f"done in {time.time() - t0:.0f} s: {len(cases) - late} cases run, {late} not run "
          f"(time); {plan.out / 'results.md'}", flush=True)


if __name__ == "__main__":
    main()
