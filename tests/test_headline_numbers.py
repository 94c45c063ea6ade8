"""The headline numbers live in one place, docs/numbers.md, written from benchmarks/results/ by
benchmarks/headline.py; the README and the docs quote the same values."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _headline():
    spec = importlib.util.spec_from_file_location("headline", ROOT / "benchmarks" / "headline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_numbers_page_is_what_the_results_files_say():
    assert (ROOT / "docs" / "numbers.md").read_text("utf-8") == _headline().render(), \
        "docs/numbers.md is out of date: run python benchmarks/headline.py"


def test_readme_and_docs_quote_the_numbers_page():
    numbers = (ROOT / "docs" / "numbers.md").read_text("utf-8")
    # (as quoted, as numbers.md writes it): the README rounds the GPU times
    quoted = {
        "README.md": [("4.4 µs", "4.4 µs"), ("24.7 µs", "24.7 µs"), ("0.755", "0.755"),
                      ("0.012-0.020 s", "0.012–0.020 s"),
                      ("0.54 s", "0.539 s"), ("6.09 s", "6.09 s"), ("0.42 s", "0.419 s")],
        "docs/differences.md": [(v, v) for v in (
            "16.3–18.6 s", "0.012–0.020 s", "24.7 µs", "4.4 µs", "0.672", "17.9–22.7 s",
            "35.8 µs", "103.7 µs")],
        "docs/programming-model.md": [("4.4 µs", "4.4 µs"), ("35.8 µs", "35.8 µs")],
    }
    for name, values in quoted.items():
        text = (ROOT / name).read_text("utf-8")
        for as_quoted, in_numbers in values:
            assert as_quoted in text, f"{name} no longer quotes {as_quoted}"
            assert in_numbers in numbers, f"docs/numbers.md has no {in_numbers}"
    # the numbers of an older run, contradicted by the results files, are gone
    for name in ("README.md", "docs/differences.md", "docs/programming-model.md"):
        text = (ROOT / name).read_text("utf-8")
        for stale in ("59.0 µs", "6.9 µs", "2.46-3.71 s", "28.9-33.3 s", "40.4 µs",
                      "0.099–0.215 s", "16.2–20.8 s", "0.040–0.054 s", "0.040-0.054 s",
                      "12.1–14.4 s", "0.068–0.086 s", "0.068-0.086 s", "15.0–19.4 s"):
            assert stale not in text, f"{name} still says {stale}"
