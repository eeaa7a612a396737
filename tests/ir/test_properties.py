"""Property tests: random valid IR round-trips through canonical text; random mutations of shipped
specs give a valid IR or a located SpecError, never anything else."""

from __future__ import annotations

import functools
import math

import typing

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from attncomp import ir
from attncomp.errors import SpecError
from attncomp.ir import nodes
from attncomp.ir.schema import classify
from tests.conftest import SPECS, examples

SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _bounds(metadata) -> dict:
    """ge/gt/le/lt constraints from pydantic field metadata."""
    found = {}
    for meta in metadata:
        for name in ("ge", "gt", "le", "lt"):
            if getattr(meta, name, None) is not None:
                found[name] = getattr(meta, name)
    return found


def _metadata(annotation) -> list:
    if typing.get_origin(annotation) in (typing.Union, __import__("types").UnionType):  # Dim | None
        return [m for a in typing.get_args(annotation) for m in _metadata(a)]
    found = list(typing.get_args(annotation)[1:]) if typing.get_origin(annotation) is typing.Annotated else []
    return [x for m in found for x in (getattr(m, "metadata", None) or [m])]  # Field(ge=...) holds Ge(...)


def _scalar(what: str, b: dict):
    low = b.get("ge", b.get("gt", 0))
    if what == "int":
        low = int(low) + (1 if "gt" in b else 0)
        high = int(b.get("le", b.get("lt", low + 4097) - 1))
        return st.integers(min_value=low, max_value=min(high, low + 4096))
    high = b.get("le", b.get("lt", float(low) + 100.0))
    return st.floats(min_value=float(low), max_value=float(high), exclude_min="gt" in b, exclude_max="lt" in b,
                     allow_nan=False, allow_infinity=False)


@functools.cache
def node_data(cls: type[BaseModel]) -> st.SearchStrategy[dict]:
    """Random field values for a node, each within the field's own bounds. Built once per class: hypothesis
    validates a new strategy tree on its first draw, which cost ten times the test itself when every example
    built its own."""
    parts = {}
    for name, field in cls.model_fields.items():
        if name == "name" and cls is nodes.LayerKind:
            parts[name] = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
            continue
        if name == "name":
            parts[name] = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
                lambda s: not __import__("keyword").iskeyword(s))
            continue
        if name == "kind":
            parts[name] = st.just(field.default)
            continue
        parts[name] = value_for(field.annotation, _bounds(field.metadata), optional_default=field.default is None)
    return st.fixed_dictionaries(parts)


def value_for(annotation, bounds: dict, optional_default=False):
    kind = classify(annotation)
    bounds = bounds or _bounds(_metadata(annotation))
    if kind.what == "choice":
        strategy = st.one_of([node_data(m) for m in kind.members])
    elif kind.what == "block":
        strategy = node_data(kind.members[0])
    elif kind.what == "named":
        strategy = st.lists(node_data(kind.members[0]), max_size=2).map(tuple)
    elif kind.what == "list":
        strategy = st.lists(st.one_of([node_data(m) for m in kind.members]), max_size=4).map(tuple)
    elif kind.what == "floats":
        strategy = st.lists(st.floats(min_value=0.25, max_value=64.0), min_size=1, max_size=4).map(tuple)
    elif kind.what == "literal":
        strategy = st.sampled_from(kind.members)
    elif kind.what == "bool":
        strategy = st.booleans()
    else:
        strategy = _scalar(kind.what, bounds)
    return st.one_of(st.none(), strategy) if kind.optional or optional_default else strategy


def _gain_first(norm: dict) -> None:
    """Nothing to bias or offset without a gain (verify._normalization)."""
    if not norm["gain"]:
        norm["bias" if norm["kind"] == "layernorm" else "offset"] = False if norm["kind"] == "layernorm" else 0


def _scaling_repaired(scaling: dict | None, d_k: int) -> dict | None:
    """A rotary scaling whose formulas are defined (verify._rope_scaling): llama3's and YaRN's defaults
    where their two factors are the wrong way round; no dynamic scaling of two rotated dims."""
    if scaling is None:
        return None
    if scaling["kind"] == "llama3" and scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
        scaling.update(low_freq_factor=1.0, high_freq_factor=4.0)
    if scaling["kind"] == "yarn" and scaling["beta_fast"] <= scaling["beta_slow"]:
        scaling.update(beta_fast=32.0, beta_slow=1.0)
    if scaling["kind"] == "longrope":  # one factor per rotated pair (fraction is 1 here)
        for key in ("short_factor", "long_factor"):
            scaling[key] = tuple(scaling[key][i % len(scaling[key])] for i in range(d_k // 2))
    return None if scaling["kind"] == "dynamic" and d_k <= 2 else scaling


def _rotated(stack: dict) -> int:
    """The dims a stack's rotary table turns (fraction is 1 here): a latent attention's rope_dims, else d_k."""
    return stack["attention"]["rope_dims"] if stack["attention"]["kind"] == "latent" else stack["d_k"]


def _shared_longrope_fits(model: dict) -> None:
    """positions' LongRoPE lists fit every stack that rotates with it (stacks may differ in d_k)."""
    scaling = model["positions"].get("scaling") if model["positions"]["kind"] == "rope" else None
    if scaling is not None and scaling["kind"] == "longrope" and any(
            s is not None and s["rope_scaling"] is None and _rotated(s) // 2 != len(scaling["short_factor"])
            for s in (model["encoder"], model["decoder"])):
        model["positions"]["scaling"] = None


def _repair(data: dict, stack: dict) -> dict:
    """Bend random data to the cross-field rules of ir.verify, so no example is thrown away."""
    model, train = data["model"], data["train"]
    if model["encoder"] is None and model["decoder"] is None:
        model["decoder"] = {**stack, "cross_attention": {"kind": "scaled_dot"}}
    decoder = model["decoder"]
    if decoder is not None and (model["encoder"] is None or decoder["cross_attention"]["kind"] == "local"):
        decoder["cross_attention"] = {"kind": "scaled_dot"}
    both = model["encoder"] is not None and decoder is not None
    if not both:
        roles = {k: v for k, v in model["vocab"].items() if k in nodes.ROLES}
        model["vocab"] = {"kind": "shared", "size": max(6, model["vocab"].get("size", 6)), **roles}
    if model["tie"] in ("all", "inputs") and not (both and model["vocab"]["kind"] == "shared" and (
            model["encoder"]["d_model"] == decoder["d_model"] or model["d_embed"] is not None)):
        model["tie"] = "none"
    if model["tie"] == "decoder" and decoder is None:
        model["tie"] = "none"
    if model["tie"] == "encoder" and (model["encoder"] is None or decoder is not None):
        model["tie"] = "none"
    if model["encoder"] is None:  # segments are added to a source
        model["segments"] = 0
    for key in ("size", "src", "tgt"):
        if key in model["vocab"]:
            model["vocab"][key] = max(8, model["vocab"][key])  # room beside its 7 special roles
    vocab = model["vocab"]
    for role in nodes.ROLES:  # special ids inside the vocabulary, and the ones the stacks need declared
        if vocab.get(role) is not None:
            vocab[role] %= 8
    if model["encoder"] is not None and vocab.get("pad", 0) is None:
        vocab["pad"] = 0
    if decoder is not None and vocab.get("bos", 2) is None and vocab.get("start") is None:
        vocab["start"] = 2
    if decoder is None and vocab.get("mask") is None and vocab.get("sep", 4) is None:
        vocab["mask"] = 4
    if model["encoder"] is not None:  # the tokens an encoder reads are not hidden as padding (verify._vocab)
        read = {vocab.get("bos", 2), vocab.get("eos", 3)}
        if decoder is None:
            read.add(vocab["mask"] if vocab.get("mask") is not None else vocab.get("sep", 4))
        if vocab.get("pad", 0) in read:
            vocab["pad"] = min(set(range(8)) - read)
    positions = model["positions"]
    if positions["kind"] == "sinusoidal" and positions["timescales"] == "tensor2tensor":
        positions["layout"] = "halves"  # with d_model >= 4, below
    for s in (model["encoder"], decoder):
        if s is not None and s["attention"]["kind"] == "local" and positions["kind"] == "learned":
            s["attention"]["window"] = min(s["attention"]["window"], positions["max_len"] - 1) or 1
            positions["max_len"] = max(positions["max_len"], 2)
    for s in (model["encoder"], decoder):
        if s is not None:
            if s["kv_heads"] is not None:
                s["kv_heads"] = math.gcd(s["kv_heads"], s["heads"])  # key/value heads divide the query heads
            for owner in (s, *s["layer"]):  # a mixture routes each token to at most its experts
                if (owner.get("ffn") or {}).get("kind") == "moe":
                    owner["ffn"]["top_k"] = min(owner["ffn"]["top_k"], owner["ffn"]["experts"])
            if positions["kind"] == "rope":  # rope rotates pairs: an even number of dims
                positions["fraction"], s["d_k"] = 1.0, s["d_k"] + s["d_k"] % 2
            if positions["kind"] == "sinusoidal" and positions["timescales"] == "tensor2tensor":
                s["d_model"] = max(s["d_model"], 4)
                model["d_embed"] = None if model["d_embed"] is None else max(model["d_embed"], 4)
            kinds = list({k["name"]: k for k in s["layer"]}.values())[: s["layers"]]
            for i, k in enumerate(kinds):  # disjoint placements; keys whose rules need the whole stack unset
                k.update(start=i, every=len(kinds), count=None, attention=None, block=None, normalization=None,
                         norm=None)
            s["layer"] = tuple(kinds)
            if positions["kind"] != "rope":  # verify._rope_base: a rotary base or scaling needs rotary positions
                for owner in (s, *kinds):
                    owner["rope_base"] = owner["rope_scaling"] = None
            else:  # verify._rope_scaling: each scaling's formulas defined
                positions["scaling"] = _scaling_repaired(positions["scaling"], s["d_k"])
                for owner in (s, *kinds):
                    owner["rope_scaling"] = _scaling_repaired(owner["rope_scaling"], s["d_k"])
            _gain_first(s["normalization"])
            if s["qk_normalization"] is not None:
                _gain_first(s["qk_normalization"])
            if s["layers"] < 2:  # verify._connections: connections across layers need two
                s["unet"] = s["reinject"] = s["value_residual"] = False
            if s["block"]["kind"] == "parallel":  # norms before the sub-layers
                s["norm"] = "pre" if s["norm"] == "post" else s["norm"]
            s["block"]["sublayers"] = _sublayers(s, cross=s is decoder and model["encoder"] is not None)
            if s["block"]["kind"] == "parallel":  # no cross-attention
                if s is decoder and model["encoder"] is not None:
                    s["block"] = {"kind": "sequential"}
    if model["head"]["kind"] == "dense":
        _gain_first(model["head"]["normalization"])
    widths = {st["d_model"] for st in (model["encoder"], decoder) if st is not None}
    if model["d_embed"] is not None and widths == {model["d_embed"]}:  # verify._embeddings: something to project
        model["d_embed"] += 1 if model["d_embed"] < 5 else -1
    if positions["kind"] == "learned" and data["decode"]["max_len"]["kind"] == "fixed":
        data["decode"]["max_len"]["length"] = min(data["decode"]["max_len"]["length"], positions["max_len"])
    for tolerance in data["expect"].values():
        if tolerance is not None and tolerance["percent"] is not None:
            tolerance["absolute"] = None
    ck = train["checkpoint"]
    ck["average_last"] = min(ck["average_last"], ck["keep"])
    sched = train["schedule"]
    if sched["kind"] == "cosine":
        train["steps"] = max(train["steps"], sched["warmup"] + 1)
        sched["final"] = min(sched["final"], sched["peak"])
    mlm = train["mlm"]
    mlm["random"] = min(mlm["random"], 1.0 - mlm["mask"])
    for s in (model["encoder"], decoder):  # verify._relative_scores: relative positions need dot-product scores
        if s is not None and positions["kind"] == "relative" and s["attention"]["kind"] == "additive":
            s["attention"] = {"kind": "scaled_dot"}
    for s in (model["encoder"], decoder):  # verify._latent: latent self-attention over rotary positions
        if s is None:
            continue
        if s is decoder and s["cross_attention"]["kind"] == "latent":
            s["cross_attention"] = {"kind": "scaled_dot"}
        if s["attention"]["kind"] == "latent" and positions["kind"] != "rope":
            s["attention"] = {"kind": "scaled_dot"}
        elif s["attention"]["kind"] == "latent":  # an even rope_dims below d_k; no kv_heads, no qk_norm
            s["value_residual"] = False  # nor value residuals
            s["attention"]["clip_qkv"] = 0.0  # nor clipping (its keys and values come from the latent)
            s["d_k"] = max(s["d_k"], 4)
            s["attention"]["rope_dims"] = max(2, min(s["attention"]["rope_dims"] // 2 * 2, s["d_k"] - 2))
            s["kv_heads"], s["qk_norm"] = None, "none"
            for k in s["layer"]:
                k["qk_norm"] = None
    if decoder is not None and decoder.get("mask") == "prefix" and (  # verify._prefix_mask: a decoder-only model's,
            model["encoder"] is not None or decoder["attention"]["kind"] == "local"):  # without a window
        decoder["mask"] = "causal"
    for s in (model["encoder"], decoder):  # nodes.Sigmoid (one of bias, length) and verify._normalizer
        if s is not None:
            _normalizer_repaired(s, positions)
    for s in (model["encoder"], decoder):  # verify._sharing: sets and key/value groups that fit the stack
        if s is None:
            continue
        share = s["share"]
        if share["kind"] == "groups":
            share["size"] = s["layers"]  # divides them
        elif share["kind"] == "cycle":
            share["period"] = min(share["period"], s["layers"])
        s["share_kv"] = min(s["share_kv"], s["layers"])
        if s["layer"]:  # one kind per set and group: sharing only without kinds
            s["share"], s["share_kv"] = {"kind": "none"}, 1
        if s["share_kv"] > 1:  # every layer computes or reads: no set spans both, no value residual, no window
            s["share"], s["value_residual"] = {"kind": "none"}, False
            if s["attention"]["kind"] in ("latent", "local"):
                s["share_kv"] = 1
    for s in (model["encoder"], decoder):  # LongRoPE's lists: one factor per pair the stack rotates
        if s is not None and positions["kind"] == "rope":
            for owner in (s, *s["layer"]):
                owner["rope_scaling"] = _scaling_repaired(owner["rope_scaling"], _rotated(s))
    _shared_longrope_fits(model)
    validation = train.get("validation")
    if validation is not None:
        if decoder is None:  # verify._validation: an encoder-only model generates no text to score
            validation["bleu"] = 0
            validation["best"] = "ppl" if validation["best"] == "bleu" else validation["best"]
        validation["bleu"] = max(validation["bleu"], 1) if validation["best"] == "bleu" else validation["bleu"]
        validation["patience"] = 0 if validation["best"] == "none" else validation["patience"]
    return data


def _normalizer_repaired(stack: dict, positions: dict) -> None:
    """sigmoid with exactly one of bias and length, and no sinks; differential not latent, not beside relative
    positions, over an even d_k (a multiple of 4 under rope, which turns each half)."""
    for key in ("attention", "cross_attention"):
        attention = stack.get(key) or {}
        normalizer = attention.get("normalizer")
        if normalizer is None:
            continue
        if normalizer["kind"] == "sigmoid":
            if (normalizer["bias"] is None) == (normalizer["length"] is None):
                normalizer["bias"], normalizer["length"] = normalizer["bias"] or -1.0, None
            attention["sinks"] = False
        elif normalizer["kind"] == "differential" and (attention["kind"] == "latent" or positions["kind"] ==
                                                        "relative"):
            attention["normalizer"] = {"kind": "softmax"}
        elif normalizer["kind"] == "differential":
            d_k = stack["d_k"] or max(1, stack["d_model"] // stack["heads"])
            stack["d_k"] = d_k + (-d_k) % (4 if positions["kind"] == "rope" else 2)


def _sublayers(stack: dict, cross: bool) -> tuple:
    """verify._sublayers: one attention (and cross-attention where the decoder reads an encoder), any
    feed-forwards; a parallel block's attention then one ffn, neither with norm = post; and none where the
    shorthand says the same (build folds it)."""
    written = stack["block"]["sublayers"]
    if not written:
        return ()
    ffns = [p for p in written if p["kind"] == "ffn"]
    if stack["block"]["kind"] == "parallel":
        cross = False  # a parallel decoder reading an encoder is made sequential by _repair
        ffns = [{**p, "norm": None if p["norm"] == "post" else p["norm"]} for p in ffns[:1]] or [
            {"kind": "ffn", "norm": None, "scale": 1.0}]
    attention = next((p for p in written if p["kind"] == "attention"), {"kind": "attention", "norm": None, "scale": 1.0})
    if stack["block"]["kind"] == "parallel" and attention["norm"] == "post":
        attention = {**attention, "norm": None}
    parts = [attention] + ([{"kind": "cross_attention", "norm": "none", "scale": 1.0}] if cross else []) + ffns
    parts = [_stream_repaired(p, stack) for p in parts]
    norms = {p["norm"] or stack["norm"] for p in parts}
    paper = [p["kind"] for p in parts] == [p.kind for p in nodes.paper_sublayers(cross)]
    plain = all(p["scale"] == 1.0 and not any(p.get(k) for k in ("gain", "skip", "normalization")) for p in parts)
    if paper and len(norms) == 1 and "none" not in norms and plain:
        return ()
    return tuple(parts)


def _stream_repaired(part: dict, stack: dict) -> dict:
    """verify._residual_stream and _normalization: a sub-layer's own norm with its gain first; a deepnorm skip only
    in a post-norm, a normed one only after a norm before the sub-layer; no skip in a parallel block."""
    part = dict(part)
    if part.get("normalization"):
        part["normalization"] = dict(part["normalization"])
        _gain_first(part["normalization"])
    norm, skip = part["norm"] or stack["norm"], (part.get("skip") or {}).get("kind")
    if stack["block"]["kind"] == "parallel" or (skip == "deepnorm" and norm != "post") or \
            (skip == "normed" and norm not in ("pre", "sandwich")):
        part["skip"] = None
    return part


@st.composite
def valid_specs(draw) -> nodes.Spec:
    data = draw(node_data(nodes.Spec))
    stack = draw(node_data(nodes.EncoderSpec))
    return ir.verify(nodes.Spec.model_validate(_repair(data, stack)))


@SETTINGS
@given(valid_specs())
def test_canonical_text_round_trips(spec):
    text = ir.to_text(spec)
    again = ir.load(text)
    assert again == spec
    assert ir.to_text(again) == text


# --- mutation fuzzing -------------------------------------------------------------------------

TEXTS = [p.read_text() for p in SPECS if "extends" not in p.read_text()]
TOKENS = ["{", "}", "=", "(", ")", ",", "+-", "+", "-", ".", '"', "#", "model", "encoder", "none", "1e999",
          "99999999999999999999", "0", "-1", "0.5", "10min", "5%", "local", "extends", "\x00", "\xff", "é", "\n"]


@st.composite
def mutated(draw) -> str:
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=3)))
        span = draw(st.integers(1, 8))
        if action == "insert":
            text = text[:at] + piece + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + span:]
        else:
            text = text[:at] + piece + text[at + span:]
    return text


@settings(max_examples=examples(400), deadline=None)
@given(mutated())
def test_mutations_give_ir_or_located_error(text):
    try:
        spec = ir.load(text + "\n" if "{" not in text else text)
    except SpecError as err:
        formatted = err.format()
        assert formatted and "Traceback" not in formatted
        assert err.span is not None, formatted
        assert err.span.line >= 1 and err.span.column >= 1
    else:
        assert isinstance(spec, nodes.Spec)
        assert ir.load(ir.to_text(spec)) == spec
