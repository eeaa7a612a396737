"""lower.size: the parameter count from the units' members equals the built model's, and specs over the limit
are refused by `build` and attncomp.compile() (unless forced) while `check` warns."""

from __future__ import annotations

import time

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.cli.main import run
from attncomp.errors import SpecError
from attncomp.lower import lower, size
from tests.conftest import ROOT, SPECS, spec_id

HUGE = f'extends "{ROOT / "specs/base.attn"}"\nmodel huge {{ layers = 1024  d_model = 65536  vocab = shared(16777216) }}\n'


def real_count(spec) -> int:
    """Parameters of the module tree the compiler builds, each tied tensor once (on meta: no memory)."""
    return sum(p.numel() for p in lower(spec, device="meta").parameters())


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_count_is_exact_for_every_shipped_spec(path):
    spec = ir.load(path)
    assert size.parameter_count(spec) == real_count(spec)


VARIANTS = [
    ["model.attention=additive", "model.cross_attention=additive"],
    ["model.norm=pre", "model.positions=learned(max_len = 77)"],
    ["model.tie=none", "model.bias=false"],
    ["model.vocab=separate(src = 61, tgt = 67)", "model.tie=decoder"],
    ["model.decoder=none", "model.tie=none"],
    ["model.bias.q=false", "model.bias.o=false", "model.bias.fc2=false", "model.bias.output=true",
     "model.embedding_norm=true", "model.head=dense(activation = gelu)"],
    ["model.decoder=none", "model.tie=encoder", "model.bias.output=true",
     "model.head=dense(activation = relu, bias = false)"],
    ["model.bias=false", "model.bias.k=true", "model.bias.fc1=true"],
    ["model.encoder.d_model=256", "model.encoder.heads=4", "model.tie=none", "model.decoder.d_k=32"],
    ["model.positions=relative(max_distance = 8)", "model.decoder.d_k=32"],
    ["model.positions=relative(max_distance = 8, values = true)", "model.d_v=32"],
    ["model.positions=alibi"],
    ["model.normalization=rmsnorm", "model.norm=pre", "model.activation=swiglu", "model.kv_heads=2"],
    ["model.normalization=rmsnorm", "model.final_norm=true", "model.activation=geglu", "model.bias=false"],
    ["model.norm=pre", "model.final_norm=false", "model.decoder.kv_heads=1", "model.positions=rope"],
]


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: ",".join(o))
def test_count_is_exact_for_every_kind_of_term(overrides):
    spec = ir.load(ROOT / "specs/base.attn", overrides)
    assert size.parameter_count(spec) == real_count(spec)


def test_compile_refuses_beyond_the_limit_and_force_passes(monkeypatch):
    start = time.perf_counter()
    with pytest.raises(SpecError, match="over the limit of 4.0 GiB"):
        attncomp.compile(HUGE, device="meta")
    assert time.perf_counter() - start < 5
    monkeypatch.setattr(size, "MAX_PARAM_BYTES", 1000)
    with pytest.raises(SpecError, match="force=True"):
        attncomp.compile(ROOT / "specs/examples/tiny.attn", device="meta")
    model = attncomp.compile(ROOT / "specs/examples/tiny.attn", device="meta", force=True)
    assert sum(p.numel() for p in model.parameters()) == 248_320


def test_build_refuses_beyond_the_limit_in_one_line(tmp_path, capsys):
    spec = tmp_path / "huge.attn"
    spec.write_text(HUGE)
    start = time.perf_counter()
    assert run(["build", str(spec), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - start < 5
    assert "huge.attn: model huge has 54,426,635,075,584 parameters" in err and "--force" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "huge.py").exists()


def test_build_prints_the_estimate_and_force_passes_the_limit(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(size, "MAX_PARAM_BYTES", 1000)
    tiny = str(ROOT / "specs/examples/tiny.attn")
    assert run(["build", tiny, "--no-write"]) == 2
    capsys.readouterr()
    assert run(["build", tiny, "--no-write", "--force"]) == 0
    out = capsys.readouterr().out
    assert "tiny: estimated 248,320 parameters, 970.0 KiB as float32" in out and "(248,320)" in out


def test_check_reports_the_count_and_warns_beyond_the_limit(tmp_path, capsys):
    spec = tmp_path / "huge.attn"
    spec.write_text(HUGE)
    assert run(["check", str(spec)]) == 0
    captured = capsys.readouterr()
    assert "54,426,635,075,584 parameters" in captured.out
    assert "warning:" in captured.err and "refuses it without --force" in captured.err


def test_count_is_exact_for_written_out_sublayers():
    spec = ir.load(ROOT / "specs/base.attn", [
        "model.norm=pre", "model.encoder.block=sequential(ffn(scale = 0.5), attention, ffn(scale = 0.5))",
        "model.decoder.block=sequential(ffn, attention(norm = sandwich), cross_attention(norm = none), ffn, ffn)",
        "model.decoder.layer.first.count=1", "model.decoder.layer.first.norm=output"])
    assert size.parameter_count(spec) == real_count(spec)


def test_a_pattern_over_the_limit_is_refused_before_anything_is_built(tmp_path, capsys):
    """64 layer kinds (the most a stack may have) of 8 sub-layers each, in 1024 wide layers."""
    kinds = "\n".join(f"    layer k{i} {{ start = {i}  every = 64 }}" for i in range(64))
    ffns = ", ".join(["ffn"] * 7)
    spec = tmp_path / "pattern.attn"
    spec.write_text(f"model pattern {{\n  d_model = 8192  heads = 64  d_ff = 32768  vocab = shared(64)\n"
                    f"  encoder = none\n  decoder {{\n    layers = 1024  norm = pre\n"
                    f"    block = sequential(attention, {ffns})\n{kinds}\n  }}\n}}\n")
    start = time.perf_counter()
    assert run(["build", str(spec), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert time.perf_counter() - start < 20
    assert "pattern.attn: model pattern has" in err and "over the limit" in err and not (tmp_path / "pattern.py").exists()
