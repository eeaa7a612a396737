"""Tiny random transformers models of every imported family, with distinctive config values (kv heads
below heads, rotary bases other than 10000, eps other than the default, biases where optional), saved
with save_pretrained, and the float64 comparison helpers the family tests share: `compiled` (attncomp's
model of a spec in float64, fused or not, its weights loaded) and `assert_same_logits` (its logits and
every cached decode step against transformers')."""

from __future__ import annotations

import json

import torch

import attncomp
from attncomp.interop import hf_import
from attncomp.passes import DEFAULT_PASSES
from tests.helpers import assert_decode_steps

transformers = __import__("pytest").importorskip("transformers")

VOCAB = 64
LM = dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
          num_hidden_layers=2, max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None)
ENCODER = dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, intermediate_size=48, num_hidden_layers=2,
               max_position_embeddings=40, layer_norm_eps=1e-7, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0)
SEQ2SEQ = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
               decoder_attention_heads=2, encoder_ffn_dim=48, decoder_ffn_dim=40, max_position_embeddings=40,
               dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1, bos_token_id=0,
               eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None)


def _rope(theta: float, fraction: float | None = None) -> dict:
    params = {"rope_type": "default", "rope_theta": theta}
    if fraction is not None:
        params["partial_rotary_factor"] = fraction
    return {"rope_parameters": params}


# family -> (config class, model class, config values)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(LM, **_rope(500000.0), rms_norm_eps=1e-5, attention_bias=True, mlp_bias=True,
                   tie_word_embeddings=True)),
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(LM, **_rope(1e6), rms_norm_eps=1e-5, head_dim=16, sliding_window=4, tie_word_embeddings=False)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(LM, **_rope(1e6), rms_norm_eps=1e-5, tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM",
              dict(LM, **_rope(20000.0), rms_norm_eps=1e-5, head_dim=16, attention_bias=True,
                   tie_word_embeddings=False)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM",
              dict(LM, **_rope(50000.0), rms_norm_eps=1e-5, attention_bias=False, tie_word_embeddings=False)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM",
                 dict(LM, **_rope(30000.0, 0.5), layer_norm_eps=1e-6, use_qkv_bias=True,
                      tie_word_embeddings=False)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM",  # fused qkv_proj (kv heads below heads) and gate_up_proj
             dict(LM, **_rope(30000.0), rms_norm_eps=1e-6, resid_pdrop=0.0, tie_word_embeddings=False)),
    "olmo": ("OlmoConfig", "OlmoForCausalLM",
             dict(LM, **_rope(40000.0), attention_bias=True, tie_word_embeddings=False, clip_qkv=None)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM",  # gelu_pytorch_tanh
              dict(LM, **_rope(10000.0 * 3), rms_norm_eps=1e-5, head_dim=16, tie_word_embeddings=True)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",  # tests/interop/test_hf_gemma2.py compares it (eager attention)
               dict(LM, **_rope(10000.0), rms_norm_eps=1e-5, head_dim=16, query_pre_attn_scalar=24,
                    attn_logit_softcapping=1.5, final_logit_softcapping=2.5, sliding_window=4)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(vocab_size=VOCAB, n_embd=32, n_head=4, n_layer=2, n_positions=40, n_inner=48,
                  activation_function="gelu_new", layer_norm_epsilon=1e-6, resid_pdrop=0.0, embd_pdrop=0.0,
                  attn_pdrop=0.0, bos_token_id=None, eos_token_id=None)),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM",
                 dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, intermediate_size=48,
                      num_hidden_layers=2, max_position_embeddings=64, **_rope(5000.0, 0.5), layer_norm_eps=1e-6,
                      use_parallel_residual=True, hidden_act="gelu", tie_word_embeddings=False,
                      bos_token_id=None, eos_token_id=None)),
    "opt": ("OPTConfig", "OPTForCausalLM",  # pre-norm, tied; positions from row 2 of a table 2 rows longer
            dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, ffn_dim=48, num_hidden_layers=2,
                 max_position_embeddings=40, activation_function="relu", dropout=0.0, attention_dropout=0.0)),
    "phi": ("PhiConfig", "PhiForCausalLM",
            dict(LM, **_rope(20000.0, 0.5), layer_norm_eps=1e-6, hidden_act="gelu_new", resid_pdrop=0.0,
                 embd_pdrop=0.0, tie_word_embeddings=False)),
    "gptj": ("GPTJConfig", "GPTJForCausalLM",  # rotates pairs of neighbouring dims: 6 of a head's 8
             dict(vocab_size=VOCAB, n_embd=32, n_head=4, n_layer=2, n_inner=48, rotary_dim=6, n_positions=64,
                  activation_function="gelu_new", layer_norm_epsilon=1e-6, resid_pdrop=0.0, embd_pdrop=0.0,
                  attn_pdrop=0.0, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)),
    "falcon": ("FalconConfig", "FalconForCausalLM",
               dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                    max_position_embeddings=64, **_rope(7000.0), layer_norm_epsilon=1e-6, bias=True,
                    ffn_hidden_size=48, hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=True,
                    bos_token_id=None, eos_token_id=None)),  # multi-query, one norm, parallel
    "bloom": ("BloomConfig", "BloomForCausalLM",  # 6 heads: ALiBi slopes of a head count not a power of two
              dict(vocab_size=VOCAB, hidden_size=48, n_head=6, n_layer=2, layer_norm_epsilon=1e-6, hidden_dropout=0.0,
                   attention_dropout=0.0, tie_word_embeddings=True, bos_token_id=None, eos_token_id=None)),
    "bert": ("BertConfig", "BertForMaskedLM", dict(ENCODER, type_vocab_size=2, pad_token_id=0)),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", dict(ENCODER, type_vocab_size=1, pad_token_id=1)),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaForMaskedLM", dict(ENCODER, type_vocab_size=1, pad_token_id=1,
                                                                       hidden_act="relu")),
    "electra": ("ElectraConfig", "ElectraForMaskedLM",
                dict(ENCODER, embedding_size=32, type_vocab_size=2, pad_token_id=0)),
    "albert": ("AlbertConfig", "AlbertForMaskedLM",  # 4 layers in 2 groups (share = groups(2)), embedding_size 16
               dict(ENCODER, embedding_size=16, num_hidden_layers=4, num_hidden_groups=2, hidden_act="gelu_new",
                    type_vocab_size=2, pad_token_id=0, bos_token_id=2, eos_token_id=3)),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM",
                   dict(vocab_size=VOCAB, dim=32, n_heads=4, hidden_dim=48, n_layers=2, max_position_embeddings=40,
                        dropout=0.0, attention_dropout=0.0, pad_token_id=0)),
    "bart": ("BartConfig", "BartForConditionalGeneration",
             dict(SEQ2SEQ, scale_embedding=True, activation_function="gelu")),
    "m2m_100": ("M2M100Config", "M2M100ForConditionalGeneration",
                dict(SEQ2SEQ, scale_embedding=True, activation_function="relu")),
    "mbart": ("MBartConfig", "MBartForConditionalGeneration",
              dict(SEQ2SEQ, scale_embedding=False, activation_function="relu")),
    # compared in their own files: test_hf_t5.py, test_hf_modernbert.py, test_hf_gemma3.py
    "t5": ("T5Config", "T5ForConditionalGeneration",
           dict(vocab_size=VOCAB, d_model=32, d_kv=12, d_ff=48, num_layers=2, num_decoder_layers=1, num_heads=4,
                relative_attention_num_buckets=8, relative_attention_max_distance=20, dropout_rate=0.0,
                feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
    "modernbert": ("ModernBertConfig", "ModernBertForMaskedLM",
                   dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, intermediate_size=40,
                        num_hidden_layers=4, local_attention=4, max_position_embeddings=64, pad_token_id=3,
                        bos_token_id=None, eos_token_id=None, cls_token_id=None, sep_token_id=None)),
    # mixtures of experts (tests/interop/test_hf_experts.py): 4 experts, top 2 (Qwen: a shared expert; not renormalised)
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(LM, **_rope(1e6), rms_norm_eps=1e-5, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                     router_aux_loss_coef=0.02, tie_word_embeddings=False)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(LM, **_rope(1e6), rms_norm_eps=1e-5, moe_intermediate_size=24, num_experts=4,
                       num_experts_per_tok=2, shared_expert_intermediate_size=40, norm_topk_prob=False,
                       tie_word_embeddings=False)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(LM, **_rope(20000.0), rms_norm_eps=1e-5, head_dim=16, moe_intermediate_size=24, num_experts=4,
                       num_experts_per_tok=3, norm_topk_prob=True, attention_bias=True, tie_word_embeddings=False)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(LM, **_rope(30000.0), rms_norm_eps=1e-5, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True,
                   tie_word_embeddings=False)),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                    dict(LM, head_dim=16, num_hidden_layers=3, sliding_window=4, query_pre_attn_scalar=24,
                         layer_types=["sliding_attention", "sliding_attention", "full_attention"])),
}


def model(family: str, dtype=torch.float64, **changes):
    """A random model of the family, every weight (norms and biases too) away from its initial value."""
    config_class, model_class, values = FAMILIES[family]
    config = getattr(transformers, config_class)(**{**values, **changes})
    # eager attention's softmax may run in float32; Gemma 2 has no other (test_hf_gemma2.py keeps it in float64),
    # nor has BLOOM (its own attention: bloom_float64)
    config._attn_implementation = "eager" if family in ("gemma2", "bloom") else "sdpa"
    if family in ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe"):  # the loop over experts (grouped_mm takes no float64)
        config._experts_implementation = "eager"
    torch.manual_seed(0)
    hf = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if "norm" in name.lower() or name.endswith("bias") else 0.1))
        if hasattr(hf, "final_logits_bias"):
            hf.final_logits_bias.normal_(0.0, 0.5)
    return hf.to(dtype)


def tokenizer_json(vocab_size: int = VOCAB) -> str:
    """A word-level tokenizer.json of `vocab_size` tokens (attncomp import stores it)."""
    tokenizers = __import__("pytest").importorskip("tokenizers")
    vocab = {f"w{i}": i for i in range(vocab_size)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w1"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return tok.to_str()


def save(hf, directory, **kwargs):
    """save_pretrained and a tokenizer.json, as a downloaded model directory has them."""
    hf.save_pretrained(directory, **kwargs)
    (directory / "tokenizer.json").write_text(tokenizer_json(hf.config.vocab_size), encoding="utf-8")
    return directory


def float64_exact(monkeypatch, hf) -> None:
    """HF computes RMSNorm, OLMo's LayerNorm and the rotary angles in float32 on purpose, whatever the
    input's dtype, and keeps Gemma's embedding scale as a float32 constant; keep them in float64 (HF's
    formulas, without the casts) so the comparison measures the architecture."""

    def rms_norm(self, x):
        eps = getattr(self, "variance_epsilon", getattr(self, "eps", None))
        gain = 1 + self.weight if type(self).__name__.startswith("Gemma") else self.weight
        return gain * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    for module in hf.modules():
        name = type(module).__name__
        if name == "M2M100SinusoidalPositionalEmbedding":  # fairseq's table, made in float32: in float64
            module.weights = fairseq_sinusoids(*module.weights.shape, module.padding_idx)
        if name.endswith("RMSNorm"):
            monkeypatch.setattr(type(module), "forward", rms_norm)
        elif name == "GPTJRotaryEmbedding":  # its own table (sin, cos), not HF's default rotary
            monkeypatch.setattr(type(module), "forward", gptj_rotary_float64)
        elif name.endswith("RotaryEmbedding"):
            monkeypatch.setattr(type(module), "forward", rotary_float64)
        elif name.endswith("TopKRouter"):  # the router's softmax in float32 (Mixtral's .float()): in float64
            monkeypatch.setattr(type(module), "forward", router_float64)
        elif name == "OlmoLayerNorm":
            monkeypatch.setattr(type(module), "forward", layer_norm_float64)
        elif isinstance(getattr(module, "embed_scale", None), torch.Tensor):  # Gemma's sqrt(d), a float32 constant
            module.embed_scale = torch.tensor(module.embedding_dim ** 0.5, dtype=torch.float64)


def router_float64(self, hidden_states):
    """transformers' MixtralTopKRouter / Qwen2MoeTopKRouter forward, its softmax in the input's dtype."""
    logits = torch.nn.functional.linear(hidden_states.reshape(-1, self.hidden_dim), self.weight)
    weights, chosen = torch.topk(torch.softmax(logits, dim=-1), self.top_k, dim=-1)
    if getattr(self, "norm_topk_prob", True):  # Mixtral's always
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return logits, weights, chosen


class _SoftmaxInDtype:
    """torch.nn.functional, but softmax in its input's dtype (BLOOM asks for float32 whatever the input's)."""

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)

    @staticmethod
    def softmax(x, dim=None, dtype=None):
        return torch.softmax(x, dim)


def bloom_float64(monkeypatch) -> None:
    """transformers' BLOOM attention takes its softmax in float32 on purpose, whatever the input's dtype: keep it
    in float64. And bloom_gelu writes sqrt(2/pi) as 0.79788456 (GELU's tanh approximation with a constant off by
    1e-10 relative, about 3e-10 on these logits): compute it with the exact constant, as the spec's gelu_tanh
    does, so the comparison measures the architecture (test_hf_bloom.py bounds what the constant changes)."""
    from transformers.models.bloom import modeling_bloom

    monkeypatch.setattr(modeling_bloom, "F", _SoftmaxInDtype())
    monkeypatch.setattr(modeling_bloom, "bloom_gelu_forward",
                        lambda x: torch.nn.functional.gelu(x, approximate="tanh"))


def eager_attention_float64(module, query, key, value, attention_mask, dropout=0.0, scaling=None, softcap=None,
                            **kwargs):
    """transformers' eager attention of Gemma 2 and Gemma 3 (scale, soft-cap where one is passed, mask,
    softmax) without the float32 upcast of its softmax, so the comparison measures the architecture."""
    from transformers.models.gemma2.modeling_gemma2 import repeat_kv

    key, value = repeat_kv(key, module.num_key_value_groups), repeat_kv(value, module.num_key_value_groups)
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if softcap is not None:
        weights = torch.tanh(weights / softcap) * softcap
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = torch.softmax(weights, dim=-1)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def layer_norm_float64(self, x):
    """OLMo's LayerNorm (no gain, no bias) as HF writes it, without its float32 cast."""
    return torch.nn.functional.layer_norm(x, self.normalized_shape, None, None, eps=1e-5)


def rotary_float64(self, x, position_ids):
    """A RotaryEmbedding's forward (HF's default rotary angles, halves layout) computed in float64."""
    dim = self.inv_freq.shape[0] * 2
    base = self.config.rope_parameters["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    emb = position_ids[..., None].to(torch.float64) * inv_freq
    emb = torch.cat((emb, emb), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def gptj_rotary_float64(self, x, position_ids):
    """GPT-J's RotaryEmbedding forward (sin, cos of its table over pos_embd_dim dims, base 10000) in float64."""
    dim = self.pos_embd_dim
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = position_ids[..., None].to(torch.float64) * inv_freq
    return angles.sin().to(x.dtype), angles.cos().to(x.dtype)


def fairseq_sinusoids(rows: int, dim: int, padding_idx: int) -> torch.Tensor:
    """fairseq's get_embedding (sines, then cosines, frequencies 10000^(-i/(dim/2 - 1))) in float64."""
    import math

    half = dim // 2
    inv_freq = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    angles = torch.arange(rows, dtype=torch.float64).unsqueeze(1) * inv_freq.unsqueeze(0)
    table = torch.cat((angles.sin(), angles.cos()), dim=1)
    table[padding_idx] = 0
    return table


def llama_like_state(hf, layer_names: dict) -> dict:
    """attncomp's names for the tensors of a LLaMA-like causal LM: model.layers.<i>.<module>.<leaf> as
    decoder.layers.<i>.<layer_names[module]>.<leaf>, the embedding, final norm and lm_head by LLaMA's names
    (any other tensor but the rotary tables is a KeyError)."""
    state = {}
    for key, value in hf.state_dict().items():
        if key.startswith("model.layers."):
            index, rest = key.removeprefix("model.layers.").split(".", 1)
            module, _, leaf = rest.rpartition(".")
            state[f"decoder.layers.{index}.{layer_names[module]}.{leaf}"] = value
        elif "rotary" not in key:
            state[{"model.embed_tokens.weight": "tgt_embed.weight", "model.norm.weight": "decoder.norm.weight",
                   "lm_head.weight": "output.weight"}[key]] = value
    return state


def imported(family: str, tmp_path, monkeypatch, **changes):
    """A tiny random `family` model (config `changes`) made float64-exact, saved and imported: (the
    transformers model, the import, attncomp's compiled model of it with the weights loaded)."""
    hf = model(family, **changes)
    float64_exact(monkeypatch, hf)
    result = hf_import.import_directory(save(hf, tmp_path / family))
    return hf, result, compiled(result.spec, result.weights)


def compiled(spec, weights: dict, passes=DEFAULT_PASSES) -> torch.nn.Module:
    """attncomp's model of `spec` in float64, with the fused passes or without them (`passes=()`), in eval
    mode, `weights` loaded strictly (none missing, none left over)."""
    model = attncomp.compile(spec, passes=passes, dtype=torch.float64).eval()
    model.load_state_dict(weights, strict=True)
    return model


def assert_same_logits(ours, expected: torch.Tensor, *inputs: torch.Tensor, rtol: float | None = None,
                       atol: float | None = None, where: torch.Tensor | None = None, unfused: bool = False,
                       steps: bool = True):
    """attncomp's logits for `inputs` (the tokens, or the source and the target) equal transformers'
    `expected`: the largest difference (over the positions where `where` is true, if given) below `atol`, or
    below `rtol` times the largest |expected| (over the same positions). With `unfused`, the same for the
    spec compiled without the fused passes, with the same weights. With `steps`, every decode_step too,
    from init_cache (of the encoded source where there are two inputs) fed the target one token at a
    time, against `expected` at that position, within the same bound. Returns the last cache (or None)."""
    assert (rtol is None) != (atol is None), "one tolerance: relative or absolute"
    assert where is None or not steps, "decode steps compare every position"
    with torch.no_grad():
        kept = expected if where is None else expected[where]
        bound = atol if rtol is None else rtol * kept.abs().max()
        models = [ours, compiled(ours.spec, ours.state_dict(), passes=())] if unfused else [ours]
        for model in models:
            difference = model(*inputs) - expected
            assert (difference if where is None else difference[where]).abs().max() < bound
        if not steps:
            return None
        src, tgt = inputs[0], inputs[-1]
        cache = ours.init_cache(src, ours.encode(src)) if len(inputs) == 2 else ours.init_cache(tgt)
        return assert_decode_steps(ours, cache, tgt, expected, bound)


def assert_export_gives_every_tensor_back(hf, tmp_path, nearly: tuple[str, ...] = ()) -> None:
    """`attncomp import` of `hf` saved with save_pretrained (tmp_path/source), then `attncomp export --format
    hf` of the checkpoint (tmp_path/exported): every tensor back under its name, in its dtype, bit for bit;
    those whose names end with one of `nearly` to within 1e-15."""
    from attncomp.cli.main import run

    safetensors_torch = __import__("pytest").importorskip("safetensors.torch")
    source = save(hf, tmp_path / "source")
    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 0
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "hf",
                "-o", str(tmp_path / "exported")]) == 0
    original = safetensors_torch.load_file(source / "model.safetensors")
    exported = safetensors_torch.load_file(tmp_path / "exported" / "model.safetensors")
    assert set(original) == set(exported)
    for name, tensor in original.items():
        assert exported[name].dtype == tensor.dtype, name
        if nearly and name.endswith(nearly):
            assert (exported[name] - tensor).abs().max() < 1e-15, name
        else:
            assert torch.equal(exported[name], tensor), name


def read_json(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
