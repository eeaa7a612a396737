"""Issue 43, items 6 and 7: values that were guessed or silently taken are refused in one line, and paths echoed
to a terminal are escaped. Before: `layer_types` with an unknown kind (`chunked_attention` in a Gemma 3 config)
imported as a sliding window; a stored tokenizer envelope whose `source` has no `text` translated every line to
an empty one with exit 0; `sweep --minutes inf` ran on with no answer; `import --out` given a dangling symbolic
link wrote through it to the link's target; `build` echoed a spec path holding a newline raw."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attncomp.cli.main import run
from tests.hostile.test_model_rows import _with_envelope


def _one_line(capsys, *names: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    for name in names:
        assert name in lines[0], err
    return lines[0]


def test_an_unknown_layer_kind_is_refused_at_import(tmp_path, capsys):
    from tests.interop import hf_models

    d = hf_models.save(hf_models.model("gemma3_text", torch.float32), tmp_path / "src")
    config = json.loads((d / "config.json").read_text())
    config["layer_types"] = ["sliding_attention", "chunked_attention", "full_attention"]
    (d / "config.json").write_text(json.dumps(config))
    assert run(["import", str(d), "--out", str(tmp_path / "out")]) == 2
    _one_line(capsys, "config.json", "chunked_attention")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("source", [[50], [], ["text", "text"], "text", ["lang", "lang", "text"], [None, "text"]])
def test_a_stored_source_frame_without_one_text_is_refused(source, imported_gpt2, tmp_path, capsys):
    ckpt = _with_envelope(imported_gpt2, tmp_path, lambda r: r.update(source=source))
    assert run(["translate", ckpt, "--input", str(imported_gpt2["input"]), "--device", "cpu",
                "--output", str(tmp_path / "out.txt")]) == 2
    assert "source frame" in _one_line(capsys)
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("argv", [
    ["sweep", "x.attn", "--data", "d", "--minutes", "inf", "--out", "o"],
    ["sweep", "x.attn", "--data", "d", "--minutes", "nan", "--out", "o"],
    ["sweep", "x.attn", "--data", "d", "--minutes", "1e300", "--out", "o"],
    ["train", "x.attn", "--data", "d", "--out", "o", "--timeout", "inf"],
    ["train", "x.attn", "--data", "d", "--out", "o", "--timeout", "1e300"],
])
def test_budgets_and_durations_are_finite(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:  # argparse's usage error
        run(argv)
    assert stop.value.code == 2
    _one_line(capsys, argv[-3] if argv[0] == "sweep" else "--timeout")
    assert not (tmp_path / "o").exists()


def test_import_refuses_an_out_that_is_a_dangling_link(imported_gpt2, tmp_path, capsys):
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    assert run(["import", str(imported_gpt2["src"]), "--out", str(tmp_path / "link")]) == 2
    _one_line(capsys, "link")
    assert not (tmp_path / "elsewhere").exists() and (tmp_path / "link").is_symlink()


def test_build_escapes_the_paths_it_echoes(tmp_path, capsys):
    from bench.hostile_corpus import tiny_spec_text

    folder = tmp_path / "a\nb"
    folder.mkdir()
    (folder / "m.attn").write_text(tiny_spec_text())
    assert run(["build", str(folder / "m.attn"), "--out", str(tmp_path / "gen\nx")]) == 0
    out = capsys.readouterr().out
    wrote = [line for line in out.splitlines() if "wrote" in line]
    assert len(wrote) == 1 and "gen\\nx" in wrote[0], out
    assert not any(line.startswith(("b/", "x/")) for line in out.splitlines()), out
    shutil.rmtree(tmp_path / "gen\nx")
