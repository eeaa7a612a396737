"""The generated modules answer the runtime's model protocol (attncomp.protocol) as the compiled model does
(issue 41): the same family, loss inputs, width and logit transform, and a training step on the generated
module with the compiled model's weights gives the compiled model's losses."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import protocol
from attncomp.codegen.render import output_path
from attncomp.train.step import TrainStep
from attncomp.vocab import IGNORE
from tests.codegen.test_generated import load_module
from tests.conftest import ROOT

# an encoder-decoder; a logit soft-cap and untied output; an output bias and segment embeddings; a language model
NAMES = ("tiny", "t5_capped", "electra", "lm")


@pytest.mark.parametrize("name", NAMES)
def test_a_generated_module_answers_the_protocol_as_the_compiled_model(name):
    spec_path = ROOT / f"specs/examples/{name}.attn"
    compiled = attncomp.compile(spec_path, passes=())
    generated = load_module(output_path(spec_path), f"attncomp_protocol_{name}").Model()
    generated.load_state_dict(compiled.state_dict())
    assert isinstance(generated, protocol.TrainableModel) and isinstance(compiled, protocol.TrainableModel)
    for key in ("family", "loss_inputs", "d_model", "logit_scale", "logit_softcap"):
        assert getattr(generated, key) == getattr(compiled, key), key
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(5, 200, (2, 8), generator=g)
    target = torch.randint(5, 200, (2, 8), generator=g)
    target[0, -3:] = IGNORE
    batch = {"src": tokens, "tgt_in": tokens, "tokens": tokens, "tgt_out": target}
    for fused in (True, False):
        compiled.eval(), generated.eval()
        want = TrainStep(compiled, 0.1, fused_loss=fused)(batch)
        got = TrainStep(generated, 0.1, fused_loss=fused)(batch)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), (fused, got, want)
        assert (TrainStep(generated, 0.1, fused_loss=fused).model.output_projection()[0]
                is dict(generated.named_parameters())[_output_name(compiled)])


def _output_name(compiled) -> str:
    weight = compiled.output_projection()[0]
    return next(name for name, p in compiled.named_parameters() if p is weight)


def test_a_model_that_does_not_answer_the_protocol_is_named():
    with pytest.raises(attncomp.errors.UsageError, match="lacks family, loss_inputs, d_model"):
        protocol.check(torch.nn.Linear(2, 2), "tests:linear")
