"""No test asserts a wall-clock bound: such a test fails on a busy or slow machine while the
code is right, and passes on a fast one while it is wrong. Tests assert the work done (nodes
laid out, layouts made, files compiled); times go to benchmarks/."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# a name, attribute or string that holds a duration or reads a clock
TIMELIKE = re.compile(
    r"(elapsed|took|duration|seconds|secs|wall|latency"
    r"|perf_counter|monotonic|process_time|time\.time|time_ns|performance\.now"
    r"|(^|[_-])(ms|us|ns|s|sec)$|(^|[_-])(ms|us|ns|s|sec)[_-])", re.IGNORECASE)
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _timelike_parts(node: ast.AST) -> list[str]:
    """The identifiers, attributes and string constants under `node` that look like time."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            text = sub.id
        elif isinstance(sub, ast.Attribute):
            text = ast.unparse(sub)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            text = sub.value
        else:
            continue
        if TIMELIKE.search(text):
            found.append(text)
    return found


def _is_set(node: ast.AST) -> bool:
    """`set(...) <= other` is a subset test, not an ordering of numbers."""
    return isinstance(node, (ast.Set, ast.SetComp)) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in ("set", "frozenset"))


def _bounds_a_time(cmp: ast.Compare) -> bool:
    """An ordering of a time-like value against anything, 0 included: `took > 0` asserts
    that a clock moved, which says nothing of the work done (assert the calls, nodes or
    files instead). A hang guard (a `deadline` or `timeout` in a polling loop) is no bound
    on the code's speed."""
    if any(re.search(r"deadline|timeout", p, re.IGNORECASE) for p in _timelike_parts(cmp)
           + [ast.unparse(cmp)]):
        return False
    sides = [cmp.left, *cmp.comparators]
    for (a, b), op in zip(zip(sides, sides[1:]), cmp.ops):
        if isinstance(op, ORDERING) and not any(_is_set(x) for x in (a, b)) \
                and (_timelike_parts(a) or _timelike_parts(b)):
            return True
    return False


def wall_clock_asserts(source: str, filename: str = "<test>") -> list[str]:
    """'file:line: assert ...' for each assert that orders a time-like value against a bound."""
    hits = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Assert):
            continue
        if any(isinstance(c, ast.Compare) and _bounds_a_time(c) for c in ast.walk(node.test)):
            hits.append(f"{filename}:{node.lineno}: {ast.unparse(node)[:120]}")
    return hits


def test_no_test_asserts_a_wall_clock_bound():
    hits = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        hits += wall_clock_asserts(path.read_text("utf-8"), str(path.relative_to(TESTS.parent)))
    assert not hits, ("tests assert a wall-clock bound (assert the work done instead; time it "
                      "in benchmarks/):\n" + "\n".join(hits))


# The checker's own test inputs are data (they are not assertions of this suite), written
# with ASSERT for the keyword
EXAMPLES = json.loads((TESTS / "wall_clock_examples.json").read_text("utf-8"))


def _source(template: str) -> str:
    return template.replace("ASSERT ", "assert ")


def test_the_check_finds_the_usual_ways_to_bound_a_time():
    assert len(EXAMPLES["flagged"]) >= 10
    for src in map(_source, EXAMPLES["flagged"]):
        assert wall_clock_asserts(src), src


def test_the_check_lets_counts_and_equalities_through():
    assert len(EXAMPLES["let_through"]) >= 9
    for ex in EXAMPLES["let_through"]:
        src = _source(ex["source"])
        assert not wall_clock_asserts(src), f"{src} ({ex['why']})"
