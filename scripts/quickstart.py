"""The quickstart, end to end: precompile a small MLP with Inductor, write its report as an
offline HTML page (what `result.to_html()` of %%precompile --out result writes), save
(python_code, cache), load the pair in a fresh process whose compiler caches are empty, and
check it against eager."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import torch
from torch import nn

from precompile_nb.core import build
from precompile_nb.tools.report import report_data
from precompile_nb.viewers import render_report_page

OUT = Path(os.environ.get("PRECOMPILE_NB_OUT", "out")).resolve()


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))
    x = torch.randn(32, 64)
    print(f"[quickstart] precompiling an MLP with Inductor on {x.device} "
          "(C++ kernels; takes a while on CPU)...", flush=True)
    t0 = time.perf_counter()
    # build is what precompile runs, keeping what each stage recorded for the report
    art = build(lambda m, x: m(x), model, x)
    code, cache = art.python_code, art.cache
    print(f"[quickstart] precompile: {time.perf_counter() - t0:.1f} s, python_code "
          f"{len(code) / 1024:.1f} KiB, cache {len(cache) / 1024:.1f} KiB")
    page = OUT / "mlp_report.html"
    page.write_text(render_report_page(report_data(art)), encoding="utf-8")
    print(f"[quickstart] report page (offline HTML, as result.to_html()): {page}")
    (OUT / "mlp.py").write_text(code)
    (OUT / "mlp.cache").write_bytes(cache)
    torch.save({"state": model.state_dict(), "x": x, "ref": model(x).detach()}, OUT / "ref.pt")
    child = textwrap.dedent(f"""
        import time, warnings, torch
        from torch import nn
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        from precompile_nb import precompile
        d = torch.load({str(OUT / 'ref.pt')!r})
        m = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))
        m.load_state_dict(d["state"])
        f = precompile.load(open({str(OUT / 'mlp.py')!r}).read(),
                            open({str(OUT / 'mlp.cache')!r}, "rb").read())
        out = f(m, d["x"])
        print(f"{{time.perf_counter() - t0:.2f}}", bool(torch.allclose(out, d["ref"], atol=1e-5)))
    """)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp())
    r = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    secs, ok = r.stdout.split()
    print(f"[quickstart] fresh process, empty compiler caches: import + load + first call "
          f"{secs} s, matches eager: {ok}")
    print(f"[quickstart] the pair is in {OUT}/mlp.py and {OUT}/mlp.cache")
    return 0 if ok == "True" else 1


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="precompile.load executes")
        sys.exit(main())
