"""Tools over finished artifacts and functions: what a user runs beside the pipeline.

  report.py         an Artifact (or a load) as plain data for the viewers
  profile.py        time a loaded artifact per kernel, node and module (profile_eager.py: the
                    eager modules' side; timing.py: the measuring primitives)
  diff.py           what changed between two reports, down to the python_code text
  check.py          every invariant problem of fn(*inputs), without compiling
  store.py          save and load a (python_code, cache) pair as files, atomically
  files.py          torch 2.15's shape: precompile.capture(...) and load of two file paths

May import: core (the stages' results and errors), runtime (the convention's records), torch.
Nothing in core, runtime or viewers imports from here (tests/test_layout.py checks it); the
magic and the package's public names do.
"""
