"""Browser tests: the report as people see it, in JupyterLab driven by headless Chromium
(Playwright), and as a static page with no kernel.

They need Debian's `chromium` (found on PATH or at PRECOMPILE_NB_CHROMIUM), the Python packages
`playwright` and `jupyterlab` (scripts/setup_browser.sh installs all three where it can) and,
for the Graph tab's static SVG, Graphviz's `dot`. Whatever is missing skips the tests that need
it, with the reason and the install command; PRECOMPILE_NB_NO_BROWSER=1 skips them all.

    bash scripts/setup_browser.sh .venv/bin/python
    .venv/bin/python -m pytest -m browser tests/browser

Screenshots (light and dark) go to a temporary folder, whose path the first one prints: a test
run never rewrites the committed ones. To refresh docs/screenshots/, ask for it:

    PRECOMPILE_NB_SCREENSHOTS=docs/screenshots .venv/bin/python -m pytest -m browser tests/browser
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from .lab import REPO, Lab, RunningNotebook, copy_stripped, open_and_run, start_lab, stop_lab

# where the screenshots go: PRECOMPILE_NB_SCREENSHOTS (docs/screenshots to refresh the committed
# ones), else a temporary folder made on the first screenshot
_SCREENSHOTS: list[Path] = []
SETUP_HINT = "run `bash scripts/setup_browser.sh .venv/bin/python`"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives headless Chromium (Playwright) against JupyterLab and the "
        "static report; skipped with a reason without chromium/playwright/jupyterlab or when "
        "PRECOMPILE_NB_NO_BROWSER=1")


def chromium_path() -> str | None:
    """The Chromium binary: $PRECOMPILE_NB_CHROMIUM, else `chromium` on PATH or Debian's."""
    explicit = os.environ.get("PRECOMPILE_NB_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


def browser_unavailable() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if os.environ.get("PRECOMPILE_NB_NO_BROWSER") == "1":
        return "browser tests disabled by PRECOMPILE_NB_NO_BROWSER=1"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"the Python package `playwright` is not installed ({SETUP_HINT})"
    if chromium_path() is None:
        explicit = os.environ.get("PRECOMPILE_NB_CHROMIUM")
        if explicit:
            return f"PRECOMPILE_NB_CHROMIUM={explicit} is not an executable"
        return ("no Chromium binary: `apt-get install chromium` (Debian) or set "
                f"PRECOMPILE_NB_CHROMIUM ({SETUP_HINT})")
    return None


def jupyterlab_unavailable() -> str | None:
    why = browser_unavailable()
    if why:
        return why
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return f"the Python package `jupyterlab` is not installed ({SETUP_HINT})"
    return None


def has_dot() -> bool:
    return shutil.which("dot") is not None


NO_DOT_REASON = ("no Graphviz `dot` binary: the Graph tab shows the DOT text fallback instead "
                 "of a static SVG (`apt-get install graphviz`, or scripts/setup_browser.sh)")


@pytest.fixture(scope="session")
def browser_context() -> Iterator[Any]:
    """One headless Chromium (Debian's binary, a fresh profile) for the session. Pages get no
    network beyond 127.0.0.1 and file:// (see offline_page)."""
    why = browser_unavailable()
    if why:
        pytest.skip(why)
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="pcnb_chromium_profile_")
    try:
        with sync_playwright() as pw:
            try:
                context = pw.chromium.launch_persistent_context(
                    profile, executable_path=chromium_path(), headless=True,
                    args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900},
                    device_scale_factor=1)
            except PlaywrightError as e:  # installed but cannot start here (libraries, sandbox)
                first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
                pytest.skip(f"Chromium at {chromium_path()} does not start: {first}")
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def offline_page(context: Any) -> Any:
    """A new page whose requests to anything but 127.0.0.1/localhost, file:, data: and
    blob: fail at once: CDN scripts of an exported page fail fast, as they would offline,
    instead of waiting on a network this machine may not have."""
    page = context.new_page()

    def route(r: Any) -> None:
        url = r.request.url
        local = url.startswith(("file:", "data:", "blob:", "http://127.0.0.1",
                                "ws://127.0.0.1", "http://localhost"))
        r.continue_() if local else r.abort()

    page.route("**/*", route)
    return page


def screenshots_dir() -> Path:
    """$PRECOMPILE_NB_SCREENSHOTS (relative to the repository), else one temporary folder for
    the session: never docs/screenshots/ unless asked for."""
    if not _SCREENSHOTS:
        asked = os.environ.get("PRECOMPILE_NB_SCREENSHOTS")
        if asked:
            where = Path(asked) if Path(asked).is_absolute() else REPO / asked
        else:
            where = Path(tempfile.mkdtemp(prefix="precompile_nb_shots_"))
            print(f"\n[browser tests] screenshots in {where} "
                  "(PRECOMPILE_NB_SCREENSHOTS=docs/screenshots refreshes the committed ones)")
        where.mkdir(parents=True, exist_ok=True)
        _SCREENSHOTS.append(where)
    return _SCREENSHOTS[0]


def save_screenshot(target: Any, name: str) -> Path:
    """Write NAME.png from a page or an element handle/locator into screenshots_dir()."""
    path = screenshots_dir() / f"{name}.png"
    target.screenshot(path=str(path))
    return path



# ---------------------------------------------------------------------------------------------
# JupyterLab with the two notebooks under test

# appended to the quickstart copy: the report's node count, and the Inductor report written
# by the live kernel (tests/browser/test_static_report.py opens it as a static page)
NODES_MARK = "PCNB-GRAPH-NODES"
QUICKSTART_EXTRA = f"""import json, pathlib
print("{NODES_MARK}", len(result.report["graph"]["nodes"]))
pathlib.Path("quickstart_report.html").write_text(result.to_html(), encoding="utf-8")
pathlib.Path("quickstart_report.json").write_text(json.dumps(result.report), encoding="utf-8")"""

VIOLATION_CELLS = [
    "import torch\nfrom torch import nn\n%load_ext precompile_nb\ntorch.manual_seed(0)\n"
    "model = nn.Linear(4, 2)\nx = torch.randn(3, 4)\nscale = torch.full((2,), 2.0)",
    # invariant 1: `scale` is read from the notebook, not passed: it would be baked in
    "%%precompile --backend eager\ndef scaled(model, x):\n    return model(x) * scale",
]


# profile a training step with the magic, then diff it against a wider model's
PROFILE_CELLS = [
    "import torch\nfrom torch import nn\n%load_ext precompile_nb\ntorch.manual_seed(0)\n"
    "narrow = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))\n"
    "wide = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))\n"
    "x = torch.randn(8, 16)",
    "%%precompile narrow x --backend eager --out a --profile 20\ndef step(model, x):\n"
    "    loss = model(x).pow(2).mean()\n    loss.backward()\n    return loss.detach()",
    "%%precompile wide x --backend eager --out b --quiet\ndef step(model, x):\n"
    "    loss = model(x).pow(2).mean()\n    loss.backward()\n    return loss.detach()",
    "%precompile_diff a b",
]


@pytest.fixture(scope="session")
def say(pytestconfig: pytest.Config) -> Callable[[str], None]:
    """Print a line to the terminal now, past pytest's output capture: the JupyterLab tests
    wait minutes for the notebooks, and a silent terminal looks like a hang."""
    capman = pytestconfig.pluginmanager.getplugin("capturemanager")

    def say(text: str) -> None:
        if capman is None:
            print(text, flush=True)
            return
        with capman.global_and_fixture_disabled():
            print(text, flush=True)

    return say


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, say: Callable[[str], None]) -> Iterator[Lab]:
    """JupyterLab on 127.0.0.1, a random free port and a token, serving a temporary root
    dir; its kernels run this interpreter with this checkout's precompile_nb."""
    why = jupyterlab_unavailable()
    if why:
        pytest.skip(why)
    say("\n[jupyterlab] starting JupyterLab; three notebooks then run at once (an Inductor "
        "compile on CPU: minutes)")
    server = start_lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield server
    finally:
        stop_lab(server)


@pytest.fixture(scope="session")
def notebooks(lab: Lab, browser_context: Any) -> Iterator[dict[str, RunningNotebook]]:
    """The quickstart (outputs stripped) and a notebook that breaks invariant 1, each opened
    in its own JupyterLab window and started with Run All at once: the violation notebook
    runs while the quickstart's Inductor compile takes most of the time."""
    copy_stripped(REPO / "notebooks" / "01_quickstart.ipynb", lab.root / "01_quickstart.ipynb",
                  [QUICKSTART_EXTRA])
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in VIOLATION_CELLS],
                                metadata={"kernelspec": kernelspec}),
                   lab.root / "violation.ipynb")
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in PROFILE_CELLS],
                                metadata={"kernelspec": kernelspec}),
                   lab.root / "profile_diff.ipynb")
    running = {
        "quickstart": open_and_run(offline_page(browser_context), lab, "01_quickstart.ipynb",
                                   "quickstart"),
        "violation": open_and_run(offline_page(browser_context), lab, "violation.ipynb",
                                  "violation"),
        "profile_diff": open_and_run(offline_page(browser_context), lab,
                                     "profile_diff.ipynb", "profile_diff"),
    }
    yield running
    for r in running.values():
        r.page.close()


@pytest.fixture(scope="session")
def quickstart(notebooks: dict[str, RunningNotebook],
               say: Callable[[str], None]) -> RunningNotebook:
    """The quickstart, run to the end in JupyterLab without an error."""
    nb = notebooks["quickstart"]
    nb.wait(progress=say)
    errors = nb.page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.'
                             'stderr"]').all_inner_texts()
    tracebacks = [t for t in errors if "Traceback" in t or "Error" in t]
    assert not tracebacks, f"the quickstart raised in JupyterLab:\n{tracebacks[0][:3000]}"
    return nb


@pytest.fixture(scope="session")
def violation(notebooks: dict[str, RunningNotebook],
              say: Callable[[str], None]) -> RunningNotebook:
    nb = notebooks["violation"]
    nb.wait(progress=say)
    return nb


@pytest.fixture(scope="session")
def profile_diff(notebooks: dict[str, RunningNotebook],
                 say: Callable[[str], None]) -> RunningNotebook:
    nb = notebooks["profile_diff"]
    nb.wait(progress=say)
    return nb
