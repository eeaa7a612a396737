"""Prefix-LM masks (`decoder { mask = prefix }`: T5's prefix LM, UL2, GLM): a decoder-only model's self-attention
sees every key of its row's prefix, in both directions, and is causal after it, M_ij = j < P_b or j <= i.

Checked against a decoder written here from the equations with the compiled model's weights, in float64; the
explicit graph equals the fused one (SDPA's boolean mask; FlexAttention's block mask where soft-capping takes the
attention there), decoding (the prefix encoded in one step by init_cache, then token by token) equals the forward
pass, and the generated module equals the compiled model."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES
from attncomp.lower import ops
from attncomp.report import attention_report
from tests.codegen.test_generated import rendered_module

MODEL = """model m {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  tie = decoder
  positions = %s
  dropout { residual = 0.0  embedding = 0.0 }
  decoder { layers = 2  norm = pre  mask = prefix  %s }
}
"""


def _load(positions: str = "learned(max_len = 64)", decoder: str = ""):
    return ir.load_flat(MODEL % (positions, decoder), "<prefix>", [])


def _compiled(spec, passes=(), seed: int = 0):
    torch.manual_seed(seed)
    model = attncomp.compile(spec, passes=passes, dtype=torch.float64).eval()
    with torch.no_grad():  # biases and norms away from their zeros and ones
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def _seen(length: int, prefix: torch.Tensor) -> torch.Tensor:
    """M (B, 1, T, T): query i of row b sees key j where j < P_b or j <= i."""
    i = torch.arange(length).view(-1, 1)
    j = torch.arange(length).view(1, -1)
    return ((j < prefix.view(-1, 1, 1)) | (j <= i)).unsqueeze(1)


def _reference(model, tokens: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
    """The pre-norm decoder from its equations: x_0 = sqrt(d) E[w] + P[pos]; per layer
    h = x + W^O softmax(Q K^T / sqrt(d_k) masked by M) V over LN_1(x), x' = h + W_2 relu(W_1 LN_2(h) + b_1) + b_2;
    logits = LN_f(x_L) E^T."""
    sd = model.state_dict()
    b, t = tokens.shape
    x = sd["tgt_embed.weight"][tokens] * math.sqrt(32) + sd["decoder.pos.weight"][:t]
    seen = _seen(t, prefix)

    def lin(name, h):
        return F.linear(h, sd[f"{name}.weight"], sd[f"{name}.bias"])

    def norm(name, h):
        return F.layer_norm(h, (32,), sd[f"{name}.weight"], sd[f"{name}.bias"])

    for n in range(2):
        layer = f"decoder.layers.{n}"
        h = norm(f"{layer}.self_attn_norm", x)
        q, k, v = (lin(f"{layer}.self_attn.{p}_proj", h).view(b, t, 4, 8).transpose(1, 2) for p in "qkv")
        scores = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(~seen, -math.inf)
        heads = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, 32)
        x = x + lin(f"{layer}.self_attn.o_proj", heads)
        h = norm(f"{layer}.ffn_norm", x)
        x = x + lin(f"{layer}.ffn.fc2", F.relu(lin(f"{layer}.ffn.fc1", h)))
    return F.linear(norm("decoder.norm", x), sd["tgt_embed.weight"])


TOKENS = torch.randint(5, 64, (3, 9), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("prefix", [(0, 4, 9), (3, 3, 3), (1, 12, 0)])
def test_the_prefix_lm_is_its_equations(prefix):
    """A row's prefix from 0 (causal) to past its end (every key seen), against the equations."""
    model = _compiled(_load())
    prefix = torch.tensor(prefix)
    with torch.no_grad():
        want = _reference(model, TOKENS, prefix)
        assert (model(TOKENS, prefix) - want).abs().max() < 1e-12
        fused = attncomp.compile(_load(), passes=DEFAULT_PASSES, dtype=torch.float64).eval()
        fused.load_state_dict(model.state_dict())
        assert (fused(TOKENS, prefix) - want).abs().max() < 1e-12


def test_no_prefix_is_causal_and_a_prefix_changes_only_what_follows_its_future():
    """prefix None and a prefix of 0 are the causal model; a prefix P moves the logits of the positions before
    P - 1 (they now see later prefix tokens) and those after (they read changed states), and the mask is that."""
    model = _compiled(_load())
    with torch.no_grad():
        causal = model(TOKENS)
        assert (model(TOKENS, torch.zeros(3, dtype=torch.long)) - causal).abs().max() == 0
        assert (model(TOKENS, torch.ones(3, dtype=torch.long)) - causal).abs().max() == 0  # P = 1: key 0 only
        prefixed = model(TOKENS, torch.full((3,), 4))
    assert (prefixed - causal).abs().amax(dim=(0, 2))[:3].min() > 1e-6
    mask = ops.prefix_mask(5, torch.tensor([0, 2, 7]), "cpu")  # True = hidden
    assert torch.equal(~mask, _seen(5, torch.tensor([0, 2, 7])))
    assert torch.equal(ops.prefix_mask(5, None, "cpu"), ops.causal_mask(5, "cpu"))


CASES = {
    "learned": ("learned(max_len = 64)", ""),
    "rope, grouped k/v": ("rope", "kv_heads = 2"),
    "alibi": ("alibi", ""),
    "relative": ("relative(max_distance = 4)", ""),
    "t5 buckets": ("buckets(count = 8, max_distance = 16)", ""),
    "latent": ("rope", "attention = latent(kv_rank = 16, rope_dims = 4)"),
    "value residual, sinks": ("rope", "value_residual = true  attention = scaled_dot(sinks = true)"),
    "soft-capped (flex)": ("rope", "attention = scaled_dot(softcap = 20)"),
}


@pytest.mark.parametrize("name", CASES)
def test_explicit_equals_fused_decoding_equals_forward_generated_equals_compiled(name, tmp_path):
    """The prefix (5 tokens of every row) encoded in one step by init_cache, then token by token: the logits of
    each later position equal the forward pass's with prefix 5."""
    spec = _load(*CASES[name])
    fused = _compiled(spec, DEFAULT_PASSES)
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(fused.state_dict())
    generated = rendered_module(spec, tmp_path, "prefix", model=fused).Model().double().eval()
    generated.load_state_dict(fused.state_dict())
    prefix = torch.tensor([5, 2, 9])
    with torch.no_grad():
        expected = explicit(TOKENS, prefix)
        assert (fused(TOKENS, prefix) - expected).abs().max() < 1e-12
        assert (generated(TOKENS, prefix) - expected).abs().max() < 1e-9
        five = torch.full((3,), 5)
        expected = explicit(TOKENS, five)
        cache = fused.init_cache(TOKENS[:, :5])
        assert int(cache.position[0]) == 5 and cache.layers[0].self_attn.k.shape[2] == 5
        for t in range(5, TOKENS.shape[1]):
            logits, cache = fused.decode_step(TOKENS[:, t : t + 1], cache)
            assert (logits - expected[:, t]).abs().max() < 1e-12, t
        cache = generated.init_cache(TOKENS[:, :5])
        logits, _ = generated.decode_step(TOKENS[:, 5:6], cache)
        assert (logits - expected[:, 5]).abs().max() < 1e-9


def test_each_kernel_says_it_reads_the_prefix():
    """SDPA takes the prefix as a boolean attn_mask; with soft-capping the attention is FlexAttention's, whose block
    mask reads the rows' prefix lengths; the build report names the mask, the kernel and why."""
    plain = attncomp.compile(_load(), device="meta")
    capped = attncomp.compile(_load("rope", "attention = scaled_dot(softcap = 20)"), device="meta")
    (row,) = attention_report(plain)
    assert (row.mask, row.kernel.split(":")[0]) == ("prefix", "sdpa") and "prefix-LM mask" in row.kernel
    assert row.backends["flash"] != "yes"  # an explicit mask
    (row,) = attention_report(capped)
    assert (row.mask, row.kernel.split(":")[0]) == ("prefix", "flex")
    units = {u.name: u for u in capped.units()}
    graph = units["CausalSelfAttention"].methods["forward"].graph
    (flex,) = [n for n in graph.nodes if n.op == "call_function" and n.target is ops.flex_attend]
    assert flex.kwargs["causal"] is True and flex.kwargs["prefix"].op == "placeholder"


def test_flex_attend_reads_the_prefix_as_its_mask():
    """ops.flex_attend's explicit form (CPU, uncompiled) with causal=True and prefix equals the masked softmax."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(3, 2, 6, 8, dtype=torch.float64, generator=g) for _ in range(3))
    prefix = torch.tensor([0, 3, 8])
    s = (q @ k.transpose(-1, -2) * 0.3).masked_fill(~_seen(6, prefix), -math.inf)
    want = s.softmax(-1) @ v
    assert (ops.flex_attend(q, k, v, 0.3, causal=True, prefix=prefix) - want).abs().max() < 1e-12


def test_flex_attention_compiled_reads_the_prefix_in_its_block_mask():
    """Under torch.compile, where FlexAttention runs (its CPU reference here, heads 16 wide), the block mask made
    from the rows' prefix lengths gives the masked softmax; with a soft cap too."""
    def backend(gm, example_inputs):
        assert any("flex_attention" in str(n.target) for n in gm.graph.nodes), gm.graph
        return gm.forward

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(3, 2, 6, 16, dtype=torch.float64, generator=g) for _ in range(3))
    prefix = torch.tensor([0, 3, 8])
    for cap in (0.0, 2.0):
        s = q @ k.transpose(-1, -2) * 0.3
        s = (torch.tanh(s / cap) * cap if cap else s).masked_fill(~_seen(6, prefix), -math.inf)
        torch.compiler.reset()
        with torch.no_grad():
            got = torch.compile(ops.flex_attend, backend=backend, fullgraph=True)(q, k, v, 0.3, cap, causal=True,
                                                                                prefix=prefix)
        assert (got - s.softmax(-1) @ v).abs().max() < 1e-12, cap


def test_the_key_round_trips_and_leaves_causal_specs_hashes_alone():
    """mask = prefix is written in the canonical text and parses back to the same IR; mask = causal, the default,
    is left out, so a spec that writes it has the hash of one that does not (the key is declared LATER)."""
    prefix = _load()
    text = ir.to_text(prefix)
    assert "mask = prefix" in text and ir.load_flat(text, "<again>", []) == prefix
    written = ir.load_flat((MODEL % ("learned(max_len = 64)", "")).replace("mask = prefix", "mask = causal"), "<c>", [])
    plain = ir.load_flat((MODEL % ("learned(max_len = 64)", "")).replace("mask = prefix", ""), "<p>", [])
    assert "mask" not in ir.to_text(written) and ir.spec_hash(written) == ir.spec_hash(plain)
