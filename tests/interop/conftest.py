"""A small random-weight checkpoint with the sample corpus's tokenizers: cheap, no training."""

from __future__ import annotations

import json

import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp import compile as compile_spec
from attncomp import ir
from tests.conftest import ROOT


def random_checkpoint(data_dir, path, seed: int = 0, sets=("model.layers=2",), spec_path=None):
    """specs/examples/tiny.attn (or `spec_path`) with random weights, saved as an "average" checkpoint at `path`."""
    spec = ir.load(spec_path or ROOT / "specs/examples/tiny.attn", list(sets))
    torch.manual_seed(seed)
    model = compile_spec(spec)
    tokenizer = torch.frombuffer(bytearray((data_dir / "spm.model").read_bytes()), dtype=torch.uint8)
    header = ckpt.Header(attncomp="0.1.0", kind="average", spec=ir.to_text(spec), spec_hash=ir.spec_hash(spec),
                         tokenizers={"src": tokenizer, "tgt": tokenizer}, data=json.dumps({"pairs": 0}), step=0,
                         position=(0, 0), metrics={})
    ckpt.save(ckpt.Checkpoint(header, model=model.state_dict()), path)
    return path


@pytest.fixture
def one_thread():
    """torch on one thread for the test; a file asks for it with `pytestmark = pytest.mark.usefixtures(
    "one_thread")`. Its models are a few thousand weights: two threads on a shared 2-core machine spend more
    time handing work over than computing (HF's generate measured 1.5 s with two, 0.02 s with one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def random_tiny(sample_data, tmp_path_factory):
    return random_checkpoint(sample_data, tmp_path_factory.mktemp("ckpt") / "checkpoint_avg.pt")
