"""One set of choices everywhere: any activation a stack takes is taken by the dense head; any norm (kind, gain,
bias, offset, eps) can be written wherever a norm is: a stack's, a sub-layer's (`attention(normalization = ...)`,
a norm step's), the q/k norms' (`qk_normalization`) and the head's. Each is checked against its equation with the
compiled module's own weights, fused against explicit and cached decoding against forward in float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES
from attncomp.errors import SpecError
from attncomp.ir import nodes

MASKED = """model m {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  positions = learned(max_len = 16)  tie = encoder
  decoder = none  dropout { residual = 0.0  embedding = 0.0 }
  head = dense(%s)
  encoder { layers = 2  %s }
}
train { mlm { rate = 0.15 } }
"""
LM = """model m {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  positions = rope  tie = decoder  encoder = none
  dropout { residual = 0.0  embedding = 0.0 }
  decoder { layers = 2  norm = pre  %s }
}
"""
ACT = {"relu": torch.relu, "gelu": F.gelu, "silu": F.silu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
       "relu2": lambda x: torch.relu(x) ** 2, "swiglu": F.silu, "geglu": F.gelu,
       "geglu_tanh": lambda x: F.gelu(x, approximate="tanh")}


def _load(text: str):
    return ir.load_flat(text, "<everywhere>", [])


def _randomised(module) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))


@pytest.mark.parametrize("activation", list(nodes.Activation.__args__))
def test_the_dense_head_takes_every_activation_a_stack_takes(activation):
    """Norm(act(W x)), or for a gated one Norm(act(W_gate x) * (W x)); its norm with its own eps."""
    assert set(ACT) == set(nodes.Activation.__args__)
    spec = _load(MASKED % (f"activation = {activation}, normalization = rmsnorm(eps = 0.001)", ""))
    torch.manual_seed(0)
    head = attncomp.compile(spec, passes=(), dtype=torch.float64).head
    _randomised(head)
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        inner = ACT[activation](head.gate(x)) * head.dense(x) if activation in nodes.GATED else \
            ACT[activation](head.dense(x))
        want = inner * torch.rsqrt(inner.pow(2).mean(-1, keepdim=True) + 0.001) * head.norm.weight
        assert (head(x) - want).abs().max() < 1e-12
    assert hasattr(head, "gate") == (activation in nodes.GATED)


def test_a_sublayers_own_norm_and_a_norm_steps_own_norm_are_their_equations():
    """(Sinusoidal positions: a layer reads x alone.) x + Attn(RMSNorm_eps(x)) with the attention's rmsnorm(eps = 1e-3), x + FFN(LN(x)) with the stack's
    LayerNorm, then a norm step of its own kind: LayerNorm without a bias, eps 0.01."""
    spec = _load((LM % "block = sequential(attention(normalization = rmsnorm(eps = 0.001)), ffn, "
                       "norm(normalization = layernorm(bias = false, eps = 0.01)))").replace("rope", "sinusoidal"))
    torch.manual_seed(0)
    layer = attncomp.compile(spec, passes=(), dtype=torch.float64).eval().decoder.layers[0]
    _randomised(layer)
    assert isinstance(layer.self_attn_norm, torch.nn.RMSNorm) and layer.self_attn_norm.eps == 0.001
    assert isinstance(layer.ffn_norm, torch.nn.LayerNorm) and layer.ffn_norm.eps == 1e-5
    assert layer.stream_norm.bias is None and layer.stream_norm.eps == 0.01
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    seen = []
    layer.self_attn.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    with torch.no_grad():
        got = layer(x)
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 0.001) * layer.self_attn_norm.weight
        assert (seen[0] - h).abs().max() < 1e-12
        h = x + layer.self_attn(h)
        h = h + layer.ffn(F.layer_norm(h, (32,), layer.ffn_norm.weight, layer.ffn_norm.bias, 1e-5))
        want = F.layer_norm(h, (32,), layer.stream_norm.weight, None, 0.01)
        assert (got - want).abs().max() < 1e-12


@pytest.mark.parametrize("kind", ["layernorm(eps = 0.001)", "rmsnorm(offset = 1, eps = 0.01)",
                                  "layernorm(bias = false)"])
def test_qk_norms_of_any_kind_fused_equal_explicit_and_decode_step_equals_forward(kind):
    spec = _load(LM % f"qk_norm = head  qk_normalization = {kind}")
    torch.manual_seed(0)
    fused = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    _randomised(fused)
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(fused.state_dict())
    q_norm = fused.decoder.layers[0].self_attn.q_norm
    eps = 0.01 if "0.01" in kind else 0.001 if "0.001" in kind else 1e-5
    assert getattr(q_norm, "eps", eps) == eps and ("layernorm" in kind) == isinstance(q_norm, torch.nn.LayerNorm)
    tokens = torch.randint(5, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = explicit(tokens)
        assert (fused(tokens) - expected).abs().max() < 1e-12
        cache = fused.init_cache(tokens)
        for t in range(tokens.shape[1]):
            logits, cache = fused.decode_step(tokens[:, t : t + 1], cache)
            assert (logits - expected[:, t]).abs().max() < 1e-12, t
        plain = attncomp.compile(_load(LM % "qk_norm = head"), passes=(), dtype=torch.float64).eval()
        plain.load_state_dict({k: v for k, v in fused.state_dict().items() if "bias" not in k or "norm" not in k},
                              strict=False)
        assert (plain(tokens) - expected).abs().max() > 1e-6  # the kind matters


@pytest.mark.parametrize("text, needle, line", [
    (LM % "block = sequential(attention(normalization = layernorm(gain = false)), ffn)",
     "layernorm(gain = false) has no bias either", 4),
    (LM % "qk_norm = head  qk_normalization = rmsnorm(gain = false, offset = 1)", "needs gain = true", 4),
    (LM % "block = sequential(attention, ffn, norm(normalization = rmsnorm(eps = 0)))", "eps must be greater than 0",
     4),
    (MASKED % ("activation = tanh", ""), 'unknown activation "tanh"', 4),
])
def test_bad_norms_and_activations_are_located_errors(text, needle, line):
    with pytest.raises(SpecError) as err:
        _load(text)
    assert needle in str(err.value), str(err.value)
    assert err.value.span is not None and err.value.span.line == line


def test_the_new_keys_keep_every_old_spec_and_round_trip():
    spec = _load(MASKED % ("activation = swiglu, normalization = layernorm(eps = 1e-06)",
                           "qk_norm = head  qk_normalization = rmsnorm(eps = 0.001)"))
    text = ir.to_text(spec)
    assert "head = dense(activation = swiglu, bias = true, normalization = layernorm(eps = 1e-06))" in text
    assert "qk_normalization = rmsnorm(eps = 0.001)" in text
    assert _load(text) == spec
    plain = ir.to_text(_load(MASKED % ("", "")))
    assert "(eps =" not in plain and ", eps =" not in plain.split("train {")[0] and "qk_normalization" not in plain
