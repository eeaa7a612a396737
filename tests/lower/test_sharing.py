"""Sharing across a stack's layers: parameter sets (`share = all | groups(size) | cycle(period)`, ALBERT and
Takase & Kiyono 2021) and cross-layer key/value sharing (`share_kv = N`, CLA, Brandon et al. 2024).

A shared model is checked against the same model without sharing whose layers hold copies of the sets' weights
(forward, and the gradients: a set's is the sum of its layers'), CLA against attention written here from the
paper's description; fused == explicit, decoding == forward, generated == compiled in float64; the parameter
count, FLOPs and cache sizes; a few training steps lower the loss; bad combinations are located errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attncomp
from attncomp import ir
from attncomp.compiler import DEFAULT_PASSES
from attncomp.errors import SpecError
from attncomp.lower.flops import training_flops
from attncomp.lower.size import parameter_count
from tests.codegen.test_generated import rendered_module

MODEL = """model m {
  d_model = 32  heads = 4  d_ff = 48  vocab = shared(64)  positions = sinusoidal
  dropout { residual = 0.0  embedding = 0.0 }
  %s
}
"""
LM = "tie = decoder  encoder = none\n  decoder { layers = 6  norm = pre  %s }"
SEQ2SEQ = "encoder { layers = 4  %s }\n  decoder { layers = 4  %s }"


def _load(text: str, *overrides: str):
    return ir.load_flat(text, "<sharing>", list(overrides))


def _randomised(model) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))


def _tokens(seed: int = 1, shape=(2, 7)) -> torch.Tensor:
    return torch.randint(5, 64, shape, generator=torch.Generator().manual_seed(seed))


# --- parameter sets ---------------------------------------------------------------------------------------

SETS = {"all": (0,) * 6, "groups(3)": (0, 0, 0, 1, 1, 1), "groups(2)": (0, 0, 1, 1, 2, 2),
        "cycle(2)": (0, 1, 0, 1, 0, 1), "cycle(4)": (0, 1, 2, 3, 0, 1), "none": tuple(range(6))}


def _unshared_copy(spec, shared) -> torch.nn.Module:
    """The same model without `share`, each layer holding a copy of its set's weights."""
    plain = attncomp.compile(spec.model_copy(update={"model": spec.model.model_copy(update={
        "decoder": spec.model.decoder.model_copy(update={"share": ir.nodes.NoSharing()})})}),
        passes=(), dtype=torch.float64).eval()
    sets = spec.model.decoder.parameter_sets()
    state = {}
    for name, value in shared.state_dict().items():
        if name.startswith("decoder.layers."):
            s, rest = name.removeprefix("decoder.layers.").split(".", 1)
            for i in (i for i, used in enumerate(sets) if used == int(s)):
                state[f"decoder.layers.{i}.{rest}"] = value.clone()
        else:
            state[name] = value.clone()
    plain.load_state_dict(state)
    return plain


@pytest.mark.parametrize("share", SETS)
def test_a_shared_model_is_the_unshared_one_with_copies_and_names_each_set_once(share):
    spec = _load(MODEL % (LM % f"share = {share}"))
    assert spec.model.decoder.parameter_sets() == SETS[share]
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    _randomised(model)
    sets = len(set(SETS[share]))
    assert len(model.decoder.layers) == sets  # the module layers.s is parameter set s
    names = {n.split(".")[2] for n in model.state_dict() if n.startswith("decoder.layers.")}
    assert names == {str(s) for s in range(sets)}
    count = sum(p.numel() for p in model.parameters())
    assert parameter_count(spec) == count == sum(v.numel() for v in model.state_dict().values())
    plain = _unshared_copy(spec, model)
    per_layer = sum(p.numel() for p in plain.decoder.layers[0].parameters())
    assert count == sum(p.numel() for p in plain.parameters()) - (6 - sets) * per_layer
    tokens = _tokens()
    with torch.no_grad():
        assert (model(tokens) - plain(tokens)).abs().max() < 1e-12


@pytest.mark.parametrize("share", ["all", "cycle(2)", "groups(3)"])
def test_a_shared_set_runs_each_depth_with_that_depths_differential_lambda_init(share):
    """lambda_init is a constant of differential attention's formula, lambda = exp(lq1 . lk1) - exp(lq2 . lk2) +
    lambda_init, not a weight: a set run at several depths applies each depth's, as the unshared model does whose
    layers hold copies of the set (each of whose layers is the paper's equation at its depth: test_normalizers)."""
    spec = _load(MODEL % (LM % f"share = {share}  attention = scaled_dot(normalizer = differential)"))
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    _randomised(model)
    assert len(model.decoder.layers) == len(set(SETS[share]))
    plain = _unshared_copy(spec, model)
    assert len({type(layer) for layer in plain.decoder.layers}) == 1  # one class serves every depth
    tokens = _tokens()
    with torch.no_grad():
        expected = plain(tokens)
        assert (model(tokens) - expected).abs().max() < 1e-12
        # the set at the first depth's lambda_init everywhere is another model: the depths' lambda_init matter here
        first = attncomp.compile(_load(MODEL % (LM % f"share = {share}  attention = scaled_dot(normalizer = "
                                                      "differential(lambda_init = 0.2))")), dtype=torch.float64).eval()
        first.load_state_dict(model.state_dict())
        assert (first(tokens) - expected).abs().max() > 1e-6


def test_flops_are_per_layer_whatever_the_sharing():
    plain = attncomp.compile(_load(MODEL % (LM % "")), device="meta")
    for share in ("all", "groups(3)", "cycle(2)"):
        shared = attncomp.compile(_load(MODEL % (LM % f"share = {share}")), device="meta")
        assert training_flops(shared) == training_flops(plain)


def test_a_set_gets_the_sum_of_its_layers_gradients_and_the_optimizer_sees_it_once():
    spec = _load(MODEL % (LM % "share = groups(3)"))
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).train()
    _randomised(model)
    plain = _unshared_copy(spec, model).train()
    tokens = _tokens(2, (3, 9))
    for m in (model, plain):
        F.cross_entropy(m(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten()).backward()
    for name, p in model.decoder.layers.named_parameters():
        s, rest = name.split(".", 1)
        want = sum(plain.decoder.layers.get_parameter(f"{i}.{rest}").grad for i in range(3 * int(s), 3 * int(s) + 3))
        assert p.grad is not None and (p.grad - want).abs().max() < 1e-10, name
    optimizer = torch.optim.Adam(model.parameters())
    seen = [p for group in optimizer.param_groups for p in group["params"]]
    assert len(seen) == len({id(p) for p in seen}) == len(model.state_dict())


CASES = {
    "lm groups": MODEL % (LM % "share = groups(3)"),
    "lm cycle with kinds": MODEL % (LM % "share = cycle(2)  layer wide { every = 2  start = 1  d_ff = 96 }  "
                                          "unet = true"),
    "seq2seq all": MODEL % (SEQ2SEQ % ("share = all", "share = cycle(2)  norm = pre")),
    "lm cla rope gqa": (MODEL % (LM % "share_kv = 2  kv_heads = 2  qk_norm = head  layer odd { start = 4  "
                                      "d_ff = 96 }")).replace("sinusoidal", "rope"),
    "seq2seq cla shared": MODEL % (SEQ2SEQ % ("share_kv = 2  unet = true", "share_kv = 3  share = cycle(3)")),
    # differential attention whose lambda_init follows the depth, in shared sets: each depth its own (ops.lambda_init)
    "seq2seq differential by depth shared": MODEL % (SEQ2SEQ % (
        "share = all  attention = scaled_dot(normalizer = differential)",
        "share = cycle(2)  share_kv = 2  attention = scaled_dot(normalizer = differential)  "
        "cross_attention = scaled_dot(normalizer = differential)")),
}


@pytest.mark.parametrize("name", CASES)
def test_explicit_equals_fused_decoding_equals_forward_generated_equals_compiled(name, tmp_path):
    spec = _load(CASES[name])
    torch.manual_seed(0)
    fused = attncomp.compile(spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    _randomised(fused)
    explicit = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    explicit.load_state_dict(fused.state_dict())
    generated = rendered_module(spec, tmp_path, "shared", model=fused).Model().double().eval()
    generated.load_state_dict(fused.state_dict())
    tokens = _tokens()
    args = (tokens,) if spec.model.encoder is None else (tokens, tokens)
    with torch.no_grad():
        expected = explicit(*args)
        assert (fused(*args) - expected).abs().max() < 1e-12
        assert (generated(*args) - expected).abs().max() < 1e-9
        caches = [m.init_cache(tokens) if len(args) == 1 else m.init_cache(tokens, m.encode(tokens))
                  for m in (fused, generated)]
        assert len(caches[0].layers) == spec.model.decoder.layers  # a cache per layer, shared weights or not
        for t in range(tokens.shape[1]):
            (logits, caches[0]), (again, caches[1]) = (m.decode_step(tokens[:, t : t + 1], c)
                                                        for m, c in zip((fused, generated), caches))
            assert (logits - expected[:, t]).abs().max() < 1e-12, t
            assert (again - expected[:, t]).abs().max() < 1e-9, t


@pytest.mark.parametrize("name", CASES)
def test_training_lowers_the_loss_and_reaches_every_parameter(name):
    spec = _load(CASES[name])
    torch.manual_seed(0)
    model = attncomp.compile(spec)
    tokens = _tokens(2, (4, 9))
    args = (tokens[:, :-1],) if spec.model.encoder is None else (tokens, tokens[:, :-1])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(8):
        loss = F.cross_entropy(model(*args).flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
        assert not missing
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


# --- cross-layer key/value sharing (CLA) ------------------------------------------------------------------


def _cla_reference(decoder, x: torch.Tensor, n: int) -> torch.Tensor:
    """Cross-layer attention (Brandon et al. 2024), pre-norm, from the paper's description: layer i computes its own
    queries, q_i = W^Q_i h_i (h_i its normed input), and attends causally with the keys and values
    K = W^K_j h_j, V = W^V_j h_j of layer j = n (i // n), the layer of its group that computes them; then
    x + Attn, x + FFN(Norm(x)), and the stack's final norm."""
    for i, layer in enumerate(decoder.layers):
        attn, h = layer.self_attn, layer.self_attn_norm(x)
        b, t, _ = h.shape
        if i % n == 0:
            k, v = (p(h).view(b, t, 4, 8).transpose(1, 2) for p in (attn.k_proj, attn.v_proj))
        else:
            assert not hasattr(attn, "k_proj") and not hasattr(attn, "v_proj")
        q = attn.q_proj(h).view(b, t, 4, 8).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1),
                                                                    float("-inf"))
        x = x + attn.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, 32))
        x = x + layer.ffn.fc2(F.relu(layer.ffn.fc1(layer.ffn_norm(x))))
    return decoder.norm(x)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_cla_is_the_papers_attention_and_caches_only_the_computing_layers(n):
    spec = _load(MODEL % (LM % f"share_kv = {n}"))
    plain_spec = _load(MODEL % (LM % ""))
    torch.manual_seed(0)
    model = attncomp.compile(spec, passes=(), dtype=torch.float64).eval()
    _randomised(model)
    tokens = _tokens()
    with torch.no_grad():
        seen = []  # the stack's input, as layer 0 reads it
        model.decoder.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0]))
        expected = model(tokens)
        assert (model.decoder(model.tgt_embed(tokens)) - _cla_reference(model.decoder, seen[0], n)).abs().max() \
            < 1e-12
        computing = [i for i in range(6) if i % n == 0]
        cache = model.init_cache(tokens)
        for t in range(tokens.shape[1]):
            logits, cache = model.decode_step(tokens[:, t : t + 1], cache)
            assert (logits - expected[:, t]).abs().max() < 1e-12, t
    held = [i for i, layer in enumerate(cache.layers) if layer.self_attn is not None]
    assert held == computing
    plain = attncomp.compile(plain_spec, passes=(), dtype=torch.float64).eval()
    with torch.no_grad():
        plain_cache = plain.init_cache(tokens)
        for t in range(tokens.shape[1]):
            _, plain_cache = plain.decode_step(tokens[:, t : t + 1], plain_cache)
    size = lambda c: sum(x.numel() for x in torch.utils._pytree.tree_leaves(c.layers) if x is not None)  # noqa: E731
    assert size(cache) * 6 == size(plain_cache) * len(computing) and size(cache) == len(computing) * 2 * 2 * 4 * 7 * 8
    kv_params = 2 * (32 * 32 + 32)  # W^K, W^V and their biases, of each layer that reads
    assert parameter_count(spec) == parameter_count(plain_spec) - (6 - len(computing)) * kv_params
    meta = [attncomp.compile(s, device="meta") for s in (spec, plain_spec)]
    assert training_flops(meta[1]) - training_flops(meta[0]) == 3 * (6 - len(computing)) * 2 * (2 * 32 * 32)


def test_sharing_round_trips_and_keeps_old_hashes():
    spec = _load(MODEL % (LM % "share = cycle(2)  share_kv = 2"))
    text = ir.to_text(spec)
    assert "share = cycle(period = 2)" in text and "share_kv = 2" in text
    assert _load(text) == spec and ir.spec_hash(_load(text)) == ir.spec_hash(spec)
    plain = _load(MODEL % (LM % "share = none  share_kv = 1"))
    assert "share =" not in ir.to_text(plain) and "share_kv" not in ir.to_text(plain)
    assert ir.spec_hash(plain) == ir.spec_hash(_load(MODEL % (LM % "")))


def test_one_layer_shares_with_itself():
    spec = _load(MODEL % (LM % "share = all  share_kv = 1"), "model.decoder.layers=1")
    model = attncomp.compile(spec, dtype=torch.float64).eval()
    assert len(model.decoder.layers) == 1


@pytest.mark.parametrize("keys, needle", [
    ("share = groups(4)", "share = groups(4) splits the decoder's 6 layers into groups of 4, which does not divide"),
    ("share = groups(7)", "which does not divide them"),
    ("share = cycle(7)", "share = cycle(7) uses 7 parameter sets in turn, but the decoder has 6 layers"),
    ("share = groups(0)", "size must be at least 1, got 0"),
    ("share = cycle(period = 0)", "period must be at least 1, got 0"),
    ("share = some", 'unknown share "some"'),
    ("share = all  layer wide { start = 3  d_ff = 96 }",
     "layers 0 and 3 of the decoder use one parameter set, but one is the stack's own, the other kind wide"),
    ("share = cycle(2)  layer wide { every = 3  d_ff = 96 }",
     "layers 0 and 2 of the decoder use one parameter set, but one is kind wide, the other the stack's own"),
    ("share_kv = 7", "share_kv = 7 groups more layers than the decoder has (6)"),
    ("share_kv = 0", "share_kv must be at least 1, got 0"),
    ("share_kv = 2  layer wide { start = 5  d_ff = 96 }",
     "layers 4 and 5 of the decoder attend with one layer's keys and values, but one is the stack's own"),
    ("share_kv = 2  value_residual = true", "share_kv = 2 makes layers reuse another layer's values"),
    ("share_kv = 3  attention = latent(kv_rank = 16, rope_dims = 4)", "has latent attention"),
    ("share_kv = 2  attention = local(window = 3)", "has local attention, whose cache keeps only its window"),
    ("share_kv = 2  share = all", "layers 0 and 1 of the decoder use one parameter set, but with share_kv = 2 one "
                                  "computes keys and values and the other reads them"),
])
def test_bad_sharing_is_a_located_error(keys, needle):
    with pytest.raises(SpecError) as err:
        _load((MODEL % (LM % keys)).replace("sinusoidal", "rope" if "latent" in keys else "sinusoidal"))
    assert needle in str(err.value), str(err.value)
    assert err.value.span is not None and err.value.span.line == 5


def test_the_build_report_counts_each_attention_per_layer_and_names_the_cla_layers():
    from attncomp.report import attention_report

    for keys, want in [("share = all", {"decoder self-attention": 6}),
                       ("share = cycle(2)  share_kv = 2", {"decoder self-attention": 3,
                                                            "decoder CLA self-attention": 3})]:
        rows = attention_report(attncomp.compile(_load(MODEL % (LM % keys)), device="meta"))
        assert {r.site: r.layers for r in rows} == want
        assert all(r.kernel.startswith("sdpa") for r in rows)


@pytest.mark.parametrize("keys", ["share = cycle(2)  share_kv = 2", "share = groups(3)"])
def test_a_shared_stack_draws_its_layers_by_what_they_run(keys, tmp_path):
    from attncomp.cli.main import run

    spec = tmp_path / "shared.attn"
    spec.write_text(MODEL % (LM % keys))
    assert run(["draw", str(spec), "-o", str(tmp_path / "shared.svg")]) == 0
    drawn = (tmp_path / "shared.svg").read_text()
    assert ("decoder (shared k, v)" in drawn) == ("share_kv" in keys)
