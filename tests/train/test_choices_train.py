"""Every architecture choice beyond the paper trains: a few updates of the runner on the sample corpus
lower the validation loss. Three narrowed specs together hold every new choice once."""

from __future__ import annotations

import numpy as np
import pytest

from attncomp import ir
from tests.conftest import ROOT
from tests.train.test_objectives import _train, small_data  # noqa: F401  (the module's data fixture)

NARROW = ["model.d_model=32", "model.d_ff=32", "model.layers=1"]  # 4 heads of 8
CHOICES = {
    "alibi_rmsnorm_geglu_gqa": ["model.positions=alibi", "model.normalization=rmsnorm", "model.final_norm=true",
                                "model.activation=geglu", "model.kv_heads=2", "model.bias.output=true"],
    "relative_silu_bert_parts": ["model.positions=relative(max_distance = 4, values = true)", "model.activation=silu",
                             "model.embedding_norm=true", "model.head=dense(activation = gelu)",
                             "model.bias.k=false"],
    "rope_swiglu_mqa_lm": ["model.encoder=none", "model.tie=decoder", "model.positions=rope(fraction = 0.5)",
                           "model.norm=pre", "model.normalization=rmsnorm", "model.activation=swiglu",
                           "model.kv_heads=1", "model.bias=false"],
}


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_new_choices_train(name, small_data, tmp_path):  # noqa: F811
    spec = ir.load(ROOT / "specs/examples/tiny.attn", NARROW + CHOICES[name])
    before, after = _train(spec, small_data / "parallel", tmp_path / name)
    assert after["loss"] < before["loss"] and np.isfinite(after["ppl"])
