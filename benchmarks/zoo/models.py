"""The zoo: models nobody in this project wrote (transformers, timm, torchvision), built from
config with random init (no weights are downloaded), two sizes each.

    REGISTRY[name](size, device) -> Spec(model, args={workload: tuple}, fns={workload: fn})

- `tiny`: for CPU (hidden 16-64, 1-2 layers, 32x32 / 64x64 images, seq 16, batch 2).
- `real`: for a GPU (the real architecture's layer widths, fewer layers, batch 4-8).

Workloads (every fn takes the model first, then tensors, all positional):
- `infer`: returns what the model returns (an HF ModelOutput, a tensor, a dict). Decoders and
  encoder-decoders are called with `use_cache=False` here; `infer_cache` (decoders and
  encoder-decoders only, not in the default run) is the model's default call, which returns a
  DynamicCache / EncoderDecoderCache; run.py registers the cache classes as pytree nodes
  first (register_cache_pytrees), as precompile's refusal of an unregistered class says to.
- `train`: forward, loss (the model's own `.loss` where it takes labels, else cross-entropy or a
  sum), `.backward()`, returns the loss. Under `torch.autocast("cuda", torch.bfloat16)` inside
  fn when the inputs are on CUDA; no autocast on CPU.

Determinism: every dropout / drop-path / layerdrop probability of every config, and the p of
every nn.Dropout module, is set to 0 (and wav2vec2's SpecAugment masking is off), so a training
step is a deterministic function of the weights and inputs, and precompile, torch.compile and
eager compute the same thing (no RNG reset is needed or done).

Models are built with `torch.manual_seed(0)` and inputs with a generator seeded 1, so every
process (eager, precompile, torch.compile, the warm loads) builds the same model and inputs.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F

from . import _tv_shim


@dataclasses.dataclass
class Spec:
    model: torch.nn.Module
    args: dict[str, tuple]  # workload -> example inputs (after the model)
    fns: dict[str, Callable[..., Any]]  # workload -> fn(model, *inputs)
    family: str = ""


REGISTRY: dict[str, Callable[[str, str], Spec]] = {}
FAMILY: dict[str, str] = {}


def register(name: str, family: str):
    def deco(builder):
        REGISTRY[name] = builder
        FAMILY[name] = family
        return builder
    return deco


def amp(t: torch.Tensor):
    """bf16 autocast on CUDA, nothing on CPU (decided from the input's device at trace time)."""
    if t.is_cuda:
        return torch.autocast("cuda", torch.bfloat16)
    return contextlib.nullcontext()


_DROP = re.compile(r"(dropout|pdrop|layerdrop|drop_path|drop_rate|drop_prob)")


def no_dropout(cfg: Any) -> Any:
    """Every float dropout-like attribute of an HF config (and its sub-configs) set to 0."""
    for k, v in list(vars(cfg).items()):
        if _DROP.search(k) and isinstance(v, float):
            setattr(cfg, k, 0.0)
        elif hasattr(v, "to_dict") and hasattr(v, "model_type"):
            no_dropout(v)
    return cfg


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(1)


def _ids(vocab: int, b: int, s: int, device: str, lo: int = 3) -> torch.Tensor:
    return torch.randint(lo, vocab, (b, s), generator=_gen()).to(device)


def _img(b: int, c: int, h: int, w: int, device: str) -> torch.Tensor:
    return torch.randn(b, c, h, w, generator=_gen()).to(device)


def _labels(n: int, b: int, device: str) -> torch.Tensor:
    return torch.randint(0, n, (b,), generator=torch.Generator().manual_seed(2)).to(device)


def _seeded(make: Callable[[], torch.nn.Module], device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return make().to(device)


def _tiny(size: str) -> bool:
    if size not in ("tiny", "real"):
        raise ValueError(f"size must be tiny or real, got {size!r}")
    return size == "tiny"


# ---------------------------------------------------------------- workload fns (positional)

def causal_infer(m, input_ids, attention_mask):
    return m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)


def causal_infer_cache(m, input_ids, attention_mask):
    return m(input_ids=input_ids, attention_mask=attention_mask)


def causal_train(m, input_ids, attention_mask):
    with amp(input_ids):
        loss = m(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids,
                 use_cache=False).loss
    loss.backward()
    return loss


def encoder_infer(m, input_ids, attention_mask):
    return m(input_ids=input_ids, attention_mask=attention_mask)


def encoder_train(m, input_ids, attention_mask, labels):
    with amp(input_ids):
        loss = m(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    loss.backward()
    return loss


def seq2seq_infer(m, input_ids, attention_mask, decoder_input_ids):
    return m(input_ids=input_ids, attention_mask=attention_mask,
             decoder_input_ids=decoder_input_ids, use_cache=False)


def seq2seq_infer_cache(m, input_ids, attention_mask, decoder_input_ids):
    return m(input_ids=input_ids, attention_mask=attention_mask,
             decoder_input_ids=decoder_input_ids)


def seq2seq_train(m, input_ids, attention_mask, labels):
    with amp(input_ids):
        loss = m(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                 use_cache=False).loss
    loss.backward()
    return loss


def speech2text_infer(m, input_features, decoder_input_ids):
    return m(input_features=input_features, decoder_input_ids=decoder_input_ids, use_cache=False)


def speech2text_infer_cache(m, input_features, decoder_input_ids):
    return m(input_features=input_features, decoder_input_ids=decoder_input_ids)


def speech2text_train(m, input_features, labels):
    with amp(input_features):
        loss = m(input_features=input_features, labels=labels, use_cache=False).loss
    loss.backward()
    return loss


def audio_infer(m, input_values):
    return m(input_values=input_values)


def audio_train(m, input_values, labels):
    with amp(input_values):
        loss = m(input_values=input_values, labels=labels).loss
    loss.backward()
    return loss


def hf_image_infer(m, pixel_values):
    return m(pixel_values=pixel_values)


def hf_image_train(m, pixel_values, labels):
    with amp(pixel_values):
        loss = m(pixel_values=pixel_values, labels=labels).loss
    loss.backward()
    return loss


def detr_train(m, pixel_values):
    # the model's own DETR loss needs scipy's Hungarian matcher (data-dependent, numpy):
    # a surrogate loss on both heads instead
    with amp(pixel_values):
        out = m(pixel_values=pixel_values)
        loss = out.logits.float().logsumexp(-1).mean() + out.pred_boxes.float().mean()
    loss.backward()
    return loss


def image_infer(m, x):
    return m(x)


def image_train(m, x, y):
    with amp(x):
        loss = F.cross_entropy(m(x), y)
    loss.backward()
    return loss


def seg_train(m, x, target):
    with amp(x):
        loss = F.cross_entropy(m(x)["out"], target)
    loss.backward()
    return loss


# ---------------------------------------------------------------- transformers

def register_cache_pytrees(model: torch.nn.Module) -> None:
    """Register transformers' cache classes (DynamicCache, EncoderDecoderCache, the model's
    own) as pytree nodes, transformers' own helper for torch.export. What a user does so that
    precompile carries the model's default output (the `infer_cache` workload): a class that
    is no pytree node is refused at capture with this as the fix."""
    _hf()
    from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model
    register_cache_pytrees_for_model(model)


def _hf():
    _tv_shim.install()  # transformers imports torchvision when it is installed
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


_DEC_TINY = dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
_B_TINY, _S_TINY = 2, 16
_B_REAL, _S_REAL = 4, 256


def _causal(cfg_name: str, tiny_kw: dict, real_kw: dict, vocab_key: str = "vocab_size"):
    def build(size: str, device: str) -> Spec:
        T = _hf()
        kw = tiny_kw if _tiny(size) else real_kw
        cfg = no_dropout(getattr(T, cfg_name)(**kw))
        m = _seeded(lambda: T.AutoModelForCausalLM.from_config(cfg), device)
        b, s = (_B_TINY, _S_TINY) if _tiny(size) else (_B_REAL, _S_REAL)
        ids = _ids(kw[vocab_key], b, s, device)
        mask = torch.ones(b, s, dtype=torch.long, device=device)
        a = (ids, mask)
        return Spec(m, {"infer": a, "infer_cache": a, "train": a},
                    {"infer": causal_infer, "infer_cache": causal_infer_cache,
                     "train": causal_train}, "decoder")
    return build


def _llama_like(real_hidden, real_inter, real_heads, real_kv, real_vocab, **extra):
    tiny = {**_DEC_TINY, **{k: v[0] for k, v in extra.items()}}
    real = dict(vocab_size=real_vocab, hidden_size=real_hidden, intermediate_size=real_inter,
                num_hidden_layers=2, num_attention_heads=real_heads, num_key_value_heads=real_kv,
                max_position_embeddings=1024, **{k: v[1] for k, v in extra.items()})
    return tiny, real


register("gpt2", "decoder")(_causal(
    "GPT2Config",
    dict(vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_positions=64),
    dict(vocab_size=50257, n_embd=768, n_layer=4, n_head=12, n_positions=1024)))
register("llama", "decoder")(_causal("LlamaConfig", *_llama_like(4096, 11008, 32, 32, 32000)))
register("qwen2", "decoder")(_causal("Qwen2Config", *_llama_like(1536, 8960, 12, 2, 151936)))
register("mistral", "decoder")(_causal("MistralConfig", *_llama_like(4096, 14336, 32, 8, 32000)))
register("mixtral", "decoder")(_causal("MixtralConfig", *_llama_like(
    1024, 3584, 16, 8, 32000, num_local_experts=(4, 8), num_experts_per_tok=(2, 2))))
register("qwen2_moe", "decoder")(_causal("Qwen2MoeConfig", *_llama_like(
    1024, 2816, 16, 16, 32000, num_experts=(4, 8), num_experts_per_tok=(2, 2),
    moe_intermediate_size=(32, 704), shared_expert_intermediate_size=(64, 2816))))
register("gemma", "decoder")(_causal("GemmaConfig", *_llama_like(
    2048, 16384, 8, 1, 32000, head_dim=(8, 256))))
register("phi", "decoder")(_causal(
    "PhiConfig",
    dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
         num_attention_heads=4, max_position_embeddings=64),
    dict(vocab_size=51200, hidden_size=2560, intermediate_size=10240, num_hidden_layers=2,
         num_attention_heads=32, max_position_embeddings=1024)))
register("gpt_neox", "decoder")(_causal(
    "GPTNeoXConfig",
    dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
         num_attention_heads=4, max_position_embeddings=64),
    dict(vocab_size=50304, hidden_size=2048, intermediate_size=8192, num_hidden_layers=2,
         num_attention_heads=16, max_position_embeddings=1024)))
register("opt", "decoder")(_causal(
    "OPTConfig",
    dict(vocab_size=256, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
         num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32),
    dict(vocab_size=50272, hidden_size=2048, ffn_dim=8192, num_hidden_layers=2,
         num_attention_heads=32, max_position_embeddings=1024, word_embed_proj_dim=2048)))


def _encoder(cfg_name: str, tiny_kw: dict, real_kw: dict):
    def build(size: str, device: str) -> Spec:
        T = _hf()
        kw = tiny_kw if _tiny(size) else real_kw
        cfg = no_dropout(getattr(T, cfg_name)(num_labels=3, **kw))
        m = _seeded(lambda: T.AutoModelForSequenceClassification.from_config(cfg), device)
        b, s = (_B_TINY, _S_TINY) if _tiny(size) else (8, 128)
        ids = _ids(kw["vocab_size"], b, s, device)
        mask = torch.ones(b, s, dtype=torch.long, device=device)
        mask[0, -3:] = 0  # some padding
        return Spec(m, {"infer": (ids, mask), "train": (ids, mask, _labels(3, b, device))},
                    {"infer": encoder_infer, "train": encoder_train}, "encoder")
    return build


_ENC_TINY = dict(vocab_size=256, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64)
_ENC_REAL = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=4, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512)
register("bert", "encoder")(_encoder("BertConfig", _ENC_TINY, _ENC_REAL))
register("roberta", "encoder")(_encoder("RobertaConfig", _ENC_TINY,
                                         {**_ENC_REAL, "vocab_size": 50265,
                                          "max_position_embeddings": 514}))
register("distilbert", "encoder")(_encoder(
    "DistilBertConfig", dict(vocab_size=256, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                             max_position_embeddings=64),
    dict(vocab_size=30522, dim=768, n_layers=4, n_heads=12, hidden_dim=3072)))
register("albert", "encoder")(_encoder("AlbertConfig", {**_ENC_TINY, "embedding_size": 16},
                                        {**_ENC_REAL, "embedding_size": 128}))
register("electra", "encoder")(_encoder("ElectraConfig", {**_ENC_TINY, "embedding_size": 16},
                                         {**_ENC_REAL, "embedding_size": 768}))
register("deberta_v2", "encoder")(_encoder(
    "DebertaV2Config", {**_ENC_TINY, "relative_attention": True, "position_buckets": 16,
                        "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1},
    {**_ENC_REAL, "vocab_size": 128100, "relative_attention": True, "position_buckets": 256,
     "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1}))


@register("wav2vec2", "encoder")
def wav2vec2(size: str, device: str) -> Spec:
    T = _hf()
    if _tiny(size):
        kw = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 4),
                  conv_kernel=(10, 8), num_conv_pos_embeddings=16,
                  num_conv_pos_embedding_groups=2, classifier_proj_size=16)
        b, n = 2, 1600
    else:
        kw = dict(num_hidden_layers=4)  # wav2vec2-base widths
        b, n = 4, 32000
    cfg = no_dropout(T.Wav2Vec2Config(num_labels=3, mask_time_prob=0.0, mask_feature_prob=0.0,
                                      **kw))
    m = _seeded(lambda: T.Wav2Vec2ForSequenceClassification(cfg), device)
    x = torch.randn(b, n, generator=_gen()).to(device)
    return Spec(m, {"infer": (x,), "train": (x, _labels(3, b, device))},
                {"infer": audio_infer, "train": audio_train}, "encoder")


def _seq2seq(cfg_name: str, model_cls: str, tiny_kw: dict, real_kw: dict):
    def build(size: str, device: str) -> Spec:
        T = _hf()
        kw = tiny_kw if _tiny(size) else real_kw
        cfg = no_dropout(getattr(T, cfg_name)(**kw))
        m = _seeded(lambda: getattr(T, model_cls)(cfg), device)
        b, s = (_B_TINY, _S_TINY) if _tiny(size) else (_B_REAL, 128)
        v = kw["vocab_size"]
        ids = _ids(v, b, s, device)
        mask = torch.ones(b, s, dtype=torch.long, device=device)
        dec = _ids(v, b, s // 2, device)
        labels = _ids(v, b, s // 2, device)
        a = (ids, mask, dec)
        return Spec(m, {"infer": a, "infer_cache": a, "train": (ids, mask, labels)},
                    {"infer": seq2seq_infer, "infer_cache": seq2seq_infer_cache,
                     "train": seq2seq_train}, "encoder-decoder")
    return build


register("t5", "encoder-decoder")(_seq2seq(
    "T5Config", "T5ForConditionalGeneration",
    dict(vocab_size=256, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
         decoder_start_token_id=0),
    dict(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=4, num_heads=12,
         decoder_start_token_id=0)))
_BART_TINY = dict(vocab_size=256, d_model=32, encoder_layers=2, decoder_layers=2,
                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                  decoder_ffn_dim=64, max_position_embeddings=64)
_BART_REAL = dict(vocab_size=50265, d_model=768, encoder_layers=3, decoder_layers=3,
                  encoder_attention_heads=12, decoder_attention_heads=12,
                  encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024)
register("bart", "encoder-decoder")(_seq2seq("BartConfig", "BartForConditionalGeneration",
                                             _BART_TINY, _BART_REAL))
register("marian", "encoder-decoder")(_seq2seq(
    "MarianConfig", "MarianMTModel", {**_BART_TINY, "decoder_start_token_id": 0,
                                      "pad_token_id": 1},
    {**_BART_REAL, "vocab_size": 58101, "decoder_start_token_id": 0, "pad_token_id": 58100,
     "d_model": 512, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048,
     "encoder_attention_heads": 8, "decoder_attention_heads": 8}))


@register("whisper", "encoder-decoder")
def whisper(size: str, device: str) -> Spec:
    T = _hf()
    if _tiny(size):
        kw = dict(vocab_size=256, num_mel_bins=16, d_model=32, encoder_layers=2,
                  decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                  encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                  max_target_positions=32)
        b, t = 2, 8
    else:
        kw = dict(vocab_size=51865, num_mel_bins=80, d_model=512, encoder_layers=3,
                  decoder_layers=3, encoder_attention_heads=8, decoder_attention_heads=8,
                  encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_source_positions=1500,
                  max_target_positions=448)
        b, t = 4, 64
    cfg = no_dropout(T.WhisperConfig(decoder_start_token_id=1, pad_token_id=0, **kw))
    m = _seeded(lambda: T.WhisperForConditionalGeneration(cfg), device)
    feats = torch.randn(b, kw["num_mel_bins"], 2 * kw["max_source_positions"],
                        generator=_gen()).to(device)
    dec = _ids(kw["vocab_size"], b, t, device)
    a = (feats, dec)
    return Spec(m, {"infer": a, "infer_cache": a, "train": (feats, dec)},
                {"infer": speech2text_infer, "infer_cache": speech2text_infer_cache,
                 "train": speech2text_train}, "encoder-decoder")


def _hf_image(cfg_name: str, model_cls: str, tiny_kw: dict, real_kw: dict):
    def build(size: str, device: str) -> Spec:
        T = _hf()
        kw = tiny_kw if _tiny(size) else real_kw
        cfg = no_dropout(getattr(T, cfg_name)(num_labels=10, **kw))
        m = _seeded(lambda: getattr(T, model_cls)(cfg), device)
        b = 2 if _tiny(size) else 8
        x = _img(b, 3, kw["image_size"], kw["image_size"], device)
        return Spec(m, {"infer": (x,), "train": (x, _labels(10, b, device))},
                    {"infer": hf_image_infer, "train": hf_image_train}, "vision-transformer")
    return build


_VIT_TINY = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=64)
_VIT_REAL = dict(image_size=224, patch_size=16, hidden_size=768, num_hidden_layers=4,
                 num_attention_heads=12, intermediate_size=3072)
register("hf_vit", "vision-transformer")(_hf_image("ViTConfig", "ViTForImageClassification",
                                                  _VIT_TINY, _VIT_REAL))
register("hf_deit", "vision-transformer")(_hf_image(
    "DeiTConfig", "DeiTForImageClassification", _VIT_TINY, _VIT_REAL))
register("hf_swin", "vision-transformer")(_hf_image(
    "SwinConfig", "SwinForImageClassification",
    dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
         window_size=4),
    dict(image_size=224, patch_size=4, embed_dim=96, depths=[2, 2, 2, 1],
         num_heads=[3, 6, 12, 24], window_size=7)))


@register("hf_segformer", "segmentation")
def hf_segformer(size: str, device: str) -> Spec:
    T = _hf()
    if _tiny(size):
        kw = dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                  patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                  mlp_ratios=[2, 2], decoder_hidden_size=32)
        b, hw = 2, 64
    else:  # mit-b0 widths
        kw = dict(decoder_hidden_size=256)
        b, hw = 4, 256
    cfg = no_dropout(T.SegformerConfig(num_labels=4, **kw))
    m = _seeded(lambda: T.SegformerForSemanticSegmentation(cfg), device)
    x = _img(b, 3, hw, hw, device)
    y = torch.randint(0, 4, (b, hw, hw), generator=_gen()).to(device)
    return Spec(m, {"infer": (x,), "train": (x, y)},
                {"infer": hf_image_infer, "train": hf_image_train}, "segmentation")


@register("hf_detr", "detection")
def hf_detr(size: str, device: str) -> Spec:
    T = _hf()
    if _tiny(size):
        bb = T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 16, 32], depths=[1, 1, 1, 1],
                            layer_type="basic", out_features=["stage4"])
        kw = dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                  decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                  num_queries=8)
        b, hw = 2, 64
    else:
        bb = T.ResNetConfig(embedding_size=64, hidden_sizes=[256, 512, 1024, 2048],
                            depths=[3, 4, 6, 3], layer_type="bottleneck",
                            out_features=["stage4"])
        kw = dict(encoder_layers=2, decoder_layers=2, num_queries=100)
        b, hw = 4, 512
    cfg = no_dropout(T.DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False,
                                  backbone_config=bb, num_labels=4, **kw))
    m = _seeded(lambda: T.DetrForObjectDetection(cfg), device)
    x = _img(b, 3, hw, hw, device)
    return Spec(m, {"infer": (x,), "train": (x,)},
                {"infer": hf_image_infer, "train": detr_train}, "detection")


# ---------------------------------------------------------------- timm

def _timm(tiny_name: str, tiny_kw: dict, real_name: str, real_kw: dict | None = None,
          family: str = "cnn", tiny_hw: int = 32):
    def build(size: str, device: str) -> Spec:
        _tv_shim.install()
        import timm
        name, kw = (tiny_name, tiny_kw) if _tiny(size) else (real_name, real_kw or {})
        m = _seeded(lambda: timm.create_model(name, pretrained=False, num_classes=10,
                                              drop_rate=0.0, drop_path_rate=0.0, **kw), device)
        b, hw = (2, tiny_hw) if _tiny(size) else (8, 224)
        x = _img(b, 3, hw, hw, device)
        return Spec(m, {"infer": (x,), "train": (x, _labels(10, b, device))},
                    {"infer": image_infer, "train": image_train}, family)
    return build


register("timm_vit", "vision-transformer")(_timm(
    "vit_tiny_patch16_224", dict(img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2),
    "vit_base_patch16_224", dict(depth=4), "vision-transformer"))
register("timm_deit", "vision-transformer")(_timm(
    "deit_tiny_distilled_patch16_224", dict(img_size=32, patch_size=8, depth=2, embed_dim=32,
                                            num_heads=2),
    "deit_small_distilled_patch16_224", dict(depth=6), "vision-transformer"))
register("timm_swin", "vision-transformer")(_timm(
    "swin_tiny_patch4_window7_224", dict(img_size=32, window_size=4, embed_dim=16,
                                         depths=(1, 1), num_heads=(1, 2)),
    "swin_tiny_patch4_window7_224", dict(depths=(2, 2, 2, 1)), "vision-transformer"))
register("timm_resnet", "cnn")(_timm("test_resnet", {}, "resnet50"))
register("timm_convnext", "cnn")(_timm("test_convnext", {}, "convnext_tiny"))
register("timm_efficientnet", "cnn")(_timm("test_efficientnet", {}, "efficientnet_b0"))
register("timm_mobilenetv3", "cnn")(_timm("mobilenetv3_small_050", {}, "mobilenetv3_large_100"))


# ---------------------------------------------------------------- torchvision

def _tv(make_tiny: Callable[[Any], torch.nn.Module], make_real: Callable[[Any], torch.nn.Module],
        family: str = "cnn", tiny_hw: int = 32, real_hw: int = 224, seg: bool = False):
    def build(size: str, device: str) -> Spec:
        _tv_shim.install()
        import torchvision
        m = _seeded(lambda: (make_tiny if _tiny(size) else make_real)(torchvision.models),
                    device)
        b, hw = (2, tiny_hw) if _tiny(size) else (8, real_hw)
        x = _img(b, 3, hw, hw, device)
        if seg:
            y = torch.randint(0, 4, (b, hw, hw), generator=_gen()).to(device)
            return Spec(m, {"infer": (x,), "train": (x, y)},
                        {"infer": image_infer, "train": seg_train}, family)
        return Spec(m, {"infer": (x,), "train": (x, _labels(10, b, device))},
                    {"infer": image_infer, "train": image_train}, family)
    return build


register("tv_resnet18", "cnn")(_tv(lambda M: M.resnet18(num_classes=10),
                                   lambda M: M.resnet50(num_classes=10)))
register("tv_mobilenet_v3", "cnn")(_tv(lambda M: M.mobilenet_v3_small(num_classes=10),
                                       lambda M: M.mobilenet_v3_large(num_classes=10)))
register("tv_vit", "vision-transformer")(_tv(
    lambda M: M.vision_transformer.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
        num_classes=10),
    lambda M: M.vision_transformer.VisionTransformer(
        image_size=224, patch_size=16, num_layers=4, num_heads=12, hidden_dim=768,
        mlp_dim=3072, num_classes=10), "vision-transformer"))
register("tv_swin", "vision-transformer")(_tv(
    lambda M: M.swin_transformer.SwinTransformer(
        patch_size=[4, 4], embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=[4, 4],
        stochastic_depth_prob=0.0, num_classes=10),
    lambda M: M.swin_transformer.SwinTransformer(
        patch_size=[4, 4], embed_dim=96, depths=[2, 2, 2, 1], num_heads=[3, 6, 12, 24],
        window_size=[7, 7], stochastic_depth_prob=0.0, num_classes=10), "vision-transformer"))
register("tv_deeplabv3", "segmentation")(_tv(
    lambda M: M.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=4, aux_loss=False),
    lambda M: M.segmentation.deeplabv3_resnet50(
        weights=None, weights_backbone=None, num_classes=4, aux_loss=False),
    "segmentation", tiny_hw=64, real_hw=256, seg=True))
register("tv_lraspp", "segmentation")(_tv(
    lambda M: M.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=4),
    lambda M: M.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=4),
    "segmentation", tiny_hw=64, real_hw=256, seg=True))

WORKLOADS = ("infer", "train")

# cases whose computation branches on tensor data, precompiled with data_guards=True (the
# branch is kept as the example takes it and checked on every call): DeBERTa-v2's loss keeps
# the labels >= 0 with nonzero() and branches on how many; DETR's encoder clamps non-finite
# activations in training; the MoE backward of transformers < 5.24 loops over
# offsets.tolist() and skips the experts that got no token (5.24 hides it in a custom op)
DATA_GUARDS = {("deberta_v2", "train"), ("hf_detr", "train"), ("mixtral", "train"),
               ("qwen2_moe", "train")}


def precompile_options(name: str, workload: str) -> dict:
    """The keyword options of precompile for this case ({} or {'data_guards': True})."""
    return {"data_guards": True} if (name, workload) in DATA_GUARDS else {}


def zero_dropout_modules(model: torch.nn.Module) -> torch.nn.Module:
    """p = 0 on every nn.Dropout* module (torchvision's MobileNetV3 classifier and DeepLabV3's
    ASPP have fixed ones that no constructor argument reaches)."""
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.dropout._DropoutNd):
            mod.p = 0.0
    return model


def build(name: str, size: str, device: str) -> Spec:
    if name not in REGISTRY:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(REGISTRY)}")
    spec = REGISTRY[name](size, device)
    spec.family = FAMILY[name]
    zero_dropout_modules(spec.model)
    return spec
