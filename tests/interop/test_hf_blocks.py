"""Layer structures and block parts as spec choices, equal to Hugging Face's models in float64:

    GPT2LMHeadModel       gelu_tanh (GPT-2's gelu_new), learned positions, Conv1D weights (transposed here)
    GemmaForCausalLM      rmsnorm(offset = 1): x / rms(x) * (1 + w), geglu_tanh, embeddings scaled by sqrt(d)
    PhiForCausalLM        block = parallel (one norm), gelu_tanh, partial rotary, an output bias
    GPTJForCausalLM       block = parallel (one norm), gelu_tanh, partial rotary (GPT-J rotates pairs of
                          neighbouring dims: its q/k rows are permuted here into rotate_half's halves)
    GPTNeoXForCausalLM    block = parallel(norms = 2), partial rotary, fused per-head q/k/v (split here)
    FalconForCausalLM     block = parallel (one norm, multi-query) and the new decoder architecture
                          (parallel(norms = 2), grouped-query)
    OlmoForCausalLM       layernorm(gain = false, bias = false): LayerNorm without parameters; and with
                          clip_qkv set: attention = scaled_dot(clip_qkv = c), q, k, v clamped to [-c, c]

the full forward, unfused and fused, and cached decoding. The specs are written by hand and the weights
renamed here (HF's deliberate float32 steps in its norms and rotary angles are patched to float64)."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
from transformers.models.falcon import modeling_falcon  # noqa: E402
from transformers.models.gemma import modeling_gemma  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox  # noqa: E402
from transformers.models.gptj import modeling_gptj  # noqa: E402
from transformers.models.olmo import modeling_olmo  # noqa: E402
from transformers.models.phi import modeling_phi  # noqa: E402

VOCAB, D, HEADS, LAYERS = 64, 32, 4, 2
NO_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)


def _spec(stack: str, d_ff: int, model: str = "", kv_heads: int | None = None, d_k: int = 8) -> str:
    heads = f"heads = {HEADS}  d_k = {d_k}  d_v = {d_k}" + (f"  kv_heads = {kv_heads}" if kv_heads else "")
    return f"""model hf {{
  d_model = {D}  {heads}  d_ff = {d_ff}  vocab = shared({VOCAB})
  {model}
  encoder = none
  decoder {{ layers = {LAYERS}  {stack} }}
  dropout {{ residual = 0.0  embedding = 0.0 }}
}}
decode {{ max_len = 60 }}
"""


def _fused(w: torch.Tensor, groups: int, per_group: tuple[int, ...], head_dim: int) -> list[torch.Tensor]:
    """Rows of a fused q/k/v projection laid out as `groups` blocks of `per_group` heads (q, k, v
    counts) -> the q, k and v rows, each in head order."""
    blocks = w.reshape(groups, sum(per_group), head_dim, *w.shape[1:])
    out, start = [], 0
    for n in per_group:
        part = blocks[:, start:start + n]
        out.append(part.reshape(groups * n * head_dim, *w.shape[1:]))
        start += n
    return out


def _layers(state: dict, prefix: str, rename: dict, split: dict | None = None) -> dict:
    """HF layer tensors under `prefix` renamed by `rename` (HF module -> ours); `split` names fused
    q/k/v modules with their splitting function."""
    out = {}
    for key, value in state.items():
        if not key.startswith(prefix):
            continue
        index, rest = key.removeprefix(prefix).split(".", 1)
        module, _, leaf = rest.rpartition(".")
        if split and module in split:
            for name, part in zip(("q_proj", "k_proj", "v_proj"), split[module](value)):
                out[f"decoder.layers.{index}.self_attn.{name}.{leaf}"] = part
        else:
            out[f"decoder.layers.{index}.{rename[module]}.{leaf}"] = value
    return out


def _gpt2(state):
    conv = {k: (v.t() if k.endswith(".weight") and v.dim() == 2 and ".h." in k else v) for k, v in state.items()}
    rename = {"ln_1": "self_attn_norm", "ln_2": "ffn_norm", "attn.c_proj": "self_attn.o_proj",
              "mlp.c_fc": "ffn.fc1", "mlp.c_proj": "ffn.fc2"}
    out = _layers(conv, "transformer.h.", rename, {"attn.c_attn": lambda w: w.chunk(3, dim=0)})
    return {**out, "tgt_embed.weight": state["transformer.wte.weight"],
            "decoder.pos.weight": state["transformer.wpe.weight"],
            "decoder.norm.weight": state["transformer.ln_f.weight"],
            "decoder.norm.bias": state["transformer.ln_f.bias"]}


LLAMA_LIKE = {"self_attn.q_proj": "self_attn.q_proj", "self_attn.k_proj": "self_attn.k_proj",
              "self_attn.v_proj": "self_attn.v_proj", "self_attn.o_proj": "self_attn.o_proj",
              "mlp.gate_proj": "ffn.gate", "mlp.up_proj": "ffn.fc1", "mlp.down_proj": "ffn.fc2",
              "input_layernorm": "self_attn_norm", "post_attention_layernorm": "ffn_norm"}


def _llama_like(state):
    out = _layers(state, "model.layers.", LLAMA_LIKE)
    extra = {"model.embed_tokens.weight": "tgt_embed.weight", "model.norm.weight": "decoder.norm.weight",
             "lm_head.weight": "output.weight"}
    return {**out, **{ours: state[hf] for hf, ours in extra.items() if hf in state}}


def _phi(state):
    rename = {"self_attn.q_proj": "self_attn.q_proj", "self_attn.k_proj": "self_attn.k_proj",
              "self_attn.v_proj": "self_attn.v_proj", "self_attn.dense": "self_attn.o_proj", "mlp.fc1": "ffn.fc1",
              "mlp.fc2": "ffn.fc2", "input_layernorm": "norm"}
    out = _layers(state, "model.layers.", rename)
    return {**out, "tgt_embed.weight": state["model.embed_tokens.weight"],
            "decoder.norm.weight": state["model.final_layernorm.weight"],
            "decoder.norm.bias": state["model.final_layernorm.bias"], "output.weight": state["lm_head.weight"],
            "output_bias": state["lm_head.bias"]}


GPTJ_ROTARY = 4  # of a head's 8 dims


def _neighbours_to_halves(w: torch.Tensor) -> torch.Tensor:
    """q/k rows of each head reordered so that GPT-J's rotated pairs (2i, 2i + 1) of its first GPTJ_ROTARY
    dims become (i, i + GPTJ_ROTARY / 2), rotate_half's pairs, at the same frequency; q . k is unchanged."""
    head = D // HEADS
    order = list(range(0, GPTJ_ROTARY, 2)) + list(range(1, GPTJ_ROTARY, 2)) + list(range(GPTJ_ROTARY, head))
    return w.reshape(HEADS, head, -1)[:, order].reshape(w.shape)


def _gptj(state):
    rename = {"ln_1": "norm", "attn.q_proj": "self_attn.q_proj", "attn.k_proj": "self_attn.k_proj",
              "attn.v_proj": "self_attn.v_proj", "attn.out_proj": "self_attn.o_proj", "mlp.fc_in": "ffn.fc1",
              "mlp.fc_out": "ffn.fc2"}
    out = _layers(state, "transformer.h.", rename)
    out = {k: _neighbours_to_halves(v) if k.endswith(("q_proj.weight", "k_proj.weight")) else v for k, v in out.items()}
    return {**out, "tgt_embed.weight": state["transformer.wte.weight"],
            "decoder.norm.weight": state["transformer.ln_f.weight"],
            "decoder.norm.bias": state["transformer.ln_f.bias"],
            "output.weight": state["lm_head.weight"], "output_bias": state["lm_head.bias"]}


def _gptj_rotary_float64(self, x, position_ids):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, self.pos_embd_dim, 2, dtype=torch.float64) / self.pos_embd_dim))
    angles = position_ids[..., None].to(torch.float64) * inv_freq
    return angles.sin().to(x.dtype), angles.cos().to(x.dtype)


def _neox(state):
    rename = {"input_layernorm": "self_attn_norm", "post_attention_layernorm": "ffn_norm",
              "attention.dense": "self_attn.o_proj", "mlp.dense_h_to_4h": "ffn.fc1", "mlp.dense_4h_to_h": "ffn.fc2"}
    split = {"attention.query_key_value": lambda w: _fused(w, HEADS, (1, 1, 1), D // HEADS)}
    out = _layers(state, "gpt_neox.layers.", rename, split)
    return {**out, "tgt_embed.weight": state["gpt_neox.embed_in.weight"],
            "decoder.norm.weight": state["gpt_neox.final_layer_norm.weight"],
            "decoder.norm.bias": state["gpt_neox.final_layer_norm.bias"], "output.weight": state["lm_head.weight"]}


def _falcon(kv_heads: int):
    def mapping(state):
        rename = {"input_layernorm": "norm", "ln_attn": "self_attn_norm", "ln_mlp": "ffn_norm",
                  "self_attention.dense": "self_attn.o_proj", "mlp.dense_h_to_4h": "ffn.fc1",
                  "mlp.dense_4h_to_h": "ffn.fc2"}
        group = HEADS // kv_heads
        split = {"self_attention.query_key_value": lambda w: _fused(w, kv_heads, (group, 1, 1), D // HEADS)}
        out = _layers(state, "transformer.h.", rename, split)
        return {**out, "tgt_embed.weight": state["transformer.word_embeddings.weight"],
                "decoder.norm.weight": state["transformer.ln_f.weight"],
                "decoder.norm.bias": state["transformer.ln_f.bias"]}
    return mapping


def _rms_norm_float64(self, x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


# family: (config class, model class, config, spec, weight mapping, float64 patches)
FAMILIES = {
    "gpt2": (transformers.GPT2Config, transformers.GPT2LMHeadModel,
             dict(n_embd=D, n_layer=LAYERS, n_head=HEADS, n_positions=64, n_inner=48, layer_norm_epsilon=1e-4),
             _spec("norm = pre  final_norm = true  activation = gelu_tanh", 48,
                   "tie = decoder  positions = learned(max_len = 64)  scale_embeddings = false  norm_eps = 1e-4"),
             _gpt2, []),
    "gemma": (transformers.GemmaConfig, transformers.GemmaForCausalLM,
              dict(hidden_size=D, num_attention_heads=HEADS, num_key_value_heads=2, head_dim=16, intermediate_size=48,
                   num_hidden_layers=LAYERS, rms_norm_eps=1e-6, rope_theta=500.0, max_position_embeddings=64),
              _spec("norm = pre  final_norm = true  activation = geglu_tanh  normalization = rmsnorm(offset = 1)", 48,
                    "tie = decoder  positions = rope(base = 500.0)  bias = false  norm_eps = 1e-6", kv_heads=2, d_k=16),
              _llama_like, [(modeling_gemma.GemmaRMSNorm, _rms_norm_float64),
                            (modeling_gemma.GemmaRotaryEmbedding, hf_models.rotary_float64)]),
    "phi": (transformers.PhiConfig, transformers.PhiForCausalLM,
            dict(hidden_size=D, num_attention_heads=HEADS, intermediate_size=48, num_hidden_layers=LAYERS,
                 partial_rotary_factor=0.5, layer_norm_eps=1e-4, max_position_embeddings=64),
            _spec("norm = pre  final_norm = true  activation = gelu_tanh  block = parallel", 48,
                  "tie = none  positions = rope(fraction = 0.5)  scale_embeddings = false  norm_eps = 1e-4  "
                  "bias { output = true }"),
            _phi, [(modeling_phi.PhiRotaryEmbedding, hf_models.rotary_float64)]),
    "gptj": (transformers.GPTJConfig, transformers.GPTJForCausalLM,
             dict(n_embd=D, n_head=HEADS, n_inner=48, n_layer=LAYERS, rotary_dim=GPTJ_ROTARY, n_positions=64,
                  tie_word_embeddings=False),
             _spec("norm = pre  final_norm = true  activation = gelu_tanh  block = parallel", 48,
                   "tie = none  positions = rope(fraction = 0.5)  scale_embeddings = false  "
                   "bias { attention = false  ffn = true  output = true }"),
             _gptj, [(modeling_gptj.GPTJRotaryEmbedding, _gptj_rotary_float64)]),
    "gpt_neox": (transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM,
                 dict(hidden_size=D, num_attention_heads=HEADS, intermediate_size=48, num_hidden_layers=LAYERS,
                      rotary_pct=0.25, rotary_emb_base=1000, max_position_embeddings=64),
                 _spec("norm = pre  final_norm = true  activation = gelu  block = parallel(norms = 2)", 48,
                       "tie = none  positions = rope(base = 1000.0, fraction = 0.25)  scale_embeddings = false"),
                 _neox, [(modeling_gpt_neox.GPTNeoXRotaryEmbedding, hf_models.rotary_float64)]),
    "falcon": (transformers.FalconConfig, transformers.FalconForCausalLM,
               dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS, max_position_embeddings=64),
               _spec("norm = pre  final_norm = true  activation = gelu  block = parallel", 4 * D,
                     "tie = decoder  positions = rope  scale_embeddings = false  bias = false", kv_heads=1),
               _falcon(1), [(modeling_falcon.FalconRotaryEmbedding, hf_models.rotary_float64)]),
    "falcon_new": (transformers.FalconConfig, transformers.FalconForCausalLM,
                   dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS, max_position_embeddings=64,
                        new_decoder_architecture=True, num_kv_heads=2),
                   _spec("norm = pre  final_norm = true  activation = gelu  block = parallel(norms = 2)", 4 * D,
                         "tie = decoder  positions = rope  scale_embeddings = false  bias = false", kv_heads=2),
                   _falcon(2), [(modeling_falcon.FalconRotaryEmbedding, hf_models.rotary_float64)]),
    "olmo": (transformers.OlmoConfig, transformers.OlmoForCausalLM,
             dict(hidden_size=D, num_attention_heads=HEADS, intermediate_size=48, num_hidden_layers=LAYERS,
                  max_position_embeddings=64),
             _spec("norm = pre  final_norm = true  activation = swiglu  "
                   "normalization = layernorm(gain = false, bias = false)", 48,
                   "tie = none  positions = rope  scale_embeddings = false  bias = false"),
             _llama_like, [(modeling_olmo.OlmoLayerNorm, hf_models.layer_norm_float64),
                           (modeling_olmo.OlmoRotaryEmbedding, hf_models.rotary_float64)]),
    "olmo_clip_qkv": (transformers.OlmoConfig, transformers.OlmoForCausalLM,
                      dict(hidden_size=D, num_attention_heads=HEADS, intermediate_size=48, num_hidden_layers=LAYERS,
                           max_position_embeddings=64, clip_qkv=0.5),
                      _spec("norm = pre  final_norm = true  activation = swiglu  "
                            "normalization = layernorm(gain = false, bias = false)  "
                            "attention = scaled_dot(clip_qkv = 0.5)", 48,
                            "tie = none  positions = rope  scale_embeddings = false  bias = false"),
                      _llama_like, [(modeling_olmo.OlmoLayerNorm, hf_models.layer_norm_float64),
                                    (modeling_olmo.OlmoRotaryEmbedding, hf_models.rotary_float64)]),
}


pytestmark = pytest.mark.usefixtures("one_thread")


def _hf(family: str, monkeypatch):
    config_class, model_class, config, _, _, patches = FAMILIES[family]
    for cls, forward in patches:
        monkeypatch.setattr(cls, "forward", forward)
    config = config_class(vocab_size=VOCAB, **config, **NO_IDS)
    config._attn_implementation = "sdpa"  # eager softmaxes in float32 in several families
    torch.manual_seed(0)
    hf = model_class(config).double().eval()
    with torch.no_grad():  # every weight random and away from its initial value, so each one counts
        for p in hf.parameters():
            p.copy_((1.0 if p.dim() == 1 and family != "gemma" else 0.0) + 0.3 * torch.randn(p.shape, dtype=p.dtype))
        for module in hf.modules():  # Gemma's sqrt(d) was made a float32 tensor before .double()
            if hasattr(module, "scalar_embed_scale"):
                module.embed_scale.fill_(module.scalar_embed_scale)
    return hf


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_and_cached_decoding_equal_hf_in_float64(family, monkeypatch):
    hf = _hf(family, monkeypatch)
    spec = ir.load_flat(FAMILIES[family][3], f"<{family}>")
    state = FAMILIES[family][4](hf.state_dict())
    if spec.model.tie == "decoder" and "output.weight" in state:  # tied: HF lists the one tensor twice
        assert torch.equal(state.pop("output.weight"), state["tgt_embed.weight"])
    ours = hf_models.compiled(spec, state)
    tokens = torch.randint(5, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(tokens).logits
    hf_models.assert_same_logits(ours, expected, tokens, rtol=1e-12, unfused=True)


def test_olmo_clip_qkv_binds_in_the_comparison(monkeypatch):
    """The clip of the test is small enough to change transformers' logits, so the equality above checks it."""
    hf = _hf("olmo_clip_qkv", monkeypatch)
    tokens = torch.randint(5, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        clipped = hf(tokens).logits
        hf.config.clip_qkv = None
        assert (hf(tokens).logits - clipped).abs().max() > 1e-3 * clipped.abs().max()
