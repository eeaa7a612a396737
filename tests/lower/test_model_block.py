"""The model-level rest of the block (issue 25, item 3): d_embed (factorised embeddings), segments
(token-type embeddings), tie = inputs (T5 v1.1) and the logits' scale and soft cap — each in float64:
fused == explicit with segment ids other than 0, decode_step == forward, generated == compiled, the
explicit formula, and the fused training loss equal to the loss of the model's own logits."""

from __future__ import annotations

import math

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.vocab import BOS, PAD
from attncomp.train.loss import token_losses
from attncomp.train.step import TrainStep
from tests.codegen.test_generated import rendered_module
from tests.conftest import ROOT
from tests.helpers import batch, pair, small

TOLERANCE = 1e-9
ELECTRA = ["model.decoder=none", "model.tie=encoder", "model.d_embed=128", "model.segments=2",
           "model.embedding_norm=true", "model.head=dense(activation = gelu)", "model.bias.output=true",
           "model.positions=learned(max_len = 64)", "model.scale_embeddings=false"]
T5 = ["model.tie=inputs", "model.logit_scale=0.25", "model.logit_softcap=5.0", "model.segments=3",
      "model.d_embed=128"]
# the dense head's own norm (ModernBERT's LayerNorm without a bias; Gemma's (1 + w) RMSNorm)
HEAD_NORMS = {"electra_head_without_bias": ELECTRA + [
    "model.head=dense(activation = gelu, normalization = layernorm(bias = false))"],
              "t5_like_rms_head": T5 + ["model.head=dense(activation = relu, normalization = rmsnorm(offset = 1))"]}
CASES = {"electra": ELECTRA, "t5_like": T5, **HEAD_NORMS}


def _spec(overrides):
    return small(ir.load(ROOT / "specs/base.attn", overrides))


def _segments(spec, src, seed=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, spec.model.segments, src.shape, generator=g)


def _randomised(model):
    """Every parameter random (zero-initialised biases and gains too), so every term counts."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    return model


def _forward(model, spec, src, tgt, segments):
    return model(src, segments) if spec.model.decoder is None else model(src, tgt, segments)


@pytest.mark.parametrize("name", CASES)
def test_fused_equals_explicit_with_segments(name):
    spec = _spec(CASES[name])
    plain, fused = pair(spec)
    fused.load_state_dict(_randomised(plain).state_dict())
    src, tgt = batch(spec)
    segments = _segments(spec, src)
    a, b = _forward(plain, spec, src, tgt, segments), _forward(fused, spec, src, tgt, segments)
    keep = (src if spec.model.decoder is None else tgt) != PAD
    assert (a - b)[keep].abs().max() < TOLERANCE
    assert (a - _forward(plain, spec, src, tgt, None))[keep].abs().max() > 1e-3  # the segments count
    (a * keep.unsqueeze(-1)).sum().backward()
    (b * keep.unsqueeze(-1)).sum().backward()
    grads = dict(plain.named_parameters())
    for key, param in fused.named_parameters():
        assert (grads[key].grad - param.grad).abs().max() < TOLERANCE, key
    assert plain.segment_embed.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("name", CASES)
def test_no_segments_means_segment_zero(name):
    spec = _spec(CASES[name])
    model = _randomised(pair(spec)[1]).eval()
    src, tgt = batch(spec)
    zeros = torch.zeros_like(src)
    assert torch.equal(_forward(model, spec, src, tgt, None), _forward(model, spec, src, tgt, zeros))


@pytest.mark.parametrize("name", CASES)
def test_generated_equals_compiled_with_segments(name, tmp_path):
    spec = _spec(CASES[name])
    compiled = _randomised(attncomp.compile(spec, dtype=torch.float64)).eval()
    generated = rendered_module(spec, tmp_path, name, model=compiled).Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    src, tgt = batch(spec)
    segments = _segments(spec, src)
    got, want = _forward(generated, spec, src, tgt, segments), _forward(compiled, spec, src, tgt, segments)
    assert (got - want).abs().max() < TOLERANCE
    assert (generated.encode(src, segments) - compiled.encode(src, segments)).abs().max() < TOLERANCE


@pytest.mark.parametrize("name", ["t5_like", "t5_like_rms_head"])
def test_decode_step_equals_forward_with_segments_capped_and_scaled(name):
    spec = _spec(CASES[name])
    for model in pair(spec):
        model = _randomised(model).eval()
        src, tgt = batch(spec)
        tgt = torch.where(tgt == PAD, torch.full_like(tgt, 7), tgt)
        tgt[:, 0] = BOS
        segments = _segments(spec, src)
        full = model(src, tgt, segments)
        cache = model.init_cache(src, model.encode(src, segments))
        for t in range(tgt.shape[1]):
            step, cache = model.decode_step(tgt[:, t: t + 1], cache)
            assert (step - full[:, t]).abs().max() < TOLERANCE, t


def test_logits_are_the_explicit_formula():
    """cap * tanh(scale * (h W^T + b) / cap), h the `hidden` entry point's states."""
    spec = _spec(T5 + ["model.bias.output=true"])
    model = _randomised(attncomp.compile(spec, dtype=torch.float64)).eval()
    src, tgt = batch(spec)
    segments = _segments(spec, src)
    h = model.hidden(src, tgt, segments)
    raw = h @ model.output.weight.T + model.output_bias
    cap, scale = spec.model.logit_softcap, spec.model.logit_scale
    assert (model(src, tgt, segments) - cap * torch.tanh(scale * raw / cap)).abs().max() < 1e-12
    assert model(src, tgt, segments).abs().max() < cap


@pytest.mark.parametrize("name", CASES)
def test_fused_training_loss_equals_the_loss_of_the_models_logits(name):
    """TrainStep's fused projection + loss applies the same scale and cap as forward: values and gradients."""
    spec = _spec(CASES[name] + ["model.logit_softcap=3.0", "model.logit_scale=0.7"])
    model = _randomised(attncomp.compile(spec, dtype=torch.float64))
    src, tgt = batch(spec)
    segments = _segments(spec, src)
    target = src if spec.model.decoder is None else tgt  # masked LM: a target per source position
    data = {"src": src, "tgt_in": tgt, "tgt_out": target, "segments": segments}
    explicit = token_losses(_forward(model, spec, src, tgt, segments), target, 0.1)
    results = []
    for fused in (True, False):
        model.zero_grad()
        losses = TrainStep(model, 0.1, fused_loss=fused, chunk=4)(data)
        losses[0].backward()
        results.append((losses.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}))
    model.zero_grad()
    explicit[0].backward()
    want = {k: p.grad.clone() for k, p in model.named_parameters()}
    for losses, grads in results:
        assert (losses - explicit.detach()).abs().max() < 1e-10
        for key in want:
            assert (grads[key] - want[key]).abs().max() < 1e-10, key


def test_parameters_of_factorised_embeddings_and_tie_inputs():
    spec = _spec(T5)
    m = spec.model
    state = attncomp.compile(spec, device="meta").state_dict()
    e, d, v = m.d_embed, m.d_model, m.tgt_vocab
    assert state["embed.weight"].shape == (v, e) and state["output.weight"].shape == (v, e)
    assert "src_embed.weight" not in state and "tgt_embed.weight" not in state
    assert state["segment_embed.weight"].shape == (3, e)
    assert state["encoder.embed_proj.weight"].shape == (d, e) and state["decoder.embed_proj.bias"].shape == (d,)
    assert state["output_proj.weight"].shape == (e, d) and "output_proj.bias" not in state
    electra = attncomp.compile(_spec(ELECTRA), device="meta").state_dict()
    assert electra["head.dense.weight"].shape == (_spec(ELECTRA).model.d_embed, d)
    assert "output_proj.weight" not in electra
    assert electra["encoder.embed_norm.weight"].shape == (_spec(ELECTRA).model.d_embed,)


def test_new_keys_stay_out_of_the_canonical_text_at_their_defaults():
    base = ir.load(ROOT / "specs/base.attn")
    text = ir.to_text(base)
    for key in ("d_embed", "segments", "logit_scale", "logit_softcap", "inputs"):
        assert key not in text
    spec = ir.load(ROOT / "specs/base.attn", T5)
    written = ir.to_text(spec)
    for line in ("tie = inputs", "d_embed = 128", "segments = 3", "logit_scale = 0.25", "logit_softcap = 5.0"):
        assert line in written
    assert ir.load(written) == spec
    assert ir.spec_hash(ir.load(ROOT / "specs/base.attn", ["model.logit_scale=1.0", "model.segments=0"])) == \
        ir.spec_hash(base)


def test_training_on_a_tied_factorised_model_reaches_every_parameter():
    spec = _spec(ELECTRA)
    model = attncomp.compile(spec, dtype=torch.float64)
    src, _ = batch(spec)
    losses = TrainStep(model, 0.1, chunk=5)({"src": src, "tgt_out": src, "segments": _segments(spec, src)})
    losses[0].backward()
    silent = [k for k, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    assert not silent
    assert math.isfinite(float(losses[0].detach()))


def test_output_weight_of_tie_inputs_is_the_output_projection():
    model = attncomp.compile(_spec(T5), dtype=torch.float64)
    assert model.output_weight() is model.output.weight
    assert model.output.weight is not model.embed.weight


def test_ctranslate2_export_refuses_the_new_choices_in_one_line():
    from attncomp.errors import UsageError
    from attncomp.interop.ctranslate2_export import check_supported

    with pytest.raises(UsageError) as info:
        check_supported(ir.load(ROOT / "specs/base.attn", T5))
    message = str(info.value)
    for part in ("d_embed = 128", "segments = 3", "logit_scale = 0.25", "logit_softcap = 5.0", "tie = inputs"):
        assert part in message
    assert "\n" not in message


def test_beam_search_encodes_the_segments_it_is_given():
    """Decoding carries the segment input: CachedStepper(model, src, segments=segments) encodes with them, and
    beam search from them picks the tokens the model's own greedy steps over that memory pick."""
    from attncomp.decode.beam import CachedStepper, beam_search

    spec = _spec(T5)
    model = _randomised(attncomp.compile(spec, dtype=torch.float64)).eval()
    src, _ = batch(spec)
    segments = _segments(spec, src)
    with torch.no_grad():
        found = beam_search(CachedStepper(model, src, segments=segments), src.shape[0], [5] * src.shape[0], 1, 0.0)
        cache = model.init_cache(src, model.encode(src, segments))
        tokens, greedy = torch.full((src.shape[0], 1), BOS), []
        for _ in range(5):
            logits, cache = model.decode_step(tokens, cache)
            tokens = logits.argmax(-1, keepdim=True)
            greedy.append(tokens)
    greedy = torch.cat(greedy, 1).tolist()
    for row, hyps in enumerate(found):
        assert hyps[0].tokens == greedy[row][: len(hyps[0].tokens)]


def test_the_dense_heads_norm_is_the_one_it_names():
    """head = dense(normalization = ...): Norm(act(dense(x))) with that norm's parameters; at its default
    (BERT's LayerNorm) the key stays out of the canonical text."""
    for name, kind, keys in (("electra_head_without_bias", torch.nn.LayerNorm, {"head.norm.weight"}),
                             ("t5_like_rms_head", None, {"head.norm.weight"})):
        spec = _spec(CASES[name])
        model = _randomised(attncomp.compile(spec, dtype=torch.float64)).eval()
        assert {k for k in model.state_dict() if k.startswith("head.norm")} == keys
        x = torch.randn(2, 3, spec.model.d_model, dtype=torch.float64)
        h = model.head.dense(x)
        h = torch.relu(h) if spec.model.head.activation == "relu" else torch.nn.functional.gelu(h)
        if kind is torch.nn.LayerNorm:
            want = torch.nn.functional.layer_norm(h, h.shape[-1:], model.head.norm.weight, None, 1e-5)
        else:
            want = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * (1 + model.head.norm.weight)
        assert (model.head(x) - want).abs().max() < 1e-12
        text = ir.to_text(spec)
        assert "normalization = " in text.split("head = ")[1].split("\n")[0] and ir.load(text) == spec
    assert "normalization" not in ir.to_text(_spec(ELECTRA)).split("head = ")[1].split("\n")[0]
    same = _spec(ELECTRA + ["model.head=dense(normalization = layernorm)"])
    assert ir.spec_hash(same) == ir.spec_hash(_spec(ELECTRA))
