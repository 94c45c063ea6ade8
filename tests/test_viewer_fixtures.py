"""The recorded reports the viewer tests render (tests/viewers/data/report_*.json) have the
structure report_data(...) gives today: the same keys at every level, the same scalar types,
the same record keys in every list. They are hand-kept copies, so a change to report_data
that they do not follow fails here, not silently in the viewers. Values (node names,
timings, hashes) are free to differ."""
from __future__ import annotations

import importlib.util
import json
import pathlib
from typing import Any

import pytest

DATA = pathlib.Path(__file__).parent / "viewers" / "data"
REGENERATE = DATA / "regenerate.py"
HOW_TO_FIX = ("rewrite the fixtures with `.venv/bin/python "
              f"{REGENERATE.relative_to(DATA.parents[2])}` (the recipe this test builds), then "
              "re-run tests/viewers: values the viewer tests read may have moved with it")


def _regenerate_module():
    spec = importlib.util.spec_from_file_location("viewer_fixtures_regenerate", REGENERATE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---- the structure of a JSON value --------------------------------------------------------

_SCALARS = ((type(None), "null"), (bool, "bool"), (int, "int"), (float, "float"), (str, "str"))


class Shape:
    """What a JSON value (or every element of a list, merged) looks like: its scalar types,
    its dict keys (per key, the shape of the values; and every key set seen, so records of
    one list that differ are visible) and the shape of list elements."""

    def __init__(self) -> None:
        self.scalars: set[str] = set()
        self.keysets: set[frozenset[str]] = set()
        self.fields: dict[str, Shape] = {}
        self.is_list = False
        self.items: Shape | None = None  # None: no list element seen (only empty lists)

    def add(self, v: Any) -> Shape:
        if isinstance(v, dict):
            self.keysets.add(frozenset(v))
            for k, x in v.items():
                self.fields.setdefault(k, Shape()).add(x)
        elif isinstance(v, list):
            self.is_list = True
            for x in v:
                self.items = (self.items or Shape()).add(x)
        else:
            for t, name in _SCALARS:
                if isinstance(v, t):
                    self.scalars.add(name)
                    break
            else:
                self.scalars.add(f"not JSON: {type(v).__name__}")
        return self


def shape_of(v: Any) -> Shape:
    return Shape().add(v)


def _keys(ks: set[frozenset[str]]) -> str:
    return " | ".join(sorted("{" + ", ".join(sorted(k)) + "}" for k in ks))


def structure_diffs(fixture: Shape, fresh: Shape, path: str = "$") -> list[str]:
    """Every place the two shapes differ, as 'path: what' lines (empty when they agree).
    Elements of a list are compared only when both lists have some."""
    out = []
    if fixture.scalars != fresh.scalars:
        out.append(f"{path}: scalar types {sorted(fixture.scalars)} in the fixture, "
                   f"{sorted(fresh.scalars)} in report_data")
    if (fixture.keysets or fresh.keysets) and fixture.keysets != fresh.keysets:
        only_fix = set().union(*fixture.keysets) - set().union(*fresh.keysets)
        only_new = set().union(*fresh.keysets) - set().union(*fixture.keysets)
        out.append(f"{path}: keys {_keys(fixture.keysets) or 'none (not a dict)'} in the "
                   f"fixture, {_keys(fresh.keysets) or 'none (not a dict)'} in report_data"
                   + (f"; only in the fixture: {sorted(only_fix)}" if only_fix else "")
                   + (f"; only in report_data: {sorted(only_new)}" if only_new else ""))
    for k in fixture.fields.keys() & fresh.fields.keys():
        out += structure_diffs(fixture.fields[k], fresh.fields[k], f"{path}.{k}")
    if fixture.is_list != fresh.is_list:
        out.append(f"{path}: a list on one side only "
                   f"({'fixture' if fixture.is_list else 'report_data'})")
    elif fixture.items is not None and fresh.items is not None:
        out += structure_diffs(fixture.items, fresh.items, f"{path}[]")
    return out


def assert_same_structure(fixture: dict, fresh: dict, name: str) -> None:
    diffs = structure_diffs(shape_of(fixture), shape_of(fresh))
    if fixture.get("report_version") != fresh.get("report_version"):
        diffs.insert(0, f"$.report_version: {fixture.get('report_version')!r} in the fixture, "
                        f"{fresh.get('report_version')!r} in report_data")
    assert not diffs, (f"{name} no longer has the structure of report_data(...):\n  "
                       + "\n  ".join(sorted(diffs)) + f"\n{HOW_TO_FIX}")


# ---- the fixtures against a fresh report --------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_recorded_report_has_the_structure_of_a_fresh_report_data(backend):
    path = DATA / f"report_{backend}.json"
    fixture = json.loads(path.read_text())
    fresh = _regenerate_module().build_report(backend)
    assert fresh["backend"] == fixture["backend"] == backend
    assert fresh["fn_name"] == fixture["fn_name"], HOW_TO_FIX  # the same recipe
    assert_same_structure(fixture, fresh, path.name)


# ---- the comparison itself (no torch build) -----------------------------------------------

BASE = {"report_version": 1, "fn_name": "step", "load": None,
        "inputs": [{"where": "x", "shape": [2, 4], "gets_grad": False},
                   {"where": "w", "shape": [], "gets_grad": True}],
        "stages": [["capture", 0.5]], "graph": {"nodes": [{"name": "a", "shape": None},
                                                          {"name": "b", "shape": [3]}]},
        "baked": []}


def _changed(**changes) -> dict:
    return json.loads(json.dumps({**BASE, **changes}))


def test_the_comparison_ignores_values():
    other = _changed(fn_name="g", stages=[["capture", 1.25], ["lower", 3.0]],
                     inputs=[{"where": "y", "shape": [7], "gets_grad": True}])
    assert structure_diffs(shape_of(BASE), shape_of(other)) == []


@pytest.mark.parametrize("change, where", [
    ({"graph": {"nodes": [{"name": "a", "shape": None, "module": ""}]}}, "$.graph.nodes[]"),
    ({"inputs": [{"where": "x", "shape": [2], "gets_grad": 0}]}, "$.inputs[].gets_grad"),
    ({"inputs": [{"where": "x", "shape": [2.0], "gets_grad": False}]}, "$.inputs[].shape[]"),
    ({"inputs": [{"where": "x", "shape": [2], "gets_grad": False},
                 {"where": "w", "shape": []}]}, "$.inputs[]"),
    ({"stages": [{"name": "capture", "seconds": 0.5}]}, "$.stages[]"),
    ({"load": {"used": True}}, "$.load"),
    ({"fn_name": None}, "$.fn_name"),
    ({"extra": 1}, "$:"),
])
def test_the_comparison_catches_keys_types_and_record_keys(change, where):
    diffs = structure_diffs(shape_of(BASE), shape_of(_changed(**change)))
    assert any(d.startswith(where) for d in diffs), diffs


def test_a_version_bump_fails_with_the_way_to_fix_it():
    with pytest.raises(AssertionError, match="report_version(.|\n)*regenerate.py"):
        assert_same_structure(BASE, _changed(report_version=2), "report_x.json")
