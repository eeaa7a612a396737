"""`attncomp import DIR` (attncomp/interop/marian_import.py): a small random MarianMTModel saved
locally with save_pretrained and MarianTokenizer's files (nothing downloaded), imported, then
translated by attncomp and by transformers' `generate`: equal token ids and text.

Search settings that both sides share: beam 1 (greedy), and beam 4 with no length penalty
(attncomp's alpha 0, HF's length_penalty 0: both rank by the sum of log-probabilities), <pad>
blocked on HF's side as attncomp always blocks it (OPUS-MT models set bad_words_ids to it too), and
the imported spec's `stop = first` (with `stop = bound` they can differ at beam 4: an ending ranked
below the beam is kept as a finished hypothesis and can win; beam 1 is greedy under either rule)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attncomp.cli.main import run
from attncomp.loading import load_checkpoint
from attncomp.data.sample_corpus import generate
from attncomp.data.tokenizer import Tokenizer
from attncomp.decode.translate import Translator
from attncomp.interop import marian_import
from attncomp.ir import nodes

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

SENTENCES = 6
LIMIT = 16  # output tokens at most, </s> included (attncomp's decode.max_len, HF's max_new_tokens)


def _train_spm(lines: list[str], prefix, vocab_size: int) -> bytes:
    """A unigram model (OPUS-MT's kind) with Marian's own special ids: <unk> 0, <s> 1, </s> 2."""
    text = prefix.with_suffix(".txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix), vocab_size=vocab_size,
                                   model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                   hard_vocab_limit=False, minloglevel=2, num_threads=1)
    return prefix.with_suffix(".model").read_bytes()


def _marian_vocab(source: bytes, target: bytes) -> dict[str, int]:
    """Marian's layout: </s> 0, <unk> 1, the pieces of both models, <pad> last."""
    pieces: list[str] = []
    for model in (source, target):
        sp = spm.SentencePieceProcessor(model_proto=model)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                   if not sp.is_control(i) and not sp.is_unknown(i) and sp.id_to_piece(i) not in pieces]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def marian_directory(out, activation: str = "relu", seed: int = 0, logits_bias: float = 0.0):
    """A random MarianMTModel (d_model 32, 2+2 layers) with its tokenizer files, saved in `out`;
    `logits_bias`: the spread of a random final_logits_bias (a buffer, zero in a fresh model)."""
    pairs = generate(seed=3, pairs=400)
    out.mkdir(parents=True, exist_ok=True)
    source = _train_spm([s for s, _ in pairs], out / "src_spm", 40)
    target = _train_spm([t for _, t in pairs], out / "tgt_spm", 40)
    (out / "source.spm").write_bytes(source)
    (out / "target.spm").write_bytes(target)
    vocab = _marian_vocab(source, target)
    (out / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = transformers.MarianTokenizer(str(out / "source.spm"), str(out / "target.spm"), str(out / "vocab.json"))
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab), d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_layers=2, decoder_layers=2, max_position_embeddings=256,
        activation_function=activation, scale_embedding=True, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=0, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0)
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():  # weights that vary the output, and </s> favoured so that some end early
        for name, p in model.named_parameters():
            if name != "model.shared.weight" and "embed_positions" not in name and "final_logits_bias" not in name:
                p.add_(torch.randn_like(p) * 0.1)
        model.final_logits_bias.normal_(0.0, logits_bias)
        eos = model.model.shared.weight[0]
        model.model.decoder.layers[-1].final_layer_norm.bias.add_(0.1 * eos / eos.norm() ** 2)
    model.generation_config.num_beams = 4  # as OPUS-MT models have it
    model.generation_config.bad_words_ids = [[pad]]
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    for leftover in out.glob("*_spm.*"):
        leftover.unlink()
    return out, model, tokenizer


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(Marian directory, its model, its tokenizer, the imported checkpoint), imported by the CLI."""
    root = tmp_path_factory.mktemp("marian")
    directory, model, tokenizer = marian_directory(root / "opus-mt")
    assert run(["import", str(directory), "--out", str(root / "imported")]) == 0
    return directory, model, tokenizer, root / "imported" / "checkpoint.pt"


def _one_line_error(capsys, argv: list[str]) -> str:
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_what_is_not_a_model_attncomp_imports_is_refused_in_one_line(imported, tmp_path, capsys):
    directory = imported[0]
    out = ["--out", str(tmp_path / "out")]
    assert "no config.json" in _one_line_error(capsys, ["import", str(tmp_path), *out])
    other = tmp_path / "other"
    shutil.copytree(directory, other)
    (other / "config.json").write_text(json.dumps({"model_type": "wav2vec2"}))
    assert "describes a 'wav2vec2' model" in _one_line_error(capsys, ["import", str(other), *out])


def test_unsupported_options_are_refused_in_one_line(imported, tmp_path, capsys):
    tanh = tmp_path / "tanh"
    shutil.copytree(imported[0], tanh)
    config = json.loads((tanh / "config.json").read_text())
    (tanh / "config.json").write_text(json.dumps({**config, "activation_function": "tanh"}))
    assert "activation 'tanh'" in _one_line_error(capsys, ["import", str(tanh), "--out", str(tmp_path / "out")])


def test_a_pickle_is_read_only_when_allowed(imported, tmp_path, capsys):
    pickled = tmp_path / "pickled"
    shutil.copytree(imported[0], pickled)
    torch.save(imported[1].state_dict(), pickled / "pytorch_model.bin")
    (pickled / "model.safetensors").unlink()
    out = tmp_path / "out"
    assert "--allow-pickle" in _one_line_error(capsys, ["import", str(pickled), "--out", str(out)])
    assert not out.exists()
    assert run(["import", str(pickled), "--out", str(out), "--allow-pickle"]) == 0
    assert (out / "checkpoint.pt").is_file() and (out / "model.attn").is_file()


def _lines(pairs: int, side: int = 0) -> list[str]:
    return [" ".join(pair[side].split()[:3]) for pair in generate(seed=4, pairs=pairs)]


def test_tokenizers_number_pieces_as_marian_does(imported):
    directory, _, tokenizer, path = imported
    rows = marian_import.import_directory(directory).rows
    _, found = load_checkpoint(path)
    src, tgt = (Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt"))
    sources, targets = _lines(8, 0), _lines(8, 1)
    assert [[rows[i] for i in seq] for seq in src.encode(sources)] == [ids[:-1] for ids in tokenizer(sources).input_ids]
    marian_target = tokenizer(text_target=targets).input_ids
    assert [[rows[i] for i in seq] for seq in tgt.encode(targets)] == [ids[:-1] for ids in marian_target]
    assert tgt.decode(tgt.encode(targets)) == tokenizer.batch_decode(marian_target, skip_special_tokens=True)


@pytest.mark.parametrize("beam", [1, 4])
def test_translations_equal_generate(imported, beam, tmp_path):
    """attncomp's token ids (the Translator) and `attncomp translate`'s text equal `generate`'s."""
    directory, hf, tokenizer, path = imported
    rows = marian_import.import_directory(directory).rows
    model, found = load_checkpoint(path)
    src, tgt = (Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt"))
    lines = _lines(SENTENCES)
    translator = Translator(model, src, tgt, beam=beam, alpha=0.0, max_len=nodes.Fixed(length=LIMIT),
                            progress=False)
    ours = [options[0].tokens for options in translator.translate(lines)]
    pad, eos = hf.config.pad_token_id, hf.config.eos_token_id
    encoded = tokenizer(lines, return_tensors="pt", padding=True)
    out = hf.generate(**encoded, num_beams=beam, do_sample=False, length_penalty=0.0, early_stopping=False,
                      max_new_tokens=LIMIT, bad_words_ids=[[pad]])
    expected = [[i for i in row[1:] if i not in (pad, eos)] for row in out.tolist()]
    assert [[rows[i] for i in tokens] for tokens in ours] == expected
    if beam > 1:  # some end before the limit while live hypotheses go on: the stopping rule matters
        assert any(len(e) < LIMIT - 1 for e in expected) 
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run(["translate", str(path), "--beam", str(beam), "--alpha", "0", "--device", "cpu",
                "--set", f"decode.max_len={LIMIT}", "--input", str(tmp_path / "in.txt"),
                "--output", str(tmp_path / "out.txt")]) == 0
    text = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    assert text == tokenizer.batch_decode([e + [eos] for e in expected], skip_special_tokens=True)


def test_swish_and_a_final_logits_bias_import(tmp_path):
    """OPUS-MT's swish (attncomp's silu) and a trained final_logits_bias (attncomp's output bias, its
    entries renumbered with the vocabulary): greedy and beam-4 ids equal `generate`'s."""
    directory, hf, tokenizer = marian_directory(tmp_path / "opus-mt", activation="swish", logits_bias=0.1)
    assert run(["import", str(directory), "--out", str(tmp_path / "imported")]) == 0
    imported = marian_import.import_directory(directory)
    assert "activation = silu" in imported.spec_text and imported.spec.model.bias.output
    model, found = load_checkpoint(tmp_path / "imported" / "checkpoint.pt")
    src, tgt = (Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt"))
    lines, pad, eos = _lines(SENTENCES), hf.config.pad_token_id, hf.config.eos_token_id
    for beam in (1, 4):
        translator = Translator(model, src, tgt, beam=beam, alpha=0.0, max_len=nodes.Fixed(length=LIMIT),
                                progress=False)
        ours = [options[0].tokens for options in translator.translate(lines)]
        out = hf.generate(**tokenizer(lines, return_tensors="pt", padding=True), num_beams=beam, do_sample=False,
                          length_penalty=0.0, early_stopping=False, max_new_tokens=LIMIT, bad_words_ids=[[pad]])
        expected = [[i for i in row[1:] if i not in (pad, eos)] for row in out.tolist()]
        assert [[imported.rows[i] for i in tokens] for tokens in ours] == expected, beam


def test_the_spec_takes_the_models_beam(imported):
    spec = (imported[3].parent / "model.attn").read_text()
    assert "decode { beam = 4  stop = first }" in spec and "vocab = shared(" in spec


def test_a_piece_missing_from_vocab_json_reads_as_unk(imported, tmp_path):
    """Marian maps a piece its vocabulary lacks to <unk>; the import gives that piece <unk>'s row."""
    directory, _, _, _ = imported
    gap = tmp_path / "gap"
    shutil.copytree(directory, gap)
    vocab = json.loads((gap / "vocab.json").read_text())
    pieces = spm.SentencePieceProcessor(model_file=str(gap / "source.spm")).encode("queen", out_type=str)
    dropped = next(p for p in pieces if "q" in p)
    del vocab[dropped]
    (gap / "vocab.json").write_text(json.dumps(vocab))
    result = marian_import.import_directory(gap)
    tokenizer = transformers.MarianTokenizer(str(gap / "source.spm"), str(gap / "target.spm"), str(gap / "vocab.json"))
    lines = ["the queen finds a quiet king"]
    ours = Tokenizer(result.tokenizers["src"]).encode(lines)
    assert [[result.rows[i] for i in seq] for seq in ours] == [ids[:-1] for ids in tokenizer(lines).input_ids]
    assert vocab["<unk>"] in [result.rows[i] for i in ours[0]]


def test_an_imported_model_fine_tunes(imported, sample_data, tmp_path):
    """`data prepare --tokenizers` encodes with the imported model's sentencepiece models, and
    `train --init` fine-tunes its weights."""
    checkpoint = imported[3]
    text, data = sample_data / "text", tmp_path / "data"
    assert run(["data", "prepare", "--train", str(text / "train"), "--valid", str(text / "valid"),
                "--tokenizers", str(checkpoint), "--out", str(data)]) == 0
    manifest = json.loads((data / "manifest.json").read_text())
    _, found = load_checkpoint(checkpoint)
    assert (data / manifest["vocab"]["src_model"]).read_bytes() == found.header.tokenizers["src"].numpy().tobytes()
    assert run(["train", str(checkpoint.parent / "model.attn"), "--init", str(checkpoint), "--data", str(data),
                "--out", str(tmp_path / "run"), "--procs", "1", "--set", "train.steps=2",
                "--set", "train.checkpoint.every=2", "--set", "train.batch=tokens(300)"]) == 0
    tuned = load_checkpoint(tmp_path / "run" / "checkpoint_00000002.pt")[1]
    assert tuned.header.step == 2 and set(tuned.model) == set(found.model)
