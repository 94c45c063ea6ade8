"""One measuring child for the probes (launcher_probe.py, beside_probe.py, tune_probe.py,
import_diff.py): `python -c CODE` in a fresh process whose Inductor and Triton caches are empty
directories of its own, its last line of output read as JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable


def run_fresh(code: str, prefix: str, timeout: int = 300, flags: tuple[str, ...] = (),
              stderr_to: str | None = None) -> dict:
    """What the child printed last, as JSON; {"error": the end of its stderr} where it failed.
    `flags` go to the interpreter (e.g. ("-X", "importtime")); `stderr_to` names a file that
    gets the child's whole stderr."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:  # its caches go with it
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
               "TRITON_CACHE_DIR": os.path.join(tmp, "triton")}
        p = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True,
                           text=True, timeout=timeout, env=env)
    if stderr_to:
        with open(stderr_to, "w") as f:
            f.write(p.stderr)
    if p.returncode != 0:
        return {"error": p.stderr[-3000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def in_turn(names: list[str], variants: tuple[str, str], rounds: int,
            one: Callable[[str, str], dict]) -> dict:
    """{name: {variant: [one(name, variant) for each round]}}, the two variants run in turn
    within each round (host drift falls on both)."""
    res: dict = {}
    for name in names:
        runs = res.setdefault(name, {v: [] for v in variants})
        for _ in range(rounds):
            for v in variants:
                runs[v].append(one(name, v))
    return res


def save(out: str, file: str, res: dict) -> None:
    """`res` as indented JSON in out/file."""
    with open(os.path.join(out, file), "w") as f:
        json.dump(res, f, indent=1)
