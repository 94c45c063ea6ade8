# ---- precompile_nb: PrecompileError (copied verbatim into every artifact, before the driver) ----
# The structured error and its message: what happened, the invariant, the stage, where,
# expected vs actual, and the fix. Its own file so that a load, which raises it but runs the
# artifact's own copy of the driver, imports neither the driver nor the convention's records
# (Note [a load imports no driver] in core/load.py); the driver takes these names from here
# when the package imports it, and from the section above it inside an artifact. Imports
# nothing.
_PC_INVARIANTS = {
    1: "everything live is an input",
    2: "the runtime model matches the traced one structurally",
    3: "control flow and shapes are specialized to the example",
    4: "boundary effects are captured; uncapturable side effects are rejected",
    5: "backward is part of the computation",
    6: "dtype, device and (inductor) layout are specialized",
    7: "python_code and cache are trusted executable input",
}


class _PcFields(dict):
    """Expected or actual of a check as data (field -> value) that prints as text:
    {'shape': [2, 4], 'dtype': 'float32'} prints as 'shape=[2, 4] dtype=float32'."""

    __slots__ = ()

    def __str__(self):
        show = lambda v: (  # noqa: E731 - lists as [2, <dynamic 0>], no quotes
            "[" + ", ".join(map(str, v)) + "]" if isinstance(v, (list, tuple)) else str(v))
        return " ".join(f"{k}={show(v)}" for k, v in self.items())

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def _pc_format_violation(what, invariant=None, stage=None, where=None, expected=None,
                         actual=None, hint=None):
    """One message a person can act on: what happened, the invariant, where, expected vs
    actual, and the fix."""
    lines = [what]
    if invariant is not None:
        lines.append(f"  invariant {invariant}: {_PC_INVARIANTS.get(invariant, '?')}")
    if stage is not None:
        lines.append(f"  stage:    {stage}")
    if where is not None:
        lines.append(f"  where:    {where}")
    if expected is not None or actual is not None:
        lines.append(f"  expected: {expected}")
        lines.append(f"  actual:   {actual}")
    if hint is not None:
        lines.append(f"  fix:      {hint}")
    return "\n".join(lines)


class PrecompileError(RuntimeError):
    """Raised when capture, lowering, load or a call breaks the precompile programming model.

    Structured fields (for tools): invariant (1-7 or None), stage ('capture', 'lower', 'load',
    'call'), where (argument path, parameter name, variable or graph node), expected and
    actual (a value, or a dict of fields such as {'shape': [2, 4], 'dtype': 'float32'}),
    hint (the fix), and extra (a dict of further details, e.g. graph node names, source
    lines, the table of every input at a failing call).
    """

    def __init__(self, what, *, invariant=None, stage=None, where=None, expected=None,
                 actual=None, hint=None, extra=None):
        self.what = what
        self.invariant = invariant
        self.stage = stage
        self.where = where
        self.expected = expected
        self.actual = actual
        self.hint = hint
        self.extra = dict(extra or {})
        super().__init__(_pc_format_violation(what, invariant, stage, where, expected,
                                              actual, hint))
