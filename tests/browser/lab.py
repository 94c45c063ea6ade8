"""A throwaway JupyterLab for the browser tests: the server (127.0.0.1, random free port,
token, everything under one temp dir) and notebooks opened in it and run with Run All."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell

REPO = Path(__file__).resolve().parents[2]
# Note [browser timeouts]: the quickstart's Inductor compile takes 20-60 s on a busy 2-core
# machine (more with a cold compiler cache), JupyterLab's first page load 10-20 s; waits are
# generous, and each fails with what the page showed instead of hanging.
LAB_START_TIMEOUT = 90.0
RUN_ALL_TIMEOUT = 300.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab server on 127.0.0.1 (started by the `lab` fixture)."""

    proc: subprocess.Popen
    port: int
    token: str
    root: Path  # the server's root dir: the notebooks under test
    log: Path

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(self.url(f"api/{path}"), method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError as e:
            return f"(no server log: {e})"


def _lab_settings(settings: Path) -> None:
    """User settings of the temporary JupyterLab: light theme to start, every cell in the
    DOM (no windowing, so the test sees all outputs), no news/update toasts in screenshots."""
    files = {
        "@jupyterlab/apputils-extension/themes.jupyterlab-settings":
            {"theme": "JupyterLab Light"},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
            {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
    }
    for rel, content in files.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))


def path_without(bin_dir: Path, *names: str) -> str:
    """A PATH of one directory linking every executable on $PATH but `names` (the first of
    each name wins, as a shell's lookup does)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for entry in os.scandir(d):
            link = bin_dir / entry.name
            if entry.name in names or link.exists() or link.is_symlink():
                continue
            if os.access(entry.path, os.X_OK) and not entry.is_dir():
                link.symlink_to(entry.path)
    return str(bin_dir)


def start_lab(base: Path) -> Lab:
    """Start JupyterLab with everything (root, settings, runtime, config) under `base` and
    wait until its REST API answers."""
    root, settings = base / "root", base / "settings"
    for d in (root, settings, base / "workspaces", base / "runtime", base / "config",
              base / "ipython"):
        d.mkdir(exist_ok=True)
    _lab_settings(settings)
    token = os.urandom(16).hex()
    env = dict(os.environ)
    env.update({
        # the kernels find no Graphviz `dot`: the report's graph is drawn by the Graphviz
        # bundled in its output (the case of most users), not by a static SVG
        "PATH": path_without(base / "bin", "dot"),
        "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p]),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "IPYTHONDIR": str(base / "ipython"),
    })
    log = base / "server.log"
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--ServerApp.terminals_enabled=False",
           f"--LabApp.user_settings_dir={settings}",
           f"--LabApp.workspaces_dir={base / 'workspaces'}",
           # window.jupyterapp: the tests run JupyterLab's own commands (the ones its menus
           # run: notebook:run-all-cells, apputils:change-theme), as Galata does
           "--LabApp.expose_app_in_browser=True",
           # a safety net should the test run be killed before stop_lab: idle kernels are
           # culled and the server exits after 10 minutes without activity
           "--MappingKernelManager.cull_idle_timeout=600",
           "--MappingKernelManager.cull_interval=60",
           "--ServerApp.shutdown_no_activity_timeout=600"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root; jupyter refuses without it
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    server = Lab(proc=proc, port=port, token=token, root=root, log=log)
    deadline = time.monotonic() + LAB_START_TIMEOUT
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {proc.returncode} before answering:\n"
                               f"{server.log_tail()}")
        try:
            server.api("status")
            return server
        except (urllib.error.URLError, ConnectionError, OSError):
            if time.monotonic() > deadline:
                stop_lab(server)
                raise RuntimeError(f"JupyterLab did not answer on port {port} within "
                                   f"{LAB_START_TIMEOUT:g} s:\n{server.log_tail()}")
            time.sleep(0.5)


def stop_lab(server: Lab) -> None:
    if server.proc.poll() is None:
        try:  # shut the kernels down through the server, then the server itself
            for k in server.api("kernels") or []:
                server.api(f"kernels/{k['id']}", method="DELETE")
        except (urllib.error.URLError, OSError):
            pass  # the server is going away anyway; its own shutdown stops kernels too
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.proc.pid, signal.SIGKILL)  # the group of the server we started
            server.proc.wait(timeout=10)


# ---------------------------------------------------------------------------------------------
# notebooks in the page; JupyterLab runs with expose_app_in_browser (window.jupyterapp)

_CELL_STATE_JS = """(path) => {
  const app = window.jupyterapp;
  if (!app) return null;
  let panel = null;
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.context.path === path) panel = w;
  }
  if (!panel || !panel.sessionContext.session || !panel.sessionContext.session.kernel)
    return null;
  const counts = [];
  const cells = panel.content.model.cells;
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type === 'code') counts.push(c.executionCount);
  }
  return {kernel: panel.sessionContext.session.kernel.status, counts: counts,
          busyPrompts: Array.from(panel.node.querySelectorAll('.jp-InputPrompt'))
                         .filter((e) => e.innerText.includes('*')).length};
}"""


def outputs_text(page: Any) -> str:
    """Every output of the notebook in the page, as text (for failure messages)."""
    return "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())


@dataclass
class RunningNotebook:
    """A notebook opened in its own JupyterLab window (workspace) and run with Run All."""

    page: Any
    path: str
    started: float
    done: bool = False
    seconds: float | None = None  # Run All to the last cell done

    def wait(self, progress: Callable[[str], None] | None = None, every: float = 30.0) -> None:
        """Block until every code cell has an execution count, no prompt shows [*] and the
        kernel is idle; fail with the outputs so far after RUN_ALL_TIMEOUT. `progress` gets
        a line every `every` seconds (cells run so far) and one at the end."""
        if self.done:
            return
        deadline = self.started + RUN_ALL_TIMEOUT
        state = None
        told = time.monotonic()
        while time.monotonic() < deadline:
            state = self.page.evaluate(_CELL_STATE_JS, self.path)
            counts = (state or {}).get("counts") or []
            ran = sum(c is not None for c in counts)
            if (counts and ran == len(counts) and state["busyPrompts"] == 0
                    and state["kernel"] == "idle"):
                self.done = True
                self.seconds = time.monotonic() - self.started
                if progress:
                    progress(f"[jupyterlab] {self.path}: all {ran} cells run "
                             f"({self.seconds:.0f} s)")
                return
            if progress and time.monotonic() - told >= every:
                told = time.monotonic()
                progress(f"[jupyterlab] {self.path}: {ran}/{len(counts)} cells run "
                         f"({told - self.started:.0f} s)")
            self.page.wait_for_timeout(500)
        raise TimeoutError(f"{self.path}: Run All did not finish within {RUN_ALL_TIMEOUT:g} s; "
                           f"last state {state}; outputs so far:\n"
                           f"{outputs_text(self.page)[:3000]}")


def read_notebook(src: Path) -> Any:
    """nbformat.read, retried: notebooks/ may be being rewritten by build.py right now."""
    for attempt in range(5):
        try:
            return nbformat.read(src, as_version=4)
        except (json.JSONDecodeError, nbformat.reader.NotJSONError):
            if attempt == 4:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def copy_stripped(src: Path, dst: Path, extra_cells: Sequence[str] = ()) -> None:
    """Copy a notebook without outputs, execution counts or stored widget state (what the
    page shows afterwards was made by this run), with `extra_cells` appended."""
    nb = read_notebook(src)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nb.cells.extend(new_code_cell(c) for c in extra_cells)
    nbformat.write(nb, dst)


def open_and_run(page: Any, lab: Lab, path: str, workspace: str) -> RunningNotebook:
    """Open `path` in a JupyterLab window of its own and start Run All (not waiting)."""
    page.set_default_timeout(60_000)
    page.goto(lab.url(f"lab/workspaces/{workspace}/tree/{path}?reset"))
    page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=120_000)
    page.wait_for_function(_CELL_STATE_JS, arg=path, timeout=120_000)
    # more room for the report: close the file browser
    page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
    page.evaluate("""async (path) => {
      const app = window.jupyterapp;
      for (const w of app.shell.widgets('main')) {
        if (w.context && w.context.path === path) {
          await w.sessionContext.ready;
          app.shell.activateById(w.id);
        }
      }
      // the command of the menu Run > Run All Cells
      app.commands.execute('notebook:run-all-cells');
    }""", path)
    return RunningNotebook(page=page, path=path, started=time.monotonic())


def set_theme(page: Any, theme: str) -> None:
    """Settings > Theme (the command apputils:change-theme), waiting until it applies."""
    page.evaluate("(t) => window.jupyterapp.commands.execute('apputils:change-theme', "
                  "{theme: t})", theme)
    light = "true" if "Light" in theme else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
    page.wait_for_timeout(500)  # let the theme's stylesheet apply
