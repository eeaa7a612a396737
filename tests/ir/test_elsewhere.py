"""attncomp.ir.elsewhere: every spelling an unknown word is pointed to is one the language reads."""

from __future__ import annotations

import re

import pytest

from attncomp import ir
from attncomp.ir import elsewhere

TRAIN_KEYS = ("schedule", "optimizer", "loss", "batch")


def _spec(how: str) -> str:
    """A small decoder-only spec with `how` written where it belongs."""
    how = how.split(" (or ")[0]  # "share = all (or groups(n), cycle(n))": the first spelling
    model, stack, train, top = "positions = rope", how, "", ""
    key = re.match(r"\w+", how).group()
    if key in TRAIN_KEYS:
        stack, train = "", how
    elif key == "decode":
        stack, top = "", how
    elif key == "decoder":
        stack = how[how.index("{") + 1: how.rindex("}")]
    elif key == "positions":
        model, stack = how, ""
    return (f"model m {{ d_model = 64  heads = 4  vocab = shared(64)  layers = 2  {model}\n"
            f"  decoder {{ {stack} }} }}\ntrain {{ {train} }}\n{top}\n")


ROWS = sorted({how for _, how in [*elsewhere.KEYS.values(), *elsewhere.VALUES.values()]})


@pytest.mark.parametrize("how", ROWS)
def test_each_pointer_is_a_valid_spelling(how, tmp_path):
    path = tmp_path / "m.attn"
    path.write_text(_spec(how), encoding="utf-8")
    ir.load(path)  # a SpecError here: the table points at a spelling the language refuses


def test_a_pointer_replaces_did_you_mean_and_names_the_spelling():
    err = elsewhere.refusal('unknown key "layerscale" in model.decoder', "layerscale", None)
    assert "LayerScale is a sub-layer's gain" in err.message
    assert "gain = layerscale(init = 0.1)" in err.hint
    assert elsewhere.refusal('unknown activation "sigmoid"', "sigmoid", None, "activation") is None
