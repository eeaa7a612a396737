"""attncomp.report reads each attention's mask from the graph (the nodes that build it), fused or not."""

from __future__ import annotations

import pytest

import attncomp
from attncomp.report import attention_report
from tests.conftest import ROOT

CASES = {
    "base": ([], {"encoder self-attention": "padding", "decoder self-attention": "causal",
                  "encoder-decoder attention": "padding"}),
    "local_both": (["model.attention=local(window = 2)"], {
        "encoder self-attention": "band + padding", "decoder self-attention": "causal band",
        "encoder-decoder attention": "padding"}),
    "additive": (["model.attention=additive"], {"encoder self-attention": "padding",
                                                 "decoder self-attention": "causal"}),
    "alibi": (["model.positions=alibi"], {"encoder self-attention": "alibi + padding",
                                          "decoder self-attention": "alibi + causal",
                                          "encoder-decoder attention": "padding"}),
    "relative_local": (["model.positions=relative(max_distance = 4)", "model.attention=local(window = 2)"], {
        "encoder self-attention": "relative + band + padding", "decoder self-attention": "relative + causal band"}),
    "relative_values": (["model.positions=relative(max_distance = 4, values = true)"], {
        "encoder self-attention": "relative + padding", "decoder self-attention": "relative + causal"}),
}


@pytest.mark.parametrize("passes", [None, ()], ids=["fused", "unfused"])
@pytest.mark.parametrize("case", CASES)
def test_masks_come_from_the_graph(case, passes):
    overrides, expected = CASES[case]
    options = {} if passes is None else {"passes": passes}
    model = attncomp.compile(ROOT / "specs/examples/tiny.attn", overrides, device="meta", **options)
    found = {a.site: a.mask for a in attention_report(model)}
    assert {site: found[site] for site in expected} == expected


def test_positional_biases_rule_out_flash_but_not_the_efficient_kernel():
    model = attncomp.compile(ROOT / "specs/examples/relative.attn", device="meta")
    rows = {a.site: a for a in attention_report(model)}
    for site in ("encoder self-attention", "decoder self-attention"):
        assert rows[site].fused and rows[site].backends["flash"].startswith("needs no explicit mask (this one has a relative")
        assert rows[site].backends["efficient"] == "yes" and rows[site].backends["math"] == "yes"
    explicit = attncomp.compile(ROOT / "specs/examples/relative.attn", ["model.positions=relative(values = true)"], device="meta")
    site = {a.site: a for a in attention_report(explicit)}["encoder self-attention"]
    assert not site.fused and site.backends["flash"].startswith("not fused")
