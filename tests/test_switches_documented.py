"""Every environment switch precompile_nb reads is in docs/api.md's table of switches, and the
table names none that the code does not read: a user finds each one, and no stale one."""
from __future__ import annotations

import re
from pathlib import Path

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


def test_every_switch_the_code_reads_is_in_the_docs_table_and_no_other():
    assert _read_by_code() == _in_the_table()
