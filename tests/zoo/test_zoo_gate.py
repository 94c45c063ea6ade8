"""parallel.py --alone's gate (benchmarks/zoo/gate.py): processes set up side by side, and each
measures with every other one asleep."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# one phase process: takes the gate shared, waits until all N hold it (their setups begin
# together), "sets up" (sleeps), then measures (exclusive) and logs each span's ends
_PHASE = r"""
import os, sys, time
sys.path.insert(0, {repo!r})
from benchmarks.zoo.gate import Gate
gate, log, ready, name, setup_s, n = sys.argv[1:7]
g = Gate(gate)
open(os.path.join(ready, name), "w").close()
while len(os.listdir(ready)) < int(n):
    time.sleep(0.01)

def mark(what):
    with open(log, "a") as f:
        f.write(f"{{time.monotonic():.6f}} {{name}} {{what}}\n")

mark("setup+")
time.sleep(float(setup_s))
mark("setup-")
g.measure()
mark("measure+")
time.sleep(0.05)
mark("measure-")
g.release()
"""


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
    n = 6
    ready = tmp_path / "ready"
    ready.mkdir()
    code = _PHASE.format(repo=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "g"),
                               str(tmp_path / "log"), str(ready), f"p{i}",
                               str(0.5 + 0.1 * (i % 3)), str(n)])
             for i in range(n)]
    try:
        for p in procs:
            assert p.wait(timeout=120) == 0
    finally:
        for p in procs:
            p.kill()
    spans = _intervals(tmp_path / "log")
    assert len(spans) == 2 * n  # every process set up and measured
    for (name, what), (a, b) in spans.items():
        if what != "measure":
            continue
        for (other, w2), (c, d) in spans.items():
            if other != name:
                assert b <= c or d <= a, f"{name}'s measurement overlaps {other}'s {w2}"
    # and the setups did overlap one another (the point of running several at a time)
    setups = sorted(v for (_, w), v in spans.items() if w == "setup")
    assert any(setups[i + 1][0] < setups[i][1] for i in range(len(setups) - 1))


def test_no_gate_path_is_no_gate():
    from benchmarks.zoo.gate import Gate
    g = Gate(None)
    g.measure()
    g.release()
    assert g.fd is None
