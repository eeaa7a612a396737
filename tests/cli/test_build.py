"""`attncomp build`: the report, --json, --emit, expectations and bad arguments."""

from __future__ import annotations

import json

import pytest

from attncomp.cli.main import run
from tests.conftest import ROOT


def test_json_report_of_base(capsys, tmp_path):
    assert run(["build", str(ROOT / "specs/base.attn"), "--json", "-o", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("params", "flops_per_token", "fused_attention", "attention", "expect_ok"):
        assert key in report
    assert report["fused_attention"] == 18 and report["expect_ok"] is True
    assert 62e6 < report["params"] < 64e6
    assert 3.5e8 < report["flops_per_token"] < 4.2e8  # about 6 x parameters per token
    sites = {a["site"]: a for a in report["attention"]}
    assert sites["decoder self-attention"]["backends"]["flash"] == "yes"
    assert "padding mask" in sites["encoder self-attention"]["backends"]["flash"]
    assert (tmp_path / "base.py").exists()


def test_b1_and_a1_cannot_use_flash(capsys):
    for row, reason in (("B1", "d_k = d_v"), ("A1", "> 256")):
        assert run(["build", str(ROOT / f"specs/table3/{row}.attn"), "--json", "--no-write"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert all(reason in a["backends"]["flash"] for a in report["attention"])
        assert all(a["backends"]["efficient"] == "yes" for a in report["attention"])


def test_unmet_expectation_fails_the_build(capsys, tmp_path):
    spec = tmp_path / "wrong.attn"
    spec.write_text(f'extends "{ROOT / "specs/base.attn"}"\nmodel {{ layers = 5 }}\n')
    assert run(["build", str(spec), "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "expect not met: params measured" in err
    assert not (tmp_path / "wrong.py").exists()


@pytest.mark.parametrize("stage, needle", [("ir", "model tiny {"), ("fx", "torch.softmax"),
                                           ("fx-opt", "scaled_dot_product_attention"), ("py", "class Model")])
def test_emit_each_stage(stage, needle, capsys):
    assert run(["build", str(ROOT / "specs/examples/tiny.attn"), "--emit", stage]) == 0
    assert needle in capsys.readouterr().out


def test_emit_one_entry_point_without_passes(capsys):
    assert run(["build", str(ROOT / "specs/examples/tiny.attn"), "--emit", "fx-opt", "--entry", "encode",
                "--passes", ""]) == 0
    out = capsys.readouterr().out
    assert "tiny.encode" in out and "scaled_dot_product_attention" not in out


@pytest.mark.parametrize("args, message", [
    (["--passes", "fuse_atention"], 'unknown pass "fuse_atention" (did you mean "fuse_attention"?)'),
    (["--emit", "fx", "--entry", "decode"], 'has no entry point "decode"'),
])
def test_bad_arguments(args, message, capsys):
    assert run(["build", str(ROOT / "specs/examples/tiny.attn"), *args]) == 2
    assert message in capsys.readouterr().err
