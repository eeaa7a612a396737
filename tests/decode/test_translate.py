"""`attncomp translate` and `attncomp eval` on a model trained on the sample corpus."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp.cli.main import run
from attncomp import checkpoint as ckpt
from tests.conftest import ROOT

BLEU_THRESHOLD = 40.0  # held-out sample sentences, 300 CPU training steps (about 20 s)


def _avg(run_dir):
    return str(run_dir / ckpt.AVERAGE)


def test_eval_scores_held_out_sentences(trained_tiny, sample_data, capsys):
    assert run(["eval", _avg(trained_tiny), "--src", str(sample_data / "text/test.src"),
                "--ref", str(sample_data / "text/test.tgt"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["bleu"] > BLEU_THRESHOLD, result
    assert result["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert result["sentences"] == 200 and result["sentences_per_s"] > 0 and result["chrf"] > 0


def test_eval_in_half_precision_keeps_most_translations(trained_tiny, sample_data, tmp_path, capsys):
    """--dtype float16 decodes with half-precision weights and activations (the beam's scores stay float32):
    the JSON says so, and most translations equal float32's (rounding may change a few)."""
    lines = (sample_data / "text/test.src").read_text().splitlines()[:40]
    (tmp_path / "src").write_text("\n".join(lines) + "\n")
    outputs = {}
    for dtype in ("float32", "float16"):
        assert run(["eval", _avg(trained_tiny), "--src", str(tmp_path / "src"), "--ref", str(tmp_path / "src"),
                    "--json", "--device", "cpu", "--dtype", dtype, "--output", str(tmp_path / dtype)]) == 0
        assert json.loads(capsys.readouterr().out)["dtype"] == dtype
        outputs[dtype] = (tmp_path / dtype).read_text().splitlines()
    same = sum(a == b for a, b in zip(outputs["float32"], outputs["float16"]))
    assert len(outputs["float16"]) == 40 and same >= 32, same


def test_int8_refuses_a_half_precision_dtype(trained_tiny, capsys):
    assert run(["translate", _avg(trained_tiny), "--device", "cpu", "--int8", "--dtype", "bfloat16"]) == 2
    err = capsys.readouterr().err
    assert "--int8" in err and "--dtype bfloat16" in err and "Traceback" not in err


def test_translate_keeps_order_and_empty_lines(trained_tiny, sample_data, tmp_path, capsys):
    lines = (sample_data / "text/test.src").read_text().splitlines()[:6]
    lines.insert(2, "")
    lines.insert(5, "   ")
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    assert run(["translate", _avg(trained_tiny), "--input", str(tmp_path / "in.txt"),
                "--output", str(tmp_path / "out.txt")]) == 0
    out = (tmp_path / "out.txt").read_text().split("\n")[:-1]
    assert len(out) == len(lines) and out[2] == "" and out[5] == ""
    singles = []
    for line in lines:  # one line at a time gives the same translations
        (tmp_path / "one.txt").write_text(line + "\n")
        run(["translate", _avg(trained_tiny), "--input", str(tmp_path / "one.txt"), "--output", str(tmp_path / "o")])
        singles.append((tmp_path / "o").read_text().rstrip("\n"))
    assert singles == out


def test_nbest_output(trained_tiny, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the dog sees a cat\n")
    assert run(["translate", _avg(trained_tiny), "--input", str(tmp_path / "in.txt"), "--nbest", "3"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.strip().split("\n")]
    assert len(rows) == 3 and all(r[0] == "0" for r in rows)
    scores = [float(r[1]) for r in rows]
    assert scores == sorted(scores, reverse=True)


def test_awkward_input_gets_defined_results(trained_tiny, tmp_path, capsys):
    (tmp_path / "in.txt").write_bytes(b"the dog \xff\xfe sees a cat\n" + b"the cat " * 1500 + b"\n")
    assert run(["translate", _avg(trained_tiny), "--input", str(tmp_path / "in.txt")]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.split("\n")) == 3
    assert "line(s) 1 are not valid UTF-8" in captured.err
    assert "1 line(s) were longer than the model reads and were cut" in captured.err


def test_checkpoint_of_another_spec_is_refused(trained_tiny, capsys):
    assert run(["translate", _avg(trained_tiny), "--spec", str(ROOT / "specs/base.attn")]) == 1
    assert "was trained with another spec than" in capsys.readouterr().err


def test_architecture_changing_override_is_a_clear_error(trained_tiny, capsys):
    assert run(["translate", _avg(trained_tiny), "--set", "model.d_ff=128"]) == 1
    err = capsys.readouterr().err
    assert "does not fit the model of its spec" in err and "Traceback" not in err


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "not a readable attncomp checkpoint"),
    (lambda p: torch.save({"model": {}}, p), "not an attncomp checkpoint"),
    (lambda p: p.write_text("hello"), "not a readable attncomp checkpoint"),
])
def test_damaged_checkpoints_are_clear_errors(trained_tiny, tmp_path, damage, message, capsys):
    path = tmp_path / "c.pt"
    path.write_bytes((trained_tiny / ckpt.AVERAGE).read_bytes())
    damage(path)
    assert run(["translate", str(path)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_eval_needs_matching_files(trained_tiny, sample_data, tmp_path, capsys):
    (tmp_path / "short.txt").write_text("one line\n")
    assert run(["eval", _avg(trained_tiny), "--src", str(sample_data / "text/test.src"),
                "--ref", str(tmp_path / "short.txt")]) == 2
    assert "200 source lines but 1 reference lines" in capsys.readouterr().err


def test_beam_stop_bench_decodes_with_both_rules(trained_tiny, sample_data, capsys):
    """bench/beam_stop.py (docs/decoding.md's table) keeps working on a current checkpoint."""
    from bench import beam_stop

    results = beam_stop.main([_avg(trained_tiny), "--src", str(sample_data / "text/test.src"),
                              "--ref", str(sample_data / "text/test.tgt"), "--lines", "20"])
    assert set(results) == {"bound", "first"}
    assert all(r["bleu"] > BLEU_THRESHOLD / 2 and r["sentences_per_s"] > 0 for r in results.values()), results
    assert "| `bound` |" in capsys.readouterr().out


@pytest.mark.parametrize("monolingual", [True, False])
def test_a_language_model_of_one_language_continues_its_line(sample_data, monolingual):
    """Trained on one language, a decoder-only model read `<s> text </s>` and never a <sep>: it is prompted
    `<s> line` and its first step reads the line's last token (attncomp translate reads `monolingual` from the
    checkpoint's data manifest); trained on pairs it read `<s> source <sep> target`, and is prompted so."""
    import attncomp
    from attncomp.data.dataset import PreparedData
    from attncomp.decode.translate import Translator
    from attncomp.ir import nodes
    from attncomp.vocab import BOS, SEP

    tok = PreparedData(sample_data).tokenizer("tgt")
    model = attncomp.compile("model lm { d_model = 16  heads = 2  d_ff = 32  vocab = shared(256)  decoder { "
                             "layers = 1 } }")
    fed, step = [], model.decode_step
    model.decode_step = lambda tokens, cache: (fed.append(int(tokens[0, 0])), step(tokens, cache))[1]
    Translator(model, tok, tok, beam=1, alpha=0.0, max_len=nodes.Fixed(length=2), progress=False,
               continuation=monolingual).translate(["the small dog"])
    body = tok.encode(["the small dog"])[0]
    assert fed[:len(body) + 1] == [BOS, *body]  # the prompt, then what is generated
    assert (fed[len(body) + 1] == SEP) is not monolingual
