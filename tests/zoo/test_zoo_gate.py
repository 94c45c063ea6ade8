"""parallel.py --alone's gate (benchmarks/zoo/gate.py): processes set up side by side, and each
measures with every other one asleep."""
from __future__ import annotations

import multiprocessing as mp
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _phase(gate_path: str, log: str, name: str, setup_s: float, start) -> None:
    from benchmarks.zoo.gate import Gate
    g = Gate(gate_path)
    start.wait()  # every process holds the gate shared: their setups begin together

    def mark(what: str) -> None:
        with open(log, "a") as f:
            f.write(f"{time.monotonic():.6f} {name} {what}\n")

    mark("setup+")
    time.sleep(setup_s)
    mark("setup-")
    g.measure()
    mark("measure+")
    time.sleep(0.05)
    mark("measure-")
    g.release()


def _intervals(log: Path) -> dict[tuple[str, str], tuple[float, float]]:
    starts, out = {}, {}
    for line in log.read_text().splitlines():
        t, name, what = line.split()
        if what.endswith("+"):
            starts[(name, what[:-1])] = float(t)
        else:
            out[(name, what[:-1])] = (starts[(name, what[:-1])], float(t))
    return out


def test_each_measurement_runs_with_no_other_setup_or_measurement_beside_it(tmp_path):
    ctx = mp.get_context("spawn")
    gate, log = str(tmp_path / "g"), str(tmp_path / "log")
    start = ctx.Barrier(6)
    procs = [ctx.Process(target=_phase, args=(gate, log, f"p{i}", 0.5 + 0.1 * (i % 3), start))
             for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    spans = _intervals(Path(log))
    assert len(spans) == 12  # every process set up and measured
    for (name, what), (a, b) in spans.items():
        if what != "measure":
            continue
        for (other, w2), (c, d) in spans.items():
            if other != name:
                assert b <= c or d <= a, f"{name}'s measurement overlaps {other}'s {w2}"
    # and the setups did overlap one another (the point of running several at a time)
    setups = sorted(v for (n, w), v in spans.items() if w == "setup")
    assert any(setups[i + 1][0] < setups[i][1] for i in range(len(setups) - 1))


def test_no_gate_path_is_no_gate():
    from benchmarks.zoo.gate import Gate
    g = Gate(None)
    g.measure()
    g.release()
    assert g.fd is None
