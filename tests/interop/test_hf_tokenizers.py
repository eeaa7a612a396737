"""Imported models read their own tokenizer.json and special ids: `translate` (greedy) gives transformers'
`generate` tokens for byte-level BPE (GPT-2: one token for begin, end and unknown, no pad), Unigram (Llama's
<s> 1 and </s> 2), and the target-language forcing of M2M100 and mBART-50 (`--tgt-lang`, or
generation_config.json's forced_bos_token_id); WordPiece encodes as BERT's template does; and an imported
decoder-only model fine-tunes on monolingual text (`data prepare --tokenizers`, `train --init`) and generates."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp.checkpoint import load as load_checkpoint_file
from attncomp.cli.main import run
from attncomp.data.tokenizer import tokenizer_of
from attncomp.decode.translate import Translator
from attncomp.loading import load_checkpoint
from attncomp.vocab import IGNORE
from tests.interop import hf_models, hf_tokenizers

transformers = pytest.importorskip("transformers")

PROMPTS = ["the quick brown fox", "a cat sees", "der hund und"]


pytestmark = pytest.mark.usefixtures("one_thread")


def _import(directory, tmp_path, name="imported"):
    out = tmp_path / name
    assert run(["import", str(directory), "--out", str(out)]) == 0
    return out / "checkpoint.pt"


def _translator(checkpoint, tgt_lang=None, src_lang=None):
    model, found = load_checkpoint(checkpoint)
    tok = {side: tokenizer_of(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt")}
    src, tgt = tok["src"].with_source_language(src_lang), tok["tgt"].with_target_language(tgt_lang)
    decode = model.spec.decode
    return Translator(model, src, tgt, beam=1, alpha=0.0, max_len=decode.max_len, progress=False), found



def _same_as_generate(ours: list[int], theirs: list[int], eos: int) -> None:
    """Our greedy tokens (without </s>) are generate's, which either ends there with </s> or runs on (our
    search stopped at its length limit, where it forces </s>)."""
    assert theirs[: len(ours)] == ours
    assert len(theirs) == len(ours) or theirs[len(ours)] == eos or len(ours) >= 4, (ours, theirs)


def _generate(hf, ids: list[int], steps: int, **kwargs) -> list[int]:
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), max_new_tokens=steps, do_sample=False, num_beams=1, **kwargs)
    return out[0].tolist()


def test_byte_level_bpe_gpt2_generates_as_transformers(tmp_path, capsys):
    tok = hf_tokenizers.byte_level_bpe()
    end = tok.token_to_id("<|endoftext|>")
    hf = hf_models.model("gpt2", torch.float32, vocab_size=tok.get_vocab_size(), n_positions=64,
                         bos_token_id=end, eos_token_id=end)
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "gpt2"), tmp_path)
    translator, found = _translator(checkpoint)
    specials = translator.specials
    assert (specials.bos, specials.eos, specials.start, specials.pad, specials.sep) == (end, end, end, None, None)
    assert specials.never_generated() == []  # <|endoftext|> is also the end; no pad: id 0 ('!') is a token
    for line, result in zip(PROMPTS, translator.translate(PROMPTS)):
        ids = [end] + tok.encode(line).ids  # GPT-2 has no template: the prompt after <|endoftext|>
        theirs = _generate(hf, ids, len(result[0].tokens) + 1, pad_token_id=end)[len(ids):]
        _same_as_generate(result[0].tokens, theirs, end)
        assert result[0].text == tok.decode(result[0].tokens, skip_special_tokens=True).replace("\n", " ")
    # the command line: the same text
    (tmp_path / "in.txt").write_text("\n".join(PROMPTS) + "\n")
    capsys.readouterr()
    assert run(["translate", str(checkpoint), "--beam", "1", "--input", str(tmp_path / "in.txt"), "--output",
                str(tmp_path / "out.txt"), "--device", "cpu"]) == 0
    assert (tmp_path / "out.txt").read_text().splitlines() == [r[0].text for r in translator.translate(PROMPTS)]


def test_unigram_llama_keeps_its_own_ids_and_generates_as_transformers(tmp_path):
    tok = hf_tokenizers.unigram()
    hf = hf_models.model("llama", torch.float32, vocab_size=tok.get_vocab_size(), bos_token_id=1, eos_token_id=2)
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "llama"), tmp_path)
    translator, _ = _translator(checkpoint)
    specials = translator.specials
    assert (specials.unk, specials.bos, specials.eos, specials.start, specials.pad) == (0, 1, 2, 1, None)
    for line, result in zip(PROMPTS, translator.translate(PROMPTS)):
        ids = tok.encode(line).ids  # the template adds <s>
        assert ids[0] == 1
        theirs = _generate(hf, ids, len(result[0].tokens) + 1, suppress_tokens=[1])[len(ids):]  # <s>: never emitted
        _same_as_generate(result[0].tokens, theirs, 2)


def _seq2seq(family: str, tmp_path, template: str, languages, generation=None):
    tok = hf_tokenizers.unigram(specials=("<s>", "<pad>", "</s>", "<unk>"), template=template, languages=languages)
    hf = hf_models.model(family, torch.float32, vocab_size=tok.get_vocab_size())
    return hf, tok, _import(hf_tokenizers.save(hf, tok, tmp_path / family, generation), tmp_path)


def test_m2m100_target_language_is_forced_as_generate_forces_it(tmp_path, capsys):
    hf, tok, checkpoint = _seq2seq("m2m_100", tmp_path, "__en__ $A </s>", ("__en__", "__de__", "__fr__"))
    for lang in ("__de__", "__fr__"):
        translator, found = _translator(checkpoint, tgt_lang=lang)
        assert translator.specials.forced == (tok.token_to_id(lang),)
        for line, result in zip(PROMPTS, translator.translate(PROMPTS)):
            ids = tok.encode(line).ids
            assert ids[0] == tok.token_to_id("__en__") and ids[-1] == 2
            assert translator._encode([line])[0][0] == ids  # the source template
            theirs = _generate(hf, ids, len(result[0].tokens) + 2, forced_bos_token_id=tok.token_to_id(lang),
                               suppress_tokens=[0, 1])  # attncomp never emits <s> or <pad>
            assert theirs[:2] == [2, tok.token_to_id(lang)]  # decoder start </s>, then the language
            _same_as_generate(result[0].tokens, theirs[2:], 2)
    # eval reads the same tokenizer and language
    (tmp_path / "src.txt").write_text("\n".join(PROMPTS) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(PROMPTS) + "\n")
    capsys.readouterr()
    assert run(["eval", str(checkpoint), "--tgt-lang", "__de__", "--src", str(tmp_path / "src.txt"), "--ref",
                str(tmp_path / "ref.txt"), "--beam", "1", "--json", "--device", "cpu"]) == 0
    assert "bleu" in json.loads(capsys.readouterr().out)
    assert run(["translate", str(checkpoint), "--tgt-lang", "xx_YY", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "__de__" in err and "\n" not in err and "Traceback" not in err


def test_mbart50_generation_config_forces_its_language(tmp_path):
    languages = ("en_XX", "ro_RO")
    tok = hf_tokenizers.unigram(specials=("<s>", "<pad>", "</s>", "<unk>"), template="en_XX $A </s>",
                                languages=languages)
    ro = tok.token_to_id("ro_RO")
    hf = hf_models.model("mbart", torch.float32, vocab_size=tok.get_vocab_size())
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "mbart", {"decoder_start_token_id": 2,
                                                                           "forced_bos_token_id": ro}), tmp_path)
    translator, found = _translator(checkpoint)  # no --tgt-lang: generation_config.json's
    stored = tokenizer_of(found.header.tokenizers["tgt"].numpy().tobytes())
    assert stored.source_lang == "en_XX" and stored.target_lang == "forced"
    assert translator.specials.forced == (ro,) and translator.specials.start == 2
    for line, result in zip(PROMPTS, translator.translate(PROMPTS)):
        ids = tok.encode(line).ids
        theirs = _generate(hf, ids, len(result[0].tokens) + 2, forced_bos_token_id=ro, suppress_tokens=[0, 1])
        assert theirs[:2] == [2, ro]
        _same_as_generate(result[0].tokens, theirs[2:], 2)
    # export writes generation_config.json back: transformers' generate forces the same language
    assert run(["export", str(checkpoint), "--format", "hf", "-o", str(tmp_path / "back")]) == 0
    back = transformers.GenerationConfig.from_pretrained(tmp_path / "back")
    assert back.forced_bos_token_id == ro and back.decoder_start_token_id == 2


def test_wordpiece_bert_encodes_with_its_template(tmp_path):
    tok = hf_tokenizers.wordpiece()
    hf = hf_models.model("bert", torch.float32, vocab_size=tok.get_vocab_size())
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "bert"), tmp_path)
    found = load_checkpoint_file(checkpoint)
    ours = tokenizer_of(found.header.tokenizers["src"].numpy().tobytes())
    assert ours.specials.pad == 0 and ours.specials.unk == 1
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    spec = load_checkpoint(checkpoint)[0].spec.model.specials  # the template's [CLS] and [SEP]: never masked
    assert (spec.bos, spec.eos, ours.specials.bos, ours.specials.eos) == (cls, sep, cls, sep)
    assert spec.mask == ours.specials.mask == tok.token_to_id("[MASK]")  # recorded, so train compares them
    assert ours.encode_source(PROMPTS) == [tok.encode(line).ids for line in PROMPTS]  # [CLS] text [SEP]
    assert ours.decode(ours.encode(PROMPTS)) == [tok.decode(tok.encode(line).ids) for line in PROMPTS]


def test_export_gives_back_the_original_tokenizer_json(tmp_path):
    tok = hf_tokenizers.byte_level_bpe()
    end = tok.token_to_id("<|endoftext|>")
    hf = hf_models.model("gpt2", torch.float32, vocab_size=tok.get_vocab_size(), bos_token_id=end, eos_token_id=end)
    source = hf_tokenizers.save(hf, tok, tmp_path / "gpt2")
    checkpoint = _import(source, tmp_path)
    assert run(["export", str(checkpoint), "--format", "hf", "-o", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "tokenizer.json").read_bytes() == (source / "tokenizer.json").read_bytes()


def test_gpt2s_own_ids_are_declared_and_its_token_0_is_a_target_like_any_other(tmp_path):
    """GPT-2 has no <pad> and its id 0 is "!": the imported spec declares its ids (no rows moved), and a
    batch of data prepared with its tokenizer keeps every "!" in the loss."""
    import numpy as np

    from attncomp import ir
    from attncomp.data.dataset import PreparedData
    from attncomp.data.objective import objective_of

    tok = hf_tokenizers.byte_level_bpe()
    end = tok.token_to_id("<|endoftext|>")
    hf = hf_models.model("gpt2", torch.float32, vocab_size=tok.get_vocab_size(), bos_token_id=end, eos_token_id=end)
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "gpt2"), tmp_path)
    spec = ir.load(checkpoint.parent / "model.attn")
    assert f"vocab = shared({tok.get_vocab_size()}, pad = none, unk = none, bos = {end}, eos = {end}, sep = none)" \
        in (checkpoint.parent / "model.attn").read_text()
    assert spec.model.specials.pad is None and spec.model.specials.start == end
    (tmp_path / "mono.xx").write_text("\n".join(hf_tokenizers.TEXT) + "\n")
    data = tmp_path / "data"
    assert run(["data", "prepare", "--train", str(tmp_path / "mono"), "--lang", "xx", "--tokenizers",
                str(checkpoint), "--out", str(data), "--workers", "1"]) == 0
    prepared = PreparedData(data)
    split = prepared.split("train")
    collate = objective_of(spec.model, True).batcher_collate(spec, lambda: prepared.tokenizer("tgt"),
                                                             str(data))
    batch = collate(split, np.arange(len(split)))
    assert int((batch["tgt_out"] == 0).sum()) == sum(tok.encode(line).ids.count(0) for line in hf_tokenizers.TEXT) > 0
    assert int((batch["tgt_out"] != IGNORE).sum()) == int(split.tgt.lengths.sum())  # every target counts
    assert (batch["tokens"][:, 0] == end).all()


@pytest.mark.slow
def test_an_imported_decoder_only_model_fine_tunes_on_monolingual_text_and_generates(tmp_path):
    tok = hf_tokenizers.byte_level_bpe()
    end = tok.token_to_id("<|endoftext|>")
    hf = hf_models.model("gpt2", torch.float32, vocab_size=tok.get_vocab_size(), n_positions=64,
                         bos_token_id=end, eos_token_id=end)
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "gpt2"), tmp_path)
    (tmp_path / "mono.xx").write_text("\n".join(hf_tokenizers.TEXT * 3) + "\n")
    data = tmp_path / "data"
    assert run(["data", "prepare", "--train", str(tmp_path / "mono"), "--lang", "xx", "--tokenizers",
                str(checkpoint), "--out", str(data), "--workers", "1"]) == 0
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["vocab"]["src_size"] == tok.get_vocab_size()
    first = json.loads((data / "manifest.json").read_text())
    assert first["monolingual"] is True
    assert run(["train", str(checkpoint.parent / "model.attn"), "--init", str(checkpoint), "--data", str(data),
                "--out", str(tmp_path / "run"), "--procs", "1", "--set", "train.steps=6",
                "--set", "train.checkpoint.every=6", "--set", "train.batch=tokens(400)"]) == 0
    tuned = tmp_path / "run" / "checkpoint_00000006.pt"
    before, after = load_checkpoint_file(checkpoint), load_checkpoint_file(tuned)
    assert after.header.step == 6 and set(after.model) == set(before.model)
    assert any(not torch.equal(before.model[k], after.model[k]) for k in before.model)
    # the fine-tuned model generates with the imported tokenizer, as transformers generates with its weights
    translator, _ = _translator(tuned)
    result = translator.translate(["the quick brown"])[0][0]
    assert result.text == tok.decode(result.tokens, skip_special_tokens=True).replace("\n", " ")
    (tmp_path / "in.txt").write_text("the quick brown\n")
    assert run(["translate", str(tuned), "--sample", "--seed", "3", "--input", str(tmp_path / "in.txt"),
                "--output", str(tmp_path / "out.txt"), "--device", "cpu"]) == 0
    assert (tmp_path / "out.txt").read_text().count("\n") == 1  # a generated line break is a space


@pytest.mark.parametrize("stored", [b"{not json", b'{"format": "attncomp/hf-tokenizer", "version": 1}',
                                    b'{"format": "something else"}'])
def test_a_damaged_stored_tokenizer_is_one_line_and_exit_2(stored, tmp_path, capsys):
    from attncomp import checkpoint as ckpt

    tok = hf_tokenizers.byte_level_bpe()
    end = tok.token_to_id("<|endoftext|>")
    hf = hf_models.model("gpt2", torch.float32, vocab_size=tok.get_vocab_size(), bos_token_id=end, eos_token_id=end)
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "gpt2"), tmp_path)
    found = load_checkpoint_file(checkpoint)
    bad = torch.frombuffer(bytearray(stored), dtype=torch.uint8)
    header = found.header.__class__(**{**found.header.__dict__, "tokenizers": {"src": bad, "tgt": bad}})
    ckpt.save(ckpt.Checkpoint(header, model=dict(found.model)), tmp_path / "bad.pt")
    (tmp_path / "in.txt").write_text("the dog\n")
    for argv in (["translate", str(tmp_path / "bad.pt"), "--input", str(tmp_path / "in.txt"), "--device", "cpu"],
                 ["translate", str(checkpoint), "--tgt-lang", "de_DE", "--input", str(tmp_path / "in.txt"),
                  "--device", "cpu"]):
        capsys.readouterr()
        assert run(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err and "\n" not in err and "Traceback" not in err, err


@pytest.mark.slow
def test_an_imported_encoder_decoder_fine_tunes_on_parallel_text_as_transformers_trains(tmp_path):
    """BART: data prepared with its tokenizer frames the source as its template (<s> text </s>) and the
    target as its labels (<s> text </s>: the forced <s> first), batches start the decoder with
    decoder_start_token_id, so attncomp's training logits are transformers' on the same pair; train --init
    fine-tunes it and translate generates."""
    from attncomp.data.batching import translation_batch
    from attncomp.data.dataset import PreparedData

    tok = hf_tokenizers.unigram(specials=("<s>", "<pad>", "</s>", "<unk>"), template="<s> $A </s>")
    hf = hf_models.model("bart", torch.float32, vocab_size=tok.get_vocab_size(), max_position_embeddings=128)
    checkpoint = _import(hf_tokenizers.save(hf, tok, tmp_path / "bart", {"decoder_start_token_id": 2,
                                                                         "forced_bos_token_id": 0}), tmp_path)
    english, german = hf_tokenizers.TEXT[0:2] + hf_tokenizers.TEXT[4:5], hf_tokenizers.TEXT[2:4] + hf_tokenizers.TEXT[5:6]
    (tmp_path / "par.src").write_text("\n".join(english * 8) + "\n")
    (tmp_path / "par.tgt").write_text("\n".join(german * 8) + "\n")
    data = tmp_path / "data"
    assert run(["data", "prepare", "--train", str(tmp_path / "par"), "--tokenizers", str(checkpoint),
                "--out", str(data), "--workers", "1"]) == 0
    prepared = PreparedData(data)
    specials = prepared.tokenizer("tgt").specials
    split = prepared.split("train")
    batch = translation_batch(split, torch.arange(3).numpy(), specials)
    model, _ = load_checkpoint(checkpoint)
    model.eval()
    for row in range(3):
        src = [t for t in batch["src"][row].tolist() if t != specials.pad]  # BART's <pad>: 1, the model's own
        labels = [t for t in batch["tgt_out"][row].tolist() if t != IGNORE]
        text = tok.decode(src, skip_special_tokens=True)
        assert src == tok.encode(text).ids  # the source: BART's template
        target = tok.decode(labels, skip_special_tokens=True)
        assert labels == tok.encode(target).ids  # the labels: <s> text </s>
        with torch.no_grad():
            theirs = hf(input_ids=torch.tensor([src]), labels=torch.tensor([labels])).logits[0]
            ours = model(torch.tensor([src]), batch["tgt_in"][row : row + 1, : len(labels)])[0]
        torch.testing.assert_close(ours.double(), theirs.double(), rtol=1e-4, atol=1e-4)
    assert run(["train", str(checkpoint.parent / "model.attn"), "--init", str(checkpoint), "--data", str(data),
                "--out", str(tmp_path / "run"), "--procs", "1", "--set", "train.steps=4",
                "--set", "train.checkpoint.every=4", "--set", "train.batch=tokens(300)"]) == 0
    tuned = tmp_path / "run" / "checkpoint_00000004.pt"
    assert load_checkpoint_file(tuned).header.step == 4
    (tmp_path / "in.txt").write_text(english[0] + "\n")
    assert run(["translate", str(tuned), "--beam", "2", "--input", str(tmp_path / "in.txt"), "--output",
                str(tmp_path / "out.txt"), "--device", "cpu"]) == 0
    assert (tmp_path / "out.txt").read_text().count("\n") == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_sharded_half_precision_checkpoint_imports_in_its_dtype_and_generates(dtype, tmp_path, capsys):
    """A real checkpoint's layout: shards (model.safetensors.index.json), bf16 or fp16 weights, tokenizer.json
    and generation_config.json; the import keeps the stored dtype and translate reads its tokenizer."""
    tok = hf_tokenizers.unigram()
    hf = hf_models.model("llama", torch.float32, vocab_size=tok.get_vocab_size(), bos_token_id=1,
                         eos_token_id=2).to(dtype)
    directory = tmp_path / "llama"
    hf.save_pretrained(directory, max_shard_size="20KB")
    tok.save(str(directory / "tokenizer.json"))
    assert len(set(hf_models.read_json(directory / "model.safetensors.index.json")["weight_map"].values())) > 1
    checkpoint = _import(directory, tmp_path)
    assert {t.dtype for t in load_checkpoint_file(checkpoint).model.values()} == {dtype}
    (tmp_path / "in.txt").write_text("the quick brown fox\n")
    assert run(["translate", str(checkpoint), "--beam", "2", "--input", str(tmp_path / "in.txt"), "--output",
                str(tmp_path / "out.txt"), "--device", "cpu"]) == 0
    assert (tmp_path / "out.txt").read_text().count("\n") == 1
