"""`rope_scaling` kinds as spec choices (`rope(scaling = linear | dynamic | llama3 | yarn | longrope)`): a tiny
Llama per kind (and a Phi-3 with LongRoPE, Phi-3's own), with distinctive scaling values, saved with save_pretrained and imported, has transformers' logits in
float64 at 30 positions, past every original context length of the configs (where dynamic NTK acts), for the
full forward and for cached decoding token by token against transformers' own cached forward (dynamic NTK
rotates each new token at the length so far, in both); and exports back to a directory that transformers
loads with the same logits.

transformers computes the inverse frequencies in float32 on purpose (`torch.float` in modeling_rope_utils)
and its rotary forward casts to float32; `float64_rope` runs its own ROPE_INIT_FUNCTIONS, formula for
formula, in float64 (that module's torch sees float64 where it asks for float32) and its forward without the
cast, so the comparison measures the formulas, not float32 rounding."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp.cli.main import run
from attncomp.compiler import DEFAULT_PASSES
from attncomp.interop import hf_import
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
from transformers import modeling_rope_utils  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402

TOLERANCE = 1e-12
LENGTH = 30
LONGROPE = {"short_factor": [1.0, 1.125, 1.5, 1.0, 2.0, 2.5, 3.25, 4.0],
            "long_factor": [1.5, 2.0, 3.0, 4.5, 6.0, 8.0, 11.0, 16.0]}
# base 10000, head_dim 16: wavelengths 6.3, 19.9, 62.8, ... so llama3's thresholds (24 / 3 = 8 and 24 / 0.5 = 48)
# leave one short, one blended and the rest long; YaRN's ramp (beta 4 to 0.25 over 16) runs over dims 0 to 3
KINDS = {
    "linear": {"rope_type": "linear", "factor": 2.5},
    "dynamic": {"rope_type": "dynamic", "factor": 3.0},  # past max_position_embeddings = 16
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0.5, "high_freq_factor": 3.0,
               "original_max_position_embeddings": 24},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 4.0,
             "beta_slow": 0.25},
    "yarn-mscale": {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 16, "mscale": 1.0,
                    "mscale_all_dim": 0.5, "truncate": False},
    # LongRoPE: one factor per rotated pair; factor unset is max_position_embeddings (16) / 12, Phi-3's way
    "longrope": {"rope_type": "longrope", "original_max_position_embeddings": 12, **LONGROPE},
    "longrope-attention": {"rope_type": "longrope", "original_max_position_embeddings": 12, "factor": 6.0,
                           "attention_factor": 1.375, **LONGROPE},
}
SPEC = {"linear": "linear(factor = 2.5)", "dynamic": "dynamic(factor = 3.0, original_max_len = 16)",
        "llama3": "llama3(factor = 8.0, low_freq_factor = 0.5, high_freq_factor = 3.0, original_max_len = 24)",
        "yarn": "yarn(factor = 4.0, original_max_len = 16, beta_fast = 4.0, beta_slow = 0.25, truncate = true)",
        "longrope": "longrope(short_factor = [1.0, 1.125, 1.5, 1.0, 2.0, 2.5, 3.25, 4.0], long_factor = [1.5, 2.0, 3.0, "
                    "4.5, 6.0, 8.0, 11.0, 16.0], original_max_len = 12, factor = 1.3333333333333333)"}


class _Float64Torch:
    """torch as modeling_rope_utils sees it here: its float32 is float64."""

    float = float32 = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


@modeling_rope_utils.dynamic_rope_update
def _rotary(self, x, position_ids):
    """LlamaRotaryEmbedding.forward without its float32 cast."""
    freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(torch.float64)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


_LONGROPE = modeling_rope_utils.ROPE_INIT_FUNCTIONS["longrope"]


def _longrope(config, device=None, seq_len=None, layer_type=None):
    """transformers' LongRoPE frequencies with its one float32 step, base ** (arange(...).float() / dim) (a
    Tensor method the module's torch does not reach), taken back to float64: its own choice of factors and
    attention factor, each pair's frequency times base^e in float32 over base^e in float64."""
    inv_freq, attention_factor = _LONGROPE(config, device, seq_len=seq_len, layer_type=layer_type)
    dim = 2 * inv_freq.shape[0]
    exponents = torch.arange(0, dim, 2, dtype=torch.int64)
    base = config.rope_parameters["rope_theta"]
    in_float32 = (base ** (exponents.float() / dim)).to(torch.float64)
    return inv_freq.to(torch.float64) * in_float32 / base ** (exponents.to(torch.float64) / dim), attention_factor


@pytest.fixture
def float64_rope(monkeypatch):
    """transformers' rotary formulas in float64 (see the module docstring); the default dtype float64 too, as
    dynamic NTK's `factor * seq_len` takes it. Models are made inside, after the patch."""
    default = torch.get_default_dtype()
    threads = torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    monkeypatch.setattr(modeling_rope_utils, "torch", _Float64Torch())
    monkeypatch.setitem(modeling_rope_utils.ROPE_INIT_FUNCTIONS, "longrope", _longrope)

    def patch(hf):
        hf_models.float64_exact(monkeypatch, hf)  # RMSNorm in float64
        monkeypatch.setattr(type(hf.model.rotary_emb), "forward", _rotary)  # Llama's, Phi-3's
        return hf
    yield patch
    torch.set_default_dtype(default)
    torch.set_num_threads(threads)


def _hf(kind: str, family: str = "llama"):
    """A tiny model of the family with the kind's scaling (Phi-3 reads its original length from the config's
    own original_max_position_embeddings, over rope_parameters')."""
    extra = {"original_max_position_embeddings": KINDS[kind]["original_max_position_embeddings"]} \
        if family == "phi3" else {"head_dim": 16}
    return hf_models.model(family, max_position_embeddings=16, rope_parameters={"rope_theta": 10000.0, **KINDS[kind]},
                           **({"hidden_size": 64} if family == "phi3" else {}), **extra)


def _stepped(model, tokens, step) -> torch.Tensor:
    """Logits of cached decoding, one token at a time."""
    out, cache = [], None
    for t in range(tokens.shape[1]):
        logits, cache = step(tokens[:, t: t + 1], cache)
        out.append(logits.reshape(tokens.shape[0], -1))
    return torch.stack(out, dim=1)


def _hf_step(hf):
    def step(token, cache):
        out = hf(token, cache=cache, use_cache=True)
        return out.logits, out.cache
    return step


def _our_step(ours, tokens):
    def step(token, cache):
        return ours.decode_step(token, ours.init_cache(tokens) if cache is None else cache)
    return step


CASES = [(kind, "llama") for kind in KINDS] + [("longrope", "phi3"), ("longrope-attention", "phi3")]


@pytest.mark.parametrize("kind,family", CASES)
def test_each_scaling_kind_imports_with_transformers_logits_and_exports_back(kind, family, float64_rope, tmp_path):
    hf = float64_rope(_hf(kind, family))
    source = hf_models.save(hf, tmp_path / "source")
    imported = hf_import.import_directory(source)
    if kind in SPEC:
        assert f"scaling = {SPEC[kind]}" in imported.spec_text
    positions = imported.spec.model.positions
    assert positions.scaling is not None and positions.scaling.kind == KINDS[kind]["rope_type"]
    ours = attncomp.compile(imported.spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    ours.load_state_dict(imported.weights)
    tokens = torch.randint(3, hf_models.VOCAB, (2, LENGTH), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(tokens).logits
        assert (ours(tokens) - expected).abs().max() < TOLERANCE
        assert (_stepped(ours, tokens, _our_step(ours, tokens)) - _stepped(hf, tokens, _hf_step(hf))).abs().max() \
            < TOLERANCE

    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 0
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "hf",
                "-o", str(tmp_path / "exported")]) == 0
    back = float64_rope(type(hf).from_pretrained(tmp_path / "exported", dtype=torch.float64))
    assert back.config.rope_parameters == hf.config.rope_parameters
    back.config._attn_implementation = "sdpa"
    with torch.no_grad():
        assert (back.eval()(tokens).logits - expected).abs().max() < TOLERANCE


@pytest.mark.parametrize("family", ["llama", "phi3"])
def test_longrope_up_to_its_original_length_takes_the_short_factors(family, float64_rope, tmp_path):
    """12 tokens, original_max_position_embeddings: the short factors, in the forward and every cached step;
    13, one past it: the long ones in the forward (transformers' seq_len)."""
    hf = float64_rope(_hf("longrope", family))
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "source"))
    ours = attncomp.compile(imported.spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    ours.load_state_dict(imported.weights)
    unfused = attncomp.compile(imported.spec, passes=(), dtype=torch.float64).eval()
    unfused.load_state_dict(imported.weights)
    tokens = torch.randint(3, hf_models.VOCAB, (2, 13), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        for length in (12, 13):
            expected = hf(tokens[:, :length]).logits
            assert (ours(tokens[:, :length]) - expected).abs().max() < TOLERANCE
            assert (unfused(tokens[:, :length]) - expected).abs().max() < TOLERANCE
        short = hf(tokens[:, :12]).logits
        assert (_stepped(ours, tokens[:, :12], _our_step(ours, tokens[:, :12])) - short).abs().max() < TOLERANCE
        assert (hf(tokens).logits[:, :12] - short).abs().max() > 1e-3  # the long factors changed the first 12


@pytest.mark.parametrize("kind", ["llama3", "longrope-attention"])
def test_the_scaling_written_by_hand_exports_to_llamas_rope_parameters(kind, float64_rope, tmp_path):
    """A spec's `rope(scaling = llama3(...))` or `longrope(...)`, not imported: export writes transformers'
    rope_parameters for it (config_of)."""
    from attncomp.interop import hf_export

    hf = float64_rope(_hf(kind))
    imported = hf_import.import_directory(hf_models.save(hf, tmp_path / "source"))
    family, config = hf_export.matching(imported.spec.model)
    assert family.model_type == "llama"
    assert config.rope_parameters == {"rope_theta": 10000.0, **KINDS[kind]}


@pytest.mark.parametrize("rope_parameters,message", [
    ({"rope_type": "linear", "factor": 0.5}, "factor 0.5 (below 1)"),
    ({"rope_type": "dynamic", "factor": True}, "factor true (not a number)"),
    ({"rope_type": "longrope", "original_max_position_embeddings": 12, "short_factor": [1.0] * 8,
      "long_factor": [2.0, "x"] * 4}, 'long_factor [2.0, "x",')])
def test_a_scaling_without_a_spec_choice_is_refused_in_one_line(rope_parameters, message, tmp_path, capsys):
    hf = hf_models.model("llama", torch.float32, head_dim=16, rope_parameters={"rope_theta": 10000.0,
                                                                               **rope_parameters})
    source = hf_models.save(hf, tmp_path / "source")
    capsys.readouterr()
    assert run(["import", str(source), "--out", str(tmp_path / "imported")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err and "no spec equivalent" in err
