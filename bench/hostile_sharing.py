"""Issue 42's sharing category of bench/hostile.py: bad values of the stack keys `share` (parameter sets across
layers) and `share_kv` (cross-layer key/value sharing), written in a spec and given with --set. Each must be
refused in one line that names the spec's line (or the --set value), exit 2, no traceback.
"""

from __future__ import annotations

from pathlib import Path

from bench.hostile_harness import Case

Files = dict[str, Path]
LOCATED = r"\.attn:4:\d+: error: "  # every bad key below is on line 4
MODEL = """model m {{
  d_model = 32  heads = 4  d_ff = 64  vocab = shared(64)  tie = decoder  encoder = none
  positions = learned(max_len = 64)
  decoder {{ layers = 6  {keys} }}
}}
"""
# the stack keys, and what the one line must say
SPECS = {
    "groups not dividing": ("share = groups(4)", "does not divide"),
    "groups over the layers": ("share = groups(7)", "does not divide"),
    "groups of 0": ("share = groups(0)", "at least 1"),
    "groups of -1": ("share = groups(-1)", ""),
    "groups of a float": ("share = groups(1.5)", ""),
    "groups of 10^9": ("share = groups(1000000000)", ""),
    "groups without a size": ("share = groups", ""),
    "cycle over the layers": ("share = cycle(7)", "uses 7 parameter sets in turn"),
    "cycle of 0": ("share = cycle(period = 0)", "at least 1"),
    "cycle with two sizes": ("share = cycle(2, 3)", ""),
    "unknown sharing": ("share = some", "unknown share"),
    "sharing a number": ("share = 2", ""),
    "sharing a string": ('share = "all"', ""),
    "all with an argument": ("share = all(2)", ""),
    "sets across kinds": ("share = all  layer wide { start = 3  d_ff = 96 }", "one is the stack's own"),
    "kv over the layers": ("share_kv = 7", "groups more layers than"),
    "kv of 0": ("share_kv = 0", "at least 1"),
    "kv negative": ("share_kv = -2", ""),
    "kv a float": ("share_kv = 2.5", ""),
    "kv a choice": ("share_kv = all", ""),
    "kv with value residual": ("share_kv = 2  value_residual = true", "value_residual"),
    "kv with a window": ("share_kv = 2  attention = local(window = 3)", "local attention"),
    "kv across kinds": ("share_kv = 2  layer wide { start = 5  d_ff = 96 }", "attend with one layer's keys"),
    "kv and a set spanning its roles": ("share_kv = 2  share = all", "computes keys and values"),
}
SETS = ("model.decoder.share=groups(5)", "model.decoder.share=cycle(0)", "model.decoder.share=everything",
        "model.decoder.share_kv=0", "model.decoder.share_kv=99", "model.encoder.share=groups(3)",
        "model.decoder.share=all", "model.decoder.share_kv=2")  # the last two: the good spec's 2-layer decoder


def sharing(root: Path, f: Files, g: Files) -> list[Case]:
    d = root / "sharing"
    d.mkdir(parents=True, exist_ok=True)
    cases = []
    for note, (keys, said) in SPECS.items():
        spec = d / (note.replace(" ", "_").replace("^", "") + ".attn")
        spec.write_text(MODEL.format(keys=keys))
        for argv in (["check", str(spec)], ["build", str(spec), "--no-write"]):
            cases.append(Case("sharing", argv, "front", timeout=30, bad_value=True, note=note,
                              expect=LOCATED + ".*" + said))
    for value in SETS[:-2]:
        cases.append(Case("sharing", ["check", str(g["spec"]), "--set", value], "front", timeout=30, bad_value=True,
                          note=f"--set {value}", expect=r"error: "))
    for value in SETS[-2:]:  # good values: the build must pass, in one go
        cases.append(Case("sharing", ["build", str(g["spec"]), "--no-write", "--set", value], "front", timeout=60,
                          note=f"--set {value} (a good value)"))
    return cases
