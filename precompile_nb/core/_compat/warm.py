"""torch internals of the warm load (Note [warm load] in core/warm.py): a cached artifact runs
without the compiler stack. Nothing here imports torch._inductor at load: that package's own
__init__ pulls in torch._dynamo and sympy (~1 s on 2.13), which is what a warm load avoids.
"""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

# What Inductor's generated CPU module imports from torch._inductor, name by name (2.11-2.14:
# PythonWrapperCodegen.write_header and CppWrapper's; checked on 2.13's inference and
# training modules). The warm load serves exactly these; a module that imports anything else
# from torch._inductor takes the compile path.
WARM_IMPORTS: dict[str, frozenset[str]] = {
    "torch._inductor.hooks": frozenset({"run_intermediate_hooks"}),
    "torch._inductor.utils": frozenset({"maybe_profile"}),
    "torch._inductor.codegen.memory_planning": frozenset({"_align"}),
    "torch._inductor.async_compile": frozenset({"AsyncCompile"}),
    "torch._inductor.select_algorithm": frozenset({"extern_kernels"}),
    # CUDA modules (Triton kernels): the bandwidth-profiling markers, imported always, called
    # only in modules compiled with profile_bandwidth (the warm path refuses those)
    "torch._inductor.runtime.triton_heuristics": frozenset({"start_graph", "end_graph"}),
}


def light_inductor_cache_dir() -> str:
    """inductor_cache_dir() without importing torch._inductor: the same rule as
    torch._inductor.runtime.cache_dir_utils.cache_dir (2.11-2.14): TORCHINDUCTOR_CACHE_DIR,
    else <tempdir>/torchinductor_<user> ("/var/tmp" in fbcode); made absolute, exported (as
    cache_dir does, so that an Inductor imported later agrees) and created."""
    directory = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if directory is None:
        import getpass
        import tempfile

        from torch._environment import is_fbcode

        try:
            user = getpass.getuser()
        except (KeyError, ModuleNotFoundError, OSError):
            getuid = getattr(os, "getuid", None)
            user = f"uid_{getuid()}" if callable(getuid) else "unknown_user"
        directory = os.path.join("/var/tmp" if is_fbcode() else tempfile.gettempdir(),
                                 "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
    directory = os.path.abspath(directory)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
    os.makedirs(directory, exist_ok=True)
    return directory


def cpp_binding_source(argtypes: Sequence[str], source: str) -> str | None:
    """The whole C++ file Inductor builds for `async_compile.cpp_pybinding(argtypes, source)`:
    the kernel plus its Python-binding suffix (2.11-2.14:
    CppPythonBindingsCodeCache.load_pybinding_async formats suffix_template so). precompile
    matches it against the compile dir's `.cpp` files to find each kernel's binary; were the
    format to change, nothing matches (None when the class lacks these attributes) and load
    takes the compile path, saying so."""
    from torch._inductor.codecache import CppPythonBindingsCodeCache as cc

    names = ("suffix_template", "call_entry_function", "entry_function", "extra_parse_arg")
    if not all(isinstance(getattr(cc, n, None), str) for n in names):
        return None
    parseargs = ", ".join(f"parse_arg<{t.replace('const ', '')}>(args, {n})"
                          for n, t in enumerate(argtypes))
    return source + cc.suffix_template.format(
        arg_len=len(argtypes), call_entry_func=cc.call_entry_function.format(parseargs),
        entry_func=cc.entry_function, extra_parse_arg=cc.extra_parse_arg.format(array_len=-1))


def extern_kernel_location(name: str) -> str | None:
    """Where `extern_kernels.<name>` of Inductor's generated module lives outside
    torch._inductor, as a dotted path from `torch`: "torch.addmm",
    "torch.ops.mkldnn._linear_pointwise.binary"; None for a Python function of
    torch._inductor itself (bias_addmm, conv1x1_via_mm) or an unknown name. (2.11-2.14:
    torch._inductor.select_algorithm.extern_kernels, filled by ExternKernelChoice.)"""
    from torch._inductor.select_algorithm import extern_kernels

    obj = getattr(extern_kernels, name, None)
    if isinstance(obj, torch._ops.OpOverload):
        ns, op = obj._schema.name.split("::")
        return f"torch.ops.{ns}.{op}.{obj._overloadname}"
    if isinstance(obj, torch._ops.OpOverloadPacket):
        ns, op = obj._qualified_op_name.split("::")
        return f"torch.ops.{ns}.{op}"
    fname = getattr(obj, "__name__", None)
    if obj is not None and fname and getattr(torch, fname, None) is obj:
        return f"torch.{fname}"
    return None


def resolve_torch_path(path: str) -> Any:
    """The object at a dotted path from `torch` that extern_kernel_location wrote."""
    parts = path.split(".")
    if parts[0] != "torch":
        raise AttributeError(path)
    obj: Any = torch
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def load_cpp_kernel(path: str, key: str) -> Callable:
    """The `kernel` function of a C++ kernel's Python-binding library that Inductor built,
    imported as Inductor imports it (2.11-2.14: CppPythonBindingsCodeCache._load_library_inner):
    the library reads the address of torch's tensor-data-pointer helper from an environment
    variable at import; the module is `<key>.kernel` (its init function is PyInit_kernel) and
    is registered in sys.modules under that name, so Inductor finds it there if it loads the
    same kernel later in this process."""
    import importlib.util
    import sys

    os.environ["_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"] = str(
        torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr)
    name = f"{key}.kernel"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"not a loadable extension module: {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module.kernel


def triton_cache_dir(device_index: int) -> str:
    """torch._inductor.runtime.cache_dir_utils.triton_cache_dir without importing
    torch._inductor (2.11-2.14): TRITON_CACHE_DIR, else <inductor cache dir>/triton/<device>."""
    directory = os.getenv("TRITON_CACHE_DIR")
    if directory is not None:
        return directory
    return os.path.join(light_inductor_cache_dir(), "triton", str(device_index))


def can_launch_cubins() -> str | None:
    """Why this process cannot launch cached cubins itself, or None when it can (a CUDA
    build of torch with its static launcher, torch._C._StaticCudaLauncher, 2.8+)."""
    if not hasattr(torch._C, "_StaticCudaLauncher"):
        return "this torch has no static CUDA launcher (torch._C._StaticCudaLauncher)"
    if not torch.cuda.is_available():
        return "CUDA is not available in this process"
    return None


def cuda_capability(device_index: int) -> int:
    """The compute capability of a GPU as Inductor writes it (90 for sm_90)."""
    major, minor = torch.cuda.get_device_capability(device_index)
    return major * 10 + minor


def load_cubin(path: str, function: str, shared: int, device_index: int) -> Any:
    """The handle of one kernel of a cubin file, loaded by torch's static CUDA launcher
    (2.11-2.12 return (function, n_regs, n_spills), 2.13+ (module, function, n_regs,
    n_spills)). Like Inductor's, the module stays loaded for the life of the process.
    The CUDA driver's refusal (a RuntimeError) is an OSError naming the file, as a C++
    kernel library that does not load is: the warm load then compiles instead."""
    torch.cuda.init()
    try:
        return torch._C._StaticCudaLauncher._load_kernel(path, function, shared,
                                                         device_index)[-3]
    except RuntimeError as e:
        raise OSError(f"cannot load kernel {function} from {path}: {e}") from e


def cubins_from_memory() -> bool:
    """Whether load_cubin_bytes can hand the CUDA driver a cubin held in memory (Linux: an
    anonymous memory file, os.memfd_create, opened by the driver through /proc/self/fd)."""
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


def load_cubin_bytes(data: Any, function: str, shared: int, device_index: int) -> Any:
    """load_cubin of a cubin's bytes (Note [cubins from memory] in core/load.py): written to
    an anonymous memory file that the driver reads by its /proc/self/fd path (cuModuleLoad
    opens a path; torch's static launcher takes nothing else); closed once loaded."""
    fd = os.memfd_create("precompile_nb_cubin", getattr(os, "MFD_CLOEXEC", 0))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return load_cubin(f"/proc/self/fd/{fd}", function, shared, device_index)
    finally:
        os.close(fd)


def launch_cubin() -> Callable[..., None]:
    """_launch_kernel(function, grid_x, grid_y, grid_z, num_warps, shared, arg_types, args,
    stream) of torch's static CUDA launcher (2.8+)."""
    return torch._C._StaticCudaLauncher._launch_kernel


def profiler_module() -> Any:
    """torch.autograd.profiler, whose `_is_profiler_enabled` Inductor's kernels read per
    launch (2.11-2.14)."""
    return torch.autograd.profiler


def record_function_fast() -> Any:
    """torch._C._profiler._RecordFunctionFast: the profiler range Inductor opens around each
    Triton launch while a profiler runs (2.11-2.14)."""
    return torch._C._profiler._RecordFunctionFast


def warm_module_attrs(async_compile: Callable, extern_kernels: Any) -> dict[str, dict[str, Any]]:
    """The objects a warm load hands the generated module for the imports in WARM_IMPORTS:
    the caller's AsyncCompile and extern_kernels, and light copies of three small helpers
    that behave as Inductor's do (2.11-2.14); `triton` for the module's plain imports."""
    import sys
    import types

    hooks = sys.modules.get("torch._inductor.hooks")
    return {
        "torch._inductor.hooks": {"run_intermediate_hooks": (
            # an intermediate hook can only be registered through that module: if nobody
            # imported it, there is none to run
            hooks.run_intermediate_hooks if hooks is not None else _no_intermediate_hooks)},
        "torch._inductor.utils": {"maybe_profile": _maybe_profile},
        "torch._inductor.codegen.memory_planning": {"_align": _align},
        "torch._inductor.async_compile": {"AsyncCompile": async_compile},
        "torch._inductor.select_algorithm": {"extern_kernels": extern_kernels},
        "torch._inductor.runtime.triton_heuristics": {"start_graph": _no_graph_marker,
                                                      "end_graph": _no_graph_marker},
        # `import triton` / `import triton.language as tl`: the module names them, only the
        # kernel sources (strings the warm path never compiles) use them
        "triton": {"language": types.SimpleNamespace()},
    }


def _no_graph_marker(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("precompile_nb: start_graph/end_graph called on the warm path (the "
                       "planner refuses modules that call them): load with cache=None and "
                       "report this as a precompile_nb bug")


def _no_intermediate_hooks(name: str, value: Any) -> None:
    return None


@contextlib.contextmanager
def _maybe_profile(should_profile: bool, *args: Any, **kwargs: Any) -> Iterator[Any]:
    # torch._inductor.utils.maybe_profile (2.11-2.14)
    if should_profile:
        with torch.profiler.profile(*args, **kwargs) as p:
            yield p
    else:
        yield


def _align(nbytes: int) -> int:
    # torch._inductor.utils._align (2.11-2.14): round up to ALIGN_BYTES = 64
    return (nbytes + 63) & -64


# Note [Triton binaries only]
#   Triton keeps, in each compiled kernel's cache dir, every stage of the compile: the
#   <name>.source, .ttir, .ttgir, .llir and .ptx text beside the binary (.cubin) and its
#   metadata (<name>.json), and a group file __grp__<name>.json naming them all. A CNN
#   training step's cache is mostly Triton's files (H200, timm efficientnet_b0: 137 of 145 MB,
#   7,818 files, its largest each kernel's .llir and .ptx at 150-290 KB), and every byte of a
#   cache is read and checksummed at load.
#   Nothing at load reads them: the warm path launches the cubin, and Triton itself, on the
#   compile path, takes a cache hit from the group file (every file it names must exist) and
#   builds its CompiledKernel from the metadata and the binary (Triton 3.x; the other stages
#   are kept only for tools that dump IR, e.g. AOTInductor on ROCm). So a cache keeps of
#   each kernel the binary and metadata, and its group file names those alone.
TRITON_STAGE_TEXTS = frozenset({"source", "ttir", "ttgir", "llir", "ptx"})
TRITON_BINARIES = frozenset({"cubin", "hsaco"})


def is_triton_driver_helper(rel: str) -> bool:
    """Whether a Triton cache file (path relative to the cache dir) is Triton's compiled
    driver helper, cuda_utils.<ABI>.so (hip_utils on ROCm): Triton 3.x builds it once per
    process into its cache dir, beside the kernels (checked on Triton 3.6)."""
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(("cuda_utils.", "hip_utils.")) and name.endswith(".so")


def triton_binaries_only(files: Sequence[tuple[str, str, bytes]],
                         ) -> list[tuple[str, str, bytes]]:
    """`files` (root, rel, bytes) without the Triton compile stages' text files that no load
    reads, each group file naming what is kept (Note [Triton binaries only]). A kernel dir
    with no binary, or with a group file this does not understand, is kept whole."""
    import json

    dirs: dict[str, dict[str, bytes]] = {}  # kernel dir -> {file name: bytes}
    for root, rel, data in files:
        if root == "triton" and "/" in rel:
            d, name = rel.rsplit("/", 1)
            dirs.setdefault(d, {})[name] = data
    drop: set[str] = set()
    new: dict[str, bytes] = {}
    for d, names in dirs.items():
        exts = {n: n.rsplit(".", 1)[-1] for n in names}
        gone = {n for n, e in exts.items() if e in TRITON_STAGE_TEXTS}
        if not gone or not TRITON_BINARIES & set(exts.values()):
            continue
        groups = {}
        try:
            for n in names:
                if n.startswith("__grp__") and n.endswith(".json"):
                    group = json.loads(bytes(names[n]))
                    group["child_paths"] = {c: p for c, p in group["child_paths"].items()
                                            if os.path.basename(str(p)) not in gone}
                    groups[f"{d}/{n}"] = json.dumps(group).encode()
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a group file of another shape: this dir stays as it is
        new.update(groups)
        drop |= {f"{d}/{n}" for n in gone}
    return [(root, rel, new.get(rel, data) if root == "triton" else data)
            for root, rel, data in files if not (root == "triton" and rel in drop)]


def relocate_cache_file(root: str, rel: str, data: bytes | memoryview, dest: str,
                        ) -> bytes | memoryview:
    """The bytes to install for one cache file at `dest`. Triton (3.x) keeps, beside each
    compiled kernel, a group file `__grp__<name>.json` that lists the kernel's files by
    ABSOLUTE path, and treats a listed file that is not there as a cache miss: installed
    as-is, every group would point into the (deleted) private compile dir, and every kernel
    would compile again. Point them at the files' new home."""
    name = rel.rsplit("/", 1)[-1]
    if root != "triton" or not (name.startswith("__grp__") and name.endswith(".json")):
        return data
    import json

    try:
        group = json.loads(bytes(data))
        children = group["child_paths"]
        here = os.path.dirname(dest)
        group["child_paths"] = {c: os.path.join(here, os.path.basename(str(p)))
                                for c, p in children.items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return data  # not a group file we know: as it was (at worst Triton recompiles)
    return json.dumps(group).encode()
