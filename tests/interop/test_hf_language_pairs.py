"""`data prepare --src-lang --tgt-lang` for imported multilingual encoder-decoders: the prepared source and
labels are what transformers' own tokenizer gives with `src_lang` and `tgt_lang` set (`tokenizer(src,
text_target=tgt)`), for tiny tokenizers of each family (mBART: `text </s> lang`, mBART-50 and NLLB:
`lang text </s>`, M2M100's own files: `__lang__ text </s>`); the decoder input of a training batch is
transformers' `shift_tokens_right` of those labels (mBART's rotates the last one to the front, M2M100's
starts with decoder_start_token_id), so the training loss of a batch equals the transformers model's loss
given the same labels (float64); and the imported model fine-tunes on them."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from attncomp.cli.main import run
from attncomp.data.batching import translation_batch
from attncomp.data.dataset import PreparedData
from attncomp.data.tokenizer import same_vocabulary
from attncomp.loading import load_checkpoint
from attncomp.train.step import TrainStep
from tests.interop import hf_models, hf_tokenizers

transformers = pytest.importorskip("transformers")

ENGLISH = hf_tokenizers.TEXT[0:2] + hf_tokenizers.TEXT[4:6]
GERMAN = hf_tokenizers.TEXT[2:4] * 2


pytestmark = pytest.mark.usefixtures("one_thread")


MODEL_TYPE = {"mbart": "mbart", "mbart50": "mbart", "nllb": "m2m_100", "m2m100": "m2m_100"}


def _prepared(kind: str, tmp_path, **model_changes):
    """A tiny imported model of the family, and data prepared for it with a chosen language pair."""
    directory = tmp_path / kind
    tok, src, tgt = hf_tokenizers.transformers_tokenizer(kind, directory)
    hf = hf_models.model(MODEL_TYPE[kind], torch.float64, vocab_size=len(tok), max_position_embeddings=128,
                         **model_changes)
    hf.save_pretrained(directory)
    assert run(["import", str(directory), "--out", str(tmp_path / "imported")]) == 0
    checkpoint = tmp_path / "imported" / "checkpoint.pt"
    (tmp_path / "par.en").write_text("\n".join(ENGLISH) + "\n")
    (tmp_path / "par.de").write_text("\n".join(GERMAN) + "\n")
    data = tmp_path / "data"
    assert run(["data", "prepare", "--train", str(tmp_path / "par"), "--src", "en", "--tgt", "de", "--tokenizers",
                str(checkpoint), "--src-lang", src, "--tgt-lang", tgt, "--out", str(data), "--workers", "1"]) == 0
    theirs = transformers.AutoTokenizer.from_pretrained(directory, src_lang=src, tgt_lang=tgt)
    return hf, theirs, checkpoint, PreparedData(data)


def _shift(kind: str, hf, labels: torch.Tensor) -> torch.Tensor:
    """transformers' decoder input for these labels, as the model makes it from `labels`."""
    if MODEL_TYPE[kind] == "mbart":
        from transformers.models.mbart.modeling_mbart import shift_tokens_right

        return shift_tokens_right(labels, hf.config.pad_token_id)
    from transformers.models.m2m_100.modeling_m2m_100 import shift_tokens_right

    return shift_tokens_right(labels, hf.config.pad_token_id, hf.config.decoder_start_token_id)


@pytest.mark.parametrize("kind", ["mbart", "mbart50", "nllb", "m2m100"])
def test_prepared_pairs_and_training_loss_are_transformers(kind, tmp_path):
    hf, theirs, checkpoint, prepared = _prepared(kind, tmp_path)
    split = prepared.split("train")  # the model's own ids (its spec declares them): no rows moved
    expected = theirs(ENGLISH, text_target=GERMAN)
    assert len(split) == len(ENGLISH)
    stored = load_checkpoint(checkpoint)[1].header.tokenizers["tgt"].numpy().tobytes()
    assert stored != prepared.tokenizer("tgt").model_bytes  # the languages chosen, the vocabulary the same:
    assert same_vocabulary(stored, prepared.tokenizer("tgt").model_bytes)  # train --init takes it
    for i in range(len(ENGLISH)):
        assert split.src[i].tolist() == expected["input_ids"][i]
        assert split.tgt[i].tolist() == expected["labels"][i]
    # the first batch: the decoder input is transformers' shift of the labels, the loss transformers' loss
    rows = np.arange(len(ENGLISH))
    batch = translation_batch(split, rows, prepared.tokenizer("tgt").specials)
    src_len, tgt_len = split.src.lengths[rows], split.tgt.lengths[rows]
    pad = hf.config.pad_token_id
    src_ids = batch["src"].clone()
    src_ids[torch.arange(src_ids.shape[1]) >= torch.tensor(src_len)[:, None]] = pad
    labels = batch["tgt_out"].clone()
    outside = torch.arange(labels.shape[1]) >= torch.tensor(tgt_len)[:, None]
    labels[outside] = -100
    decoder_in = batch["tgt_in"].clone()
    shifted = _shift(kind, hf, labels)
    assert torch.equal(decoder_in[~outside], shifted[~outside])
    with torch.no_grad():
        loss = hf(input_ids=src_ids, attention_mask=(src_ids != pad).long(), labels=labels).loss
        model, _ = load_checkpoint(checkpoint)
        sums = TrainStep(model.double().eval(), smoothing=0.0)(batch)
    # 1e-8: transformers computes M2M100's sinusoid table in float32, attncomp in float64
    torch.testing.assert_close(sums[1] / sums[2], loss, rtol=1e-8, atol=0.0)
    assert int(sums[2]) == int((~outside).sum())


@pytest.mark.slow
def test_an_imported_mbart_fine_tunes_on_a_chosen_language_pair_and_translates_into_it(tmp_path):
    """mBART (cc25's template, `text </s> lang`): train --init on data prepared with --tgt-lang, and the
    fine-tuned checkpoint decodes from that language (its decoder start) without --tgt-lang."""
    hf, theirs, checkpoint, prepared = _prepared("mbart", tmp_path)
    de = theirs.convert_tokens_to_ids("de_DE")
    assert prepared.tokenizer("tgt").specials.start == de and prepared.tokenizer("tgt").specials.forced == ()
    assert run(["train", str(checkpoint.parent / "model.attn"), "--init", str(checkpoint), "--data",
                str(prepared.path), "--out", str(tmp_path / "run"), "--procs", "1", "--set", "train.steps=3",
                "--set", "train.checkpoint.every=3", "--set", "train.batch=tokens(200)"]) == 0
    tuned = tmp_path / "run" / "checkpoint_00000003.pt"
    (tmp_path / "in.txt").write_text(ENGLISH[0] + "\n")
    assert run(["translate", str(tuned), "--beam", "2", "--input", str(tmp_path / "in.txt"), "--output",
                str(tmp_path / "out.txt"), "--device", "cpu"]) == 0
    assert (tmp_path / "out.txt").read_text().count("\n") == 1
    _, found = load_checkpoint(tuned)
    from attncomp.data.tokenizer import tokenizer_of

    assert tokenizer_of(found.header.tokenizers["tgt"].numpy().tobytes()).specials.start == de


def test_unknown_or_misplaced_language_codes_are_one_line_and_exit_2(tmp_path, capsys):
    hf, theirs, checkpoint, prepared = _prepared("nllb", tmp_path)
    common = ["data", "prepare", "--train", str(tmp_path / "par"), "--src", "en", "--tgt", "de", "--workers", "1"]
    for extra in (["--tokenizers", str(checkpoint), "--tgt-lang", "xx_YY"],
                  ["--tokenizers", str(checkpoint), "--src-lang", "__en__"],
                  ["--tgt-lang", "deu_Latn"]):
        capsys.readouterr()
        assert run([*common, *extra, "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err.strip()
        assert err and "\n" not in err and "Traceback" not in err, err
    assert not (tmp_path / "bad").exists()
