"""train.precision = float8 on a CPU, through torchao's emulation (attncomp.train.float8): the conversion, its
losses against fp32 on the same batches, the refusals, and a float8 run's checkpoint read where float8 is off.
Float8 itself needs a GPU of compute capability 8.9; what it does to speed is docs/performance.md's to say."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from torch import nn

from attncomp import checkpoint as ckpt
from attncomp import ir
from attncomp.cli.main import run
from attncomp.compiler import compile_spec, training_passes
from attncomp.train import float8
from attncomp.train.step import TrainStep
from tests.conftest import ROOT

pytest.importorskip("torchao.float8")  # the float8 extra, which the test extra installs

TINY = str(ROOT / "specs/examples/tiny.attn")
FLOAT8 = ["--set", "train.precision=float8"]
# the largest gap between float8 (emulated) and fp32 of a batch's mean NLL over 20 updates of the copy task below,
# measured over seeds 0-3: 0.025, 0.014, 0.034, 0.017 (nats, the loss falling from about 6.0 to 3.7); the
# tolerance leaves about 3x of that
TOLERANCE = 0.1


@pytest.fixture
def emulate(monkeypatch):
    monkeypatch.setenv(float8.EMULATE, "1")


def tiny_model(precision: str = "float8"):
    spec = ir.load(TINY, [f"train.precision={precision}"])
    return compile_spec(spec, training_passes(spec)).train()


def copy_batches(n: int, seed: int) -> list[dict]:
    """A task the tiny model learns in 20 updates: the target is the source."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        src = torch.randint(5, 40, (8, 10), generator=g)
        batches.append({"src": src, "tgt_in": torch.cat((torch.full((8, 1), 1), src[:, :-1]), 1), "tgt_out": src})
    return batches


def nll_per_update(converted: bool, seed: int, updates: int = 20) -> np.ndarray:
    torch.manual_seed(seed)
    model = tiny_model()
    if converted:
        float8.convert(model)
    step, optimizer = TrainStep(model, 0.1), torch.optim.Adam(model.parameters(), lr=3e-3)
    nll = []
    for batch in copy_batches(updates, seed):
        smoothed, total, tokens = step(batch)
        (smoothed / tokens).backward()
        optimizer.step()
        optimizer.zero_grad()
        nll.append(float((total / tokens).detach()))
    return np.array(nll)


@pytest.fixture
def one_thread():
    """The tiny model's products are too small to share: on a busy 2-core machine two threads took this module's
    40 updates from 5 s to 42 s."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_float8_losses_follow_fp32_on_the_same_batches(emulate, one_thread):
    plain, converted = nll_per_update(False, seed=2), nll_per_update(True, seed=2)
    assert plain[-1] < plain[0] - 1.5  # it learns: the comparison is of a falling loss, not of noise
    gap = np.abs(converted - plain).max()
    assert 0 < gap < TOLERANCE, (gap, plain, converted)  # not zero: the products did run through float8


def test_every_linear_layer_of_the_tiny_spec_converts_and_runs(emulate):
    """32 linear layers (2 encoder layers of 6, 2 decoder layers of 10), each called by the forward: without
    fuse_qkv (attncomp.compiler.training_passes), no projection is read as a weight by a fused product."""
    from torchao.float8.float8_linear import Float8Linear

    model = tiny_model()
    conversion = float8.convert(model)
    assert len(conversion.converted) == 32 and not conversion.skipped
    assert conversion.summary() == "float8 (emulated): 32 of 32 linear layers converted"
    called = set()
    for name in conversion.converted:
        layer = model.get_submodule(name)
        assert isinstance(layer, Float8Linear)
        layer.register_forward_hook(lambda m, *_, name=name: called.add(name))
    TrainStep(model, 0.1)(copy_batches(1, 0)[0])
    assert called == set(conversion.converted)
    assert "fuse_qkv" not in training_passes(ir.load(TINY, ["train.precision=float8"]))
    assert "fuse_qkv" in training_passes(ir.load(TINY))


class Skips(nn.Module):
    """A model with one linear layer of each kind the conversion leaves alone, beside one it converts."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 64)
        self.odd = nn.Linear(32, 40)  # 40 is not a multiple of 16
        self.attn = nn.MultiheadAttention(32, 2)  # its forward reads out_proj.weight itself
        self.out = nn.Linear(32, 96)

    def output_projection(self):
        return self.out.weight, self.out.bias


def test_conversion_skips_the_output_projection_odd_widths_and_multihead_attention(emulate):
    conversion = float8.convert(Skips())
    assert conversion.converted == ("fc",)
    assert dict(conversion.skipped) == {"odd": "features not multiples of 16",
                                        "attn.out_proj": "read by nn.MultiheadAttention, not called",
                                        "out": "the output projection"}
    assert conversion.summary() == (
        "float8 (emulated): 1 of 4 linear layers converted; skipped: odd (features not multiples of 16); "
        "attn.out_proj (read by nn.MultiheadAttention, not called); out (the output projection); "
        "1 nn.MultiheadAttention in-projection(s) not converted (a parameter, not a linear layer)")


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_without_torchao_a_float8_run_is_one_line(sample_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torchao", None)  # as if not installed: importing it raises ImportError
    monkeypatch.setitem(sys.modules, "torchao.float8", None)
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(tmp_path / "run"), *FLOAT8]) == 2
    assert "pip install 'attncomp[float8]'" in _one_error_line(capsys)
    assert not (tmp_path / "run").exists()  # refused before the run directory is written


def test_float8_on_a_cpu_without_emulation_is_refused_in_one_line(sample_data, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(float8.EMULATE, raising=False)
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(tmp_path / "run"), *FLOAT8]) == 2
    err = _one_error_line(capsys)
    assert "compute capability 8.9" in err and f"{float8.EMULATE}=1" in err


@pytest.mark.slow  # the elastic launcher, a worker and a translation
def test_a_float8_run_trains_and_its_checkpoint_decodes_without_float8(sample_data, tmp_path, emulate, capfd):
    import attncomp

    out = tmp_path / "run"
    assert run(["train", TINY, "--data", str(sample_data), "--out", str(out), "--procs", "1", *FLOAT8,
                "--set", "train.steps=3", "--set", "train.checkpoint.every=3", "--set", "train.batch=tokens(600)"]) == 0
    assert "float8 (emulated): 32 of 32 linear layers converted" in capfd.readouterr().err
    found = ckpt.load(out / "checkpoint_00000003.pt")
    plain = compile_spec(ir.load(TINY)).state_dict()  # the default passes, float8 off
    assert set(found.model) == set(plain)  # the state-dict keys are unchanged
    assert all(type(t) is torch.Tensor and t.dtype == torch.float32 for t in found.model.values())
    model = attncomp.load(out / "checkpoint_00000003.pt")  # read with fuse_qkv, in fp32, no torchao layer
    assert not any(type(m).__name__ == "Float8Linear" for m in model.modules())
    assert all(torch.equal(v, found.model[k]) for k, v in model.state_dict().items())
    (tmp_path / "in.txt").write_text("the house is small\n")
    assert run(["translate", str(out / "checkpoint_00000003.pt"), "--input", str(tmp_path / "in.txt"),
                "--device", "cpu"]) == 0


def test_a_gpu_below_compute_capability_8_9_is_refused_and_one_at_9_0_is_not(monkeypatch):
    from attncomp.errors import UsageError

    monkeypatch.delenv(float8.EMULATE, raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: (8, 0))
    with pytest.raises(UsageError, match=r"NVIDIA A100-SXM4-80GB is 8\.0 \(set ATTNCOMP_FLOAT8_EMULATE=1"):
        float8.check_device("cuda")
    monkeypatch.setenv(float8.EMULATE, "1")
    float8.check_device("cuda")  # emulation runs anywhere
    monkeypatch.delenv(float8.EMULATE)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: (9, 0))
    float8.check_device("cuda")
