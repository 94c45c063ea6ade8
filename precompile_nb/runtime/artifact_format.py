"""What names an artifact's format: its name and version (with the rule for the version), the
metadata literal's name and the sections' order. Apart from convention.py, which holds the
records, so that a load checks an artifact's header without importing the driver (Note [a load
imports no driver] in core/load.py)."""

# Note [artifact version]
#   ARTIFACT_VERSION names the shape of what the package reads out of an artifact without
#   running it: the metadata literal (every record's fields and literal kinds, the union tags,
#   the header fields) and the section markers. It changes exactly when that shape changes, so
#   that this package never misreads an artifact written by another version of itself.
#   The driver's *code* is not part of it: each artifact carries its own copy and runs it.
#   The rule is enforced by tests/core/test_convention.py: it recomputes
#   convention.schema_fingerprint() and compares it with FINGERPRINTS[ARTIFACT_VERSION].
#   When it fails, bump ARTIFACT_VERSION and record the new fingerprint under it (keep the
#   old ones: they document the history).
ARTIFACT_FORMAT = "precompile_nb.artifact"
# the metadata literal's name in python_code, and its sections in order (each opens with
# a marker line, emit.marker)
META_NAME = "_PC_META"
SECTIONS = ("graph", "metadata", "driver")
ARTIFACT_VERSION = 11
FINGERPRINTS = {
    2: "171e3cadd88976d991d90287a3f83fc7798119443ab51f09dd6200f436cdfda4",
    # 3: guards on dynamic sizes (mark_dynamic)
    3: "64e16d10a6757c970ee94d89d24c18c83177d2eb8188794d848dae453fc19b6f",
    # 4: DTensor inputs, results and gradients on device meshes
    4: "76a712b17cc14361ca4b7f89cd9efd55ac85b4f0b80ad7233ec0c4911c36c692",
    # 5: optimizer arguments (state and tensor hyperparameters as graph inputs)
    5: "0080f1d6cd244af266972bd68d08f19dbb04fb63bc3149d097a2a1c5f2de618c",
    # 6: data guards (branches on tensor data kept as the example took them)
    6: "4de3d779ea0a54d7acf37c4fc87dfaf1da58670e6cbd9fc56a14fee2e7d5cd87",
    # 7: process groups the graph's collectives name, with their sizes (checked at a call)
    7: "f8eb7186b204748b2280dc067bfae9cc3cdc9d95d2e7f9934336d9392743f484",
    # 8: the inputs the compiled graph writes in place (Note [writes inside the graph])
    8: "1e771f0eea1b7e47f54b44575113212ee871aa0e69c53801b62920575faf47f9",
    # 9: whether fn ran autograd (a call with gradients off is refused); torch.Size nodes in
    # tree literals (a Size in fn's result comes back a Size); size results (PcSizeOut: a
    # number computed from dynamic sizes, computed at each call)
    9: "7ab515e3e8f8fd4e33faf49de70d911e6b47a65d71245c724c367cd279e51f1a",
    # 10: structseq nodes in tree literals (fn returns x.max(1) or torch.sort(x)); the tree
    # literals' node types are part of the fingerprint from here on
    10: "399301b6a21a79f67e0b4ffee0fb355032a2abc2c0dbe6f9cf052a5ebbc10731",
    # 11: the models' attributes fn read (PcModuleAttr), checked on every call
    11: "c25060766d6f70b26beceba8411a3154c04c9cb98151f5b5a494b379df8c3b8c",
}
