"""Every pass is checked against the graph before it: float64, dropout off, forward and gradients."""

from __future__ import annotations

import pytest
import torch

from attncomp import ir
from attncomp.ir import nodes
from attncomp.passes import PASSES, count_fused, run_passes
from attncomp.passes.fuse_attention import count_flex
from attncomp.lower import lower
from tests.conftest import ROOT, SPECS, spec_id
from tests.helpers import batch, pair, real_positions, run_forward, small

TOLERANCE = 1e-9

EXTRA = {  # variants no shipped spec covers, as overrides on base
    "pre_gelu_learned": ["model.norm=pre", "model.activation=gelu", "model.positions=learned(max_len = 64)"],
    "no_positions_untied": ["model.positions=none", "model.tie=none", "model.scale_embeddings=false"],
    "additive": ["model.attention=additive", "model.cross_attention=additive"],
    "local_decoder": ["model.decoder.attention=local(window = 3)"],
    "encoder_only": ["model.decoder=none", "model.tie=none"],
    "separate_vocab": ["model.vocab=separate(src = 61, tgt = 67)", "model.tie=decoder"],
    "no_bias": ["model.bias=false"],
    "attention_bias": ["model.bias.attention=true"],  # base has the paper's form: no attention biases
    "alibi": ["model.positions=alibi", "model.heads=6", "model.d_k=4", "model.d_v=4"],  # 6 heads: interpolated slopes
    "alibi_lm": ["model.positions=alibi", "model.encoder=none", "model.tie=decoder"],
    "alibi_local": ["model.positions=alibi", "model.attention=local(window = 3)"],
    "relative": ["model.positions=relative(max_distance = 3)"],
    "relative_values": ["model.positions=relative(max_distance = 3, values = true)"],
    "relative_encoder_only": ["model.positions=relative(max_distance = 2)", "model.decoder=none", "model.tie=none"],
    "relative_lm": ["model.positions=relative(max_distance = 2)", "model.encoder=none", "model.tie=decoder"],
    "bert_choices": ["model.decoder=none", "model.tie=encoder", "model.embedding_norm=true", "model.bias=true",
                     "model.head=dense(activation = gelu)", "model.bias.output=true", "model.norm_eps=1e-12",
                     "model.positions=learned(max_len = 64)", "model.scale_embeddings=false"],
    "mixed_biases": ["model.bias.attention=true", "model.bias.k=false", "model.bias.fc1=false",
                     "model.bias.output=true", "model.embedding_norm=true", "model.head=dense(activation = relu)"],
    "rmsnorm_pre": ["model.norm=pre", "model.normalization=rmsnorm"],
    "rmsnorm_post_final": ["model.normalization=rmsnorm", "model.final_norm=true"],
    "silu": ["model.activation=silu"],
    "swiglu": ["model.activation=swiglu"],
    "geglu": ["model.activation=geglu", "model.bias=false"],
    "gqa": ["model.kv_heads=2"],  # self- and cross-attention, 8 query heads per 2 key/value heads
    "mqa_decoder_only": ["model.encoder=none", "model.tie=decoder", "model.kv_heads=1"],
    "rope": ["model.positions=rope"],  # encoder (bidirectional) and decoder; cross-attention unrotated
    "rope_partial_gqa": ["model.positions=rope(base = 500, fraction = 0.5)", "model.kv_heads=4"],
    # the model-level rest of the block (issue 25): factorised embeddings, segments, logit scale and cap
    "electra_parts": ["model.decoder=none", "model.tie=encoder", "model.d_embed=128", "model.segments=2",
                      "model.embedding_norm=true", "model.head=dense(activation = gelu)", "model.bias.output=true",
                      "model.positions=learned(max_len = 64)", "model.scale_embeddings=false"],
    "factorised_linear_head": ["model.d_embed=128", "model.positions=learned(max_len = 64)"],
    "tie_inputs_scaled_capped": ["model.tie=inputs", "model.logit_scale=0.25", "model.logit_softcap=5.0",
                                 "model.segments=3"],
    "capped_factorised_lm": ["model.encoder=none", "model.tie=decoder", "model.logit_softcap=2.0",
                             "model.d_embed=256", "model.positions=rope"],
}


def _cases():
    cases = [(spec_id(p), ir.load(p)) for p in SPECS]
    cases += [(name, ir.load(ROOT / "specs/base.attn", o)) for name, o in EXTRA.items()]
    return cases


CASES = _cases()


@pytest.mark.parametrize("name, spec", CASES, ids=[c[0] for c in CASES])
def test_fused_equals_unfused_forward_and_gradients(name, spec):
    spec = small(spec)
    plain, fused = pair(spec)
    src, tgt = batch(spec)
    keep = real_positions(spec, src, tgt)
    a, b = run_forward(plain, spec, src, tgt), run_forward(fused, spec, src, tgt)
    assert (a - b)[keep].abs().max() < TOLERANCE
    weights = torch.randn(a.shape, dtype=a.dtype, generator=torch.Generator().manual_seed(1)) * keep.unsqueeze(-1)
    (a * weights).sum().backward()
    (b * weights).sum().backward()
    grads_a = dict(plain.named_parameters())
    for key, param in fused.named_parameters():
        ga, gb = grads_a[key].grad, param.grad
        assert (ga - gb).abs().max() < TOLERANCE, key


@pytest.mark.parametrize("pass_name", list(PASSES))
def test_each_pass_alone_preserves_numerics(pass_name):
    spec = small(ir.load(ROOT / "specs/examples/local.attn"))
    plain = lower(spec).double()
    gm = plain.flat("forward")
    before = gm.code
    needs = [n for n in PASSES[pass_name].needs]
    optimised, log = run_passes(gm, [*needs, pass_name])
    log = log[len(needs):]
    src, tgt = batch(spec)
    keep = real_positions(spec, src, tgt)
    assert (plain(src, tgt) - optimised(src, tgt))[keep].abs().max() < TOLERANCE
    if pass_name in ("fuse_attention", "fuse_qkv"):
        assert log[0][1] is True and optimised.code != before
    if pass_name == "eliminate_dead_code":  # the lowering leaves nothing dead
        assert log[0][1] is False


def test_dead_code_is_removed():
    spec = small(ir.load(ROOT / "specs/examples/tiny.attn"))
    gm = lower(spec).flat("encode")
    src = next(n for n in gm.graph.nodes if n.op == "placeholder")
    with gm.graph.inserting_after(src):
        gm.graph.call_function(torch.mul, (src, 2))
    optimised, log = run_passes(gm, ["eliminate_dead_code"])
    assert log == [("eliminate_dead_code", True)]
    assert not any(n.target is torch.mul and n.args == (src, 2) for n in optimised.graph.nodes)


def _expected_sdpa(spec, entry: str) -> int:
    m = spec.model
    def fusable(kind) -> int:  # kernel calls (SDPA or FlexAttention): a differential attention's two maps, sigmoid's none
        normalizer = getattr(kind, "normalizer", nodes.Softmax())
        calls = 0 if isinstance(normalizer, nodes.Sigmoid) else 2 if isinstance(normalizer, nodes.Differential) else 1
        return calls * (kind.kind in ("scaled_dot", "local"))

    enc = sum(fusable(s.attention) for _, s in m.encoder.layer_plan()) if m.encoder else 0
    dec_self = sum(fusable(s.attention) for _, s in m.decoder.layer_plan()) if m.decoder else 0
    cross = m.decoder.layers * fusable(m.decoder.cross_attention) if m.decoder and m.encoder else 0
    whole = enc + dec_self + cross
    return {"forward": whole, "hidden": whole, "hidden_dense": whole, "encode": enc, "init_cache": 0,
            "decode_step": dec_self + cross}[entry]


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_sdpa_count_of_every_shipped_spec(path):
    """Full-size specs on the meta device: every scaled_dot attention is fused, and no softmax is left."""
    import attncomp

    model = attncomp.compile(path, device="meta")
    spec = model.spec
    for entry, graph in ((e, model.flat(e).graph) for e in model.entry_points):
        assert count_fused(graph) + count_flex(graph) == _expected_sdpa(spec, entry), entry
        assert not any(n.target is torch.softmax for n in graph.nodes), entry


def test_additive_attention_stays_explicit():
    spec = small(ir.load(ROOT / "specs/base.attn", EXTRA["additive"]))
    _, fused = pair(spec)
    assert count_fused(fused.flat("forward").graph) == 0
    assert sum(n.target is torch.softmax for n in fused.flat("forward").graph.nodes) == 6  # 2 + 2 + 2 layers


def test_is_causal_only_where_exact():
    import torch.nn.functional as F

    spec = small(ir.load(ROOT / "specs/base.attn"))
    _, fused = pair(spec)
    sdpa = lambda g: [n for n in g.nodes if n.target is F.scaled_dot_product_attention]  # noqa: E731
    causal = [n.kwargs.get("is_causal", False) for n in sdpa(fused.flat("forward").graph)]
    assert causal.count(True) == spec.model.decoder.layers  # decoder self-attention only
    assert not any(n.kwargs.get("is_causal", False) for n in sdpa(fused.flat("decode_step").graph))
    for n in sdpa(fused.flat("forward").graph):
        assert not (n.kwargs.get("is_causal") and n.kwargs.get("attn_mask") is not None)


@pytest.mark.slow  # every shipped spec compiled twice: about 9 s
def test_state_dict_names_do_not_change():
    """Names follow the structure, not the widths: small versions of every shipped spec show it."""
    import attncomp

    for path in SPECS:
        spec = small(ir.load(path))
        plain = attncomp.compile(spec, passes=(), device="meta")
        fused = attncomp.compile(spec, device="meta")
        assert list(plain.state_dict()) == list(fused.state_dict()), path


@pytest.mark.parametrize("attention_bias", [False, True], ids=["no_bias", "bias"])
def test_fuse_qkv_with_and_without_attention_biases(attention_bias):
    spec = small(ir.load(ROOT / "specs/base.attn", [f"model.bias.attention={str(attention_bias).lower()}"]))
    plain = lower(spec).double()
    gm = plain.flat("forward")
    optimised, log = run_passes(gm, ["fuse_qkv"])
    assert log == [("fuse_qkv", True)]
    code = optimised.code
    assert ("q_proj.bias" in code) is attention_bias and ("k_proj.bias" in code) is attention_bias
    src, tgt = batch(spec)
    keep = real_positions(spec, src, tgt)
    assert (plain(src, tgt) - optimised(src, tgt))[keep].abs().max() < TOLERANCE


def _randomised(model):
    """Every parameter random (biases, norms and the output bias start at 0 or 1, which hides terms)."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    return model


@pytest.mark.parametrize("name", ["bert_choices", "mixed_biases"])
def test_fused_equals_unfused_with_every_new_term_nonzero(name):
    spec = small(ir.load(ROOT / "specs/base.attn", EXTRA[name]))
    plain, fused = pair(spec)
    fused.load_state_dict(_randomised(plain).state_dict())
    src, tgt = batch(spec)
    keep = real_positions(spec, src, tgt)
    a, b = run_forward(plain, spec, src, tgt), run_forward(fused, spec, src, tgt)
    assert (a - b)[keep].abs().max() < TOLERANCE
    (a * keep.unsqueeze(-1)).sum().backward()
    (b * keep.unsqueeze(-1)).sum().backward()
    grads = dict(plain.named_parameters())
    for key, param in fused.named_parameters():
        assert (grads[key].grad - param.grad).abs().max() < TOLERANCE, key


def test_fuse_qkv_leaves_projections_with_mixed_biases_apart():
    """q with a bias, k without: one fused matmul would need a bias for part of it; the pass skips them."""
    spec = small(ir.load(ROOT / "specs/base.attn", ["model.bias.attention=true", "model.bias.k=false"]))
    gm = lower(spec).double().flat("forward")
    optimised, log = run_passes(gm, ["fuse_qkv"])
    assert log == [("fuse_qkv", False)]


def _sdpa_and_repeats(graph):
    import torch.nn.functional as F

    sdpa = [n for n in graph.nodes if n.target is F.scaled_dot_product_attention]
    repeats = [n for n in graph.nodes if n.target is torch.repeat_interleave]
    return sdpa, repeats


def test_grouped_query_attention_uses_enable_gqa_where_no_mask_rules_flash_out():
    """Unmasked and causal attentions hand SDPA the kv_heads heads with enable_gqa (flash takes it);
    padding-masked ones keep the explicit repeat, which the memory-efficient kernel takes."""
    import attncomp
    from attncomp.report import attention_report

    spec = small(ir.load(ROOT / "specs/base.attn", EXTRA["gqa"]))
    _, fused = pair(spec)
    sdpa, repeats = _sdpa_and_repeats(fused.flat("forward").graph)
    gqa = [n.kwargs.get("enable_gqa", False) for n in sdpa]
    layers = spec.model.decoder.layers
    assert gqa.count(True) == layers and all(n.kwargs.get("is_causal") for n in sdpa if n.kwargs.get("enable_gqa"))
    assert len(repeats) == 2 * (len(sdpa) - layers)  # k and v of each encoder and cross-attention
    widths = {n.args[1] for n in fused.flat("forward").graph.nodes if n.target is torch.split}
    d_k = spec.model.encoder.d_k
    assert widths == {(8 * d_k, 2 * d_k, 2 * d_k), (2 * d_k, 2 * d_k)}  # fuse_qkv: q wider than k, v; cross k, v
    sdpa, repeats = _sdpa_and_repeats(fused.flat("decode_step").graph)
    assert [n.kwargs.get("enable_gqa", False) for n in sdpa].count(True) == layers  # self-attention, no mask
    rows = {r.site: r.grouping for r in attention_report(attncomp.compile(spec, device="meta"))}
    assert rows["decoder self-attention"] == "grouped-query: 8 query heads over 2 key/value heads (4 per group, " \
        "SDPA enable_gqa)"
    assert rows["encoder self-attention"].endswith("k/v heads repeated)")
