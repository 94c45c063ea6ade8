"""The dry-run checker: check(fn, *example_inputs) -> CheckReport.

Captures like precompile (same trace, same invariant checks) but never lowers, and reports
*every* problem it finds in one go instead of stopping at the first, plus what the artifact
would bake or do at its boundary (baked values, parameters without gradients, mutated
buffers, results that alias inputs). Errors block precompile; warnings and notes do not.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..core import _compat
from ..core.capture import Problems, capture
from ..core.errors import PrecompileError

Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Finding:
    """One thing the checker found."""

    severity: Severity
    invariant: int | None
    what: str
    where: str | None
    expected: str | None
    actual: str | None
    hint: str | None
    source: str | None  # the user's source line, "File ..., line N, in f" or "path:line: code"
    nodes: tuple[str, ...]  # captured graph nodes involved


@dataclass(frozen=True)
class CheckReport:
    """All findings for one computation; `ok` when nothing blocks precompile."""

    fn_name: str
    findings: tuple[Finding, ...]
    captured: Any  # the Captured graph when the trace completed, else None

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    def __str__(self) -> str:
        head = (f"check({self.fn_name}): {len(self.errors)} error(s), "
                f"{len(self.findings) - len(self.errors)} warning(s)/note(s)")
        lines = [head]
        for f in self.findings:
            inv = f" [invariant {f.invariant}]" if f.invariant else ""
            lines.append(f"- {f.severity}{inv}: {f.what}" + (f" ({f.where})" if f.where else ""))
            if f.hint:
                lines.append(f"    fix: {f.hint}")
        return "\n".join(lines)


def _from_error(e: PrecompileError) -> Finding:
    nodes = e.extra.get("nodes") or ()
    return Finding(severity="error", invariant=e.invariant, what=e.what, where=e.where,
                   expected=None if e.expected is None else str(e.expected),
                   actual=None if e.actual is None else str(e.actual), hint=e.hint,
                   source=e.extra.get("source"), nodes=tuple(str(n) for n in nodes))


def check(fn: Callable, *example_inputs: Any, decompositions: dict | None = None) -> CheckReport:
    """Report every way `fn(*example_inputs)` breaks (or leans on) the programming model,
    without compiling anything.

    >>> import torch
    >>> W = torch.randn(3)
    >>> report = check(lambda x: x * W, torch.randn(3))
    >>> report.ok, report.findings[0].invariant
    (False, 1)
    """
    problems = Problems(collect=True)
    with _compat.GLOBAL_LOCK:
        captured = capture(fn, example_inputs, decompositions=decompositions, problems=problems)
    findings = [_from_error(e) for e in problems.errors]
    name = getattr(fn, "__name__", "fn")
    if captured is not None:
        name = captured.fn_name
        findings.extend(_notes(captured))
    return CheckReport(fn_name=name, findings=tuple(findings), captured=captured)


def _note(severity: Severity, invariant: int, what: str, where: str | None = None,
          hint: str | None = None) -> Finding:
    return Finding(severity=severity, invariant=invariant, what=what, where=where,
                   expected=None, actual=None, hint=hint, source=None, nodes=())


def _notes(c: Any) -> list[Finding]:
    out = []
    for where, value in c.baked:
        out.append(_note("warning", 3, f"non-tensor value {value!r} will be baked (checked on "
                         "every call; another value is an error)", where,
                         "pass it as a tensor if it should vary between calls"))
    grads = {g.input for g in c.convention.grads}
    if grads:
        for i, s in enumerate(c.inputs):
            if s.kind == "param" and i not in grads:
                why = "frozen (requires_grad=False)" if not s.requires_grad else "unused"
                out.append(_note("warning", 5, f"parameter gets no gradient ({why}); its .grad "
                                 "stays None", s.where,
                                 "expected for frozen parameters; otherwise check it is used"))
            elif s.kind == "buffer" and i in grads:
                out.append(_note("warning", 5, "a buffer receives a gradient", s.where,
                                 "register it as nn.Parameter if it is trained"))
    for i in c.mutated:
        if i < len(c.inputs):
            out.append(_note("note", 4, "mutated in place; the artifact writes it back",
                             c.inputs[i].where))
    for o, view in c.aliases:
        out.append(_note("note", 4, f"result #{o} is a view of an input; the artifact "
                         "returns a view too", c.inputs[view.index].where))
    return out
