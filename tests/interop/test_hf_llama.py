"""specs/examples/llama.attn's architecture equals Hugging Face's LlamaForCausalLM: pre-norm RMSNorm,
SwiGLU, rotary positions (rotate_half pairs), grouped-query attention, no biases, untied output.

Weights are copied HF -> attncomp (the LLaMA entry of attncomp.interop.families); the full forward and cached decoding
are compared with HF's, in float64 with HF's deliberate float32 steps kept in float64 (see
`float64_hf`), and in float32 with HF unpatched."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES
from attncomp.interop import families, mapping
from attncomp.lower import ops
from tests.conftest import ROOT

transformers = pytest.importorskip("transformers")
from transformers.models.llama import modeling_llama  # noqa: E402

CONFIG = dict(vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
              num_hidden_layers=2, rope_theta=10000.0, rms_norm_eps=1e-6, attention_bias=False,
              tie_word_embeddings=False, max_position_embeddings=64, bos_token_id=None, eos_token_id=None,
              pad_token_id=None)


pytestmark = pytest.mark.usefixtures("one_thread")


def _hf(dtype):
    config = transformers.LlamaConfig(**CONFIG)
    config._attn_implementation = "sdpa"  # eager attention's softmax runs in float32 even for float64 inputs
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(dtype).eval()


def _ours(hf, dtype, passes):
    spec = ir.load_flat(mapping.spec_text(families.LLAMA, hf.config), "<llama config>")
    model = attncomp.compile(spec, passes=passes, dtype=dtype).eval()
    model.load_state_dict(mapping.convert(families.LLAMA, hf.config, hf.state_dict()))
    return model


@pytest.fixture
def float64_hf(monkeypatch):
    """HF computes RMSNorm and the rotary angles in float32 on purpose (for bf16 training), whatever the
    input's dtype; keep them in the input's dtype so the float64 comparison measures the architecture,
    not that rounding. The formulas are HF's own, only without the casts."""

    def rms_norm(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))

    def rotary(self, x, position_ids):
        dim = self.inv_freq.shape[0] * 2
        base = self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        freqs = position_ids[..., None].to(torch.float64) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", rms_norm)
    monkeypatch.setattr(modeling_llama.LlamaRotaryEmbedding, "forward", rotary)
    return _hf(torch.float64)


def _tokens(b: int = 2, t: int = 9) -> torch.Tensor:
    return torch.randint(5, CONFIG["vocab_size"], (b, t), generator=torch.Generator().manual_seed(1))


def test_spec_of_the_config_is_the_shipped_example_at_the_test_size():
    config = transformers.LlamaConfig(**CONFIG)
    spec = ir.load_flat(mapping.spec_text(families.LLAMA, config), "<llama config>").model
    shipped = ir.load(ROOT / "specs/examples/llama.attn").model
    for key in ("normalization", "norm", "final_norm", "activation"):
        assert getattr(spec.decoder, key) == getattr(shipped.decoder, key), key
    assert spec.decoder.kv_heads == 2 and spec.decoder.heads == 4 and spec.decoder.d_ff == 48
    assert (spec.positions, spec.tie, spec.scale_embeddings, spec.bias) == \
        (shipped.positions, shipped.tie, shipped.scale_embeddings, shipped.bias)


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_full_forward_equals_hf_in_float64(float64_hf, fused):
    ours = _ours(float64_hf, torch.float64, DEFAULT_PASSES if fused else ())
    tokens = _tokens()
    with torch.no_grad():
        expected = float64_hf(tokens).logits
        got = ours(tokens)
    assert (got - expected).abs().max() < 1e-9


def test_cached_decoding_equals_hf_generation_in_float64(float64_hf):
    """HF's cached greedy generation (the prompt at once, then token by token with its key/value
    cache) against attncomp's decode_step fed the prompt and then HF's generated tokens one at a time.
    `generate` hands its logits back cast to float32, so they are compared at that rounding; the
    same steps through HF's cache by hand stay in float64 and are compared at 1e-9."""
    ours = _ours(float64_hf, torch.float64, DEFAULT_PASSES)
    prompt = _tokens(t=5)
    with torch.no_grad():
        out = float64_hf.generate(prompt, max_new_tokens=4, do_sample=False, output_logits=True,
                                  return_dict_in_generate=True, use_cache=True)
        step_hf = float64_hf(prompt, use_cache=True)
        by_hand = [step_hf.logits[:, -1]]
        for t in range(prompt.shape[1], out.sequences.shape[1] - 1):
            step_hf = float64_hf(out.sequences[:, t : t + 1], past_key_values=step_hf.past_key_values, use_cache=True)
            by_hand.append(step_hf.logits[:, -1])
        cache, ours_steps = ours.init_cache(prompt), []
        for t in range(out.sequences.shape[1] - 1):
            step, cache = ours.decode_step(out.sequences[:, t : t + 1], cache)
            ours_steps.append(step)
    ours_steps = ours_steps[prompt.shape[1] - 1 :]
    assert len(ours_steps) == len(out.logits) == len(by_hand) == 4
    for i, (got, generated, manual) in enumerate(zip(ours_steps, out.logits, by_hand)):
        assert (got - manual).abs().max() < 1e-9, f"step {i}"
        assert (got - generated.double()).abs().max() < 1e-6, f"step {i}"  # float32 rounding of |logits| < 1
        assert torch.equal(got.argmax(-1), out.sequences[:, prompt.shape[1] + i]), f"step {i}"
    keys = cache.layers[0].self_attn.k
    assert keys.shape == (2, CONFIG["num_key_value_heads"], out.sequences.shape[1] - 1, 8)  # (B, kv_heads, T, d_k)


def test_full_forward_equals_unpatched_hf_in_float32():
    hf = _hf(torch.float32)
    ours = _ours(hf, torch.float32, DEFAULT_PASSES)
    tokens = _tokens()
    with torch.no_grad():
        assert (ours(tokens) - hf(tokens).logits).abs().max() < 1e-4


def _complex_rotary(x: torch.Tensor, dims: int, base: float) -> torch.Tensor:
    """Partial rotary positions written independently: dims i and i + dims/2 of each head as one
    complex number, multiplied by exp(1j * pos * base^(-2i/dims)); the dims past `dims` unchanged.
    (HF's Llama has no partial rotation: its default rope rotates all of head_dim; GPT-NeoX's
    rotary_pct is the same rule, which this writes out.)"""
    half = dims // 2
    pos = torch.arange(x.shape[-2], dtype=torch.float64).unsqueeze(1)
    theta = pos * base ** (-torch.arange(half, dtype=torch.float64) * 2 / dims)
    z = torch.complex(x[..., :half], x[..., half:dims]) * torch.polar(torch.ones_like(theta), theta)
    return torch.cat((z.real, z.imag, x[..., dims:]), dim=-1)


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.25])
def test_rotation_equals_the_complex_form(fraction):
    x = torch.randn(2, 3, 7, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    dims = int(16 * fraction)
    table = ops.rope_table(torch.arange(7), dims, 500.0, torch.float64)
    assert (ops.rotate(x, table) - _complex_rotary(x, dims, 500.0)).abs().max() < 1e-12


def test_partial_rotary_scores_depend_on_relative_positions_only():
    """Rotated q.k depends on the distance between the positions alone: shifting every position by 3
    leaves the scores unchanged, with half of the dims rotated (the other half carry no position)."""
    q = torch.randn(1, 1, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    k = torch.randn(1, 1, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    scores = []
    for start in (0, 3):
        table = ops.rope_table(torch.arange(start, start + 5), 4, 10000.0, torch.float64)
        scores.append(ops.rotate(q, table) @ ops.rotate(k, table).transpose(-2, -1))
    assert (scores[0] - scores[1]).abs().max() < 1e-12
