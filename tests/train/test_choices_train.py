"""Every architecture choice beyond the paper trains: a few updates of the runner on the sample corpus
lower the validation loss. Five narrowed specs together hold every new choice once; the layer-structure
examples of specs/examples/ (GPT-NeoX, OLMo, Gemma and a new combination) train too, and so do the
model-level ones (ELECTRA's factorised embeddings and segments; tie = inputs with soft-capped logits)."""

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
    "parallel_offset_rmsnorm_geglu_tanh_lm": ["model.encoder=none", "model.tie=decoder", "model.positions=rope",
                                              "model.norm=pre", "model.block=parallel(norms = 2)",
                                              "model.normalization=rmsnorm(offset = 1)", "model.activation=geglu_tanh"],
    "parallel_encoder_relu2_bare_layernorm": ["model.norm=pre", "model.encoder.block=parallel",
                                              "model.normalization=layernorm(gain = false, bias = false)",
                                              "model.activation=relu2"],
}
EXAMPLES = ["neox", "olmo", "gemma", "novel", "local_global", "electra", "t5_capped", "macaron", "modernbert",
            "t5", "t5_v11", "softcap", "sinks", "composed",  # t5 to composed: attention parts
            "mixtral",  # a mixture of experts, with the router's load-balancing loss
            "stream", "deepnet",  # the residual stream and connections across layers
            "diff_shared", "diff_cla", "prefix_sigmoid"]  # sharing across layers, normalisers, a prefix LM


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_new_choices_train(name, small_data, tmp_path):  # noqa: F811
    spec = ir.load(ROOT / "specs/examples/tiny.attn", NARROW + CHOICES[name])
    before, after = _train(spec, small_data / "parallel", tmp_path / name)
    assert after["loss"] < before["loss"] and np.isfinite(after["ppl"])


@pytest.mark.parametrize("name", EXAMPLES)
def test_layer_structure_examples_train(name, small_data, tmp_path):  # noqa: F811
    spec = ir.load(ROOT / f"specs/examples/{name}.attn")
    before, after = _train(spec, small_data / "parallel", tmp_path / name)
    assert after["loss"] < before["loss"] and np.isfinite(after["ppl"])
