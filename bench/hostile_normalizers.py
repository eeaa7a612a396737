"""Issue 42's category of bench/hostile.py for how attention normalises (`normalizer = softmax | sigmoid(...) |
differential(...)`, docs/language.md): bad values and bad combinations in a spec and through `--set`. Each must
end in one located line (file:line:col for a spec, `error:` for `--set`), exit 2, no traceback; exit 0 is a
failure. (root, hostile files, good artifacts) -> cases.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.hostile_harness import Case
from bench.hostile_special import LOCATED, _write

MODEL = ("model m {{\n  vocab = shared(61)  d_model = 16  heads = 2  d_ff = 32  {model}\n"
         "  decoder {{ layers = 2  attention = {attention} }}\n}}\n")
# (the attention as written, keys of the model, what the error must say); every error is on line 2 or 3
BAD = [
    ("scaled_dot(normalizer = sigmoid)", "", "exactly one of bias"),
    ("scaled_dot(normalizer = sigmoid())", "", "exactly one of bias"),
    ("scaled_dot(normalizer = sigmoid(bias = 1, length = 2))", "", "exactly one of bias"),
    ("scaled_dot(normalizer = sigmoid(bias = nan))", "", "bias must be a number"),
    ("scaled_dot(normalizer = sigmoid(bias = -inf))", "", "a number"),
    ("scaled_dot(normalizer = sigmoid(bias = 1e400))", "", "out of range"),
    ("scaled_dot(normalizer = sigmoid(bias = \"x\"))", "", "bias must be a number"),
    ("scaled_dot(normalizer = sigmoid(length = 0))", "", "length must be at least 1"),
    ("scaled_dot(normalizer = sigmoid(length = -5))", "", "length must be at least 1"),
    ("scaled_dot(normalizer = sigmoid(length = 1.5))", "", "whole number"),
    ("scaled_dot(normalizer = sigmoid(length = 99999999999999999999999))", "", "out of range"),
    ("scaled_dot(normalizer = sigmoid(-1))", "", "argument"),
    ("scaled_dot(sinks = true, normalizer = sigmoid(length = 8))", "", "sigmoid attention takes no sinks"),
    ("scaled_dot(normalizer = differential(lambda_init = nan))", "", "lambda_init must be a number"),
    ("scaled_dot(normalizer = differential(lambda_init = 1))", "", "lambda_init must be less than 1"),
    ("scaled_dot(normalizer = differential(lambda_init = -0.5))", "", "lambda_init must be at least 0"),
    ("scaled_dot(normalizer = differential(lambda_init = 1e999))", "", "out of range"),
    ("scaled_dot(normalizer = differential(lambda_init = true))", "", "lambda_init must be a number"),
    ("scaled_dot(normalizer = differential(0.5))", "", "argument"),
    ("scaled_dot(normalizer = differential(lambda_init = 0.5, lambda_init = 0.6))", "", "twice"),
    ("scaled_dot(normalizer = differential)", "d_k = 7", "is odd"),
    ("scaled_dot(normalizer = differential)", "positions = relative(max_distance = 4)", "no relative positions"),
    ("latent(kv_rank = 6, rope_dims = 4, normalizer = differential)", "positions = rope  d_k = 12",
     "cannot be latent"),
    ("additive(normalizer = differential)", "", "normalizer"),
    ("scaled_dot(normalizer = softmax(2))", "", "argument"),
    ("scaled_dot(normalizer = tanh)", "", 'unknown normalizer "tanh"'),
    ("scaled_dot(normalizer = differentail)", "", "did you mean"),
    ("scaled_dot(normalizer = )", "", ""),
    ("scaled_dot(normalizer = differential) layer last { start = 1  attention = scaled_dot }", "positions = rope",
     "is differential with rope"),
]
SETS = ["model.decoder.attention=scaled_dot(normalizer=sigmoid)",
        "model.decoder.attention=scaled_dot(normalizer=differential(lambda_init=2))",
        "model.decoder.attention=scaled_dot(normalizer=sigmoid(length=0))",
        "model.decoder.attention=scaled_dot(normalizer=nonsense)"]


def normalizers(root: Path, f: dict, g: dict) -> list[Case]:
    d = root / "normalizers"
    cases = []
    for attention, model, said in BAD:
        name = re.sub(r"[^a-z0-9]+", "_", f"{attention} {model}").strip("_")[:80]
        spec = _write(d / "specs" / f"{name}.attn", MODEL.format(model=model, attention=attention))
        for argv in (["check", str(spec)], ["build", str(spec), "--no-write"]):
            cases.append(Case("normalizers", argv, "front", timeout=30, bad_value=True, note=f"{attention} {model}",
                              expect=LOCATED + ".*" + re.escape(said)))
    for value in SETS:
        cases.append(Case("normalizers", ["check", str(g["spec"]), "--set", value], "front", timeout=30,
                          bad_value=True, note=f"--set {value}", expect=r"error: "))
    return cases
