"""The special_ids category of bench/hostile.py: a vocabulary's special token ids (`vocab = shared(N, pad = ...,
unk = ..., bos = ..., eos = ..., sep = ..., mask = ..., start = ...)`, docs/language.md "Special tokens") as a user
types them wrong: out of range, negative, huge, floats, strings, given twice or by position, `none` where a stack
needs the role, ids the encoder's padding mask would hide; `--set model.vocab=...`; ids that disagree with the
prepared data's tokenizer (train, sweep) or with a checkpoint's (translate, eval); masked LM without a <mask>;
a decoder-only model without <pad> or <sep> on monolingual and parallel data; decoding without </s>; imported
models (GPT-2: pad = none, bos = eos; BERT: its [MASK]; BART: pad = 1) whose model.attn is edited, fine-tuned on
data of another tokenizer, and exported (torch-export, ctranslate2, hf). (root, hostile files, good artifacts)
-> cases.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

from bench.hostile_harness import Case
from bench.hostile_corpus import TINY_SET

Files = dict[str, Path]
LOCATED = r"\.attn:\d+:\d+: error: "
MODEL = "model m {{\n  d_model = 16  heads = 2  d_ff = 32  layers = 1\n  vocab = {vocab}\n  {stacks}\n}}\n"
ENC_DEC, ENCODER, DECODER = "encoder { }  decoder { }", "encoder { }", "decoder { }"
# (name, vocab, stacks, what stderr names): each refused at the spec's line by `check` and `build`
SPECS = [
    ("outside", "shared(64, pad = 64)", ENC_DEC, "not an id of a vocabulary of 64"),
    ("negative", "shared(64, eos = -1)", ENC_DEC, "at least 0"),
    ("huge", "shared(64, bos = 9223372036854775808)", ENC_DEC, "less than"),
    ("power", "shared(64, bos = 2**63)", ENC_DEC, "unexpected"),
    ("max id", "shared(64, unk = 16777216)", ENC_DEC, "less than"),
    ("float", "shared(64, pad = 1.5)", ENC_DEC, "whole number"),
    ("float huge", "shared(64, start = 1e9)", ENC_DEC, "less than"),
    ("nan", "shared(64, pad = nan)", ENC_DEC, "a number"),
    ("string", 'shared(64, sep = "4")', ENC_DEC, "a number"),
    ("bool", "shared(64, mask = true)", ENCODER, "a number"),
    ("twice", "shared(64, pad = 0, pad = 1)", ENC_DEC, "twice"),
    ("positional", "shared(64, 0, 1)", ENC_DEC, "at most 1 argument"),
    ("unknown role", "shared(64, cls = 2)", ENC_DEC, "no argument"),
    ("no size", "shared(pad = 0)", ENC_DEC, "needs size"),
    ("no room", "shared(5)", ENC_DEC, "no room"),
    ("encoder without pad", "shared(64, pad = none)", ENC_DEC, "needs a pad"),
    ("encoder-only without pad", "shared(64, pad = none)", ENCODER, "needs a pad"),
    ("decoder without bos", "shared(64, bos = none)", DECODER, "neither bos nor start"),
    ("decoder without start", "shared(64, bos = none, start = none)", ENC_DEC, "neither bos nor start"),
    ("eos = pad", "shared(64, pad = 3)", ENC_DEC, "eos and pad are both 3"),
    ("bos = pad", "shared(64, bos = 0)", ENC_DEC, "bos and pad are both 0"),
    ("mask = pad", "shared(64, mask = 0)", ENCODER, "mask and pad are both 0"),
    ("sep = pad, mask unset", "shared(64, sep = 0)", ENCODER, "mask .unset: sep's id. and pad"),
    ("separate: outside the target side", "separate(64, 32, eos = 40)", ENC_DEC, "vocabulary of 32"),
    ("separate: positional role", "separate(64, 32, 3)", ENC_DEC, "at most 2 argument"),
    ("separate on one stack", "separate(64, 32, pad = 1)", DECODER, "one vocabulary"),
]
SETS = ["model.vocab=shared(256, pad = 300)", "model.vocab=shared(256, pad = none)", "model.vocab=shared(256, 3)",
        "model.vocab=shared(256, eos = 0)", "model.vocab=shared(256, bos = -2)", "model.vocab.pad=5",
        "model.vocab=shared(256, start = 1.5)", "model.vocab=separate(256, 8, pad = 9)"]
# ids of the tiny spec's vocabulary that attncomp's sentencepiece tokenizer (the good data's) does not have
DISAGREE = ["pad = 5", "unk = none", "bos = 7", "eos = none", "sep = 9", "start = 3"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _quiet(argv: list[str]) -> int:
    """Run an attncomp command in this process (making the category's artifacts), its output swallowed."""
    from attncomp.cli.main import run

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return run(argv)
        except SystemExit as stop:
            return stop.code if isinstance(stop.code, int) else 1


def _tiny(g: Files, d: Path, name: str, vocab: str, stacks: str | None = None) -> Path:
    """The good spec with this vocabulary (and, given `stacks`, only those of its stacks)."""
    text = g["spec"].read_text().replace("vocab = shared(size = 256)", f"vocab = {vocab}")
    if stacks == "encoder":
        text = re.sub(r"\n  decoder \{.*?\n  \}", "", text, flags=re.S).replace("tie = all", "tie = encoder")
    elif stacks == "decoder":
        text = re.sub(r"\n  encoder \{.*?\n  \}", "", text, flags=re.S).replace("tie = all", "tie = decoder")
    return _write(d / f"{name}.attn", text)


def _hf(root: Path) -> dict[str, Path]:
    """Imported GPT-2 (and one without eos_token_id), BERT and BART checkpoints, made here with transformers
    (none without it), and data prepared with GPT-2's and BERT's tokenizers."""
    try:
        import torch

        from tests.interop import hf_models, hf_tokenizers
    except ImportError:
        return {}
    d, out = root / "hf", {}
    text = root / "text"
    _write(text / "mono.xx", "\n".join(hf_tokenizers.TEXT * 2) + "\n")
    _write(text / "pairs.src", "\n".join(hf_tokenizers.TEXT) + "\n")
    _write(text / "pairs.tgt", "\n".join(reversed(hf_tokenizers.TEXT)) + "\n")
    tok = hf_tokenizers.byte_level_bpe()
    end = tok.token_to_id("<|endoftext|>")
    wordpiece = hf_tokenizers.wordpiece()
    makers = {
        "gpt2": lambda: hf_tokenizers.save(hf_models.model("gpt2", torch.float32, vocab_size=tok.get_vocab_size(),
                                                           n_positions=64, bos_token_id=end, eos_token_id=end),
                                           tok, d / "src" / "gpt2"),
        "gpt2_noeos": lambda: hf_tokenizers.save(hf_models.model("gpt2", torch.float32, n_positions=64,
                                                                 vocab_size=tok.get_vocab_size(), bos_token_id=end,
                                                                 eos_token_id=None), tok, d / "src" / "gpt2_noeos"),
        "bert": lambda: hf_tokenizers.save(hf_models.model("bert", torch.float32,
                                                           vocab_size=wordpiece.get_vocab_size()),
                                           wordpiece, d / "src" / "bert"),
        "bart": lambda: hf_models.save(hf_models.model("bart", torch.float32), d / "src" / "bart"),
    }
    for name, make in makers.items():
        out[name] = d / name / "checkpoint.pt"
        if not out[name].exists():
            shutil.rmtree(d / name, ignore_errors=True)
            if _quiet(["import", str(make()), "--out", str(d / name)]) != 0:
                raise RuntimeError(f"could not import the {name} model the special_ids category attacks")
    mono = ["--train", str(text / "mono"), "--lang", "xx", "--tokenizers"]
    for name, argv in (("gpt2_mono", [*mono, str(out["gpt2"])]), ("bert_mono", [*mono, str(out["bert"])]),
                       ("gpt2_pairs", ["--train", str(text / "pairs"), "--tokenizers", str(out["gpt2"])])):
        out[name] = d / "data" / name
        if not (out[name] / "manifest.json").exists():
            if _quiet(["data", "prepare", *argv, "--out", str(out[name]), "--workers", "1", "--force"]) != 0:
                raise RuntimeError(f"could not prepare {name} for the special_ids category")
    return out


def special_ids(root: Path, f: Files, g: Files) -> list[Case]:
    d = root / "special_ids"
    cases = []
    for name, vocab, stacks, said in SPECS:
        path = d / "specs" / f"{re.sub(r'[^a-z0-9]+', '_', name)}.attn"
        spec = _write(path, MODEL.format(vocab=vocab, stacks=stacks))
        for argv in (["check", str(spec)], ["build", str(spec), "--no-write"]):
            cases.append(Case("special_ids", argv, "front", timeout=30, bad_value=True, note=name,
                              expect=LOCATED + ".*" + said))
    for value in SETS:
        cases.append(Case("special_ids", ["check", str(g["spec"]), "--set", value], "front", timeout=30,
                          bad_value=True, note=f"--set {value}", expect=r"error: "))
    # the good data's tokenizer is attncomp's (<pad> 0 ... <sep> 4): a spec declaring other ids is refused
    tiny = ["--procs", "1", *[a for s in TINY_SET for a in ("--set", s)]]
    for ids in DISAGREE:
        name = re.sub(r"[^a-z0-9]+", "_", ids)
        spec = _tiny(g, d / "specs", f"disagree_{name}", f"shared(256, {ids})")
        cases.append(Case("special_ids", ["train", str(spec), "--data", str(g["data"]), "--out",
                                          str(d / "runs" / name), *tiny], "cli", timeout=120, bad_value=True,
                          note=f"train: {ids} against the data's tokenizer", expect=r"^error: .*tokenizer has"))
        for command in (["translate", str(g["ckpt"]), "--input", str(g["src"])],
                        ["eval", str(g["ckpt"]), "--src", str(g["src"]), "--ref", str(g["ref"])]):
            cases.append(Case("special_ids", [*command, "--device", "cpu", "--set", f"model.vocab=shared(256, {ids})"],
                              "cli", timeout=60, bad_value=True, note=f"{command[0]} --set {ids}",
                              expect=r"^error: .*keep the ids the model was trained with"))
    spec = _tiny(g, d / "specs", "sweep_row", "shared(256, bos = 7)")
    cases.append(Case("special_ids", ["sweep", str(spec), "--data", str(g["data"]), "--out", str(d / "sweep"),
                                      "--steps", "1", "--bleu-sentences", "0"], "cli", timeout=180, bad_value=True,
                      note="sweep: a row whose ids disagree with the data"))
    mono = d / "mono"
    if not (mono / "manifest.json").exists():
        _quiet(["data", "prepare", "--train", str(g["data"] / "text" / "train"), "--lang", "tgt", "--out", str(mono),
                "--vocab-size", "256", "--workers", "1", "--force"])
    for data in (g["data"], mono):
        which = "pairs" if data == g["data"] else "monolingual"
        for name, vocab, stacks in (("mlm_no_mask", "shared(256, mask = none, sep = none)", "encoder"),
                                    ("lm_no_pad", "shared(256, pad = none)", "decoder"),
                                    ("lm_no_sep", "shared(256, sep = none)", "decoder")):
            spec = _tiny(g, d / "specs", name, vocab, stacks)
            cases.append(Case("special_ids", ["train", str(spec), "--data", str(data), "--out",
                                              str(d / "runs" / f"{name}_{which}"), *tiny], "cli", timeout=120,
                              bad_value=True, note=f"{name} on {which} data", expect=r"^error: "))
    hf = _hf(d)
    if not hf:
        return cases
    gpt2, bert = hf["gpt2"].parent / "model.attn", hf["bert"].parent / "model.attn"
    edited = {"gpt2_pad5": (gpt2, "pad = none", "pad = 5"),
              "gpt2_eos_none": (gpt2, f"eos = {_eos(gpt2)}", "eos = none"),
              "bert_mask_none": (bert, "mask = 4", "mask = none"), "bert_mask_pad": (bert, "mask = 4", "mask = 0")}
    for name, (source, old, new) in edited.items():
        spec = _write(d / "specs" / f"{name}.attn", source.read_text().replace(old, new, 1))
        data = hf["gpt2_mono"] if name.startswith("gpt2") else hf["bert_mono"]
        init = hf["gpt2"] if name.startswith("gpt2") else hf["bert"]
        cases.append(Case("special_ids", ["train", str(spec), "--init", str(init), "--data", str(data), "--out",
                                          str(d / "runs" / name), *tiny], "ckpt", timeout=120, bad_value=True,
                          note=f"imported model.attn edited: {new}", expect=r"error: "))
    for name, data in (("gpt2 on its pairs (no <sep>)", hf["gpt2_pairs"]), ("gpt2 on attncomp's data", g["data"]),
                       ("tiny on gpt2's data", hf["gpt2_mono"])):
        spec, init = (gpt2, ["--init", str(hf["gpt2"])]) if name.startswith("gpt2") else (g["spec"], [])
        cases.append(Case("special_ids", ["train", str(spec), *init, "--data", str(data), "--out",
                                          str(d / "runs" / re.sub(r"\W+", "_", name)), *tiny], "ckpt", timeout=120,
                          bad_value=True, note=name, expect=r"^error: "))
    for command in (["translate", str(hf["gpt2_noeos"]), "--input", str(g["src"])],
                    ["translate", str(hf["gpt2_noeos"]), "--input", str(g["src"]), "--sample"],
                    ["eval", str(hf["gpt2_noeos"]), "--src", str(g["src"]), "--ref", str(g["ref"])]):
        cases.append(Case("special_ids", [*command, "--device", "cpu"], "ckpt", timeout=60, bad_value=True,
                          note="decoding without eos", expect=r"^error: .*no end token"))
    for model in ("gpt2", "gpt2_noeos", "bart"):
        for kind in ("torch-export", "ctranslate2", "hf"):
            out = d / "exports" / f"{model}_{kind}"
            shutil.rmtree(out, ignore_errors=True)
            cases.append(Case("special_ids", ["export", str(hf[model]), "--format", kind, "--out", str(out)], "ckpt",
                              timeout=120, bad_value=kind == "ctranslate2", note=f"export {model} (its own ids)"))
    return cases


def _eos(spec: Path) -> str:
    found = re.search(r"eos = (\d+)", spec.read_text())
    return found.group(1) if found else "none"
