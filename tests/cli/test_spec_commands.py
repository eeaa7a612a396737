"""`attncomp check | show | diff` as a user runs them: output, exit codes, and overrides."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attncomp import ir
from attncomp.cli.main import run
from tests.conftest import ROOT, SPECS


def attncomp(*args, cwd=ROOT):
    """Run the installed entry point the way a shell would."""
    return subprocess.run([sys.executable, "-m", "attncomp.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_check_every_shipped_spec_with_a_recursive_glob():
    result = attncomp("check", "specs/**/*.attn")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ok  ") == len(SPECS)
    assert "Traceback" not in result.stderr


def test_check_a_directory(capsys):
    assert run(["check", "-q", str(ROOT / "specs")]) == 0


def test_check_reports_each_bad_file_and_exits_2(tmp_path, capsys):
    (tmp_path / "good.attn").write_text("model m { decoder {} }\n")
    (tmp_path / "bad.attn").write_text("model m { decoder { layers = 0 } }\n")
    code = run(["check", str(tmp_path / "good.attn"), str(tmp_path / "bad.attn")])
    out = capsys.readouterr()
    assert code == 2
    assert "good.attn" in out.out and "layers must be at least 1, got 0" in out.err


def test_show_b1_resolves_d_k_and_d_v(capsys):
    assert run(["show", str(ROOT / "specs/table3/B1.attn")]) == 0
    text = capsys.readouterr().out
    assert text.count("d_k = 16") == 2 and text.count("d_v = 64") == 2
    assert "sha256 " + ir.spec_hash(ir.load(ROOT / "specs/table3/B1.attn")) in text


def test_show_output_parses_back_to_the_same_spec(capsys):
    run(["show", str(ROOT / "specs/big.attn")])
    assert ir.load(capsys.readouterr().out) == ir.load(ROOT / "specs/big.attn")


def test_show_json(capsys):
    assert run(["show", "--json", str(ROOT / "specs/base.attn")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["encoder"]["heads"] == 8 and len(data["hash"]) == 64


def test_override_goes_through_validation(capsys):
    assert run(["show", str(ROOT / "specs/base.attn"), "--set", "model.heads=4"]) == 0
    assert capsys.readouterr().out.count("d_k = 128") == 2
    assert run(["show", str(ROOT / "specs/base.attn"), "--set", "model.hedas=4"]) == 2
    err = capsys.readouterr().err
    assert 'unknown key "hedas" in model (did you mean "heads"?)' in err
    assert run(["show", str(ROOT / "specs/base.attn"), "--set", "model.heads=7"]) == 2
    assert "not divisible by heads = 7" in capsys.readouterr().err


def test_override_of_a_choice_argument_merges(capsys):
    assert run(["show", "--json", str(ROOT / "specs/base.attn"), "--set", "train.schedule=noam(warmup = 8000)"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["schedule"] == {"kind": "noam", "warmup": 8000, "scale": 1.0}


@pytest.mark.parametrize("tolerance, expected", [("58M +- 5%", {"percent": 5.0, "absolute": None}),
                                                  ("58M", {"percent": None, "absolute": None})])
def test_a_tolerance_over_another_replaces_it_whole(tolerance, expected, capsys):
    """base.attn's `65M +- 2.6M` under `58M +- 5%` was refused ("not both", located in base.attn), and under `58M`
    kept its 2.6M: a tolerance is one value, not a block merged key by key."""
    assert run(["show", "--json", str(ROOT / "specs/base.attn"), "--set", f"expect.params={tolerance}"]) == 0
    assert json.loads(capsys.readouterr().out)["expect"]["params"] == {"value": 58e6, **expected}


@pytest.mark.parametrize("bad", ["model.heads", "=3", "model.heads=", "model.heads=4 5"])
def test_malformed_override_is_a_located_error(bad, capsys):
    assert run(["show", str(ROOT / "specs/base.attn"), "--set", bad]) == 2
    assert "error:" in capsys.readouterr().err


def test_diff_lists_what_big_changes(capsys):
    assert run(["diff", str(ROOT / "specs/base.attn"), str(ROOT / "specs/big.attn")]) == 1
    out = capsys.readouterr().out
    for key in ("model.encoder.d_model", "model.decoder.heads", "model.dropout.residual", "train.steps"):
        assert key in out
    assert "model.encoder.layers" not in out


def test_diff_of_identical_specs_exits_0(capsys):
    path = str(ROOT / "specs/base.attn")
    assert run(["diff", path, path]) == 0


def test_missing_file_is_one_clean_line():
    result = attncomp("show", "nowhere.attn")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: no such spec file: nowhere.attn"
