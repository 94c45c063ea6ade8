"""A plain test run never rewrites the committed screenshots in docs/screenshots/: they are
written only where PRECOMPILE_NB_SCREENSHOTS asks. Needs no browser."""
from __future__ import annotations

from pathlib import Path

from . import conftest
from .lab import REPO

DOCS = REPO / "docs" / "screenshots"


class _Shot:
    """Stands in for a Playwright page: screenshot(path=) writes a file."""

    def screenshot(self, path: str) -> None:
        Path(path).write_bytes(b"\x89PNG fake")


def test_a_plain_test_run_writes_screenshots_to_a_temporary_folder(monkeypatch):
    monkeypatch.delenv("PRECOMPILE_NB_SCREENSHOTS", raising=False)
    monkeypatch.setattr(conftest, "_SCREENSHOTS", [])
    before = {p.name: p.stat().st_mtime_ns for p in DOCS.glob("*.png")}
    path = conftest.save_screenshot(_Shot(), "lab-summary-light")
    assert path.exists() and DOCS not in path.parents
    assert {p.name: p.stat().st_mtime_ns for p in DOCS.glob("*.png")} == before


def test_screenshots_go_to_docs_only_when_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("PRECOMPILE_NB_SCREENSHOTS", "docs/screenshots")
    monkeypatch.setattr(conftest, "_SCREENSHOTS", [])
    assert conftest.screenshots_dir() == DOCS
    monkeypatch.setenv("PRECOMPILE_NB_SCREENSHOTS", str(tmp_path / "shots"))
    monkeypatch.setattr(conftest, "_SCREENSHOTS", [])
    assert conftest.screenshots_dir() == tmp_path / "shots"
