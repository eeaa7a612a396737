"""A Marian model with separate source and target vocabularies (`share_encoder_decoder_embeddings =
false`: vocab.json and target_vocab.json, two embeddings, the output tied to the target's) imports as
`vocab = separate(...)`, `tie = decoder`, each side's tokenizer numbered from its own vocabulary; the
logits equal Marian's in float64 on ids its own tokenizer gives."""

from __future__ import annotations

import json

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.cli.main import run
from attncomp.compiler import DEFAULT_PASSES
from attncomp.loading import load_checkpoint
from attncomp.data.sample_corpus import generate
from attncomp.data.tokenizer import Tokenizer
from attncomp.interop import importing
from tests.interop.test_hf_marian import _marian_halves
from tests.interop.test_marian_import import _lines, _marian_vocab, _train_spm

transformers = pytest.importorskip("transformers")


def separate_directory(out):
    """A random MarianMTModel with separate vocabularies (swish, a final_logits_bias) and its tokenizer files,
    saved in `out` (made here): (out, the model in float64, its tokenizer)."""
    out.mkdir(parents=True)
    pairs = generate(seed=3, pairs=400)
    source = _train_spm([s for s, _ in pairs], out / "src_spm", 48)
    target = _train_spm([t for _, t in pairs], out / "tgt_spm", 36)
    (out / "source.spm").write_bytes(source)
    (out / "target.spm").write_bytes(target)
    src_vocab, tgt_vocab = _marian_vocab(source, source), _marian_vocab(target, target)
    assert len(src_vocab) > len(tgt_vocab)  # the encoder's padding_idx (the target's <pad>) fits both
    (out / "vocab.json").write_text(json.dumps(src_vocab), encoding="utf-8")
    (out / "target_vocab.json").write_text(json.dumps(tgt_vocab), encoding="utf-8")
    tokenizer = transformers.MarianTokenizer(str(out / "source.spm"), str(out / "target.spm"), str(out / "vocab.json"),
                                             target_vocab_file=str(out / "target_vocab.json"), separate_vocabs=True)
    pad = tgt_vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(src_vocab), decoder_vocab_size=len(tgt_vocab), share_encoder_decoder_embeddings=False,
        d_model=32, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=40,
        encoder_layers=2, decoder_layers=2, max_position_embeddings=128, activation_function="swish",
        scale_embedding=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(0)
    hf = transformers.MarianMTModel(config).double().eval()
    hf.config._attn_implementation = "sdpa"
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "embed_positions" not in name:
                p.add_(torch.randn_like(p) * 0.1)
        for stack in (hf.model.encoder, hf.model.decoder):
            stack.embed_positions.weight.copy_(_marian_halves(128, 32))
        hf.final_logits_bias.normal_(0.0, 0.5)
    hf.save_pretrained(out)
    tokenizer.save_pretrained(out)
    for leftover in out.glob("*_spm.*"):
        leftover.unlink()
    return out, hf, tokenizer


@pytest.fixture(scope="module")
def separate(tmp_path_factory):
    out, hf, tokenizer = separate_directory(tmp_path_factory.mktemp("marian") / "separate")
    return out, hf, tokenizer, importing.import_directory(out)


def test_the_spec_has_two_vocabularies_and_the_output_tied_to_the_target(separate, tmp_path):
    directory, hf, _, imported = separate
    assert run(["import", str(directory), "--out", str(tmp_path / "out")]) == 0
    model, found = load_checkpoint(tmp_path / "out" / "checkpoint.pt")
    assert found.header.spec == ir.to_text(imported.spec)
    assert "vocab = separate(" in (tmp_path / "out" / "model.attn").read_text()
    model = imported.spec.model
    assert model.tie == "decoder" and model.src_vocab != model.tgt_vocab
    assert imported.weights["src_embed.weight"].shape[0] == model.src_vocab
    assert imported.weights["output_bias"].shape == (model.tgt_vocab,)


def test_each_sides_tokenizer_numbers_pieces_as_its_vocabulary_does(separate):
    _, _, tokenizer, imported = separate
    sources, targets = _lines(8, 0), _lines(8, 1)
    src, tgt = (Tokenizer(imported.tokenizers[side]) for side in ("src", "tgt"))
    rows = imported.side_rows
    assert [[rows["src"][i] for i in seq] for seq in src.encode(sources)] == \
        [ids[:-1] for ids in tokenizer(sources).input_ids]
    marian_target = tokenizer(text_target=targets).input_ids
    assert [[rows["tgt"][i] for i in seq] for seq in tgt.encode(targets)] == [ids[:-1] for ids in marian_target]


def test_logits_equal_marians_on_its_tokenizers_ids(separate):
    _, hf, tokenizer, imported = separate
    ours = attncomp.compile(imported.spec, passes=DEFAULT_PASSES, dtype=torch.float64).eval()
    ours.load_state_dict(imported.weights)
    src_tok, tgt_tok = (Tokenizer(imported.tokenizers[side]) for side in ("src", "tgt"))
    sources, targets = _lines(4, 0), _lines(4, 1)
    src_ids = [ids + [3] for ids in src_tok.encode(sources)]  # attncomp's </s>
    tgt_ids = [[2] + ids for ids in tgt_tok.encode(targets)]  # attncomp's <s> has the decoder start's row
    width_s, width_t = max(map(len, src_ids)), max(map(len, tgt_ids))
    src = torch.tensor([ids + [0] * (width_s - len(ids)) for ids in src_ids])
    tgt = torch.tensor([ids + [0] * (width_t - len(ids)) for ids in tgt_ids])
    rows = {side: torch.tensor(r) for side, r in imported.side_rows.items()}
    with torch.no_grad():
        expected = hf(input_ids=rows["src"][src], attention_mask=(src != 0).long(),
                      decoder_input_ids=rows["tgt"][tgt]).logits[..., rows["tgt"]]
        got = ours(src, tgt)
    assert (rows["src"][src][src != 0] == torch.cat([torch.tensor(i) for i in
                                                     tokenizer(sources).input_ids])).all()
    keep = tgt != 0
    assert (got - expected)[keep].abs().max() < 1e-12


def _round_trip(directory, tmp_path):
    assert run(["import", str(directory), "--out", str(tmp_path / "imported")]) == 0
    assert run(["export", str(tmp_path / "imported" / "checkpoint.pt"), "--format", "hf",
                "--out", str(tmp_path / "exported")]) == 0
    return tmp_path / "exported"


def _same_tensors(directory, exported):
    from safetensors.torch import load_file

    original, back = load_file(directory / "model.safetensors"), load_file(exported / "model.safetensors")
    assert set(original) == set(back)
    for name, tensor in original.items():
        assert back[name].dtype == tensor.dtype and torch.equal(back[name], tensor), name


def _same_tokens(tokenizer, exported):
    again = transformers.MarianTokenizer.from_pretrained(exported)
    sources, targets = _lines(8, 0), _lines(8, 1)
    assert again(sources).input_ids == tokenizer(sources).input_ids
    assert again(text_target=targets).input_ids == tokenizer(text_target=targets).input_ids


def test_export_gives_back_marians_files_separate_vocabularies(separate, tmp_path):
    directory, _, tokenizer, _ = separate
    exported = _round_trip(directory, tmp_path)
    _same_tensors(directory, exported)
    _same_tokens(tokenizer, exported)
    back = transformers.MarianMTModel.from_pretrained(exported, dtype=torch.float64).eval()
    hf = transformers.MarianMTModel.from_pretrained(directory, dtype=torch.float64).eval()  # loaded alike
    src = tokenizer(_lines(3, 0), return_tensors="pt", padding=True)
    targets = tokenizer(text_target=_lines(3, 1)).input_ids  # padded with the target's <pad>, not the source's
    width = max(map(len, targets))
    tgt = torch.tensor([ids + [hf.config.pad_token_id] * (width - len(ids)) for ids in targets])
    with torch.no_grad():
        expected = hf(**src, decoder_input_ids=tgt).logits
        assert (back(**src, decoder_input_ids=tgt).logits - expected).abs().max() < 1e-12


def test_export_gives_back_marians_files_shared_vocabulary(tmp_path):
    from tests.interop.test_marian_import import marian_directory

    directory, hf, tokenizer = marian_directory(tmp_path / "opus", logits_bias=0.1)
    exported = _round_trip(directory, tmp_path)
    _same_tensors(directory, exported)
    _same_tokens(tokenizer, exported)
