"""The residual stream, written: a sub-layer's learned gain (LayerScale, ReZero), what its skip carries (alpha x,
DeepNorm's alpha with its beta on the initialisation, the normed input) and norm-only steps.

Each is checked against a layer written here from its paper's equation with the compiled layer's own weights;
explicit == fused, cached decoding == forward and generated == compiled in float64; a few training steps lower the
loss and every new parameter gets a gradient; bad combinations are located errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attncomp
from attncomp import ir
from attncomp.errors import SpecError
from attncomp.ir import nodes
from tests.codegen.test_generated import load_module
from tests.helpers import assert_fused_explicit_decoding_generated

MODEL = """model m {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  positions = sinusoidal
  dropout { residual = 0.0  embedding = 0.0 }
  %s
}
"""
LM = "tie = decoder  encoder = none\n  decoder { layers = 3  %s }"
SEQ2SEQ = "encoder { layers = %d  %s }\n  decoder { layers = %d  %s }"


def _load(text: str, *overrides: str):
    return ir.load_flat(text, "<stream>", list(overrides))


def _attention(layer, x: torch.Tensor, causal: bool, first: list | None = None) -> torch.Tensor:
    """Multi-head attention, Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, from the layer's projections; with
    `first` (value residual learning, ResFormer), V replaced by l_1 V + l_2 V_1, V_1 the first layer's V (first[0];
    the first layer sets it, and mixes its own)."""
    attn = layer.self_attn
    b, t, _ = x.shape
    q, k, v = (p(x).view(b, t, 4, 8).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    if first is not None:
        if not first:
            first.append(v)
        v = attn.value_weights[0] * v + attn.value_weights[1] * first[0]
    scores = q @ k.transpose(-1, -2) / 8 ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, 32))


def _ffn(ffn, x: torch.Tensor) -> torch.Tensor:
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""
    return ffn.fc2(F.relu(ffn.fc1(x)))


def _randomised(layer) -> None:
    with torch.no_grad():
        for p in layer.parameters():  # gains (ReZero's 0, LayerScale's init) and norms away from their start
            p.add_(0.3 * torch.randn_like(p))


def _layer(spec, stack: str = "decoder"):
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    layer = getattr(model, stack).layers[0]
    _randomised(layer)
    return layer


def test_layerscale_rezero_and_a_layer_final_norm_are_their_equations():
    """x + diag(lambda) Attn(LN_1(x)) (CaiT's LayerScale), x + alpha FFN(LN_2(x)) (ReZero), then LN_3(x)."""
    spec = _load(MODEL % (LM % "norm = pre  block = sequential(attention(gain = layerscale(init = 0.01)), "
                                "ffn(gain = rezero), norm)"))
    fresh = attncomp.compile(spec, passes=(), dtype=torch.float64).decoder.layers[0]
    assert fresh.self_attn_gain.shape == (32,)
    assert torch.allclose(fresh.self_attn_gain, torch.full((32,), 0.01, dtype=torch.float64))
    assert fresh.ffn_gain.shape == (1,) and (fresh.ffn_gain == 0).all()  # every layer starts as the identity
    layer = _layer(spec)
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        h = x + layer.self_attn_gain * _attention(layer, layer.self_attn_norm(x), causal=True)
        h = h + layer.ffn_gain * _ffn(layer.ffn, layer.ffn_norm(h))
        want = F.layer_norm(h, (32,), layer.stream_norm.weight, layer.stream_norm.bias)
        assert (layer(x) - want).abs().max() < 1e-12


def _deep(skip: str, shape: str) -> str:
    two = f"block = sequential(attention(skip = {skip}), ffn(skip = {skip}))"
    if shape == "lm":
        return MODEL % (LM % two)
    three = f"block = sequential(attention(skip = {skip}), cross_attention(skip = {skip}), ffn(skip = {skip}))"
    return MODEL % (SEQ2SEQ % (4, two, 2, three))


@pytest.mark.parametrize("shape, stack, expected", [
    ("lm", "decoder", ((2 * 3) ** 0.25, (8 * 3) ** -0.25)),
    ("seq2seq", "encoder", (0.81 * (4 ** 4 * 2) ** (1 / 16), 0.87 * (4 ** 4 * 2) ** (-1 / 16))),
    ("seq2seq", "decoder", ((3 * 2) ** 0.25, (12 * 2) ** -0.25)),
])
def test_deepnorm_is_post_norm_of_alpha_x_plus_f_and_beta_scales_the_initialisation(shape, stack, expected):
    """DeepNet (Wang et al. 2022): x_{l+1} = LN(alpha x_l + G(x_l)); W^V, W^O, W_1, W_2 drawn times beta (W^Q and
    W^K not); an encoder-decoder of N = 4 encoder and M = 2 decoder layers, or a decoder of L = 3 alone."""
    alpha, beta = expected
    counts = (None, 3) if shape == "lm" else (4, 2)
    assert nodes.DeepNorm.constants(*counts, stack == "decoder") == pytest.approx(expected, rel=1e-15)
    spec = _load(_deep("deepnorm", shape))
    torch.manual_seed(0)
    a = getattr(attncomp.compile(spec, passes=(), dtype=torch.float64), stack).layers[0]
    torch.manual_seed(0)  # the same draws with a constant skip: only beta differs
    b = getattr(attncomp.compile(_load(_deep("1.5", shape)), passes=(), dtype=torch.float64), stack).layers[0]
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        factor = beta if name in ("v_proj", "o_proj") else 1.0
        assert torch.allclose(getattr(a.self_attn, name).weight, factor * getattr(b.self_attn, name).weight,
                              rtol=1e-6)  # drawn in float32
    for name in ("fc1", "fc2"):
        assert torch.allclose(getattr(a.ffn, name).weight, beta * getattr(b.ffn, name).weight, rtol=1e-6)
    if stack == "decoder" and shape == "seq2seq":
        assert torch.allclose(a.cross_attn.v_proj.weight, beta * b.cross_attn.v_proj.weight, rtol=1e-6)
        return  # its equation, with the memory, is checked through decoding and fusion below
    layer = _layer(spec, stack)
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        h = layer.self_attn_norm(alpha * x + _attention(layer, x, causal=stack == "decoder"))
        want = layer.ffn_norm(alpha * h + _ffn(layer.ffn, h))
        got = layer(x) if stack == "decoder" else layer(x, torch.zeros(2, 1, 1, 5, dtype=torch.bool))
        assert (got - want).abs().max() < 1e-12


def test_a_constant_skip_and_the_normed_skip_are_their_equations():
    """skip = 0.5: Norm(0.5 x + F(x)) (post) or 0.5 x + F(Norm(x)) (pre); skip = normed: Norm(x) + F(Norm(x))
    (BLOOM's apply_residual_connection_post_layernorm)."""
    spec = _load(MODEL % (LM % "norm = pre  block = sequential(attention(skip = 0.5), ffn(skip = normed))"))
    layer = _layer(spec)
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        h = 0.5 * x + _attention(layer, layer.self_attn_norm(x), causal=True)
        normed = layer.ffn_norm(h)
        assert (layer(x) - (normed + _ffn(layer.ffn, normed))).abs().max() < 1e-12


CASES = {
    "lm": MODEL % (LM % "unet = true  reinject = true  value_residual = true  norm = pre  "
                        "block = sequential(attention(gain = layerscale(init = 0.1)), "
                        "ffn(gain = rezero, skip = normed), norm)  "
                        "layer last { start = 2  block = sequential(attention(skip = 0.5), ffn) }"),
    "seq2seq": MODEL % (SEQ2SEQ % (2, "block = sequential(attention(skip = deepnorm), ffn(skip = deepnorm))  "
                                      "unet = true  value_residual = true", 2,
                                   "norm = pre  block = sequential(attention(gain = rezero), cross_attention(skip = "
                                   "normed), ffn(gain = layerscale(init = 0.5)), norm)")),
}


@pytest.mark.parametrize("name", CASES)
def test_explicit_equals_fused_decoding_equals_forward_generated_equals_compiled(name, tmp_path):
    assert_fused_explicit_decoding_generated(_load(CASES[name]), tmp_path, "stream", move=True)  # ReZero's 0 moved


@pytest.mark.parametrize("name", CASES)
def test_training_lowers_the_loss_and_reaches_every_gain(name):
    spec = _load(CASES[name])
    torch.manual_seed(0)
    model = attncomp.compile(spec)
    tokens = torch.randint(5, 64, (4, 9), generator=torch.Generator().manual_seed(2))
    args = (tokens[:, :-1],) if spec.model.encoder is None else (tokens, tokens[:, :-1])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(8):
        loss = F.cross_entropy(model(*args).flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        gains = {n: p.grad for n, p in model.named_parameters()
                 if n.endswith(("_gain", "unet_weights", "reinject_x", "reinject_x0", "value_weights"))}
        assert gains and all(g is not None and g.abs().sum() > 0 for g in gains.values()), gains
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("keys, needle", [
    ("norm = pre  block = sequential(attention(skip = deepnorm), ffn)", "skip = deepnorm is Norm(alpha x + F(x))"),
    ("block = sequential(attention(skip = normed), ffn)", "skip = normed carries the normed input"),
    ("norm = pre  block = parallel(attention(skip = 0.5), ffn)", "a parallel block adds both outputs to one skip"),
    ("block = sequential(attention, ffn, norm(gain = rezero))", 'norm() has no argument "gain"'),
    ("block = sequential(attention, ffn(gain = layerscale(init = 0)))", "init must be greater than 0"),
    ("block = sequential(attention, ffn(skip = sideways))", 'unknown skip "sideways"'),
    ("norm = pre  layer last { start = 2  block = sequential(attention(skip = deepnorm), ffn) }",
     "skip = deepnorm is Norm(alpha x + F(x))"),
])
def test_bad_combinations_are_located_errors(keys, needle):
    with pytest.raises(SpecError) as err:
        _load(MODEL % (LM % keys))
    assert needle in str(err.value), str(err.value)
    assert err.value.span is not None and err.value.span.line == 5


def test_a_layer_written_with_the_stream_keys_round_trips_and_keeps_old_hashes():
    spec = _load(CASES["lm"])
    text = ir.to_text(spec)
    assert "block = sequential(attention(gain = layerscale(init = 0.1)), ffn(gain = rezero, skip = normed), norm)" \
        in text
    assert _load(text) == spec and ir.spec_hash(_load(text)) == ir.spec_hash(spec)
    plain = _load(MODEL % (LM % "norm = pre"))
    assert "gain" not in ir.to_text(plain) and "skip" not in ir.to_text(plain)


# --- connections across layers ---------------------------------------------------------------------------


def test_unet_skips_and_the_reinjected_input_are_their_equations():
    """With L = 5 layers and outputs y_0..y_4 of the embedded input x_0: layer i reads
    h_i = a_i (h + w_j y_j) + b_i x_0, where h is the previous layer's output, j = L-1-i, the U-net term only for
    j < L/2 (layers 3 and 4 read y_1 and y_0), and a_i, b_i the re-injection weights of layers i > 0."""
    spec = _load(MODEL % (SEQ2SEQ % (5, "unet = true  reinject = true", 2, "")))
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    encoder = model.encoder
    assert encoder.unet_weights.tolist() == [1.0, 1.0] and encoder.reinject_x.tolist() == [1.0] * 4
    assert encoder.reinject_x0.tolist() == [0.0] * 4  # from the start, the plain stack
    with torch.no_grad():
        for p in (encoder.unet_weights, encoder.reinject_x, encoder.reinject_x0):
            p.add_(0.5 * torch.randn_like(p))
    tokens = torch.randint(5, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    padding = tokens.eq(0)[:, None, None, :]
    with torch.no_grad():
        seen = []  # the stack's input x_0, as layer 0 reads it (the U-net and re-injection leave it alone)
        encoder.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0]))
        expected = encoder(model.embed(tokens), padding)
        x = x0 = seen[0]
        outputs = []
        for i, layer in enumerate(encoder.layers):
            j = 4 - i
            if j < 2:
                x = x + encoder.unet_weights[j] * outputs[j]
            if i > 0:
                x = encoder.reinject_x[i - 1] * x + encoder.reinject_x0[i - 1] * x0
            x = layer(x, padding)
            outputs.append(x)
        assert (expected - x).abs().max() < 1e-12


def test_value_residual_learning_is_its_equation():
    """ResFormer (Zhou et al. 2024): layer n attends with V'_n = l_1 V_n + l_2 V_1 (l learned, from 0.5), V_1 the
    first layer's values; each layer post-norm, x = LN(x + Attn(x)), x = LN(x + FFN(x)); L = 3."""
    spec = _load(MODEL % (LM % "value_residual = true"))
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    decoder = model.decoder
    assert decoder.layers[1].self_attn.value_weights.tolist() == [0.5, 0.5]
    _randomised(decoder)
    tokens = torch.randint(5, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        seen = []
        decoder.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0]))
        expected = decoder(model.tgt_embed(tokens))
        x, first = seen[0], []
        for layer in decoder.layers:
            x = layer.self_attn_norm(x + _attention(layer, x, causal=True, first=first))
            x = layer.ffn_norm(x + _ffn(layer.ffn, x))
        assert (expected - x).abs().max() < 1e-12


@pytest.mark.parametrize("keys", ["unet = true", "reinject = true", "value_residual = true"])
def test_a_connection_across_one_layer_is_a_located_error(keys):
    with pytest.raises(SpecError) as err:
        _load(MODEL % (LM % keys), "model.decoder.layers=1")
    assert "connects layers across the decoder, which has one layer" in str(err.value)
    assert err.value.span is not None and err.value.span.line == 5


@pytest.mark.parametrize("name", ["stream", "deepnet"])
def test_the_examples_generated_modules_equal_the_compiled_model_fused_and_explicit(name):
    """specs/examples/stream.attn and deepnet.attn (compositions no published model uses) against their checked-in
    generated modules, imported as they are: forward and cached decoding; fused against explicit."""
    from tests.conftest import ROOT
    from tests.helpers import assert_generated_equals_compiled, batch

    spec = ir.load(ROOT / f"specs/examples/{name}.attn")
    torch.manual_seed(0)
    compiled = attncomp.compile(spec, dtype=torch.float64).eval()
    _randomised(compiled)
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(compiled.state_dict())
    module = load_module(ROOT / "generated" / "examples" / f"{name}.py", f"generated_{name}")
    generated = module.Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    src, tgt = batch(spec, b=2, s=9, t=7)
    assert_generated_equals_compiled(generated, compiled, spec, src, tgt)
    args = (tgt,) if spec.model.encoder is None else (src, tgt)
    with torch.no_grad():
        assert (explicit(*args) - compiled(*args)).abs().max() < 1e-12
