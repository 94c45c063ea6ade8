"""What every artifact carries: the driver and the calling convention's records.

`violation.py` and `driver.py` are copied verbatim into every python_code (Note [one driver,
two homes] in core/emit.py): the first defines PrecompileError and its message, the second the
convention's record classes and the call (it checks the arguments, flattens the models, calls
the graph, writes back and scatters gradients), so an artifact runs where only torch is
installed. `convention.py` is the package's door to those records; `artifact_format.py`
holds the artifact format's name and version with its rule (Note [artifact version]).

May import: the standard library and torch. Nothing here may import the rest of precompile_nb
(core, tools, viewers, magics): the driver must run alone inside an artifact, and the stages
and tools all read the convention from here (tests/test_layout.py checks it).
"""
