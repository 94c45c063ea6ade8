"""The environment switches: every one precompile_nb reads is in docs/api.md's table and in
_compat's list of switches, and no other; a misspelt switch, or one set to a word that is
neither on nor off, is said once at the precompile that would have read it."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core._compat.scoped_patch import SWITCHES, switch_mistakes, switch_seconds

ROOT = Path(__file__).resolve().parent.parent


def _read_by_code() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "precompile_nb").rglob("*.py"):
        names |= set(re.findall(r"\bPRECOMPILE_NB_[A-Z0-9_]+\b", path.read_text()))
    return names


def _in_the_table() -> set[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    start = text.index("**Switches.**")
    table = text[start:text.index("\n## ", start)]
    return set(re.findall(r"^\| `(PRECOMPILE_NB_[A-Z0-9_]+)` \|", table, re.M))


def test_every_switch_the_code_reads_is_in_the_docs_table_and_the_list_and_no_other():
    assert _read_by_code() == _in_the_table() == set(SWITCHES)


def test_a_misspelt_switch_is_named_with_the_one_meant():
    said = switch_mistakes({"PRECOMPILE_NB_KERNEL_THREAD": "0"})
    assert said == ["PRECOMPILE_NB_KERNEL_THREAD is not a switch precompile_nb reads, so it "
                    "changes nothing: did you mean PRECOMPILE_NB_KERNEL_THREADS?"]


def test_a_switch_set_to_neither_on_nor_off_is_named():
    said = switch_mistakes({"PRECOMPILE_NB_GC_PAUSE": "disable"})
    assert len(said) == 1 and "PRECOMPILE_NB_GC_PAUSE='disable'" in said[0]
    assert "stays on" in said[0]


def test_a_number_of_pieces_that_is_no_number_is_named():
    assert switch_mistakes({"PRECOMPILE_NB_PIECES": "four"}) == [
        "PRECOMPILE_NB_PIECES='four' is not a number of pieces, so every graph is compiled in "
        "one: set a whole number (e.g. 4), or unset it"]


def test_a_wait_that_is_no_number_is_named_and_the_wait_read_as_said(monkeypatch):
    assert switch_mistakes({"PRECOMPILE_NB_TUNE_TOGETHER": "long"}) == [
        "PRECOMPILE_NB_TUNE_TOGETHER='long' is neither seconds nor off, so precompile waits "
        "the default 60 s: set seconds (e.g. 120), or 0 to never wait"]
    for value, seconds in (("long", 60.0), ("off", 0.0), ("0", 0.0), ("2.5", 2.5),
                           ("-3", 0.0), ("on", 60.0)):
        monkeypatch.setenv("PRECOMPILE_NB_TUNE_TOGETHER", value)
        assert switch_seconds("PRECOMPILE_NB_TUNE_TOGETHER", 60.0) == seconds, value
    monkeypatch.delenv("PRECOMPILE_NB_TUNE_TOGETHER")
    assert switch_seconds("PRECOMPILE_NB_TUNE_TOGETHER", 60.0) == 60.0


def test_switches_set_right_and_the_projects_other_variables_are_not_named():
    assert switch_mistakes({
        "PRECOMPILE_NB_GC_PAUSE": " OFF ", "PRECOMPILE_NB_FEWER_RUNS": "no",
        "PRECOMPILE_NB_KERNEL_THREADS": "1", "PRECOMPILE_NB_PIECES": "4",
        "PRECOMPILE_NB_TUNE_TOGETHER": "120",
        "PRECOMPILE_NB_OUT": "out", "PRECOMPILE_NB_SCREENSHOTS": "/tmp/s",
        "PRECOMPILE_NB_NO_BROWSER": "1", "PRECOMPILE_NB_VENV215": "/v",
        "PRECOMPILE_NB_CHROMIUM": "/c", "PRECOMPILE_NB_FUZZ_SEED": "3", "PATH": "/bin"}) == []


def test_precompile_warns_once_per_process_at_the_users_call(monkeypatch):
    monkeypatch.setenv("PRECOMPILE_NB_GC_PAUSED", "0")
    monkeypatch.setattr("precompile_nb.core._SAID", set())
    x = torch.randn(4)
    with pytest.warns(UserWarning, match="did you mean PRECOMPILE_NB_GC_PAUSE") as seen:
        precompile(lambda x: x + 1, x, backend="eager")
    assert [w.filename for w in seen if "GC_PAUSED" in str(w.message)] == [__file__]
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        precompile(lambda x: x + 2, x, backend="eager")
    assert not [w for w in again if "GC_PAUSED" in str(w.message)]  # said once per process
