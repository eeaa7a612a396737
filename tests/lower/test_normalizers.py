"""How attention turns scores into weights, `normalizer = softmax | sigmoid(bias = B) | sigmoid(length = n) |
differential | differential(lambda_init = x)` (a part of every dot-product kind: nodes.DotProduct).

Sigmoid attention (Ramapuram et al. 2024) and differential attention (Ye et al. 2024) are each checked against an
attention written here from the paper's equations with the compiled layer's own weights; in float64: fused ==
explicit, decode_step == forward, generated == compiled; the kernel each attention gets; a few training steps lower
the loss and every new parameter (the lambdas, the head norm) gets a gradient; bad combinations are located
errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES
from attncomp.errors import SpecError
from attncomp.ir import nodes
from attncomp.passes.fuse_attention import count_flex, count_fused
from attncomp.report import attention_report
from tests.codegen.test_generated import rendered_module
from tests.helpers import (assert_decode_steps, assert_fused_explicit_decoding_generated, assert_generated_equals_compiled,
                           batch, first_cache, pair)

MODEL = """model normalised {{
  vocab = shared(61)  d_model = 16  heads = 2  d_ff = 32
  {positions}
  dropout {{ residual = 0  attention = 0 }}
  {model}
}}
"""
VARIANTS = {
    # every attention explicit: an encoder's sigmoid with a number, the decoder's and cross-attention's -log n
    "sigmoid": ("", "encoder { layers = 1  attention = scaled_dot(normalizer = sigmoid(bias = -2)) }\n"
                    "decoder { layers = 2  attention = scaled_dot(normalizer = sigmoid(length = 16))\n"
                    "          cross_attention = scaled_dot(normalizer = sigmoid(length = 16)) }"),
    # SDPA twice per attention; grouped k/v heads in the decoder, lambda_init by depth and fixed
    "differential": ("", "encoder { layers = 2  attention = scaled_dot(normalizer = differential) }\n"
                         "decoder { layers = 2  kv_heads = 1  attention = scaled_dot(normalizer = differential)\n"
                         "          cross_attention = scaled_dot(normalizer = differential(lambda_init = 0.5)) }"),
    # FlexAttention twice per attention (a soft-capped window, sinks); rotary positions on each half
    "flex": ("positions = rope  d_k = 8", "decoder { layers = 2  attention = local(window = 3, softcap = 20, "
             "normalizer = differential)\n"
             "          layer full { every = 2  start = 1  attention = scaled_dot(sinks = true, "
             "normalizer = differential) } }"),
    # ALiBi's bias beside the sigmoid, a window
    "sigmoid_local": ("positions = alibi", "decoder { layers = 2  attention = local(window = 3, "
                                           "normalizer = sigmoid(length = 8)) }"),
}
NEW = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2", "head_norm.weight")


def spec_of(name: str) -> nodes.Spec:
    positions, model = VARIANTS[name]
    return ir.load_flat(MODEL.format(positions=positions, model=model), f"{name}.attn")


def _run(model, spec, src, tgt):
    return model(src, tgt) if spec.model.encoder is not None else model(tgt)


def _moved(model, seed: int = 1) -> None:
    """Every parameter a little away from its initialisation (the head norms' gains from 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))


# --- the papers' equations ----------------------------------------------------------------------------------------


def _heads(proj, x, h):
    b, t, _ = x.shape
    return proj(x).view(b, t, h, -1).transpose(1, 2)


def _causal(t: int) -> torch.Tensor:
    return torch.ones(t, t, dtype=torch.bool).triu(1)


def sigmoid_attention(attn, x: torch.Tensor, b: float) -> torch.Tensor:
    """Sigmoid attention (Ramapuram et al. 2024, eq. 1): SigmoidAttn(X) = sigma(Q K^T / sqrt(d_qk) + b) V, a
    causal decoder's hidden keys weighing 0; heads concatenated and projected by W^O."""
    q, k, v = (_heads(p, x, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + b
    w = torch.sigmoid(s).masked_fill(_causal(x.shape[1]), 0.0)
    return attn.o_proj((w @ v).transpose(1, 2).flatten(2))


def differential_attention(attn, x: torch.Tensor, lambda_init: float, eps: float) -> torch.Tensor:
    """Differential attention (Ye et al. 2024, eqs. 1-3): per head [Q1; Q2] = X W^Q, [K1; K2] = X W^K (halves of d),
    V = X W^V; DiffAttn(X) = (softmax(Q1 K1^T / sqrt(d)) - lambda softmax(Q2 K2^T / sqrt(d))) V with
    lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init; head_i = (1 - lambda_init) RMSNorm(DiffAttn_i);
    MultiHead = Concat(heads) W^O. Causal (a decoder's)."""
    q, k, v = (_heads(p, x, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    d = q.shape[-1] // 2
    maps = []
    for half in (slice(0, d), slice(d, 2 * d)):
        s = q[..., half] @ k[..., half].transpose(-1, -2) / math.sqrt(d)
        maps.append(torch.softmax(s.masked_fill(_causal(x.shape[1]), float("-inf")), -1))
    lam = torch.exp(attn.lambda_q1 @ attn.lambda_k1) - torch.exp(attn.lambda_q2 @ attn.lambda_k2) + lambda_init
    heads = (maps[0] - lam * maps[1]) @ v
    heads = heads / torch.sqrt(heads.pow(2).mean(-1, keepdim=True) + eps) * attn.head_norm.weight
    return attn.o_proj(((1 - lambda_init) * heads).transpose(1, 2).flatten(2))


def lm(attention: str, positions: str = "") -> str:
    """A decoder-only model of three layers with this self-attention (written on line 6)."""
    return MODEL.format(positions=positions, model="tie = decoder  encoder = none\n"
                                                   f"  decoder {{ layers = 3  attention = {attention} }}")


@pytest.mark.parametrize("written, b", [("sigmoid(bias = -1.5)", -1.5), ("sigmoid(length = 64)", -math.log(64))])
def test_sigmoid_attention_is_the_papers_equation(written, b):
    spec = ir.load_flat(lm(f"scaled_dot(normalizer = {written})"), "lm.attn")
    model = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    _moved(model)
    x = torch.randn(2, 6, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        for layer in model.decoder.layers:
            assert (layer.self_attn(x) - sigmoid_attention(layer.self_attn, x, b)).abs().max() < 1e-12


@pytest.mark.parametrize("written", ["differential", "differential(lambda_init = 0.3)"])
def test_differential_attention_is_the_papers_equation_lambda_init_by_depth(written):
    spec = ir.load_flat(lm(f"scaled_dot(normalizer = {written})"), "lm.attn")
    model = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    _moved(model)
    seen = []  # each layer's attention as the model runs it: its input x, the lambda_init its loop gave, its output
    for layer in model.decoder.layers:
        layer.self_attn.register_forward_hook(lambda attn, args, out: seen.append((attn, args, out)))
    tokens = torch.randint(5, 61, (2, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model(tokens)
        assert len(seen) == 3
        for depth, (attn, args, out) in enumerate(seen, start=1):
            lambda_init = 0.3 if "0.3" in written else 0.8 - 0.6 * math.exp(-0.3 * (depth - 1))
            assert attn.lambda_q1.shape == (4,) and attn.head_norm.weight.shape == (8,)
            assert args[1:] == (() if "0.3" in written else (lambda_init,)), depth  # by depth: 0.2, 0.356, 0.471
            expected = differential_attention(attn, args[0], lambda_init, spec.model.norm_eps)
            assert (out - expected).abs().max() < 1e-12, depth
    # layers that differ only by their depth's lambda_init are one class (the loop hands each its own)
    assert len({type(layer) for layer in model.decoder.layers}) == 1


# --- kernels, decoding, generated code ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(VARIANTS))
def test_fused_equals_explicit_and_decode_step_equals_forward(name):
    spec = spec_of(name)
    plain, fused = pair(spec)
    _moved(plain)
    fused.load_state_dict(plain.state_dict())
    plain.eval(), fused.eval()
    src, tgt = batch(spec, b=2, s=7, t=8)
    tgt[:] = tgt[:1]
    graph = fused.flat("forward").graph
    calls = {"sigmoid": (0, 0), "sigmoid_local": (0, 0), "differential": (12, 0), "flex": (0, 4)}[name]
    assert (count_fused(graph), count_flex(graph)) == calls
    with torch.no_grad():
        full = _run(plain, spec, src, tgt)
        assert (_run(fused, spec, src, tgt) - full).abs().max() < 1e-9
        assert_decode_steps(fused, first_cache(fused, src, tgt, spec.model.encoder is not None), tgt, full, 1e-9)


@pytest.mark.parametrize("name", ["sigmoid", "differential", "flex"])
def test_generated_equals_compiled(name, tmp_path):
    spec = spec_of(name)
    compiled = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    _moved(compiled)
    generated = rendered_module(spec, tmp_path, f"normalised_{name}", model=compiled).Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    src, tgt = batch(spec, b=2, s=7, t=8)
    assert_generated_equals_compiled(generated, compiled, spec, src, tgt)


def test_the_build_report_names_the_kernel_and_why():
    rows = {name: attention_report(attncomp.compile(spec_of(name), device="meta")) for name in VARIANTS}
    assert all(r.kernel.startswith("explicit: sigmoid weights") and r.kind.endswith("(sigmoid)")
               for r in rows["sigmoid"])
    assert all(r.kernel.startswith("sdpa: one of a differential attention's two softmax maps") and r.calls == 2
               for r in rows["differential"])
    assert all(r.kernel.startswith("flex: one of a differential") for r in rows["flex"])


# --- training ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sigmoid", "differential", "flex"])
def test_training_lowers_the_loss_and_reaches_every_new_parameter(name):
    spec = spec_of(name)
    torch.manual_seed(0)
    model = attncomp.compile(spec, dtype=torch.float64)
    src, tgt = batch(spec, b=4, s=7, t=9, seed=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(8):
        logits = _run(model, spec, src, tgt[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        new = {n: p.grad for n, p in model.named_parameters() if n.endswith(NEW)}
        assert bool(new) == (name != "sigmoid")
        assert all(g is not None and g.abs().sum() > 0 for g in new.values()), new
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


# --- the language -------------------------------------------------------------------------------------------------


def test_canonical_text_writes_it_only_where_set_and_old_hashes_stay():
    for name in VARIANTS:
        spec = spec_of(name)
        assert ir.load_flat(ir.to_text(spec), "again.attn") == spec
    text = ir.to_text(spec_of("sigmoid"))
    assert "scaled_dot(normalizer = sigmoid(bias = -2.0))" in text and "sigmoid(length = 16)" in text
    assert "cross_attention = scaled_dot(normalizer = differential(lambda_init = 0.5))" in \
        ir.to_text(spec_of("differential"))
    plain = ir.load_flat(lm("scaled_dot"), "p.attn")
    softmax = ir.load_flat(lm("scaled_dot(normalizer = softmax)"), "s.attn")
    assert "normalizer" not in ir.to_text(softmax) and ir.spec_hash(plain) == ir.spec_hash(softmax)


@pytest.mark.parametrize("attention, needle", [
    ("scaled_dot(normalizer = sigmoid)", "sigmoid takes exactly one of bias = B"),
    ("scaled_dot(normalizer = sigmoid(bias = 1, length = 8))", "sigmoid takes exactly one of bias = B"),
    ("scaled_dot(normalizer = sigmoid(length = 0))", "length"),
    ("scaled_dot(sinks = true, normalizer = sigmoid(bias = -1))", "sigmoid attention takes no sinks"),
    ("scaled_dot(normalizer = sigmoid(bias = -1)) d_k = 7", None),  # an odd d_k is fine for sigmoid
    ("scaled_dot(normalizer = differential) d_k = 7", "d_k = 7 in the decoder is odd"),
    ("scaled_dot(normalizer = differential(lambda = 0.5))", 'no argument "lambda"'),
    ("scaled_dot(normalizer = differential(lambda_init = 1))", "lambda_init must be less than 1"),
    ("additive(normalizer = differential)", "normalizer"),
    ("scaled_dot(normalizer = softmax(bias = 1))", "softmax"),
])
def test_bad_combinations_are_located_errors(attention, needle):
    text = lm(attention)
    if needle is None:
        ir.load_flat(text, "lm.attn")
        return
    with pytest.raises(SpecError) as err:
        ir.load_flat(text, "lm.attn")
    assert needle in str(err.value), str(err.value)
    assert err.value.span is not None and err.value.span.line == 6


@pytest.mark.parametrize("positions, attention, needle", [
    ("positions = relative(max_distance = 4)", "scaled_dot(normalizer = differential)",
     "differential attention takes no relative positions"),
    ("positions = rope  d_k = 12  d_v = 4", "latent(kv_rank = 6, rope_dims = 4, normalizer = differential)",
     "differential attention cannot be latent"),
    ("positions = rope", "scaled_dot(normalizer = differential)\n  layer last { start = 2  attention = scaled_dot }",
     "cannot change whether the decoder's attention is differential with rope"),
    ("positions = rope  d_k = 6", "scaled_dot(normalizer = differential)", "fraction * d_k / 2 = 1.0 * 3 = 3"),
])
def test_combinations_across_keys_are_located_errors(positions, attention, needle):
    with pytest.raises(SpecError) as err:
        ir.load_flat(lm(attention, positions), "lm.attn")
    assert needle in str(err.value), str(err.value)
    assert err.value.span is not None and err.value.span.line in (3, 6, 7)


@pytest.mark.parametrize("normalizer", ["sigmoid(length = 64)", "differential"])
def test_export_as_hf_refuses_a_normaliser_no_family_has(normalizer):
    """`export --format hf` matches a spec to a family's resolved spec: a normaliser other than softmax is a
    difference, named in the one line (CTranslate2's refusal: tests/interop/test_ctranslate2.py)."""
    pytest.importorskip("transformers")
    from attncomp.errors import UsageError
    from attncomp.interop import hf_export
    from tests.conftest import ROOT

    spec = ir.load(ROOT / "specs/examples/llama.attn",
                   [f"model.decoder.attention=scaled_dot(normalizer = {normalizer})"])
    with pytest.raises(UsageError, match=r"decoder\.attention\.normalizer\.kind = (sigmoid|differential) "
                                         r"\(softmax in the family\)"):
        hf_export.matching(spec.model)


def test_a_layer_kind_without_differential_attention_runs_in_the_loop_of_depth_following_ones(tmp_path):
    """The stack's loop hands every layer its depth's lambda_init where any layer's differential attention follows the
    depth; a softmax layer kind takes it and reads nothing of it: fused == explicit == generated, decoding == forward."""
    spec = ir.load_flat(lm("scaled_dot(normalizer = differential)\n  layer plain { every = 2  start = 1  "
                           "attention = scaled_dot }"), "lm.attn")
    model = assert_fused_explicit_decoding_generated(spec, tmp_path, "mixed")
    kinds = [type(layer).__name__ for layer in model.decoder.layers]
    assert kinds == ["DecoderLayer", "PlainDecoderLayer", "DecoderLayer"]
    assert not hasattr(model.decoder.layers[1].self_attn, "lambda_q1")
