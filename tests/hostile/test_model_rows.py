"""Issue 43, items 3 and 4: every id a tokenizer or a stored envelope can produce is checked against the model's
embedding rows at import, at load and before decoding; translate and eval refuse an encoder-only model. Before,
a tokenizer.json of 192 tokens on a 64-row model imported with exit 0 and translate then died of an IndexError
in beam search (exit 70), as did envelopes whose forced, language or source ids were 10^9; translate and eval of
an imported BERT were an AttributeError (`init_cache`, exit 70)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attncomp.cli.main import run


def _one_line(capsys, *names: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], err
    return lines[0]


def test_import_refuses_a_tokenizer_with_more_tokens_than_the_model_has_rows(tmp_path, capsys):
    from tests.interop import hf_models

    d = hf_models.save(hf_models.model("gpt2", torch.float32, vocab_size=64, n_positions=64, eos_token_id=2,
                                       bos_token_id=2), tmp_path / "src")
    (d / "tokenizer.json").write_text(hf_models.tokenizer_json(192))
    assert run(["import", str(d), "--out", str(tmp_path / "out")]) == 2
    assert "192" in _one_line(capsys, "tokenizer.json", "64")
    assert not (tmp_path / "out").exists()


def _with_envelope(imported_gpt2, tmp_path, change) -> str:
    payload = torch.load(imported_gpt2["ckpt"], weights_only=True)
    record = json.loads(payload["tokenizers"]["src"].numpy().tobytes())
    change(record)
    stored = torch.frombuffer(bytearray(json.dumps(record).encode()), dtype=torch.uint8)
    payload["tokenizers"] = {"src": stored, "tgt": stored.clone()}
    torch.save(payload, tmp_path / "crafted.pt")
    return str(tmp_path / "crafted.pt")


CHANGES = {
    "forced id 10^9": lambda r: r["specials"].update(forced=[10 ** 9]),
    "language id 10^9": lambda r: r.update(languages={"en_XX": 10 ** 9}),
    "source id 10^9": lambda r: r.update(source=[10 ** 9, "text"]),
    "target frame id 10^9": lambda r: r.update(target=[10 ** 9, "text"]),
    "eos 10^9": lambda r: r["specials"].update(eos=10 ** 9),
    "exchanged 10^9": lambda r: r.update(exchanged=10 ** 9),
    "size below the tokenizer's": lambda r: r.update(size=8),
    "size above the model's rows, a forced id between": lambda r: (r.update(size=10 ** 6),
                                                                   r["specials"].update(forced=[5000])),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_translate_refuses_an_envelope_whose_ids_the_model_lacks(change, imported_gpt2, tmp_path, capsys):
    ckpt = _with_envelope(imported_gpt2, tmp_path, CHANGES[change])
    code = run(["translate", ckpt, "--input", str(imported_gpt2["input"]), "--device", "cpu",
                "--output", str(tmp_path / "out.txt")])
    assert code in (1, 2)
    _one_line(capsys)
    assert not (tmp_path / "out.txt").exists()


@pytest.fixture(scope="module")
def imported_bert(tmp_path_factory):
    from tests.interop import hf_models, hf_tokenizers

    root = tmp_path_factory.mktemp("bert")
    tok = hf_tokenizers.wordpiece()
    source = hf_tokenizers.save(hf_models.model("bert", torch.float32, vocab_size=tok.get_vocab_size()), tok,
                                root / "src")
    assert run(["import", str(source), "--out", str(root / "imported")]) == 0
    (root / "in.txt").write_text("the quick brown fox\n")
    return root / "imported" / "checkpoint.pt", root / "in.txt"


def test_translate_and_eval_refuse_an_encoder_only_model(imported_bert, tmp_path, capsys):
    ckpt, text = imported_bert
    capsys.readouterr()
    assert run(["translate", str(ckpt), "--input", str(text), "--device", "cpu"]) == 2
    assert "encoder-only" in _one_line(capsys)
    assert run(["eval", str(ckpt), "--src", str(text), "--ref", str(text), "--device", "cpu"]) == 2
    assert "encoder-only" in _one_line(capsys)
