"""The Profile view: Profile.to_data() (tools/profile.py) in, HTML out. Top modules (forward,
backward where the step has one, the eager forward beside it) with the unattributed remainder
as its own row (never negative; the share attributed is capped at 100%, with the ratio said,
where the profiled kernels took longer than the step timed apart), top kernels, and the
slowest graph nodes. Plain data only; nothing here imports torch.

    html = render_profile_html(prof.to_data())       # a notebook output on its own
    tab = profile_section(prof.to_data(), uid)       # the body of the report's Profile tab

The graph viewer colors nodes by data["node_seconds"] (graph node name -> seconds per step).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._common import esc, human_bytes, make_uid, table, wrap

__all__ = ["render_profile_html", "profile_section", "profile_text", "has_backward",
           "UNATTRIBUTED"]

UNATTRIBUTED = "(unattributed)"  # the same name as core.profile.UNATTRIBUTED
_TOP_KERNELS = 15
_TOP_NODES = 15
_CSS = """
.pcnb .pcnb-faster { color: var(--pcnb-ok); font-weight: 600; }
.pcnb .pcnb-slower { color: var(--pcnb-bad); font-weight: 600; }
.pcnb tr.pcnb-unattributed td { background: var(--pcnb-bg2); font-style: italic; }
.pcnb td.pcnb-num { text-align: right; font-variant-numeric: tabular-nums; }
"""


def _ms(s: float | None) -> str:
    if s is None:
        return '<span class="pcnb-muted">–</span>'
    return esc(f"{s * 1e3:.3f} ms")


def _num(html: str) -> tuple[str, str]:
    return (html, "pcnb-num")


def _bar(s: float, top: float) -> str:
    width = max(1, round(120 * s / top)) if top > 0 and s > 0 else 0
    return f'<span class="pcnb-bar" style="width:{width}px"></span>' if width else ""


def _speed(eager: float | None, compiled: float) -> str:
    """eager / compiled for a module's forward: >1 means compiled is faster."""
    if eager is None or eager <= 0 or compiled <= 0:
        return '<span class="pcnb-muted">–</span>'
    ratio = eager / compiled
    cls = "pcnb-faster" if ratio >= 1.1 else "pcnb-slower" if ratio <= 0.9 else ""
    word = "faster" if ratio >= 1.1 else "slower" if ratio <= 0.9 else "same"
    return f'<span class="{cls}">{esc(f"{ratio:.2f}×")} {word}</span>'


def profile_text(data: Mapping[str, Any]) -> str:
    """One line for text/plain: what was profiled (no timings: they vary run to run)."""
    mods = [m for m in data.get("modules") or [] if m.get("module") != UNATTRIBUTED]
    return (f"<Profile {data.get('fn_name')} on {data.get('device')}: {data.get('steps')} "
            f"step(s), {len(data.get('kernels') or [])} kernel(s), {len(mods)} module(s)>")


def _attributed(data: Mapping[str, Any]) -> float:
    """The time the module rows other than UNATTRIBUTED hold (the kernels' time that went to
    graph nodes); it can exceed the step, which is measured apart (Note [how kernels are
    timed] in tools/profile.py)."""
    return sum(float(m.get("seconds") or 0.0) for m in data.get("modules") or []
               if m.get("module") != UNATTRIBUTED)


def _share(part: float, step: float, digits: int = 0) -> str:
    """part of the step in percent, capped at 100% (the kernels, profiled, can take longer
    than the step, timed without the profiler)."""
    return f"{min(100.0, 100 * part / step):.{digits}f}%" if step > 0 else "?"


def _over(attributed: float, step: float) -> str:
    """'kernels 1.12× the step time, measured apart' where the attributed time exceeds the
    step's, else ''."""
    return (f"kernels {attributed / step:.2f}× the step time, measured apart"
            if step > 0 and attributed > step * 1.005 else "")


def has_backward(data: Mapping[str, Any]) -> bool:
    """Whether the profiled step has a backward (a training step), not inference."""
    return (any(float(m.get("backward_seconds") or 0.0) > 0 for m in data.get("modules") or [])
            or any(float(k.get("backward_fraction") or 0.0) > 0
                   for k in data.get("kernels") or []))


def _headline(data: Mapping[str, Any]) -> str:
    step = float(data.get("step_seconds") or 0.0)
    kernels = float(data.get("kernel_seconds") or 0.0)
    attributed = _attributed(data)
    over = _over(attributed, step)
    parts = [f"<h3>profile of <code>{esc(data.get('fn_name'))}</code></h3>",
             f"<p>one step on <b>{esc(data.get('device'))}</b>: <b>{_ms(step)}</b> "
             f"(median of {esc(data.get('steps'))} calls); kernels, timed under torch.profiler: "
             f"{_ms(kernels)}; {esc(_share(attributed, step))} of the step is attributed to "
             "graph nodes" + (f" ({esc(over)}: see the notes)" if over else "") + ".</p>"]
    if data.get("peak_bytes"):
        parts.append(f"<p>peak GPU memory during a step: "
                     f"<b>{esc(human_bytes(data['peak_bytes']))}</b></p>")
    eager = data.get("eager_step_seconds")
    if eager:
        parts.append(f"<p>the same call run eagerly: {_ms(eager)} per step "
                     f"({_speed(eager, step)} compiled).</p>")
    return "".join(parts)


def _module_row(m: Mapping[str, Any], total: float, step: float, top: float, backward: bool,
                has_eager: bool) -> list[Any]:
    unattributed = str(m.get("module")) == UNATTRIBUTED
    row = [f"<code>{esc(m.get('module'))}</code>" if not unattributed else esc(m.get("module")),
           _num(_ms(m.get("forward_seconds")) if not unattributed else "–")]
    if backward:
        row.append(_num(_ms(m.get("backward_seconds")) if not unattributed else "–"))
    row += [_num(_ms(total)), _num(esc(_share(total, step, 1))),
            _bar(total, top)]
    if has_eager:
        fwd = float(m.get("forward_seconds") or 0.0)
        row += [_num(_ms(m.get("eager_forward_seconds"))),
                _speed(m.get("eager_forward_seconds"), fwd) if not unattributed else "–"]
    return row


def _modules(data: Mapping[str, Any]) -> str:
    mods = list(data.get("modules") or [])
    step = float(data.get("step_seconds") or 0.0)
    attributed = _attributed(data)
    # the unattributed remainder is never negative, whatever the data says
    seconds = [max(0.0, step - attributed) if m.get("module") == UNATTRIBUTED
               else float(m.get("seconds") or 0.0) for m in mods]
    top = max(seconds + [0.0])
    has_eager = any(m.get("eager_forward_seconds") is not None for m in mods)
    backward = has_backward(data)
    rows = [_module_row(m, s, step, top, backward, has_eager) for m, s in zip(mods, seconds)]
    classes = ["pcnb-unattributed" if m.get("module") == UNATTRIBUTED else "" for m in mods]
    headers = ["module", "forward"] + (["backward"] if backward else []) + [
        "total", "of step", ""]
    if has_eager:
        headers += ["eager forward", "forward vs eager"]
    over = _over(attributed, step)
    rows.append(["<b>sum</b>", ""] + ([""] if backward else [])
                + [_num(f"<b>{_ms(sum(seconds))}</b>"),
                   _num(esc(_share(sum(seconds), step, 1))
                        + (f' <span class="pcnb-muted">({esc(over)})</span>' if over else "")),
                   ""] + (["", ""] if has_eager else []))
    classes.append("")
    note = ('<p class="pcnb-muted">Each graph node counts toward its innermost module'
            + ("; backward nodes count toward the module of the forward op they "
               "differentiate. " if backward else ". ") +
            f"<i>{esc(UNATTRIBUTED)}</i> is the step time outside every kernel the report "
            "maps to graph nodes: the artifact's input checks, buffer allocation, "
            + ("gradient accumulation into <code>.grad</code>, " if backward else "")
            + "Python.")
    if has_eager:
        note += (" The eager column is each module's own forward (its submodules excluded), "
                 "timed by forward hooks around the plain function.")
    note += "</p>"
    return ("<h4>Modules</h4>" + table(headers, rows, cls="pcnb-profile-modules",
                                       row_classes=classes) + note + _outside(data))


def _outside(data: Mapping[str, Any]) -> str:
    rows = [(f"<code>{esc(o.get('name'))}</code>", _num(_ms(o.get("seconds"))))
            for o in (data.get("outside") or [])[:10]]
    if not rows:
        return ""
    return ("<details><summary>profiled ops outside the kernels (part of "
            f"{esc(UNATTRIBUTED)})</summary>" + table(["op", "per step"], rows) + "</details>")


def _kernels(data: Mapping[str, Any]) -> str:
    kernels = list(data.get("kernels") or [])
    step = float(data.get("step_seconds") or 0.0)
    top = max([float(k.get("seconds") or 0.0) for k in kernels] + [0.0])
    backward = has_backward(data)  # inference: every kernel is forward, no "pass" column
    rows = []
    for k in kernels[:_TOP_KERNELS]:
        s = float(k.get("seconds") or 0.0)
        nodes = list(k.get("nodes") or [])
        shown = ", ".join(f"<code>{esc(n)}</code>" for n in nodes[:6])
        if len(nodes) > 6:
            shown += f" … (+{len(nodes) - 6})"
        bwd = float(k.get("backward_fraction") or 0.0)
        direction = "backward" if bwd == 1.0 else "forward" if bwd == 0.0 else "both"
        how = str(k.get("attribution"))
        rows.append([f"<code>{esc(k.get('name'))}</code>", esc(k.get("kind")), _num(_ms(s)),
                     _num(esc(_share(s, step, 1))), _bar(s, top),
                     _num(esc(k.get("calls"))), _num(esc(human_bytes(k.get("bytes"))))
                     if k.get("bytes") else _num("–")] + ([esc(direction)] if backward else [])
                    + [(shown or '<span class="pcnb-muted">none</span>')
                       + ("" if how == "source nodes"
                          else f' <span class="pcnb-muted">({esc(how)})</span>')])
    more = (f'<p class="pcnb-muted">{len(kernels) - _TOP_KERNELS} more kernel(s) not shown.</p>'
            if len(kernels) > _TOP_KERNELS else "")
    return ("<h4>Top kernels</h4>"
            + table(["kernel", "kind", "per step", "of step", "", "calls", "allocated"]
                    + (["pass"] if backward else []) + ["graph nodes"], rows,
                    cls="pcnb-profile-kernels") + more
            + '<p class="pcnb-muted"><i>allocated</i>: the buffers the graph allocates for '
              "the kernel to write (per step).</p>")


def _nodes(data: Mapping[str, Any]) -> str:
    ns = sorted((data.get("node_seconds") or {}).items(), key=lambda kv: -kv[1])
    if not ns:
        return ""
    rows = [(f"<code>{esc(n)}</code>", _num(_ms(s))) for n, s in ns[:_TOP_NODES]]
    return ("<details><summary>Slowest graph nodes (a kernel's time is split evenly over the "
            "nodes it computes)</summary>" + table(["node", "per step"], rows) + "</details>")


def _notes(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    return "<h4>Notes</h4><ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>"


def profile_section(data: Mapping[str, Any], uid: str) -> str:
    """The Profile tab's body (not wrapped): headline, modules, kernels, nodes, notes.
    `uid` scopes the ids of this fragment (the report's uid)."""
    return (f'<style>{_CSS}</style><div class="pcnb-profile" id="{esc(uid)}-profile">'
            + _headline(data) + _modules(data) + _kernels(data) + _nodes(data)
            + _notes(data.get("notes") or []) + "</div>")


def render_profile_html(data: Mapping[str, Any], *, uid: str | None = None) -> str:
    """The Profile view on its own, as one self-contained fragment."""
    uid = uid or make_uid(data, "pcnb-prof")
    return wrap(profile_section(data, uid), uid)
