"""Issue 42's prefix-LM category of bench/hostile.py (`decoder { mask = prefix }`): bad values and bad combinations
of the key (located at their line), a prefix LM given monolingual data to train on, exported where no format can
express it (CTranslate2, Hugging Face), and asked to translate prompts longer than its position table or empty.
(root, hostile files, good artifacts) -> cases. Every case must end in one line, without a traceback; those that
name a bad value must be refused (exit 2 for a spec, data or usage error)."""

from __future__ import annotations

from pathlib import Path

from bench.hostile_harness import Case

LOCATED = r"\.attn:{line}:\d+: error: "
PREFIX_LM = """model plm {{
  d_model = 32  heads = 2  d_ff = 64  vocab = shared(256)  tie = decoder
  positions = learned(max_len = 40)
  decoder {{ layers = 1  norm = pre  {decoder} }}
}}
train {{ batch = tokens(400)  steps = 1  checkpoint {{ every = 1  average_last = 1 }} }}
decode {{ beam = 2  max_len = src + 5 }}
"""
# (name, spec text, the line of its located error)
BAD_SPECS = {
    "with an encoder": ("model m {\n  encoder {}\n  decoder { mask = prefix }\n}\n", 3),
    "an argument": (PREFIX_LM.format(decoder="mask = prefix(3)"), 4),
    "a misspelling": (PREFIX_LM.format(decoder="mask = prefx"), 4),
    "a number": (PREFIX_LM.format(decoder="mask = 1"), 4),
    "bidirectional": (PREFIX_LM.format(decoder="mask = bidirectional"), 4),
    "twice": (PREFIX_LM.format(decoder="mask = prefix  mask = causal"), 4),
    "with local attention": (PREFIX_LM.format(decoder="mask = prefix  attention = local(window = 4)"), 4),
    "with a local layer kind": (PREFIX_LM.format(
        decoder="mask = prefix\n    layer near { every = 2  attention = local(window = 4) }"), 4),
    "in an encoder": ("model m {\n  vocab = shared(256)\n  encoder { mask = prefix }\n}\n", 3),
    "in the model block, encoder-only": ("model m {\n  vocab = shared(256)  tie = encoder\n  mask = prefix\n"
                                         "  encoder {}\n}\n", 3),
    "in the model block, with an encoder": ("model m {\n  mask = prefix\n  encoder {}\n  decoder {}\n}\n", 2),
}
SETS = ("model.decoder.mask=prefix", "model.decoder.mask=prefix(2)", "model.decoder.mask=")  # on tiny.attn


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _checkpoint(d: Path, data: Path) -> Path | None:
    """A prefix LM with random weights and the good data's tokenizer, saved as a checkpoint (as tests' are)."""
    try:
        from tests.interop.conftest import random_checkpoint
    except ImportError:
        return None
    spec = _write(d / "plm.attn", PREFIX_LM.format(decoder="mask = prefix"))
    return random_checkpoint(data, d / "plm.pt", sets=(), spec_path=spec)


def _monolingual(d: Path) -> Path:
    from bench.hostile_special import _quiet

    out = d / "mono"
    if not (out / "spm.model").exists():
        _quiet(["data", "sample", "--out", str(out), "--pairs", "200", "--held-out", "20", "--lang", "tgt", "--force"])
    return out


def prefix_lm(root: Path, f: dict, g: dict) -> list[Case]:
    d = root / "prefix_lm"
    cases = []
    for note, (text, line) in BAD_SPECS.items():
        spec = _write(d / "specs" / (note.replace(" ", "_") + ".attn"), text)
        for argv in (["check", str(spec)], ["build", str(spec), "--no-write"]):
            cases.append(Case("prefix-lm", argv, "front", bad_value=True, note=note,
                              expect=LOCATED.format(line=line)))
    for value in SETS:
        cases.append(Case("prefix-lm", ["build", str(g["spec"]), "--no-write", "--set", value], "front",
                          bad_value=True, note=f"--set {value} on an encoder-decoder"))
    spec = _write(d / "plm.attn", PREFIX_LM.format(decoder="mask = prefix"))
    cases.append(Case("prefix-lm", ["train", str(spec), "--data", str(_monolingual(d)), "--out", str(d / "run"),
                                    "--procs", "1"], "front", timeout=120, bad_value=True,
                      note="monolingual data has no source to be the prefix"))
    ckpt = _checkpoint(d, g["data"])
    if ckpt is None:
        return cases
    for fmt in ("ctranslate2", "hf"):
        cases.append(Case("prefix-lm", ["export", str(ckpt), "--format", fmt, "--out", str(d / f"out-{fmt}")],
                          "ckpt", timeout=90, bad_value=True, note=f"--format {fmt} cannot express a prefix LM"))
    long_line = _write(d / "text" / "long.src", " ".join(["the quick brown fox"] * 40) + "\n")
    odd = _write(d / "text" / "odd.src", "\n   \nfox\n" + "a" * 3000 + "\n")
    for text, note in ((long_line, "a prompt longer than the position table"), (odd, "empty and odd prompts")):
        cases.append(Case("prefix-lm", ["translate", str(ckpt), "--input", str(text), "--device", "cpu"], "ckpt",
                          timeout=90, note=note))
    return cases
