"""Mixture-of-experts decoders: Mixtral, Qwen2-MoE, Qwen3-MoE and OLMoE, LLaMA-like layers whose feed-forward net is
`ffn = moe(experts, top_k, renormalize, shared, shared_gate, aux_loss)`.

On disk (save_pretrained) every expert is its own projections (`block_sparse_moe.experts.E.w1`, `mlp.experts.E.
gate_proj`), as attncomp's `ffn.experts.E.gate` / `fc1` / `fc2`; transformers 5 holds them in memory as two
tensors per layer, `mlp.experts.gate_up_proj` (E, 2 d_ff, d_model: gate rows, then up rows) and `down_proj`
(E, d_model, d_ff), which export fills from the experts' own (`fuse_experts`) and save_pretrained splits back."""

from __future__ import annotations

import re

import torch

from attncomp.errors import UsageError
from attncomp.interop.families.common import MIXED_LAYERS
from attncomp.interop.families.decoders import _PRE_NORMS, _llama_like, _without
from attncomp.interop.mapping import Key, Transform
from attncomp.ir import nodes

_FUSED = re.compile(r"(decoder\.layers\.\d+\.ffn\.experts)\.(gate_up_proj|down_proj)")
_EXPERT = re.compile(r"(decoder\.layers\.\d+\.ffn\.experts)\.(\d+)\.(gate|fc1|fc2)\.weight")


def _split_experts(state, config):
    """transformers' in-memory (E, 2 d_ff, d) gate_up_proj and (E, d, d_ff) down_proj -> each expert's own."""
    out = {}
    for name, tensor in state.items():
        found = _FUSED.fullmatch(name)
        if found is None:
            out[name] = tensor
            continue
        if tensor.dim() != 3:  # a crafted file: (experts, rows, columns) or nothing (one line, not an IndexError)
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, not (experts, rows, columns)")
        for e in range(tensor.shape[0]):
            if found.group(2) == "down_proj":
                out[f"{found.group(1)}.{e}.fc2.weight"] = tensor[e]
            else:
                gate, up = tensor[e].chunk(2, dim=0)
                out[f"{found.group(1)}.{e}.gate.weight"], out[f"{found.group(1)}.{e}.fc1.weight"] = gate, up
    return out


def _fuse_experts(state, config):
    """Each expert's own projections -> transformers' in-memory gate_up_proj and down_proj of the layer."""
    experts: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
    out = {}
    for name, tensor in state.items():
        found = _EXPERT.fullmatch(name)
        if found is None:
            out[name] = tensor
            continue
        experts.setdefault(found.group(1), {}).setdefault(int(found.group(2)), {})[found.group(3)] = tensor
    for prefix, by_index in experts.items():
        ordered = [by_index[e] for e in sorted(by_index)]
        out[f"{prefix}.gate_up_proj"] = torch.stack([torch.cat((p["gate"], p["fc1"]), 0) for p in ordered])
        out[f"{prefix}.down_proj"] = torch.stack([p["fc2"] for p in ordered])
    return out


FUSE_EXPERTS = Transform("fuse_experts", _split_experts, _fuse_experts)
_LAYER = r"model\.layers\.(\d+)\.mlp\."
_IN_MEMORY = ((_LAYER + r"experts\.(gate_up_proj|down_proj)", r"decoder.layers.\1.ffn.experts.\2"),
              (_LAYER + r"gate\.weight", r"decoder.layers.\1.ffn.router.weight"))


def _moe(model) -> nodes.MoE:
    dec = model.decoder
    if dec is None or not isinstance(dec.ffn, nodes.MoE) or dec.layer:
        raise UsageError("not a decoder whose every feed-forward net is a mixture of experts")
    return dec.ffn


def _moe_text(experts: str, shared=None, renormalize=None):
    """The spec's `moe(...)` of a config: experts (its attribute's name), top_k, renormalisation, a shared expert."""
    def text(config) -> str:
        args = [f"experts = {getattr(config, experts)}", f"top_k = {config.num_experts_per_tok}"]
        if renormalize is not None:
            args.append(f"renormalize = {'true' if getattr(config, renormalize) else 'false'}")
        if shared is not None:
            args.append(f"shared = {getattr(config, shared)}")
        args.append(f"aux_loss = {float(config.router_aux_loss_coef)!r}")
        return "moe(" + ", ".join(args) + ")"
    return text


def _mixtral_config(model) -> dict:
    moe = _moe(model)
    if moe.shared or not moe.renormalize:
        raise UsageError("Mixtral's experts are renormalised and it has no shared expert")
    values = _without("attention_bias", "mlp_bias")(model)
    attention = model.decoder.attention
    values["sliding_window"] = attention.window + 1 if getattr(attention, "kind", None) == "local" else None
    return dict(values, num_local_experts=moe.experts, num_experts_per_tok=moe.top_k,
                router_aux_loss_coef=moe.aux_loss, router_jitter_noise=0.0)


MIXTRAL = _llama_like(
    "mixtral", "MixtralConfig", "MixtralForCausalLM",
    spec={"bias.attention": False, "bias.ffn": False, "decoder.ffn": _moe_text("num_local_experts")},
    renames=_PRE_NORMS + _IN_MEMORY + (
        (r"model\.layers\.(\d+)\.block_sparse_moe\.gate\.weight", r"decoder.layers.\1.ffn.router.weight"),
        (r"model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.w1\.weight", r"decoder.layers.\1.ffn.experts.\2.gate.weight"),
        (r"model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.w3\.weight", r"decoder.layers.\1.ffn.experts.\2.fc1.weight"),
        (r"model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.w2\.weight", r"decoder.layers.\1.ffn.experts.\2.fc2.weight")),
    transforms=(FUSE_EXPERTS,),
    refuse=(MIXED_LAYERS, (lambda c: (c.router_jitter_noise or 0) > 0,
                           lambda c: f"router_jitter_noise = {c.router_jitter_noise} (noise on the router's input "
                                     "in training)")),
    folded="each expert's w1, w3, w2 as its gate, fc1, fc2 (export: transformers' fused gate_up_proj, down_proj)",
    config_of=_mixtral_config)

_QWEN_EXPERTS = (
    (_LAYER + r"experts\.(\d+)\.gate_proj\.weight", r"decoder.layers.\1.ffn.experts.\2.gate.weight"),
    (_LAYER + r"experts\.(\d+)\.up_proj\.weight", r"decoder.layers.\1.ffn.experts.\2.fc1.weight"),
    (_LAYER + r"experts\.(\d+)\.down_proj\.weight", r"decoder.layers.\1.ffn.experts.\2.fc2.weight"),
    (_LAYER + r"shared_expert\.gate_proj\.weight", r"decoder.layers.\1.ffn.shared.gate.weight"),
    (_LAYER + r"shared_expert\.up_proj\.weight", r"decoder.layers.\1.ffn.shared.fc1.weight"),
    (_LAYER + r"shared_expert\.down_proj\.weight", r"decoder.layers.\1.ffn.shared.fc2.weight"),
    (_LAYER + r"shared_expert_gate\.weight", r"decoder.layers.\1.ffn.shared_gate.weight"))
_QWEN_FOLDED = ("its experts' gate_proj, up_proj, down_proj as gate, fc1, fc2 (export: transformers' fused "
                "gate_up_proj, down_proj)")
_SPARSE_EVERYWHERE = (
    (lambda c: c.decoder_sparse_step != 1 or bool(c.mlp_only_layers),
     lambda c: f"dense layers among the sparse ones (decoder_sparse_step = {c.decoder_sparse_step}, mlp_only_layers "
               f"= {list(c.mlp_only_layers)}): attncomp imports models whose every layer is a mixture of experts"),)


def _qwen_moe_config(shared: bool, drop: tuple[str, ...] | None = None):
    def config_of(model) -> dict:
        moe = _moe(model)
        if bool(moe.shared) != shared or (shared and not moe.shared_gate):
            raise UsageError("Qwen2-MoE has a gated shared expert" if shared else "no shared expert in Qwen3-MoE or OLMoE")
        dropped = drop if drop is not None else ("attention_bias", "mlp_bias", "head_dim") if shared else ("mlp_bias",)
        values = dict(_without(*dropped)(model), moe_intermediate_size=model.decoder.d_ff, num_experts=moe.experts,
                      num_experts_per_tok=moe.top_k, norm_topk_prob=moe.renormalize,
                      router_aux_loss_coef=moe.aux_loss, decoder_sparse_step=1, mlp_only_layers=[])
        values.pop("intermediate_size")
        if shared:
            values.update(shared_expert_intermediate_size=moe.shared, qkv_bias=model.bias.of("q"))
        if getattr(model.decoder.attention, "kind", None) == "local":
            raise UsageError("a sliding window (attncomp's Qwen MoE export writes full attention)")
        return values
    return config_of


QWEN2_MOE = _llama_like(
    "qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
    spec={"bias.attention": False, "bias.q": Key("qkv_bias"), "bias.k": Key("qkv_bias"), "bias.v": Key("qkv_bias"),
          "bias.ffn": False, "d_ff": Key("moe_intermediate_size"),
          "decoder.ffn": _moe_text("num_experts", "shared_expert_intermediate_size", "norm_topk_prob")},
    renames=_PRE_NORMS + _IN_MEMORY + _QWEN_EXPERTS, transforms=(FUSE_EXPERTS,),
    refuse=(MIXED_LAYERS, *_SPARSE_EVERYWHERE),
    folded=_QWEN_FOLDED, config_of=_qwen_moe_config(True))

QWEN3_MOE = _llama_like(
    "qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
    spec={"bias.ffn": False, "d_ff": Key("moe_intermediate_size"), "decoder.qk_norm": "head",
          "decoder.ffn": _moe_text("num_experts", renormalize="norm_topk_prob")},
    renames=_PRE_NORMS + _IN_MEMORY + _QWEN_EXPERTS, transforms=(FUSE_EXPERTS,),
    refuse=(MIXED_LAYERS, *_SPARSE_EVERYWHERE),
    folded=_QWEN_FOLDED, config_of=_qwen_moe_config(False))

# OLMoE: OLMo 2's q/k norms over the whole projections (qk_norm = projection) in pre-norm layers; its clip_qkv
# clamps after those norms, where attncomp's clips before them: refused unless unset (the released models')
OLMOE = _llama_like(
    "olmoe", "OlmoeConfig", "OlmoeForCausalLM",
    spec={"bias.ffn": False, "decoder.qk_norm": "projection",
          "decoder.ffn": _moe_text("num_experts", renormalize="norm_topk_prob")},
    renames=_PRE_NORMS + _IN_MEMORY + _QWEN_EXPERTS[:3], transforms=(FUSE_EXPERTS,),
    refuse=(MIXED_LAYERS, (lambda c: c.clip_qkv is not None,
                           lambda c: f"clip_qkv = {c.clip_qkv} (OLMoE clamps after its q/k norms, attncomp before)")),
    folded=_QWEN_FOLDED, config_of=_qwen_moe_config(False, ("mlp_bias", "head_dim")))
