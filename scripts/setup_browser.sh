#!/usr/bin/env bash
# Install what tests/browser needs, where this machine allows it:
#   - Debian `chromium` (the browser Playwright drives; `playwright install` downloads are not
#     used) and `graphviz` (optional: `dot` draws the Graph tab's first picture as a static
#     SVG for viewers that run no scripts; without it the page lays the graph out itself),
#     via apt-get when missing, apt-get exists and we are root;
#   - `playwright` and `jupyterlab` into the environment of the given python.
# Usage: scripts/setup_browser.sh [PYTHON]   (default: .venv/bin/python)
# Idempotent and fast when everything is there. It never fails the run: whatever it cannot
# install, it says so, and the browser tests then skip with the reason.
set -uo pipefail
PY=${1:-.venv/bin/python}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
case "$PY" in
  /*) ;;
  */*) PY="$ROOT/$PY" ;;  # a relative path is relative to the repository root
esac

say() { echo "[setup_browser] $*"; }

if [ "${PRECOMPILE_NB_NO_BROWSER:-}" = "1" ]; then
  say "PRECOMPILE_NB_NO_BROWSER=1: nothing to install (the browser tests skip)"
  exit 0
fi

missing_debs=()
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || missing_debs+=(chromium)
command -v dot >/dev/null 2>&1 || missing_debs+=(graphviz)
if [ ${#missing_debs[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${missing_debs[*]} with apt-get"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
              "${missing_debs[@]}" fonts-dejavu-core >/dev/null; }; then
      say "WARNING: apt-get could not install ${missing_debs[*]}: the browser tests skip" \
          "(no chromium), or the dot tests skip (no graphviz)"
    fi
  else
    say "WARNING: ${missing_debs[*]} missing and cannot be installed here (needs root and" \
        "apt-get): install them (apt-get install ${missing_debs[*]}); browser tests skip"
  fi
fi

if [ ! -x "$PY" ]; then
  say "WARNING: no python at $PY (run scripts/setup.sh first): browser tests skip"
  exit 0
fi
if "$PY" -c "import playwright.sync_api, jupyterlab" >/dev/null 2>&1; then
  say "playwright and jupyterlab present"
else
  say "installing playwright and jupyterlab into $PY"
  if ! "$PY" -m pip install --progress-bar on playwright jupyterlab; then
    say "WARNING: pip could not install playwright/jupyterlab: the browser tests skip"
  fi
fi
exit 0
