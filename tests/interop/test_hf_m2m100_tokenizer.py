"""M2M100's own checkpoints (facebook/m2m100_418M's layout): sentencepiece.bpe.model and vocab.json, no
tokenizer.json. The import reads them as transformers' M2M100Tokenizer does (pieces through vocab.json, the
language tokens __xx__ after it): the same ids on varied text, `translate --tgt-lang` gives `generate`'s tokens
with forced_bos_token_id, data prepared with it is transformers' input and labels, export writes
the files back; damaged files are one line and exit 2."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp.cli.main import run
from attncomp.data.tokenizer import tokenizer_of
from attncomp.errors import DataError
from attncomp.vocab import IGNORE
from tests.interop import hf_models, hf_tokenizers
from tests.interop.test_hf_tokenizers import _generate, _import, _same_as_generate, _translator

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")

LINES = ["the quick brown fox", "hello world, this is a tiny corpus", "  spaced   out  ", "snow ☃ 日本 über",
         "x</s>y and a<unk>b", "a literal __fr__ token", "numbers 1 2 3: yes! no?"]
MADE_UP = 8  # M2M100's vocabulary ends with 8 "madeupword" rows after the language tokens


def _m2m100(tmp_path, forced: str | None = None):
    tok = hf_tokenizers.m2m100_files(tmp_path / "m2m")
    hf = hf_models.model("m2m_100", torch.float32, vocab_size=tok.get_lang_id("zu") + 1 + MADE_UP)
    hf.save_pretrained(tmp_path / "m2m")
    if forced is not None:
        generation = {"decoder_start_token_id": 2, "forced_bos_token_id": tok.get_lang_id(forced)}
        (tmp_path / "m2m" / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return hf, tok, _import(tmp_path / "m2m", tmp_path)


def _stored(checkpoint) -> bytes:
    from attncomp.checkpoint import load

    return load(checkpoint).header.tokenizers["src"].numpy().tobytes()


def test_ids_are_m2m100_tokenizers_and_export_writes_its_files_back(tmp_path):
    hf, tok, checkpoint = _m2m100(tmp_path)
    ours = tokenizer_of(_stored(checkpoint))
    assert ours.exchanged is None and ours.specials.pad == 1  # the model's own ids: no rows moved
    assert ours.languages["__af__"] == tok.get_lang_id("af") == tok.vocab_size  # right after vocab.json
    assert ours.languages["__en__"] == tok.get_lang_id("en")
    for src in ("en", "de"):
        tok.src_lang = src
        mine = ours.with_source_language(f"__{src}__").encode_source(LINES)
        assert mine == [tok(line).input_ids for line in LINES]
    assert 3 in tok("snow ☃").input_ids  # a character sentencepiece has not seen: <unk>
    assert tok.get_lang_id("fr") in tok("a literal __fr__ token").input_ids  # a language token in the text
    assert ours.decode(ours.encode(LINES)) == [tok.decode(tok(line, add_special_tokens=False).input_ids,
                                                         skip_special_tokens=True) for line in LINES]
    assert run(["export", str(checkpoint), "--format", "hf", "-o", str(tmp_path / "back")]) == 0
    for name in ("sentencepiece.bpe.model", "vocab.json"):
        assert (tmp_path / "back" / name).read_bytes() == (tmp_path / "m2m" / name).read_bytes()
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "back")
    assert type(again).__name__ == "M2M100Tokenizer"
    tok.src_lang = "en"
    assert [again(line).input_ids for line in LINES] == [tok(line).input_ids for line in LINES]
    record = json.loads(_stored(checkpoint))  # a damaged stored record is one line (DataError: exit 2)
    for damage in ({"model": "not base64!"}, {"model": ""}, {"vocab": "[1, 2]"}, {"vocab": "{"}):
        with pytest.raises(DataError) as raised:
            tokenizer_of(json.dumps({**record, "sentencepiece": {**record["sentencepiece"], **damage}}).encode())
        assert "\n" not in str(raised.value)


def test_tgt_lang_is_forced_as_generate_forces_it(tmp_path, capsys):
    hf, tok, checkpoint = _m2m100(tmp_path)
    tok.src_lang = "en"
    prompts = LINES[:3]
    for lang in ("fr",):
        translator, found = _translator(checkpoint, tgt_lang=f"__{lang}__")
        assert translator.specials.forced == (tok.get_lang_id(lang),)
        for line, result in zip(prompts, translator.translate(prompts)):
            ids = tok(line).input_ids
            theirs = _generate(hf, ids, len(result[0].tokens) + 2, forced_bos_token_id=tok.get_lang_id(lang),
                               suppress_tokens=[0, 1])  # attncomp never emits <s> or <pad>
            assert theirs[:2] == [2, tok.get_lang_id(lang)]
            _same_as_generate(result[0].tokens, theirs[2:], 2)
    (tmp_path / "in.txt").write_text("\n".join(prompts) + "\n")
    assert run(["translate", str(checkpoint), "--tgt-lang", "__fr__", "--beam", "1", "--input",
                str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.txt"), "--device", "cpu"]) == 0
    translator, _ = _translator(checkpoint, tgt_lang="__fr__")
    assert (tmp_path / "out.txt").read_text().splitlines() == [r[0].text for r in translator.translate(prompts)]
    capsys.readouterr()
    assert run(["eval", str(checkpoint), "--tgt-lang", "__de__", "--src", str(tmp_path / "in.txt"), "--ref",
                str(tmp_path / "in.txt"), "--beam", "1", "--json", "--device", "cpu"]) == 0
    assert "bleu" in json.loads(capsys.readouterr().out)


def test_prepared_data_is_transformers_input_and_labels(tmp_path):
    from attncomp.data.batching import translation_batch
    from attncomp.data.dataset import PreparedData

    hf, tok, checkpoint = _m2m100(tmp_path, forced="de")  # generation_config.json's forced language
    tok.src_lang, tok.tgt_lang = "en", "de"
    english, german = hf_tokenizers.TEXT[0:2], hf_tokenizers.TEXT[2:4]
    (tmp_path / "par.src").write_text("\n".join(english * 8) + "\n")
    (tmp_path / "par.tgt").write_text("\n".join(german * 8) + "\n")
    data = tmp_path / "data"
    assert run(["data", "prepare", "--train", str(tmp_path / "par"), "--tokenizers", str(checkpoint),
                "--out", str(data), "--workers", "1"]) == 0
    prepared = PreparedData(data)
    specials = prepared.tokenizer("tgt").specials
    assert specials.pad == 1  # M2M100's own <pad>: no rows moved
    batch = translation_batch(prepared.split("train"), torch.arange(2).numpy(), specials)
    for row in range(2):
        src = [t for t in batch["src"][row].tolist() if t != specials.pad]
        labels = [t for t in batch["tgt_out"][row].tolist() if t != IGNORE]
        expected = tok(english[row], text_target=german[row])
        assert src == expected.input_ids  # __en__ text </s>
        assert labels == expected.labels  # __de__ text </s>
    # train --init reads these batches as it reads BART's (test_hf_tokenizers.py fine-tunes an imported BART:
    # a training worker is a fresh process, seconds this file does not spend again)


@pytest.mark.parametrize("damage", ["vocab.json missing", "vocab.json a list", "vocab.json not JSON",
                                    "sentencepiece.bpe.model empty",
                                    "tokenizer_config.json with unknown language_codes"])
def test_damaged_tokenizer_files_are_one_line_and_exit_2(damage, tmp_path, capsys):
    directory = tmp_path / "m2m"
    tok = hf_tokenizers.m2m100_files(directory)
    hf_models.model("m2m_100", torch.float32, vocab_size=tok.get_lang_id("zu") + 1 + MADE_UP).save_pretrained(directory)
    if damage == "vocab.json missing":
        (directory / "vocab.json").unlink()
    elif damage == "vocab.json a list":
        (directory / "vocab.json").write_text("[1, 2]")
    elif damage == "vocab.json not JSON":
        (directory / "vocab.json").write_bytes(b"\xff{")
    elif damage == "sentencepiece.bpe.model empty":
        (directory / "sentencepiece.bpe.model").write_bytes(b"")
    else:
        (directory / "tokenizer_config.json").write_text(json.dumps({"language_codes": "klingon"}))
    capsys.readouterr()
    assert run(["import", str(directory), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    assert damage.split()[0] in err  # the file it names
