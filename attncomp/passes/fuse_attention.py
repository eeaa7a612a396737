"""fuse_attention: explicit attention -> torch.nn.functional.scaled_dot_product_attention.

The pattern, in canonical spelling (run `canonicalize` first on graphs from elsewhere):

    s = torch.matmul(q, torch.transpose(k, -2, -1))
    s = torch.mul(s, scale)                      # optional; scale a number
    s = torch.add(s, bias)                       # optional; a float bias (ALiBi, relative positions)
    s = torch.masked_fill(s, mask, -inf)         # optional; or torch.add(s, additive_mask) alone
    w = torch.softmax(s, -1)
    w = torch.masked_fill(w, rows, 0.0)          # optional; rows = fully_masked_rows(mask)
    w = F.dropout(w, p=p, training=t)            # optional
    o = torch.matmul(w, v)

becomes  o = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale), where

- a bool mask is inverted (masked_fill hides where True; SDPA attends where True), once per mask;
- `is_causal=True` only for a mask made by `ops.causal_mask`, which masked_fill can only apply
  to square scores, so query and key lengths are equal (is_causal aligns top-left);
- dropout_p is `ops.dropout_p(p, training)`: SDPA drops whenever dropout_p > 0;
- a float bias and a bool mask become one float mask, `ops.additive_mask(bias, mask)` (-inf where
  hidden), made once per (bias, mask) pair; a bias alone is the attn_mask; never is_causal with a bias;
- fully masked rows: SDPA returns 0 for them (a bool mask, or a float mask of -inf), which the unfused
  graph's row fix also defines.
- grouped-query attention: k and v made by `torch.repeat_interleave(x, heads // kv_heads, 1)` are
  replaced by x with `enable_gqa=True` (torch >= 2.5), so the repeated heads are never materialised,
  where the attention has no explicit mask (none, or is_causal) and no positional bias: that is where the flash kernel can
  run, and on CUDA only flash (and math) take enable_gqa (pytorch/pytorch#139586). With a mask (padding),
  or on an older torch, the repeat stays, and the memory-efficient kernel serves it;
- rotary positions need nothing: q and k reach the scores already rotated (`ops.rotate`), so SDPA
  takes the rotated tensors.

Guards (else the attention stays explicit): softmax over the last dim; the scores and the weights
have no other users; the scale is a number; k is transposed over its last two dims; q, k and v
agree in dtype and device where shapes have been propagated.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from numbers import Number

import torch
import torch.nn.functional as F
from torch import fx
from torch.fx.passes.infra.pass_base import PassResult

from attncomp.lower import ops


GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)  # SDPA's enable_gqa


@dataclass
class Match:
    q: fx.Node
    k: fx.Node
    v: fx.Node
    scale: float
    mask: fx.Node | None
    mask_kind: str  # "none", "bool", "additive"
    dropout: fx.Node | None
    output: fx.Node
    bias: fx.Node | None = None  # a float bias added before the bool mask (ALiBi, relative positions)
    gqa: bool = False


def _call(node, target) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target is target


def _only_user(node: fx.Node) -> fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _scores(s: fx.Node) -> tuple | None:
    """Walk back from softmax's input: (q, k, scale, mask, mask_kind, bias), or None."""
    mask, kind, bias = None, "none", None
    if _call(s, torch.masked_fill) and s.args[2] == -math.inf and len(s.users) == 1:
        s, mask, kind = s.args[0], s.args[1], "bool"
    if _call(s, torch.add) and len(s.users) == 1 and (_call(s.args[0], torch.mul) or _call(s.args[0], torch.matmul)):
        if kind == "bool":
            s, bias = s.args[0], s.args[1]
        else:
            s, mask, kind = s.args[0], s.args[1], "additive"
    scale = 1.0
    if _call(s, torch.mul) and len(s.users) == 1:
        if not isinstance(s.args[1], Number) or isinstance(s.args[1], bool):
            return None
        s, scale = s.args[0], float(s.args[1])
    if not (_call(s, torch.matmul) and len(s.users) == 1):
        return None
    q, kt = s.args[:2]
    if not (_call(kt, torch.transpose) and tuple(kt.args[1:]) == (-2, -1) and len(kt.users) == 1):
        return None
    return q, kt.args[0], scale, mask, kind, bias


def _weights(w: fx.Node, mask: fx.Node | None) -> tuple | None:
    """Walk forward from softmax: (dropout node or None, the final matmul), or None."""
    user = _only_user(w)
    if _call(user, torch.masked_fill) and user.args[0] is w:  # the fully-masked-row fix
        rows = user.args[1]
        if not (mask is not None and _call(rows, ops.fully_masked_rows) and rows.args[0] is mask):
            return None
        w, user = user, _only_user(user)
    drop = None
    if _call(user, F.dropout) and user.args[0] is w:
        drop, w, user = user, user, _only_user(user)
    if not (_call(user, torch.matmul) and user.args[0] is w):
        return None
    return drop, user


def _follows(a: fx.Node, b: fx.Node) -> bool:
    """Whether node a comes after node b in their graph."""
    node = b.next
    while node.op != "root":
        if node is a:
            return True
        node = node.next
    return False


def _same_dtype_device(*tensors: fx.Node) -> bool:
    metas = [t.meta.get("tensor_meta") for t in tensors]
    if any(m is None for m in metas):
        return True  # unknown until run: every attncomp graph projects q, k, v from one dtype
    return len({m.dtype for m in metas}) == 1


def _repeated(x: fx.Node) -> tuple[fx.Node, int] | None:
    """(the k/v heads, groups) of `torch.repeat_interleave(x, groups, 1)` read once, or None."""
    if _call(x, torch.repeat_interleave) and len(x.args) == 3 and x.args[2] == 1 and isinstance(x.args[1], int) \
            and not x.kwargs and len(x.users) == 1:
        return x.args[0], x.args[1]
    return None


def _ungroup(m: Match) -> Match:
    """Grouped k and v: SDPA's enable_gqa reads the kv_heads heads instead of their repeats."""
    k, v = _repeated(m.k), _repeated(m.v)
    unmasked = m.bias is None and (m.mask is None or (m.mask_kind == "bool" and _call(m.mask, ops.causal_mask)))
    if not GQA or not unmasked or k is None or v is None or k[1] != v[1]:
        return m
    return dataclasses.replace(m, k=k[0], v=v[0], gqa=True)


def match(softmax: fx.Node) -> Match | None:
    if not _call(softmax, torch.softmax) or softmax.args[1:] != (-1,) or softmax.kwargs:
        return None
    found = _scores(softmax.args[0])
    if found is None:
        return None
    q, k, scale, mask, kind, bias = found
    after = _weights(softmax, mask if kind == "bool" else None)
    if after is None:
        return None
    drop, out = after
    v = out.args[1]
    if not _same_dtype_device(q, k, v):
        return None
    return _ungroup(Match(q, k, v, scale, mask, kind, drop, out, bias))


class _Rewriter:
    def __init__(self, graph: fx.Graph):
        self.graph = graph
        self.inverted: dict[fx.Node, fx.Node] = {}
        self.combined: dict[tuple[fx.Node, fx.Node], fx.Node] = {}

    def attend_mask(self, mask: fx.Node) -> fx.Node:
        """logical_not(mask), made once per mask right after it."""
        if mask not in self.inverted:
            with self.graph.inserting_after(mask):
                self.inverted[mask] = self.graph.call_function(torch.logical_not, (mask,))
        return self.inverted[mask]

    def biased_mask(self, bias: fx.Node, mask: fx.Node | None) -> fx.Node:
        """additive_mask(bias, mask), made once per pair right after the later of the two (so a bias
        shared by a stack's layers is combined once, outside them); the bias alone without a mask."""
        if mask is None:
            return bias
        if (bias, mask) not in self.combined:
            with self.graph.inserting_after(bias if _follows(bias, mask) else mask):
                self.combined[bias, mask] = self.graph.call_function(ops.additive_mask, (bias, mask))
        return self.combined[bias, mask]

    def rewrite(self, m: Match) -> None:
        kwargs: dict = {"scale": m.scale}
        if m.gqa:
            kwargs["enable_gqa"] = True
        if m.bias is not None:
            kwargs["attn_mask"] = self.biased_mask(m.bias, m.mask)
        elif m.mask is not None and m.mask_kind == "bool" and _call(m.mask, ops.causal_mask):
            kwargs["is_causal"] = True
        elif m.mask is not None:
            kwargs["attn_mask"] = self.attend_mask(m.mask) if m.mask_kind == "bool" else m.mask
        with self.graph.inserting_before(m.output):
            if m.dropout is not None:
                p, training = m.dropout.kwargs["p"], m.dropout.kwargs["training"]
                kwargs["dropout_p"] = self.graph.call_function(ops.dropout_p, (p, training))
            fused = self.graph.call_function(F.scaled_dot_product_attention, (m.q, m.k, m.v), kwargs)
        fused.meta.update(m.output.meta)
        fused.meta["fused_attention"] = True
        m.output.replace_all_uses_with(fused)


def fuse_attention(gm: fx.GraphModule) -> PassResult:
    """Fuse every attention that matches; leave the rest (additive, guarded cases) explicit."""
    rewriter = _Rewriter(gm.graph)
    matches = [m for node in list(gm.graph.nodes) if (m := match(node)) is not None]
    for m in matches:
        rewriter.rewrite(m)
    if matches:
        gm.graph.eliminate_dead_code()
        gm.graph.lint()
        gm.recompile()
    return PassResult(gm, bool(matches))


def count_fused(graph: fx.Graph) -> int:
    return sum(1 for n in graph.nodes if _call(n, F.scaled_dot_product_attention))
