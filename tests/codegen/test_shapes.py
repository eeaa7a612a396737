"""Shape comments (attncomp.codegen.shapes): each names the sizes a real run gives, or is absent."""

from __future__ import annotations

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.codegen.shapes import _dimension, _Recorder, annotate
from tests.conftest import ROOT
from tests.helpers import batch, small


@pytest.mark.parametrize("a, b, text", [
    (512, 512, "512"),
    (2, 3, "batch"),
    (16, 24, "8*batch"),
    (5, 105, "tgt_len"),
    (8, 1008, "cache_len + 1"),
    (4, 14, "src_len + 1"),
    (10, 315, "batch*tgt_len"),
    (6, 40, None),  # no size moves like this
])
def test_a_dimension_is_named_after_the_size_it_follows(a, b, text):
    assert _dimension(a, b) == text


def _size(text: str, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(eval(text, {}, sizes))  # noqa: S307 - the comment's own grammar: names, ints, + and *


def _check(model, name: str, inputs: tuple, sizes: dict[str, int]) -> int:
    recorder = _Recorder(model.pass_module(model.graphs[name]))
    out = recorder.run(*inputs)
    checked = 0
    for node in model.graphs[name].nodes:
        if "shape" in node.meta:
            expected = _size(node.meta["shape"], sizes)
            assert recorder.shapes[node.name] == expected, f"{name}: {node.name} {node.meta['shape']}"
            checked += 1
    return checked, out


@pytest.mark.parametrize("spec_file", ["base.attn", "examples/llama.attn", "examples/local.attn"])
def test_shape_comments_hold_for_other_sizes_on_a_model_with_weights(spec_file):
    spec = small(ir.load(ROOT / "specs" / spec_file))
    model = attncomp.compile(spec, dtype=torch.float64).eval()
    annotate(model)
    src, tgt = batch(spec, b=4, s=6, t=9)
    sizes = {"batch": 4, "src_len": 6, "tgt_len": 9}
    with torch.no_grad():
        if spec.model.encoder is not None:
            checked, _ = _check(model, "forward", (src, tgt), sizes)
            _, memory = _check(model, "encode", (src,), sizes)
            _, cache = _check(model, "init_cache", (src, memory), sizes)
        else:
            checked, _ = _check(model, "forward", (tgt,), sizes)
            _, cache = _check(model, "init_cache", (tgt[:, :2],), {**sizes, "tgt_len": 2})
        assert checked > 20
        tokens = tgt[:, :1]
        for step in range(3):  # the cache grows: cache_len is what it holds before each step
            checked, (_, cache) = _check(model, "decode_step", (tokens, cache), {**sizes, "cache_len": step})
            assert checked > 10


def test_generated_base_says_the_shapes():
    text = (ROOT / "generated" / "base.py").read_text()
    for line in ["        # x: (batch, src_len, 512), logical_not: (batch, 1, 1, src_len)",
                 "        self_attn_qkv = F.linear(x, self_attn_qkv_weight, None)  # (batch, src_len, 1536)",
                 "        self_attn_k = torch.transpose(unflatten, 1, 2)  # (batch, 8, src_len, 64)",
                 "        linear = F.linear(decoder_out, embed_weight)  # (batch, tgt_len, 37000)",
                 "        linear = F.linear(select, embed_weight)  # (batch, 37000)"]:
        assert line + "\n" in text, line
    assert "(batch, 8, cache_len + 1, 64)" in text
