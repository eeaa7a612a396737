"""The lowering: the paper's architecture (checked against torch.nn.Transformer), incremental
decoding against the full decoder, padding, entry points, and golden graphs."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import attncomp
from attncomp import ir
from attncomp.lower import lower
from attncomp.vocab import BOS, PAD
from tests.conftest import ROOT, SPECS, check_golden, spec_id
from tests.helpers import batch, pair, small

GOLDEN = ROOT / "tests" / "golden" / "fx"


def _paper_pe(length: int, d: int) -> torch.Tensor:
    """The sinusoidal encoding written out independently (the PyTorch tutorial's formula)."""
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe = torch.zeros(length, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def _copy_attention(ref: nn.MultiheadAttention, ours) -> None:
    ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
    ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    ref.out_proj.weight.copy_(ours.o_proj.weight)
    ref.out_proj.bias.copy_(ours.o_proj.bias)


def _copy_layer(ref, ours, cross: bool) -> None:
    _copy_attention(ref.self_attn, ours.self_attn)
    ref.linear1.load_state_dict(ours.ffn.fc1.state_dict())
    ref.linear2.load_state_dict(ours.ffn.fc2.state_dict())
    ref.norm1.load_state_dict(ours.self_attn_norm.state_dict())
    if cross:
        _copy_attention(ref.multihead_attn, ours.cross_attn)
        ref.norm2.load_state_dict(ours.cross_attn_norm.state_dict())
        ref.norm3.load_state_dict(ours.ffn_norm.state_dict())
    else:
        ref.norm2.load_state_dict(ours.ffn_norm.state_dict())


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_base_architecture_equals_torch_nn_transformer(fused):
    """Post-norm, sinusoidal positions, shared embeddings scaled by sqrt(d_model), tied output; attention
    biases on, as nn.MultiheadAttention has them (the paper's projections have none)."""
    spec = ir.load(ROOT / "specs/base.attn", ["model.d_model=32", "model.heads=4", "model.d_ff=64",
                                                  "model.layers=2", "model.vocab=shared(50)",
                                                  "model.dropout.residual=0", "model.bias.attention=true"])
    ours = attncomp.compile(spec, passes=attncomp.compiler.DEFAULT_PASSES if fused else (), dtype=torch.float64)
    d = 32
    ref = nn.Transformer(d_model=d, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=64,
                         dropout=0.0, batch_first=True).double()
    ref.encoder.norm = nn.Identity()  # nn.Transformer adds a final LayerNorm per stack; the paper does not
    ref.decoder.norm = nn.Identity()
    with torch.no_grad():
        for i in range(2):
            _copy_layer(ref.encoder.layers[i], ours.encoder.layers[i], cross=False)
            _copy_layer(ref.decoder.layers[i], ours.decoder.layers[i], cross=True)
    src, tgt = batch(spec.model_copy(), b=3, s=9, t=7)
    embed = lambda x: ours.embed(x) * math.sqrt(d) + _paper_pe(x.shape[1], d)  # noqa: E731
    causal = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], dtype=torch.float64)
    pad = src == PAD
    hidden = ref(embed(src), embed(tgt), tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
    expected = hidden @ ours.embed.weight.T
    got = ours(src, tgt)
    keep = tgt != PAD
    assert (got - expected)[keep].abs().max() < 1e-9


DECODING = ["base.attn", "examples/lm.attn", "examples/local.attn", "big.attn", "table3/E.attn",
            "table3/B1.attn", "examples/llama.attn"]
DECODING_EXTRA = {"additive": ["model.attention=additive", "model.cross_attention=additive"],
                  "local_decoder": ["model.decoder.attention=local(window = 2)"],
                  "pre_norm": ["model.norm=pre", "model.activation=gelu"],
                  "alibi": ["model.positions=alibi", "model.heads=6", "model.d_k=4", "model.d_v=4"],
                  "alibi_lm": ["model.positions=alibi", "model.encoder=none", "model.tie=decoder"],
                  "alibi_local": ["model.positions=alibi", "model.decoder.attention=local(window = 2)"],
                  "relative": ["model.positions=relative(max_distance = 3)"],
                  "relative_values": ["model.positions=relative(max_distance = 3, values = true)"],
                  "relative_lm": ["model.positions=relative(max_distance = 2)", "model.encoder=none",
                                  "model.tie=decoder"],
                  "bert_choices": ["model.embedding_norm=true", "model.head=dense(activation = gelu)",
                                   "model.bias.output=true", "model.bias.q=false", "model.norm_eps=1e-12"],
                  "rope_gqa_rmsnorm": ["model.positions=rope(fraction = 0.5)", "model.kv_heads=2",
                                       "model.normalization=rmsnorm", "model.activation=swiglu"],
                  "mqa_local": ["model.kv_heads=1", "model.decoder.attention=local(window = 2)"],
                  "tie_inputs_scaled_capped_segments": ["model.tie=inputs", "model.logit_scale=0.25",
                                                        "model.logit_softcap=5.0", "model.segments=3"],
                  "factorised_learned": ["model.d_embed=128", "model.positions=learned(max_len = 64)",
                                         "model.embedding_norm=true"],
                  "capped_factorised_lm": ["model.encoder=none", "model.tie=decoder", "model.logit_softcap=2.0",
                                           "model.d_embed=256", "model.positions=rope"]}


def _decoding_cases():
    cases = [(name, ir.load(ROOT / "specs" / name)) for name in DECODING]
    cases += [(name, ir.load(ROOT / "specs/base.attn", o)) for name, o in DECODING_EXTRA.items()]
    return cases


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("name, spec", _decoding_cases(), ids=[c[0] for c in _decoding_cases()])
def test_decode_step_token_by_token_equals_full_decoder(name, spec, fused):
    spec = small(spec)
    model = pair(spec)[1 if fused else 0].eval()
    src, tgt = batch(spec, b=3, s=9, t=7)
    tgt = torch.where(tgt == PAD, torch.full_like(tgt, 7), tgt)  # every position is compared
    tgt[:, 0] = BOS
    if spec.model.encoder is not None:
        full = model(src, tgt)
        cache = model.init_cache(src, model.encode(src))
    else:
        full = model(tgt)
        cache = model.init_cache(tgt)
    for t in range(tgt.shape[1]):
        step, cache = model.decode_step(tgt[:, t : t + 1], cache)
        assert (step - full[:, t]).abs().max() < 1e-9, f"position {t}"


@pytest.mark.parametrize("path", ["base.attn", "examples/local.attn", "examples/lm.attn"])
def test_padding_does_not_change_real_outputs(path):
    spec = small(ir.load(ROOT / "specs" / path))
    model = pair(spec)[1].eval()
    src, tgt = batch(spec, b=1, s=6, t=5)
    padded_src = torch.cat([src, torch.full((1, 4), PAD)], 1)
    padded_tgt = torch.cat([tgt, torch.full((1, 3), PAD)], 1)
    if spec.model.encoder is not None:
        short, long = model(src, tgt), model(padded_src, padded_tgt)
    else:
        short, long = model(tgt), model(padded_tgt)
    assert (short - long[:, : tgt.shape[1]]).abs().max() < 1e-5


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_every_shipped_spec_lowers_with_its_entry_points(path):
    model = attncomp.compile(path, passes=(), device="meta")
    m = model.spec.model
    expected = {"forward", "hidden"} | ({"encode", "hidden_dense"} if m.encoder else set()) | \
        ({"init_cache", "decode_step"} if m.decoder else set())
    assert set(model.entry_points) == expected
    for unit in model.units():
        for method in unit.methods.values():
            method.graph.lint()


def test_encoder_only_model_gives_a_distribution_per_position():
    spec = small(ir.load(ROOT / "specs/base.attn", ["model.decoder=none", "model.tie=none"]))
    model = lower(spec).double().eval()
    src, _ = batch(spec)
    assert model(src).shape == (3, 9, spec.model.tgt_vocab)
    assert set(model.entry_points) == {"forward", "hidden", "hidden_dense", "encode"}


def test_weights_are_deterministic_for_a_seed():
    a = lower(small(ir.load(ROOT / "specs/base.attn"))).state_dict()
    b = lower(small(ir.load(ROOT / "specs/base.attn"))).state_dict()
    c = lower(small(ir.load(ROOT / "specs/base.attn", ["train.seed=2"]))).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["embed.weight"], c["embed.weight"])


@pytest.mark.parametrize("stage", ["fx", "fx-opt"])
def test_golden_graph_of_the_tiny_spec(stage):
    model = attncomp.compile(ROOT / "specs/examples/tiny.attn", passes=() if stage == "fx" else
                             attncomp.compiler.DEFAULT_PASSES, device="meta")
    for unit in model.units():
        for name, method in unit.methods.items():
            check_golden(GOLDEN / stage / f"tiny.{unit.name}.{name}.fx",
                         method.graph.python_code("self").src.lstrip("\n"))


def test_methods_are_made_on_first_use_on_meta_and_all_at_once_with_weights():
    import types

    from attncomp.compiler import compile_spec

    spec = ir.load(ROOT / "specs/examples/tiny.attn")
    meta = compile_spec(spec, device="meta")
    made = lambda model: [n for n in model.entry_points  # noqa: E731
                          if isinstance(type(model).__dict__[n], types.FunctionType)]
    assert made(meta) == [] and set(meta.entry_points) >= {"forward", "encode", "decode_step"}
    meta.forward  # noqa: B018 - looking the method up makes it
    assert made(meta) == ["forward"]
    real = compile_spec(spec)
    assert made(real) == real.entry_points
    for unit in real.units():
        assert all(isinstance(type(real.instance(unit)).__dict__[n], types.FunctionType) for n in unit.methods)
