"""fuse_attention: explicit attention -> torch.nn.functional.scaled_dot_product_attention.

The rules are data (attncomp.passes.patterns): one pattern/replacement pair per way the scores are
masked (MASKS), each with and without the 1/sqrt(d_k) scale, with and without dropout on the
weights, and, where SDPA's enable_gqa serves it, with k and v repeated for grouped-query attention.
The pattern, in canonical spelling (run `canonicalize` first on graphs from elsewhere):

    s = torch.matmul(q, torch.transpose(k, -2, -1))
    s = torch.mul(s, scale)                      # scale a number
    s = torch.add(s, bias)                       # a float bias (ALiBi, relative positions)
    s = ops.hide(s, mask)                        # -inf where the bool mask hides a key
    w = torch.softmax(s, -1)
    w = ops.zero_rows(w, mask)                   # weights of queries that see no key are 0
    w = F.dropout(w, p=p, training=t)
    o = torch.matmul(w, v)

    mask (MASKS)     the scores                      SDPA's arguments (FlexAttention: FLEX_RULES, below)
    none             s                               -
    causal           hide(s, causal_mask(T))         is_causal=True (square scores: is_causal aligns top-left)
    masked           hide(s, mask)                   attn_mask=ops.attend(mask)  (True = attend; None stays None)
    masked_rows      ... and zero_rows(w, mask)      attn_mask=ops.attend(mask)  (SDPA gives fully masked rows 0)
    bias             add(s, bias)                    attn_mask=bias
    bias_masked      hide(add(s, bias), mask)        attn_mask=ops.additive_mask(bias, mask)
    bias_masked_rows ... and zero_rows(w, mask)      attn_mask=ops.additive_mask(bias, mask)

- dropout_p is `ops.dropout_p(p, training)`: SDPA drops whenever dropout_p > 0;
- grouped-query attention: k and v made by `torch.repeat_interleave(x, groups, 1)` are replaced by x
  with `enable_gqa=True` (torch >= 2.5), so the repeated heads are never materialised, where the
  attention has no explicit mask (none, or causal) and no bias: that is where the flash kernel can run,
  and on CUDA only flash (and math) take enable_gqa (pytorch/pytorch#139586);
- rotary positions need nothing: q and k reach the scores already rotated (`ops.rotate`).

What stays explicit: anything the patterns do not cover exactly (softmax over another dim, a scale
that is a tensor, scores or weights read elsewhere, additive scores, relative positions' value term).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx
from torch.fx.passes.infra.pass_base import PassResult

from attncomp.lower import ops
from attncomp.passes.patterns import Rule, rewrite

GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)  # SDPA's enable_gqa
MASKS = ("causal", "none", "masked", "masked_rows", "bias", "bias_masked", "bias_masked_rows")


def _rule(mask: str, scaled: bool, dropout: bool, grouped: bool) -> Rule:
    biased, hidden, rows = mask.startswith("bias"), mask not in ("none", "bias"), mask.endswith("rows")

    def pattern(q, k, v, scale, m, bias, p, training, groups, length, device):
        if grouped:
            k, v = torch.repeat_interleave(k, groups, 1), torch.repeat_interleave(v, groups, 1)
        s = torch.matmul(q, torch.transpose(k, -2, -1))
        if scaled:
            s = torch.mul(s, scale)
        if biased:
            s = torch.add(s, bias)
        if mask == "causal":
            s = ops.hide(s, ops.causal_mask(length, device))
        elif hidden:
            s = ops.hide(s, m)
        w = torch.softmax(s, -1)
        if rows:
            w = ops.zero_rows(w, m)
        if dropout:
            w = F.dropout(w, p=p, training=training)
        return torch.matmul(w, v)

    def replacement(q, k, v, scale, m, bias, p, training, groups, length, device):
        kwargs = {"scale": scale if scaled else 1.0}
        if mask == "causal":
            kwargs["is_causal"] = True
        elif biased and hidden:
            kwargs["attn_mask"] = ops.additive_mask(bias, m)
        elif biased:
            kwargs["attn_mask"] = bias
        elif hidden:
            kwargs["attn_mask"] = ops.attend(m)
        if dropout:
            kwargs["dropout_p"] = ops.dropout_p(p, training)
        if grouped:
            kwargs["enable_gqa"] = True
        return F.scaled_dot_product_attention(q, k, v, **kwargs)

    name = f"{mask}{'_scaled' * scaled}{'_dropout' * dropout}{'_grouped' * grouped}"
    return Rule(name, pattern, replacement, guard=_number_scale if scaled else lambda bindings: True)


def _number_scale(bindings: dict) -> bool:
    scale = bindings["scale"]
    return isinstance(scale, (int, float)) and not isinstance(scale, bool)


def _flex_rule(mask: str, scaled: bool, capped: bool, sinks: bool) -> Rule:
    """Soft-capped scores or sinks: SDPA takes neither, FlexAttention does (ops.flex_attend: the soft-capping
    and the bias in its score_mod, causality as its block mask, sinks by a log-sum-exp correction).
    Without dropout only: FlexAttention has none."""
    label = mask
    biased, hidden, rows = mask.startswith("bias"), mask not in ("none", "bias"), mask.endswith("rows")
    if mask.endswith("band"):
        mask, biased, hidden = "band", mask.startswith("bias"), True

    def pattern(q, k, v, scale, cap, m, bias, length, device, logits, window, back):
        s = torch.matmul(q, torch.transpose(k, -2, -1))
        if scaled:
            s = torch.mul(s, scale)
        if capped:
            s = ops.softcap(s, cap)
        if biased:
            s = torch.add(s, bias)
        if mask == "causal":
            s = ops.hide(s, ops.causal_mask(length, device))
        elif mask == "band":
            s = ops.hide(s, ops.band_mask(length, window, back, device))
        elif hidden:
            s = ops.hide(s, m)
        w = ops.sink_softmax(s, logits) if sinks else torch.softmax(s, -1)
        if rows:
            w = ops.zero_rows(w, m)
        return torch.matmul(w, v)

    def replacement(q, k, v, scale, cap, m, bias, length, device, logits, window, back):
        kwargs = {"bias": bias} if biased else {}
        if mask == "causal":
            kwargs["causal"] = True
        elif mask == "band":  # a local window: FlexAttention's block mask, as causality
            kwargs["window"], kwargs["causal"] = window, back
        elif hidden:
            kwargs["mask"] = m
        if rows:
            kwargs["rows"] = True
        if sinks:
            kwargs["sinks"] = logits
        return ops.flex_attend(q, k, v, scale if scaled else 1.0, cap if capped else 0.0, **kwargs)

    name = f"flex_{label}{'_scaled' * scaled}{'_capped' * capped}{'_sinks' * sinks}"
    return Rule(name, pattern, replacement, guard=_number_scale if scaled else lambda bindings: True)


RULES = [_rule(mask, scaled, dropout, grouped)
         for grouped in ((True, False) if GQA else (False,))
         for mask in (("causal", "none") if grouped else MASKS)
         for scaled in (True, False) for dropout in (True, False)]
FLEX_RULES = [_flex_rule(mask, scaled, capped, sinks) for mask in ("band", "bias_band") + MASKS
              for scaled in (True, False)
              for capped, sinks in ((True, False), (True, True), (False, True))]


def fuse_attention(gm: fx.GraphModule) -> PassResult:
    """Fuse every attention a rule matches; leave the rest explicit."""
    done = rewrite(gm.graph, RULES + FLEX_RULES)
    for _, node in done:
        node.meta["fused_attention"] = True
    if done:
        _share_masks(gm.graph)
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return PassResult(gm, bool(done))


def _share_masks(graph: fx.Graph) -> None:
    """One SDPA mask per distinct inputs: attentions reading the same mask share the node that makes it."""
    made: dict[tuple, fx.Node] = {}
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in (ops.attend, ops.additive_mask):
            first = made.setdefault((node.target, node.args), node)
            if first is not node:
                node.replace_all_uses_with(first)
                graph.erase_node(node)


def count_fused(graph: fx.Graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "call_function" and n.target is F.scaled_dot_product_attention)


def count_flex(graph: fx.Graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "call_function" and n.target is ops.flex_attend)
