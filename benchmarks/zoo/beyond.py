"""Reach past the zoo: architectures that are not among benchmarks/zoo's 39 models, tiny
configs built from config with random init (nothing is downloaded; every dropout at p = 0, as
in the zoo), each inference and training step precompiled, loaded and called in this one
process and compared with eager by the zoo's own measure (run.py's rel_err and bounds). A
check of what users may bring next; no timings but each case's seconds.

usage: python benchmarks/zoo/beyond.py [--backend inductor|eager] [--device cpu|cuda]
                                        [--models a,b] [--workloads infer,train] [--out DIR]
                                        [--tc-always] [--data-guards]
       python benchmarks/zoo/beyond.py --merge DIR DIR ... --out DIR   (a later row replaces
                                        an earlier one of the same model and workload)

Writes DIR/results.json after every case and DIR/results.md at the end (default
benchmarks/zoo/results/<device>_beyond_<backend>), and prints a line a case as it goes.
torch.compile's own error is measured where precompile_nb's is over the bound (on every case
with --tc-always); --data-guards precompiles with data_guards=True.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.zoo import models as Z  # noqa: E402
from benchmarks.zoo.run import (TC_FACTOR, TOL, _grad_ctx, _Runner, error_limit,  # noqa: E402
                                rel_err)

_REPLACED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "intermediate_size", "max_position_embeddings")


def _causal(cfg: str, extra: dict | None = None, drop: tuple[str, ...] = ()) -> Callable:
    def build() -> tuple[torch.nn.Module, str]:
        T = Z._hf()
        kw = {k: v for k, v in {**Z._DEC_TINY, **(extra or {})}.items() if k not in drop}
        return T.AutoModelForCausalLM.from_config(Z.no_dropout(getattr(T, cfg)(**kw))), "text"
    return build


def _gpt_style(cfg: str, **extra: Any) -> Callable:  # n_embd / n_layer / n_head configs
    return _causal(cfg, {"n_embd": 32, "n_layer": 2, "n_head": 4, **extra}, drop=_REPLACED)


def _hf(model_cls: str, cfg: str, kind: str = "image", **kw: Any) -> Callable:
    def build() -> tuple[torch.nn.Module, str]:
        T = Z._hf()
        cls, config = getattr(T, model_cls), Z.no_dropout(getattr(T, cfg)(**kw))
        return (cls.from_config(config) if model_cls.startswith("Auto") else cls(config)), kind
    return build


def _timm(name: str) -> Callable:
    def build() -> tuple[torch.nn.Module, str]:
        Z._tv_shim.install()
        import timm
        return timm.create_model(name, pretrained=False, num_classes=10, drop_rate=0.0,
                                 drop_path_rate=0.0), "timm"
    return build


_VIT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            image_size=32, patch_size=8)
CASES: dict[str, Callable[[], tuple[torch.nn.Module, str]]] = {
    "qwen3": _causal("Qwen3Config", {"head_dim": 8}),
    "qwen3_moe": _causal("Qwen3MoeConfig", {"head_dim": 8, "num_experts": 4,
                                            "num_experts_per_tok": 2,
                                            "moe_intermediate_size": 16}),
    "gemma2": _causal("Gemma2Config", {"head_dim": 8, "sliding_window": 8}),
    "gemma3": _causal("Gemma3TextConfig", {"head_dim": 8, "sliding_window": 8}),
    "phi3": _causal("Phi3Config", {"pad_token_id": 0}),
    "stablelm": _causal("StableLmConfig"),
    "starcoder2": _causal("Starcoder2Config"),
    "olmo2": _causal("Olmo2Config"),
    "granite": _causal("GraniteConfig"),
    "cohere": _causal("CohereConfig"),
    "smollm3": _causal("SmolLM3Config", {"pad_token_id": 0}),
    "gpt_oss": _causal("GptOssConfig", {"head_dim": 8, "num_local_experts": 4,
                                        "num_experts_per_tok": 2, "sliding_window": 8}),
    # as many key/value heads as query heads: with fewer, Hugging Face's DeepseekV3 attention
    # repeats its already expanded keys when a mask is passed and fails in eager too
    "deepseek_v3": _causal("DeepseekV3Config", {
        "num_key_value_heads": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 16, "q_lora_rank": 16, "kv_lora_rank": 8,
        "qk_rope_head_dim": 4, "qk_nope_head_dim": 4, "v_head_dim": 8, "n_group": 1,
        "topk_group": 1, "first_k_dense_replace": 1}),
    "falcon": _causal("FalconConfig", {"num_kv_heads": 2}, drop=(
        "num_key_value_heads", "intermediate_size", "max_position_embeddings")),
    "bloom": _causal("BloomConfig", {"n_layer": 2, "n_head": 4}, drop=_REPLACED[1:]),
    "gptj": _gpt_style("GPTJConfig", rotary_dim=4, n_positions=64),
    "gpt_bigcode": _gpt_style("GPTBigCodeConfig", n_positions=64),
    "mamba": _causal("MambaConfig", {"state_size": 4}, drop=(
        "intermediate_size", "num_attention_heads", "num_key_value_heads",
        "max_position_embeddings")),
    "modernbert": _hf("AutoModelForMaskedLM", "ModernBertConfig", "text", vocab_size=256,
                      hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, max_position_embeddings=64, local_attention=8,
                      pad_token_id=0),
    "dinov2": _hf("Dinov2ForImageClassification", "Dinov2Config", num_labels=10, **_VIT),
    "beit": _hf("BeitForImageClassification", "BeitConfig", num_labels=10,
                use_relative_position_bias=True, **_VIT),
    "clip_vision": _hf("CLIPVisionModelWithProjection", "CLIPVisionConfig", "embeds",
                       projection_dim=16, **_VIT),
    "hf_convnext": _hf("ConvNextForImageClassification", "ConvNextConfig", num_labels=10,
                       hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1]),
    "hf_resnet": _hf("ResNetForImageClassification", "ResNetConfig", num_labels=10,
                     hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], embedding_size=8),
    "mobilevit": _hf("MobileViTForImageClassification", "MobileViTConfig", num_labels=10,
                     image_size=32, hidden_sizes=[16, 24, 32],
                     neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32]),
    "swinv2": _hf("Swinv2ForImageClassification", "Swinv2Config", num_labels=10, image_size=32,
                  patch_size=2, embed_dim=8, depths=[1, 1], num_heads=[2, 2], window_size=4),
    **{f"timm_{t}": _timm(f"test_{t}") for t in (
        "byobnet", "coatnet", "maxvit", "nfnet", "mambaout", "vit_relpos", "efficientnet_gn",
        "convnext3")},
}


def _example(m: torch.nn.Module, kind: str) -> dict[str, tuple[Callable, tuple]]:
    """{workload: (fn, its inputs after the model)} of a built model."""
    g = torch.Generator().manual_seed(1)
    if kind == "text":
        vocab = m.config.vocab_size
        ids = torch.randint(3, vocab, (2, 16), generator=g)
        mask = torch.ones(2, 16, dtype=torch.long)

        def infer(m, ids, mask):
            return m(input_ids=ids, attention_mask=mask).logits

        def train(m, ids, mask):
            logits = infer(m, ids, mask)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
            loss.backward()
            return loss
        return {"infer": (infer, (ids, mask)), "train": (train, (ids, mask))}
    hw = m.pretrained_cfg["input_size"][-1] if kind == "timm" else 32
    x = torch.randn(2, 3, hw, hw, generator=g)
    y = torch.randint(0, 10, (2,), generator=g)
    if kind == "embeds":
        def infer(m, x):
            return m(pixel_values=x).image_embeds

        def train(m, x):
            loss = infer(m, x).square().mean()
            loss.backward()
            return loss
        return {"infer": (infer, (x,)), "train": (train, (x,))}

    def infer(m, x):
        return m(pixel_values=x).logits if kind == "image" else m(x)

    def train(m, x, y):
        loss = torch.nn.functional.cross_entropy(infer(m, x), y)
        loss.backward()
        return loss
    return {"infer": (infer, (x,)), "train": (train, (x, y))}


def _tc_err(r: _Runner, fn: Callable, ref: dict) -> dict:
    """torch.compile's own error against eager, where precompile_nb's is over the bound."""
    try:
        return {"tc_rel_err": rel_err(r.call(torch.compile(fn))[1], ref)[0], "tc_status": "ok"}
    except Exception as e:  # noqa: BLE001 - no baseline then: the bound alone decides
        return {"tc_status": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}


def judged(row: dict, eager_spread: Callable[[], float]) -> str:
    """A measured row's status: ok within error_limit; else SPREAD where eager itself, run in
    channels_last, is at least half as far from eager as the row's result
    (`eager_spread()`, kept in the row), MISMATCH where it is not."""
    if row["rel_err"] <= error_limit(row):
        return "ok"
    row["eager_spread"] = eager_spread()
    return "SPREAD" if row["rel_err"] <= TC_FACTOR * row["eager_spread"] else "MISMATCH"


def eager_nhwc_leaves(r: _Runner, fn: Callable) -> dict:
    """Eager's leaves with the model, its saved state and its 4-D inputs in channels_last:
    the same computation rounded another way (the runner stays so). Where a compiled
    result is far from eager's and this is as far, the case amplifies rounding (HF ResNet's
    and MobileViT's tiny configs on CUDA, whose last BatchNorms normalize 2 values per
    channel), and no compiler can be held to the bound there."""
    nhwc = torch.channels_last
    r.m.to(memory_format=nhwc)
    r.args = tuple(t.to(memory_format=nhwc) if t.dim() == 4 else t for t in r.args)
    r.state = {k: v.to(memory_format=nhwc) if v.dim() == 4 else v for k, v in r.state.items()}
    return r.call(fn)[1]


def case_runner(name: str, workload: str, device: str) -> tuple[_Runner, Callable]:
    """A case built (seed 0, every dropout zeroed: timm's relative-position MLP has a fixed
    one of its own) on `device` in the workload's mode, as the zoo's _Runner (same weights
    every call, the leaves to compare), and its fn."""
    torch.manual_seed(0)
    m, kind = CASES[name]()
    Z.zero_dropout_modules(m)
    fn, args = _example(m, kind)[workload]
    m, args = m.to(device), tuple(t.to(device) for t in args)
    m.train(workload == "train")
    return _Runner(m, args, workload, device), fn


def run_case(name: str, workload: str, backend: str, device: str = "cpu",
             tc_always: bool = False, data_guards: bool = False) -> dict:
    """One case against eager; torch.compile's own error measured where precompile_nb's is
    over the bound (on every case with tc_always)."""
    from precompile_nb import precompile

    row: dict = {"model": name, "workload": workload, "backend": backend, "device": device}
    stage, t0 = "build", time.perf_counter()
    try:
        r, fn = case_runner(name, workload, device)
        m, args = r.m, r.args
        stage = "eager"
        ref = r.call(fn)[1]
        stage = "precompile"
        r.reset()
        with _grad_ctx(workload):
            code, cache = precompile(fn, m, *args, backend=backend, data_guards=data_guards)
        stage = "load"
        f = precompile.load(code, cache)
        stage = "call"
        row["rel_err"], row["where"] = rel_err(r.call(f)[1], ref)
        if tc_always or row["rel_err"] > TOL[workload]:  # as close as torch.compile? (run.py)
            row.update(_tc_err(r, fn, ref))
        row["status"] = judged(row, lambda: rel_err(eager_nhwc_leaves(r, fn), ref)[0])
    except Exception as e:  # noqa: BLE001 - a case reports every failure
        row.update(status="ERROR", stage=stage, error=f"{type(e).__name__}: "
                   + " | ".join(str(e).splitlines()[:6])[:600])
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def render(rows: list[dict], backend: str, version: str = torch.__version__) -> str:
    ok = sum(r["status"] == "ok" for r in rows)
    spread = sum(r["status"] == "SPREAD" for r in rows)
    lines = [f"# Beyond the zoo: {len(rows)} cases, backend={backend}, torch {version}",
             "", f"{ok} of {len(rows)} ok (rel err within the zoo's bound, infer "
             f"{TOL['infer']:g}, train {TOL['train']:g}, or, where over it, within "
             f"{TC_FACTOR:g}x torch.compile's own error against eager); {spread} SPREAD (over "
             f"that, within {TC_FACTOR:g}x eager's own distance when run in channels_last).",
             "", "| model | workload | status | rel err | torch.compile's | eager NHWC's "
             "| worst at / error | s |", "| --- | --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for r in rows:
        what = r.get("where", "") if r["status"] != "ERROR" else f"{r['stage']}: {r['error']}"
        err = f"{r['rel_err']:.1e}" if "rel_err" in r else "–"
        tc = f"{r['tc_rel_err']:.1e}" if "tc_rel_err" in r else r.get("tc_status", "–")[:40]
        spread = f"{r['eager_spread']:.1e}" if "eager_spread" in r else "–"
        lines.append(f"| {r['model']} | {r['workload']} | {r['status']} | {err} | {tc} | "
                     f"{spread} | {what.replace('|', '/')[:200]} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


def _merge(dirs: list[Path], out: Path) -> int:
    runs = [json.loads((d / "results.json").read_text()) for d in dirs]
    rows: dict[tuple[str, str], dict] = {}
    for run in runs:
        rows.update({(r["model"], r["workload"]): r for r in run["rows"]})
    merged = {**runs[-1], "rows": list(rows.values()), "merged_from": [str(d) for d in dirs]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(merged, indent=1))
    (out / "results.md").write_text(render(merged["rows"], f"{merged['backend']}, device="
                                           f"{merged.get('device', 'cpu')}, merged",
                                           merged["torch"]))
    print(f"wrote {out}/results.json, results.md")
    return 0 if all(r["status"] == "ok" for r in merged["rows"]) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="inductor", choices=("inductor", "eager"))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--workloads", default="infer,train")
    ap.add_argument("--tc-always", action="store_true",
                    help="measure torch.compile's error on every case, not only over the bound")
    ap.add_argument("--data-guards", action="store_true", help="precompile(..., data_guards=True)")
    ap.add_argument("--out", default="")
    ap.add_argument("--merge", nargs="+", default=[], metavar="DIR")
    a = ap.parse_args(argv)
    if a.merge:
        return _merge([Path(d) for d in a.merge], Path(a.out or ap.error("--merge needs --out")))
    warnings.filterwarnings("ignore", message="precompile.load executes")  # invariant 7's
    names = [n for n in a.models.split(",") if n] or list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(CASES)}")
    out = Path(a.out or REPO / f"benchmarks/zoo/results/{a.device}_beyond_{a.backend}")
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for k, name in enumerate(names):
        for workload in a.workloads.split(","):
            rows.append(run_case(name, workload, a.backend, a.device, a.tc_always,
                                 a.data_guards))
            r = rows[-1]
            tc = f" (torch.compile {r['tc_rel_err']:.1e})" if "tc_rel_err" in r else ""
            print(f"[beyond {k + 1}/{len(names)}] {name} {workload}: {r['status']} "
                  f"{r.get('rel_err', r.get('error', ''))}{tc} ({r['seconds']} s)", flush=True)
            (out / "results.json").write_text(json.dumps(  # after each case: a time limit
                {"torch": torch.__version__, "backend": a.backend, "device": a.device,
                 "data_guards": a.data_guards, "rows": rows}, indent=1))  # keeps those done
    (out / "results.md").write_text(render(rows, f"{a.backend}, device={a.device}"))
    print(f"wrote {out}/results.json, results.md")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
