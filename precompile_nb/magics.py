"""%%precompile: the notebook adapter. It parses the magic line, runs the cell, calls the core
(build, then load as a check), binds the result in the namespace and displays the report. No
pipeline logic lives here.

    %load_ext precompile_nb

    %%precompile --backend eager --out r
    def step(model, x):
        return model(x).sum()

`step` is now the precompiled callable (step.__wrapped__ is the plain function) and `r` a
PrecompileResult: r.python_code, r.cache, r.save("artifacts/"), r.to_html().
"""
from __future__ import annotations

import ast
import inspect
import os
import re
import time
import traceback
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .core import BACKENDS, _compat, build
from .core.errors import PrecompileError
from .core.load import _AST_LOCK, load
from .tools.report import error_data, report_data
from .core.schemas import Artifact
from .viewers.explorer import render_violation_html
from .viewers.html import render_report_html, render_report_page, summary_text

if TYPE_CHECKING:
    from .tools.diff import ReportDiff
    from .tools.profile import Profile

__all__ = ["PrecompileMagics", "PrecompileResult", "PrecompileDiff", "PrecompileProfile",
           "load_ipython_extension", "unload_ipython_extension"]

_MISSING = object()
_SHOWN = "_precompile_nb_explorer_shown"  # set on an error whose explorer the magic showed
# graph nodes of recently precompiled functions, by artifact file name, so an error raised
# when one is called later can show its graph
_KEEP_GRAPHS = 32


class PrecompileResult:
    """What `%%precompile --out VAR` binds (like `%timeit -o`): the pair, the loaded callable,
    everything the build recorded and the report."""

    def __init__(self, name: str, artifact: Artifact, fn: Callable[..., Any],
                 report: dict[str, Any]) -> None:
        self.name = name  # the name the callable is bound under; NAME.py / NAME.cache
        self.artifact = artifact
        self.fn = fn  # the loaded callable
        self.report = report  # report_data(...): plain JSON-able data

    @property
    def python_code(self) -> str:
        return self.artifact.python_code

    @property
    def cache(self) -> bytes:
        return self.artifact.cache

    def save(self, directory: str | os.PathLike[str]) -> tuple[str, str]:
        """Write NAME.py and NAME.cache into `directory` (created if needed), crash-safe (see
        precompile_nb.core.store: a killed save leaves the previous pair or the new one,
        never a torn pair); returns their paths."""
        from .tools.store import save_pair

        code_path, cache_path = save_pair(directory, self.name, self.python_code, self.cache)
        return os.fspath(code_path), os.fspath(cache_path)

    def to_html(self) -> str:
        """The report as a full offline HTML page (save it, attach it to an email)."""
        return render_report_page(self.report)

    def diff(self, other: PrecompileResult, *,
             names: tuple[str, str] | None = None) -> PrecompileDiff:
        """What changed from this result to `other`: calling convention, graph nodes, kernels,
        cache size, stage times and the python_code text (see precompile_nb.core.diff).

        >>> d = narrow.diff(wide)  # doctest: +SKIP
        >>> d.data.nodes_changed, d.data.code_diff[:3]  # doctest: +SKIP
        """
        from .tools.diff import diff_reports

        if not isinstance(other, PrecompileResult):
            raise TypeError(f"diff: compare with another PrecompileResult (%%precompile --out), "
                            f"got {type(other).__name__}")
        if names is None:
            names = (self.name, other.name) if self.name != other.name else ("before", "after")
        return PrecompileDiff(diff_reports(self.report, other.report, names=names))

    def profile(self, *inputs: Any, steps: int = 10, eager: bool = True) -> PrecompileProfile:
        """Run the artifact `steps` times on `inputs` under torch.profiler and attribute its
        time to graph nodes and modules, forward and backward apart; with `eager`, each
        module's eager forward is timed too (see precompile_nb.core.profile). Gradients and
        buffers of the models passed are restored afterwards. The profile also goes into the
        report (report["profile"]).

        >>> r.profile(model, x, steps=20)  # doctest: +SKIP
        """
        from .tools.profile import profile_artifact

        plain = getattr(self.fn, "__wrapped__", None) if eager else None
        prof = profile_artifact(self.fn, self.report, inputs, steps=steps, eager=plain)
        self.report["profile"] = prof.to_data()
        return PrecompileProfile(prof)

    def _repr_html_(self) -> str:
        return render_report_html(self.report)

    def _ipython_display_(self) -> None:
        show_report(self.report)

    def __repr__(self) -> str:
        return f"<PrecompileResult {self.name}: {summary_text(self.report)}>"


class PrecompileDiff:
    """What result.diff(other) and %precompile_diff return: `data` (a ReportDiff), shown as
    HTML in a notebook."""

    def __init__(self, data: ReportDiff) -> None:
        self.data = data

    @property
    def same(self) -> bool:
        return bool(self.data.same)

    def _repr_html_(self) -> str:
        from .viewers.diff import render_diff_html

        return render_diff_html(self.data.to_data())

    def to_html(self) -> str:
        """The diff as a full offline HTML page (like PrecompileResult.to_html())."""
        from .viewers.diff import render_diff_page

        return render_diff_page(self.data.to_data())

    def __repr__(self) -> str:
        return f"<PrecompileDiff {self.data.summary()}>"


class PrecompileProfile:
    """What result.profile(...) returns: `data` (a core.profile.Profile), shown as HTML."""

    def __init__(self, data: Profile) -> None:
        self.data = data

    def _repr_html_(self) -> str:
        from .viewers.profile import render_profile_html

        return render_profile_html(self.data.to_data())

    def __repr__(self) -> str:
        from .viewers.profile import profile_text

        return profile_text(self.data.to_data())


def show_report(report: dict[str, Any]) -> None:
    """Display the report: the live widget where an interactive frontend draws widgets, with
    the static HTML alongside for renderers that do not (GitHub, nbviewer, a reopened
    notebook); only the static HTML where no frontend draws widgets (a script, nbconvert
    --execute: see viewers.widgets.has_widget_frontend), so an exported page shows it."""
    from .viewers.widgets import has_widget_frontend, report_widget

    bundle: dict[str, Any] = {"text/plain": summary_text(report),
                              "text/html": render_report_html(report)}
    if has_widget_frontend():
        # only the widget view: the one-line text summary stays the text/plain fallback
        widget = report_widget(report)._repr_mimebundle_()
        key = "application/vnd.jupyter.widget-view+json"
        if key in widget:
            bundle[key] = widget[key]
    display(bundle, raw=True)


def _show_violation(err: PrecompileError, graph_nodes: Sequence[dict[str, Any]] | None) -> None:
    data = error_data(err)
    display({"text/plain": f"[precompile] {data['what']}",
             "text/html": render_violation_html(data, graph_nodes)}, raw=True)


def _last_def(code: str, filename: str) -> str:
    """The name of the last top-level `def` of the cell: the computation."""
    with _AST_LOCK:  # ast.parse is not thread-safe on Python 3.11 (cpython#106905)
        tree = ast.parse(code, filename)
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        raise UsageError("%%precompile: the cell defines no function; write the computation as "
                         "a top-level `def` (the last one is precompiled)")
    if isinstance(defs[-1], ast.AsyncFunctionDef):
        raise UsageError(f"%%precompile: `{defs[-1].name}` is async; precompile a plain def")
    return defs[-1].name


def _positional_params(fn: Callable) -> tuple[list[inspect.Parameter], bool]:
    params = list(inspect.signature(fn).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return positional, any(p.kind is p.VAR_POSITIONAL for p in params)


def _available(ns: dict[str, Any]) -> str:
    names = sorted(k for k, v in ns.items() if not k.startswith("_")
                   and isinstance(v, (torch.Tensor, torch.nn.Module)))
    return ", ".join(names) if names else "none"


def _example_inputs(ns: dict[str, Any], fn: Callable, fn_name: str,
                    names: Sequence[str]) -> tuple[list[str], list[Any]]:
    """The example inputs: the variables named on the magic line, else the variables named
    like fn's parameters. Returns (parameter names, values)."""
    params, var_positional = _positional_params(fn)
    if names:
        required = sum(p.default is p.empty for p in params)
        if len(names) < required or (len(names) > len(params) and not var_positional):
            raise UsageError(f"%%precompile: {fn_name}() takes {required}"
                             + (f" to {len(params)}" if len(params) > required else "")
                             + f" positional argument(s), the magic line names {len(names)}")
        chosen = list(names)
    else:
        chosen = []
        for p in params:
            if p.name not in ns and p.default is not p.empty:
                break  # this and the later parameters keep their defaults
            chosen.append(p.name)
    values = []
    for k, var in enumerate(chosen):
        if var not in ns:
            for_what = f" for argument '{params[k].name}'" if k < len(params) else ""
            raise UsageError(f"%%precompile: no variable '{var}' in the notebook{for_what} of "
                             f"{fn_name}(); models/tensors available: {_available(ns)}")
        values.append(ns[var])
    arg_names = [params[k].name if k < len(params) else chosen[k] for k in range(len(chosen))]
    return arg_names, values


_DYNAMIC_ITEM = re.compile(r"^(?P<arg>[A-Za-z_]\w*):(?P<dim>-?\d+)"
                           r"(?:=(?P<lo>\d+)?\.\.(?P<hi>\d+)?)?$")


def _parse_sizes(text: str | None) -> list[int]:
    """--tune-sizes 1,256 -> [1, 256]."""
    if not text:
        return []
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"%%precompile: --tune-sizes takes sizes like 1,256, got {text!r}")
    return [int(p) for p in parts]


def _parse_dynamic(spec: str | None) -> list[tuple[str, int, int | None, int | None]]:
    """ARG:DIM[=LO..HI][,...] -> (arg, dim, lo, hi) marks."""
    if not spec:
        return []
    marks = []
    for item in spec.split(","):
        m = _DYNAMIC_ITEM.match(item.strip())
        if m is None:
            raise UsageError("%%precompile: --dynamic takes ARG:DIM[=LO..HI][,...], e.g. x:0 or "
                             f"x:0=1..4096, got {item!r}")
        lo, hi = (int(v) if v else None for v in (m["lo"], m["hi"]))
        marks.append((m["arg"], int(m["dim"]), lo, hi))
    return marks


def _mark_dynamic(marks: list[tuple[str, int, int | None, int | None]], arg_names: list[str],
                  line_names: Sequence[str], values: list[Any]) -> list[Any]:
    """The inputs with the --dynamic dims marked. A marked alias is passed, not the notebook's
    tensor: a mark left on it would make a later %%precompile of it dynamic too."""
    values = list(values)
    aliased: set[int] = set()
    for arg, dim, lo, hi in marks:
        if arg in arg_names:
            k = arg_names.index(arg)
        elif arg in line_names:
            k = list(line_names).index(arg)
        else:
            raise UsageError(f"%%precompile: --dynamic {arg}:{dim}: '{arg}' is not an input; "
                             f"inputs: {', '.join(arg_names) or 'none'}")
        t = values[k]
        if not isinstance(t, torch.Tensor):
            raise UsageError(f"%%precompile: --dynamic {arg}:{dim}: '{arg}' is a "
                             f"{type(t).__name__}, not a tensor")
        if not -t.dim() <= dim < t.dim():
            raise UsageError(f"%%precompile: --dynamic {arg}:{dim}: '{arg}' has {t.dim()} "
                             "dimension(s)")
        if k not in aliased:
            values[k] = t = t.detach().requires_grad_(t.requires_grad)
            aliased.add(k)
        _compat.mark_dynamic(t, dim % t.dim(), lo, hi)
    return values


def _save(result: PrecompileResult, args: Any) -> None:
    """--save DIR: the pair written; a directory that cannot be written is a UsageError that
    says where the compiled result is kept."""
    try:
        result.save(args.save)
    except OSError as e:
        kept = f"`{args.out}`" if args.out else f"`{result.name}` (the loaded function)"
        raise UsageError(
            f"%%precompile: --save {args.save}: {e.strerror or e}; the compiled result is "
            f"kept in {kept}" + (f": {args.out}.save(OTHER_DIR) writes the pair" if args.out
                                 else "; run again with --out VAR to save it with "
                                      "VAR.save(OTHER_DIR)")) from e


def _identifier(option: str, value: str | None) -> None:
    if value is not None and not value.isidentifier():
        raise UsageError(f"%%precompile: {option} takes a Python name, got {value!r}")


@magics_class
class PrecompileMagics(Magics):
    """The %%precompile cell magic."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._graphs: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    @magic_arguments(name="%precompile")  # the usage line reads %%precompile
    @argument("names", nargs="*", metavar="NAME",
              help="notebook variables to use as the example inputs, in order (default: the "
                   "variables named like the function's parameters)")
    @argument("--backend", choices=BACKENDS, default="inductor",
              help="inductor (default): generated kernels; eager: the captured ATen graph")
    @argument("--dynamic", metavar="ARG:DIM[=LO..HI][,...]",
              help="dimensions that may change between calls, e.g. x:0 or "
                   "x:0=1..4096 (torch._dynamo.mark_dynamic with that range)")
    @argument("--name", metavar="N", help="bind the precompiled callable as N (default: the "
                                          "function's name)")
    @argument("--out", metavar="VAR", help="bind a PrecompileResult (python_code, cache, save(), "
                                           "to_html(), report) as VAR")
    @argument("--save", metavar="DIR", help="write NAME.py and NAME.cache into DIR")
    @argument("--quiet", action="store_true", help="do not show progress or the report")
    @argument("--profile", nargs="?", const=10, type=int, metavar="STEPS",
              help="after compiling, run the artifact STEPS times (default 10) on the example "
                   "inputs under torch.profiler and show time per module and kernel, beside "
                   "each module's eager forward (result.profile(...) does the same later)")
    @argument("--check", action="store_true",
              help="dry run: report every problem (all invariants) without compiling; binds "
                   "nothing but --out VAR (the CheckReport)")
    @argument("--data-guards", action="store_true",
              help="keep a branch on tensor data as the example takes it, checked on every "
                   "call (precompile(..., data_guards=True))")
    @argument("--tune-sizes", metavar="N[,N...]",
              help="on the GPU, also autotune the dynamic dims at these sizes, e.g. 1,256 "
                   "(precompile(..., tune_sizes=[1, 256]))")
    @cell_magic
    def precompile(self, line: str, cell: str) -> None:
        """Precompile the last function the cell defines, with example inputs taken from the
        notebook, and bind the precompiled callable under its name.

        The cell runs in the notebook namespace. If precompiling fails, the name keeps the
        value it had before the cell (a PrecompileError shows the violation explorer, then
        its traceback).
        """
        args = parse_argstring(self.precompile, line)
        _identifier("--name", args.name)
        _identifier("--out", args.out)
        if args.profile is not None and args.profile < 1:
            raise UsageError(f"%%precompile: --profile takes a number of steps >= 1, got "
                             f"{args.profile}")
        marks = _parse_dynamic(args.dynamic)
        args.tune_sizes = _parse_sizes(args.tune_sizes)
        code = self.shell.transform_cell(cell)  # IPython syntax inside the cell
        filename = self.shell.compile.cache(code, self.shell.execution_count, raw_code=cell)
        fn_name = _last_def(code, filename)
        ns = self.shell.user_ns
        previous = ns.get(fn_name, _MISSING)
        try:
            # registered in linecache by compile.cache: errors can show the cell's lines
            exec(compile(code, filename, "exec"), ns)  # noqa: S102 - it is the user's cell
            if args.check:
                self._check(ns[fn_name], fn_name, args, marks)
                return
            result, inputs = self._precompile(ns[fn_name], fn_name, args, marks)
        except BaseException:
            # a failed cell leaves the names it would have bound as they were
            if previous is _MISSING:
                ns.pop(fn_name, None)
            else:
                ns[fn_name] = previous
            raise
        if args.save:  # after the names are bound: a directory that cannot be written loses
            _save(result, args)  # no compile
        if args.profile is not None:  # after the names are bound: a failure here keeps them
            try:
                result.profile(*inputs, steps=args.profile)
            finally:  # the report, with its Profile tab when profiling worked
                if not args.quiet:
                    show_report(result.report)

    def _check(self, fn: Callable, fn_name: str, args: Any,
               marks: list[tuple[str, int]]) -> None:
        import dataclasses

        from .tools.check import check
        from .viewers.explorer import render_check_html

        ns = self.shell.user_ns
        arg_names, inputs = _example_inputs(ns, fn, fn_name, args.names)
        inputs = _mark_dynamic(marks, arg_names, args.names, inputs)
        report = check(fn, *inputs)
        if args.out:
            ns[args.out] = report
        if not args.quiet:
            display({"text/plain": str(report),
                     "text/html": render_check_html(
                         report.fn_name, [dataclasses.asdict(f) for f in report.findings])},
                    raw=True)

    def _precompile(self, fn: Callable, fn_name: str, args: Any,
                    marks: list[tuple[str, int]]) -> tuple[PrecompileResult, list[Any]]:
        ns = self.shell.user_ns
        arg_names, inputs = _example_inputs(ns, fn, fn_name, args.names)
        inputs = _mark_dynamic(marks, arg_names, args.names, inputs)
        from .viewers.widgets import progress_widget

        progress = None if args.quiet else progress_widget()
        # the compiler's warnings (e.g. the TF32 notice on CUDA), as the notebook's filters
        # let them through, go into the report, not into the middle of the progress line
        with warnings.catch_warnings(record=True) as caught:
            # the code was compiled here, from this cell, a moment ago: the warning that load
            # executes code (invariant 7) is for pairs that come from elsewhere
            warnings.filterwarnings("ignore", message="precompile.load executes",
                                    category=UserWarning)
            art, forward, load_seconds = self._build_and_load(fn, inputs, args, progress)
        shown = list(dict.fromkeys(f"{w.category.__name__}: {str(w.message).strip()}"
                                   for w in caught))
        if args.quiet:  # no report to carry them: say them once, after the run
            for text in shown:
                print(f"[precompile] {text}")

        report = report_data(art, load_stats=forward.__precompile_load__)
        report["stages"].append(["load check", round(load_seconds, 4)])
        report["warnings"] = shown
        name = args.name or fn_name
        forward.__wrapped__ = fn
        result = PrecompileResult(name, art, forward, report)
        ns[name] = forward
        if args.out:
            ns[args.out] = result
        self._remember_graph(forward, report)
        if not args.quiet and args.profile is None:  # --profile: shown once profiled
            show_report(report)
        return result, inputs

    @staticmethod
    def _build_and_load(fn: Callable, inputs: list[Any], args: Any,
                        progress: Any) -> tuple[Any, Callable, float]:
        """precompile, then load the pair once (the load check), with the progress view."""
        on_stage = progress.on_stage if progress else None
        try:
            art = build(fn, *inputs, backend=args.backend, data_guards=args.data_guards,
                        tune_sizes=args.tune_sizes, on_stage=on_stage)
            if on_stage:
                on_stage("load check", "start", 0.0)
            t0 = time.perf_counter()
            forward = load(art.python_code, art.cache)
            load_seconds = time.perf_counter() - t0
            if on_stage:
                on_stage("load check", "done", load_seconds)
        except PrecompileError as e:
            if progress:
                progress.finish(ok=False)
            _show_violation(e, None)
            e.__dict__[_SHOWN] = True  # the error handler must not show it a second time
            raise
        except BaseException:
            if progress:
                progress.finish(ok=False)
            raise
        if progress:
            progress.finish()
        return art, forward, load_seconds

    @line_magic("precompile_diff")
    def precompile_diff(self, line: str) -> PrecompileDiff:
        """%precompile_diff A B: what changed from the PrecompileResult A to B (both bound by
        %%precompile --out): calling convention, graph nodes, kernels, cache size, stage times
        and the python_code text diff. Returns the diff (shown when it is the cell's last
        line)."""
        names = line.split()
        if len(names) != 2:
            raise UsageError("%precompile_diff takes two names of PrecompileResults "
                             "(%%precompile --out VAR), e.g. %precompile_diff r1 r2; "
                             f"got {line!r}")
        ns = self.shell.user_ns
        results = []
        for var in names:
            value = ns.get(var, _MISSING)
            if not isinstance(value, PrecompileResult):
                have = sorted(k for k, v in ns.items()
                              if isinstance(v, PrecompileResult) and not k.startswith("_"))
                what = ("is not defined" if value is _MISSING
                        else f"is a {type(value).__name__}")
                raise UsageError(f"%precompile_diff: '{var}' {what}, not a PrecompileResult "
                                 "(bind one with %%precompile --out VAR); results in the "
                                 f"notebook: {', '.join(have) or 'none'}")
            results.append(value)
        return results[0].diff(results[1], names=(names[0], names[1]))

    def _remember_graph(self, forward: Callable, report: dict[str, Any]) -> None:
        filename = getattr(getattr(forward, "__code__", None), "co_filename", None)
        if filename:
            self._graphs[filename] = report["graph"]["nodes"]
            while len(self._graphs) > _KEEP_GRAPHS:
                self._graphs.popitem(last=False)

    def graph_for(self, tb: Any) -> list[dict[str, Any]] | None:
        """The graph of the precompiled function a traceback passes through, if any."""
        found = None
        for frame, _ in traceback.walk_tb(tb):
            found = self._graphs.get(frame.f_code.co_filename, found)
        return found

    def handle_error(self, shell: Any, etype: type, value: BaseException, tb: Any,
                     tb_offset: int | None = None) -> None:
        """set_custom_exc handler: the explorer for a PrecompileError raised in any cell (a
        precompiled function called with a wrong shape, a load of a bad pair), then the
        normal traceback. A %%precompile cell that failed already showed its explorer: one
        line follows it, not a traceback through precompile_nb's own frames (the explorer has
        the user's line; the chained original error stays on the exception)."""
        if value.__dict__.get(_SHOWN):
            inv = getattr(value, "invariant", None)
            print(f"PrecompileError: {getattr(value, 'what', value)}"
                  + (f" (invariant {inv}" if inv else " (")
                  + f"{', ' if inv else ''}stage {getattr(value, 'stage', '?')}; "
                  "details in the explorer above)")
            return
        _show_violation(value, self.graph_for(tb))  # type: ignore[arg-type]
        shell.showtraceback((etype, value, _without_hidden_frames(tb)), tb_offset=tb_offset)


def _without_hidden_frames(tb: Any) -> Any:
    """`tb` less the frames that set __tracebackhide__ (the artifact's checks: Note [hidden
    driver frames] in runtime/driver.py). IPython hides such frames itself except the
    innermost, the driver's `raise`; here the user's line is the last one shown."""
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    kept = [t for t in entries if not t.tb_frame.f_locals.get("__tracebackhide__")]
    if not kept:
        return entries[0] if entries else None
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def load_ipython_extension(ip: Any) -> None:
    """%load_ext precompile_nb: register %%precompile and the violation explorer for
    PrecompileError raised in any cell."""
    magics = PrecompileMagics(ip)
    ip.register_magics(magics)
    ip.set_custom_exc((PrecompileError,), magics.handle_error)


def unload_ipython_extension(ip: Any) -> None:
    """%unload_ext precompile_nb: remove %%precompile and the error handler."""
    mm = ip.magics_manager
    magics = mm.registry.pop(PrecompileMagics.__name__, None)
    mm.magics["cell"].pop("precompile", None)
    mm.magics["line"].pop("precompile_diff", None)
    if magics is not None and PrecompileError in ip.custom_exceptions:
        ip.set_custom_exc((), None)
