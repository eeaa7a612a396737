"""fuse_attention: explicit attention -> a fused kernel, chosen from the attention's parts by one rule.

Each attention is read from its graph (`read`): from its weights (a softmax over the keys) back along its
scores to q . k^T, and forward to `@ v`, collecting its parts; then `choose_kernel` picks the kernel and
says why, the attention is rewritten into it (`_sdpa`, `_flex`) and the choice is recorded in the kernel's
node metadata, `meta["attention"]` = {"mask", "kernel", "reason", "grouped"} (the mask as the lowering named
it), where the build report reads it. The graph, in canonical spelling (run `canonicalize` first on graphs
from elsewhere); every line but the scores and `@ v` is optional:

    s = torch.matmul(q, torch.transpose(k, -2, -1))  # k, v may be torch.repeat_interleave(x, groups, 1)
    s = torch.mul(s, scale)                      # scale a number: SDPA's and FlexAttention's scale
    s = ops.softcap(s, cap)                      # soft-capping: FlexAttention's score_mod
    s = torch.add(s, bias)                       # a float bias (ALiBi, relative positions, T5's buckets)
    s = ops.hide(s, mask)                        # -inf where the bool mask hides a key
    w = torch.softmax(s, -1)                     # or ops.sink_softmax(s, sinks): FlexAttention's lse;
                                                 # or ops.sigmoid_weights(s, b): explicit
    w = ops.zero_rows(w, mask)                   # weights of queries that see no key are 0
    w = F.dropout(w, p=p, training=t)
    o = torch.matmul(w, v)

The rule (`choose_kernel`): sigmoid weights stay explicit (both kernels normalise over the keys: a softmax is
what they compute); soft-capping or sinks need FlexAttention (SDPA takes neither), which has no dropout, so with
dropout they stay explicit; everything else is SDPA's arguments, a prefix LM's mask (`mask = prefix`) as an
explicit boolean mask. A differential attention is two attentions
whose outputs are subtracted (attncomp.lower.attention): each map gets its kernel by the same rule, and its
reason says it is one of the two (the lowering marks its weights, `meta["attention"]["normalizer"]`). What
reaches the kernel:

    the mask                   SDPA                                  FlexAttention (ops.flex_attend)
    none                       -                                     -
    causal_mask(T), no bias    is_causal=True (square scores)        causal=True (a block mask)
    band_mask(T, w, back)      attn_mask=ops.attend(band)            window=w, causal=back (a block mask)
    prefix_mask(T, P)          attn_mask=ops.attend(m)               causal=True, prefix=P (a block mask)
    any other mask m           attn_mask=ops.attend(m)               mask=m (in the score_mod)
    a bias                     attn_mask=bias, or                    bias=bias (in the score_mod)
                               ops.additive_mask(bias, m)
    zero_rows                  - (SDPA gives fully masked rows 0)    rows=True

- dropout_p is `ops.dropout_p(p, training)`: SDPA drops whenever dropout_p > 0;
- grouped-query attention: k and v made by `torch.repeat_interleave(x, groups, 1)` are replaced by x
  with `enable_gqa=True` (torch >= 2.5), so the repeated heads are never materialised, where the
  attention has no explicit mask (none, or causal) and no bias: that is where the flash kernel can run,
  and on CUDA only flash (and math) take enable_gqa (pytorch/pytorch#139586);
- parts that act before the scores (rotary positions, q/k norms, clip_qkv) or after `@ v` (the gate) need
  nothing: the kernel takes q, k, v as they come.

What stays explicit, with its reason recorded on its weights: scores that are no q . k^T (additive
attention, a scale that is a tensor), scores or weights read elsewhere (relative positions' value term),
soft-capping or sinks with dropout. A softmax over another dim is no attention and is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx
from torch.fx.passes.infra.pass_base import PassResult

from attncomp.lower import ops

GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)  # SDPA's enable_gqa


@dataclass
class Parts:
    """One explicit attention's parts, as its graph has them."""

    weights: fx.Node  # the softmax over the keys
    q: Any = None
    k: Any = None
    v: Any = None
    out: fx.Node | None = None  # torch.matmul(w, v)
    scale: Any = None  # a number; None: unscaled
    cap: Any = 0.0
    bias: fx.Node | None = None
    mask: str = "none"  # none, causal (a causal_mask of its own), band (a band_mask of its own), prefix (a
    # prefix_mask of its own: a prefix LM's), or hidden
    hidden: Any = None  # the mask node (band, hidden, or a shared causal_mask)
    rows: bool = False
    sinks: fx.Node | None = None
    dropout: tuple | None = None  # (p, training)
    grouped: tuple | None = None  # (k, v) before their torch.repeat_interleave
    normalizer: str = "softmax"  # softmax, sigmoid (ops.sigmoid_weights) or differential (one of its two maps)
    why: str = ""  # why it cannot fuse, where it cannot


def choose_kernel(parts: Parts) -> tuple[str, str]:
    """The one rule: the kernel an attention gets from its parts ("sdpa", "flex" or "explicit"), and why."""
    if parts.normalizer == "sigmoid":
        return "explicit", "sigmoid weights, sigmoid(s + b) per key: SDPA and FlexAttention both normalise the " \
                           "weights over the keys (a softmax)"
    which = "one of a differential attention's two softmax maps (subtracted after the kernels): " \
        if parts.normalizer == "differential" else ""
    if parts.why:
        return "explicit", which + parts.why
    if parts.cap or parts.sinks is not None:
        if parts.dropout is not None:
            return "explicit", which + "soft-capping or sinks with attention dropout (FlexAttention has no dropout)"
        return "flex", which + "soft-capped scores (a score function) or sinks (a log-sum-exp correction), which " \
                               "SDPA cannot take"
    if parts.mask == "prefix":
        return "sdpa", which + "a prefix-LM mask (each row's prefix both ways, then causal) is SDPA's boolean " \
                               "attn_mask, made from the rows' prefix lengths; FlexAttention's block mask would skip " \
                               "hidden blocks, but only compiled and without dropout"
    return "sdpa", which + "its scale, positional bias and mask are SDPA's arguments (scale=, attn_mask=, is_causal=)"


def _call(node: Any, target: Any, arity: int) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target is target \
        and len(node.args) == arity and not node.kwargs


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _only_user(node: fx.Node) -> fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _is_weights(node: fx.Node) -> bool:
    """Weights over the keys: torch.softmax(s, -1), ops.sink_softmax(s, sinks) or ops.sigmoid_weights(s, b)."""
    return _call(node, ops.sink_softmax, 2) or _call(node, ops.sigmoid_weights, 2) \
        or _call(node, torch.softmax, 2) and type(node.args[1]) is int \
        and node.args[1] == -1


def read(weights: fx.Node) -> Parts:
    """The parts of the attention whose weights are `weights`; `why` says what keeps it explicit."""
    parts = Parts(weights, sinks=weights.args[1] if weights.target is ops.sink_softmax else None,
                  normalizer="sigmoid" if weights.target is ops.sigmoid_weights else
                  weights.meta.get("attention", {}).get("normalizer", "softmax"))
    _read_mask(parts, _read_scores(parts))
    _read_output(parts)
    return parts


def _read_scores(parts: Parts) -> fx.Node:
    """Back from the weights along the scores to q . k^T; returns the scores' ops.hide, or None."""
    s, inner = parts.weights.args[0], []
    hide = s if _call(s, ops.hide, 2) else None
    if hide is not None:
        inner.append(s)
        s = s.args[0]
    if _call(s, torch.add, 2) and isinstance(s.args[1], fx.Node):
        inner.append(s)
        parts.bias, s = s.args[1], s.args[0]
    if _call(s, ops.softcap, 2) and _number(s.args[1]):
        inner.append(s)
        parts.cap, s = s.args[1], s.args[0]
    if _call(s, torch.mul, 2) and _number(s.args[1]):
        inner.append(s)
        parts.scale, s = s.args[1], s.args[0]
    k_t = s.args[1] if _call(s, torch.matmul, 2) else None
    if not (_call(k_t, torch.transpose, 3) and tuple(k_t.args[1:]) == (-2, -1)
            and all(type(d) is int for d in k_t.args[1:])):
        parts.why = "its scores are no scaled q . k^T (additive scores, or a scale that is a tensor)"
        return hide
    inner += [s, k_t]
    if any(len(n.users) != 1 for n in inner):
        parts.why = "its scores are read by another op too"
    parts.q, parts.k = s.args[0], k_t.args[0]
    return hide


def _read_mask(parts: Parts, hide: fx.Node | None) -> None:
    """What the scores' ops.hide hides: its own causal or band mask (a block mask), or any mask."""
    if hide is None:
        return
    m = hide.args[1]
    own = isinstance(m, fx.Node) and len(m.users) == 1
    if own and _call(m, ops.causal_mask, 2) and parts.bias is None:
        parts.mask = "causal"
    elif own and _call(m, ops.band_mask, 4):
        parts.mask = "band"
    elif own and _call(m, ops.prefix_mask, 3):
        parts.mask = "prefix"
    else:
        parts.mask = "hidden"
    parts.hidden = m


def _read_output(parts: Parts) -> None:
    """Forward from the weights: [zero_rows(w, mask)], [dropout], then `@ v`."""
    node, user = parts.weights, _only_user(parts.weights)
    if _call(user, ops.zero_rows, 2) and user.args[0] is node:
        parts.rows, node, user = True, user, _only_user(user)
        if parts.mask != "hidden" or node.args[1] is not parts.hidden:
            parts.why = parts.why or "its weights' row fix reads another mask than its scores"
    if isinstance(user, fx.Node) and user.target is F.dropout and len(user.args) == 1 and user.args[0] is node \
            and {"p", "training"} <= set(user.kwargs) <= {"p", "training", "inplace"} \
            and not user.kwargs.get("inplace", False):
        parts.dropout, node, user = (user.kwargs["p"], user.kwargs["training"]), user, _only_user(user)
    if not (_call(user, torch.matmul, 2) and user.args[0] is node):
        parts.why = parts.why or "its weights are read by another op too (relative positions' value term)"
        return
    parts.out, parts.v = user, user.args[1]
    k, v = parts.k, parts.v
    if _call(k, torch.repeat_interleave, 3) and _call(v, torch.repeat_interleave, 3) and k.args[1:] == v.args[1:] \
            and type(k.args[2]) is int and k.args[2] == 1 and len(k.users) == 1 and len(v.users) == 1:
        parts.grouped = (k.args[0], v.args[0])


def _sdpa(graph: fx.Graph, p: Parts) -> tuple[fx.Node, bool]:
    """F.scaled_dot_product_attention for the parts (and whether it took enable_gqa)."""
    grouped = GQA and p.grouped is not None and p.bias is None and p.mask in ("none", "causal")
    k, v = p.grouped if grouped else (p.k, p.v)
    kwargs: dict[str, Any] = {"scale": 1.0 if p.scale is None else p.scale}
    if p.mask == "causal":
        kwargs["is_causal"] = True
    elif p.bias is not None and p.hidden is not None:
        kwargs["attn_mask"] = graph.call_function(ops.additive_mask, (p.bias, p.hidden))
    elif p.bias is not None:
        kwargs["attn_mask"] = p.bias
    elif p.hidden is not None:
        kwargs["attn_mask"] = graph.call_function(ops.attend, (p.hidden,))
    if p.dropout is not None:
        kwargs["dropout_p"] = graph.call_function(ops.dropout_p, p.dropout)
    if grouped:
        kwargs["enable_gqa"] = True
    return graph.call_function(F.scaled_dot_product_attention, (p.q, k, v), kwargs), grouped


def _flex(graph: fx.Graph, p: Parts) -> tuple[fx.Node, bool]:
    """ops.flex_attend for the parts: the soft cap and bias in its score_mod, causality and a window as its
    block mask, sinks by the log-sum-exp correction."""
    kwargs: dict[str, Any] = {"bias": p.bias} if p.bias is not None else {}
    if p.mask == "causal":
        kwargs["causal"] = True
    elif p.mask == "band":  # a local window: FlexAttention's block mask, as causality
        kwargs["window"], kwargs["causal"] = p.hidden.args[1], p.hidden.args[2]
    elif p.mask == "prefix":  # a prefix LM: causality and the rows' prefix lengths, in the block mask
        kwargs["causal"], kwargs["prefix"] = True, p.hidden.args[1]
    elif p.hidden is not None:
        kwargs["mask"] = p.hidden
    if p.rows:
        kwargs["rows"] = True
    if p.sinks is not None:
        kwargs["sinks"] = p.sinks
    scale = 1.0 if p.scale is None else p.scale
    return graph.call_function(ops.flex_attend, (p.q, p.k, p.v, scale, p.cap if p.cap else 0.0), kwargs), False


KERNELS = {"sdpa": _sdpa, "flex": _flex}


def fuse_attention(gm: fx.GraphModule) -> PassResult:
    """Give every attention the kernel its parts choose, and record the choice; leave the rest explicit."""
    fused = 0
    for weights in [n for n in gm.graph.nodes if _is_weights(n)]:
        parts = read(weights)
        kernel, reason = choose_kernel(parts)
        record = {"mask": parts.mask, **weights.meta.get("attention", {}), "kernel": kernel, "reason": reason}
        if kernel == "explicit":
            weights.meta["attention"] = {**record, "grouped": False}
            continue
        with gm.graph.inserting_before(parts.out):
            new, grouped = KERNELS[kernel](gm.graph, parts)
        new.meta.update({k: v for k, v in parts.out.meta.items() if k in ("var", "shape")})
        new.meta["attention"] = {**record, "grouped": grouped}
        parts.out.replace_all_uses_with(new)
        fused += 1
    if fused:
        _share_masks(gm.graph)
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return PassResult(gm, bool(fused))


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
