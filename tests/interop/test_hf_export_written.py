"""`attncomp export CKPT --format hf` of specs written by hand (issue 27, Build item 4): a spec that is a
family's architecture (here, the spec the family table gives a tiny config, compiled with fresh random
weights and saved as attncomp's training saves, with attncomp's sentencepiece tokenizer) exports to a
directory whose transformers model has attncomp's logits (relative 1e-12, float64), whose config carries the
spec's special ids, and whose tokenizer (`AutoTokenizer`) gives attncomp's tokenizer's ids."""

from __future__ import annotations

import json

import pytest
import torch

import attncomp
from attncomp import checkpoint as ckpt
from attncomp import ir
from attncomp.cli.main import run
from attncomp.data.tokenizer import Tokenizer
from attncomp.interop import families, mapping
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")
VOCAB = 256  # the sample corpus's sentencepiece vocabulary

# family -> changes to tests/interop/hf_models.py's config of it (a second case: "family:variant")
CASES = {
    "gpt2": {}, "gpt_neox": {}, "gpt_neox:sequential": dict(use_parallel_residual=False),
    "phi": {}, "gptj": {}, "gptj:whole": dict(rotary_dim=8, activation_function="gelu"), "falcon": {}, "falcon:new": dict(new_decoder_architecture=True, num_kv_heads=2),
    "falcon:sequential": dict(parallel_attn=False, multi_query=False),
    "bloom": {}, "bloom:untied": dict(n_head=4, hidden_size=32, tie_word_embeddings=False),
    "gemma": {}, "gemma:silu": dict(hidden_act="silu"), "olmo": {}, "olmo:clip": dict(clip_qkv=0.5),
    "stablelm": {}, "stablelm:parallel": dict(use_parallel_residual=True),
    "opt": {}, "opt:post": dict(do_layer_norm_before=False),
    "opt:plain": dict(layer_norm_elementwise_affine=False, enable_bias=False, tie_word_embeddings=False),
    "phi3": {}, "phi3:window": dict(sliding_window=4),  # --family phi3 (the spec is Llama's, or Mistral's)
    "gemma3_text": {},  # two local layers, a global one: rotary bases 10000 and 1e6
    "gemma3_text:scaled": dict(  # a global layer every third from 2, its rotary scaled; logits soft-capped
        num_hidden_layers=6, layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
        final_logit_softcapping=2.5, hidden_activation="silu",
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 40000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}}),
    "gemma3_text:global": dict(layer_types=["full_attention"] * 3),
    "modernbert": {},  # layer 0 and 3 global (the `first` and `global` kinds), 1 and 2 local
    "modernbert:every2": dict(  # biases, norm biases, silu, a relu head with a bias; layer 0 global, then every 2
        num_hidden_layers=5, global_attn_every_n_layers=2, norm_bias=True, attention_bias=True, mlp_bias=True,
        classifier_bias=True, hidden_activation="silu", classifier_activation="relu", norm_eps=1e-6,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 90000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 700.0}}),
    "modernbert:local0": dict(layer_types=["sliding_attention", "full_attention"] * 2),  # layer 0 local
    "roberta": {}, "xlm-roberta": {}, "distilbert": {}, "distilbert:sinusoidal": dict(sinusoidal_pos_embds=True),
    "bart": {}, "mbart": {},
    "m2m_100": dict(pad_token_id=0),  # its sinusoids start after the pad id: the spec's, 0
    "marian": {}, "marian:separate": dict(share_encoder_decoder_embeddings=False, decoder_vocab_size=VOCAB,
                                          tie_word_embeddings=True),
    "t5": {}, "t5:v1.0": dict(feed_forward_proj="relu", tie_word_embeddings=True),
    "mt5": {}, "umt5": {},
    "mixtral": {}, "qwen2_moe": {}, "qwen2_moe:renormalized": dict(norm_topk_prob=True), "qwen3_moe": {}, "olmoe": {},
}
# families tests/interop/hf_models.py has no config of: (config class, model class, another family's values)
OTHER = {"mt5": ("MT5Config", "MT5ForConditionalGeneration", "t5"),
         "umt5": ("UMT5Config", "UMT5ForConditionalGeneration", "t5"),
         "marian": ("MarianConfig", "MarianMTModel", "bart")}
DECODERS = ("gpt2", "gpt_neox", "bloom", "phi", "gptj", "falcon", "gemma", "olmo", "stablelm", "gemma3_text", "phi3",
            "opt", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe")
EXPERTS = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe")  # transformers' loop over experts (its grouped_mm takes no float64)
ENCODERS = ("modernbert", "roberta", "xlm-roberta", "distilbert")
SEQ2SEQ = ("bart", "mbart", "m2m_100", "marian", "t5", "mt5", "umt5")
FIXED = ("olmo",)  # its LayerNorms have no parameters: export refuses weights moved from 1 and 0
LINES = ["the friend opens the sad car", "  Hello   wörld, ÄÖ ß 東京!", "a garden takes the big cat", ""]


pytestmark = pytest.mark.usefixtures("one_thread")


def _written(case: str, sample_data, tmp_path):
    """The family's spec of a tiny config, as a file written by hand, compiled with random weights (every
    parameter moved off its initial value) and saved with the sample corpus's tokenizer."""
    family = case.split(":")[0]
    config_class, _, values = _family(family)
    config = getattr(transformers, config_class)(**{**values, "vocab_size": VOCAB, **CASES[case]})
    spec_path = tmp_path / "written.attn"
    spec_path.write_text(mapping.spec_text(families.IMPORTED[family], config, name="written"), encoding="utf-8")
    spec = ir.load(spec_path, [])
    torch.manual_seed(0)
    model = attncomp.compile(spec, dtype=torch.float64)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not (family in FIXED and "norm" in name):
                p.add_(torch.randn_like(p) * 0.1)
    tokenizer = torch.frombuffer(bytearray((sample_data / "spm.model").read_bytes()), dtype=torch.uint8)
    header = ckpt.Header(attncomp="0.1.0", kind="average", spec=ir.to_text(spec), spec_hash=ir.spec_hash(spec),
                         tokenizers={"src": tokenizer, "tgt": tokenizer}, data=json.dumps({"pairs": 0}), step=0,
                         position=(0, 0), metrics={})
    path = tmp_path / "written.pt"
    ckpt.save(ckpt.Checkpoint(header, model=model.state_dict()), path)
    return path, model.eval()


def _family(family: str) -> tuple[str, str, dict]:
    if family in OTHER:
        config_class, model_class, like = OTHER[family]
        return config_class, model_class, hf_models.FAMILIES[like][2]
    return hf_models.FAMILIES[family]


def _rms_float64(self, x):
    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _same(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max() <= 1e-12 * theirs.abs().max()


def _export(case: str, sample_data, tmp_path, monkeypatch):
    family = case.split(":")[0]
    path, ours = _written(case, sample_data, tmp_path)
    out = tmp_path / "hf"
    assert run(["export", str(path), "--format", "hf", "--family", family, "-o", str(out)]) == 0
    model_class = getattr(transformers, _family(family)[1])
    attn = "eager" if family in ("gemma3_text", "bloom") else "sdpa"
    more = dict(experts_implementation="eager") if family in EXPERTS else {}
    hf = model_class.from_pretrained(out, dtype=torch.float64, attn_implementation=attn, **more).eval()
    hf_models.float64_exact(monkeypatch, hf)
    if family == "bloom":  # its softmax in float32, bloom_gelu's truncated constant: in float64, exact
        hf_models.bloom_float64(monkeypatch)
    if family == "gemma3_text":  # its rotary angles per layer type and its eager attention, in float64
        from tests.interop import test_hf_gemma3

        test_hf_gemma3._float64(monkeypatch, hf)
    if family == "marian":  # its sinusoid table, stored in float32 (the checkpoint has none): in float64
        from attncomp.lower import ops

        for stack in (hf.model.encoder, hf.model.decoder):
            rows, dim = stack.embed_positions.weight.shape
            stack.embed_positions.weight.data = ops.sinusoidal_halves(torch.arange(rows), dim, torch.float64)
    if family == "modernbert":  # its rotary angles per layer type, in float64
        from tests.interop import test_hf_modernbert as mb

        monkeypatch.setattr(mb.modeling_modernbert.ModernBertRotaryEmbedding, "forward", mb._rotary_float64)
        monkeypatch.setattr(mb.modeling_modernbert, "apply_rotary_pos_emb", mb._apply_rotary_float64)
    for module in hf.modules():  # T5's RMSNorm computes its variance in float32 on purpose: in float64
        if type(module).__name__.endswith("T5LayerNorm"):
            monkeypatch.setattr(type(module), "forward", _rms_float64)
    config = hf_models.read_json(out / "config.json")
    assert config["model_type"] == family
    tok = transformers.AutoTokenizer.from_pretrained(out)
    expected = Tokenizer((sample_data / "spm.model").read_bytes()).encode(LINES)
    assert tok(LINES, add_special_tokens=False)["input_ids"] == expected
    return ours, hf, config


@pytest.mark.parametrize("case", [c for c in CASES if c.split(":")[0] in DECODERS])
def test_a_decoder_written_by_hand_exports_to_its_family(case, sample_data, tmp_path, monkeypatch):
    ours, hf, config = _export(case, sample_data, tmp_path, monkeypatch)
    assert (config.get("bos_token_id"), config.get("eos_token_id")) == (2, 3)  # the spec's (attncomp's) ids
    tokens = torch.randint(5, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _same(ours(tokens), hf(tokens).logits)


@pytest.mark.parametrize("case", [c for c in CASES if c.split(":")[0] in ENCODERS])
def test_an_encoder_written_by_hand_exports_to_its_family(case, sample_data, tmp_path, monkeypatch):
    ours, hf, config = _export(case, sample_data, tmp_path, monkeypatch)
    assert config["pad_token_id"] == 0  # the spec's (attncomp's) pad id
    tokens = torch.randint(5, VOCAB, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _same(ours(tokens), hf(input_ids=tokens).logits)


@pytest.mark.parametrize("case", [c for c in CASES if c.split(":")[0] in SEQ2SEQ])
def test_an_encoder_decoder_written_by_hand_exports_to_its_family(case, sample_data, tmp_path, monkeypatch):
    ours, hf, config = _export(case, sample_data, tmp_path, monkeypatch)
    assert (config["pad_token_id"], config["eos_token_id"], config["decoder_start_token_id"]) == (0, 3, 2)
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randint(5, VOCAB, (2, 9), generator=g), torch.randint(5, VOCAB, (2, 6), generator=g)
    tgt[:, 0] = 2  # the decoder's start
    with torch.no_grad():
        _same(ours(src, tgt), hf(input_ids=src, decoder_input_ids=tgt).logits)


def test_a_spec_of_several_families_needs_family(sample_data, tmp_path, capsys):
    """RoBERTa's spec is XLM-R's too (one table): export asks for --family in one line; a family whose spec
    it is not is refused naming what differs."""
    path, _ = _written("roberta", sample_data, tmp_path)
    capsys.readouterr()
    assert run(["export", str(path), "--format", "hf", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "several families (roberta, xlm-roberta)" in err and "--family" in err
    assert run(["export", str(path), "--format", "hf", "--family", "bert", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--family bert: not this spec's architecture (Bert: no segments" in err


@pytest.mark.parametrize("case, family", [("phi3", "llama"), ("phi3:window", "mistral")])
def test_a_phi3_spec_exports_as_phi3_only_where_named(case, family, sample_data, tmp_path):
    """Phi-3's spec is Llama's (Mistral's with a window): without --family it exports as that family, not
    as a choice between two; `--family phi3` writes Phi-3 (test_a_decoder_written_by_hand_exports_to_its_family)."""
    path, _ = _written(case, sample_data, tmp_path)
    assert run(["export", str(path), "--format", "hf", "-o", str(tmp_path / "out")]) == 0
    assert hf_models.read_json(tmp_path / "out" / "config.json")["model_type"] == family
