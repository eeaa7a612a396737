"""Issue 43's categories of bench/hostile.py: deep JSON wherever attncomp reads JSON (json-depth), tokenizers whose
compiled library fails (native), ids past a model's embedding rows and encoder-only models given to translate and
eval (model-rows), over-long, undecodable and streamed corpus lines (data-lines), and values that were guessed or
taken silently (silent-values). Each case's command must end in one line, no traceback and no exit 70; most name
a value that must be refused (exit 0 is a failure). (root, hostile files, good artifacts) -> cases; the imported
models come from the special_ids category's (made with transformers; no case without it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from bench.hostile_harness import Case
from bench.hostile_special import _hf, _write

Files = dict[str, Path]
DEEP = "[" * 5000 + "]" * 5000
SPLIT = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
REPLACE = {"type": "Replace", "pattern": {"Regex": "(a|aa)+$"}, "content": "b"}
LONG_RUN = "a" * 5000 + "b"
ENVELOPES = {  # a stored tokenizer envelope, changed
    "forced id 10^9": lambda r: r["specials"].update(forced=[10 ** 9]),
    "language id 10^9": lambda r: r.update(languages={"en_XX": 10 ** 9}),
    "source id 10^9": lambda r: r.update(source=[10 ** 9, "text"]),
    "target frame id 10^9": lambda r: r.update(target=[10 ** 9, "text"]),
    "exchanged 10^9": lambda r: r.update(exchanged=10 ** 9),
    "size below the tokenizer's": lambda r: r.update(size=8),
    "size 10^6, forced id past the rows": lambda r: (r.update(size=10 ** 6), r["specials"].update(forced=[5000])),
    "source without text": lambda r: r.update(source=[50]),
    "source empty": lambda r: r.update(source=[]),
    "source text twice": lambda r: r.update(source=["text", "text"]),
    "source a string": lambda r: r.update(source="text"),
    "source null id": lambda r: r.update(source=[None, "text"]),
    "pre-tokenizer backtracks": lambda r: r.update(tokenizer=_with(r["tokenizer"], pre_tokenizer=SPLIT)),
    "normalizer backtracks": lambda r: r.update(tokenizer=_with(r["tokenizer"], normalizer=REPLACE)),
}


def _with(tokenizer_json: str, **changes) -> str:
    return json.dumps({**json.loads(tokenizer_json), **changes})


def _payload(ckpt: Path, out: Path, **changes) -> Path:
    payload = torch.load(ckpt, weights_only=True)
    payload.update(changes)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, out)
    return out


def _stored(text: str) -> dict:
    stored = torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8)
    return {"src": stored, "tgt": stored.clone()}


def _copy(source: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest)
    return dest


def _decoding(ckpt: Path, d: Path, text: Path, name: str) -> dict[str, list[str]]:
    """translate, eval and data prepare --tokenizers of a checkpoint (each writing under d)."""
    return {"translate": ["translate", str(ckpt), "--input", str(text), "--device", "cpu", "--output",
                          str(d / f"{name}.out")],
            "eval": ["eval", str(ckpt), "--src", str(text), "--ref", str(text), "--device", "cpu"],
            "data prepare": ["data", "prepare", "--train", str(text.with_suffix("")), "--lang", "xx", "--tokenizers",
                             str(ckpt), "--out", str(d / f"{name}.prepared"), "--workers", "1"]}


def _imports(cat: str, d: Path, source: Path, edits: dict) -> list[Case]:
    """`import` of a copy of `source` with each edit (a file name -> its new text) applied."""
    cases = []
    for note, (name, text) in edits.items():
        copy = _copy(source, d / "src" / note.replace(" ", "_"))
        (copy / name).write_text(text)
        cases.append(Case(cat, ["import", str(copy), "--out", str(copy / "out")], "ckpt", timeout=90, bad_value=True,
                          note=note))
    return cases


def hardening(root: Path, f: Files, g: Files) -> list[Case]:
    hf = _hf(root / "special_ids")  # the special_ids category's imports (made once, kept in the work dir)
    if not hf:
        return []
    d = root / "hardening"
    text = _write(d / "text" / "long.xx", "the quick fox\n" * 20 + LONG_RUN + "\n")
    return [*_json_depth(d / "json", hf, g, text), *_native(d / "native", hf, text),
            *_model_rows(d / "rows", hf, text), *_data_lines(d / "data"), *_silent_values(d / "silent", hf, g)]


def _json_depth(d: Path, hf: dict, g: Files, text: Path) -> list[Case]:
    source = hf["gpt2"].parent.parent / "src" / "gpt2"
    tokenizer = (source / "tokenizer.json").read_text()
    cases = _imports("json-depth", d, source, {"tokenizer.json nested": ("tokenizer.json", DEEP),
                                               "tokenizer.json nested inside": ("tokenizer.json",
                                                                                tokenizer[:-1] + ', "x": ' + DEEP + "}")})
    crafted = {"data nested": _payload(hf["gpt2"], d / "data.pt", data=DEEP),
               "envelope nested": _payload(hf["gpt2"], d / "envelope.pt",
                                           tokenizers=_stored('{"format": ' + DEEP + "}"))}
    for note, ckpt in crafted.items():
        for command, argv in {**_decoding(ckpt, d, text, note.replace(" ", "_")),
                              "export": ["export", str(ckpt), "--format", "hf", "--out", str(d / f"{ckpt.stem}.hf")]
                              }.items():
            cases.append(Case("json-depth", argv, "ckpt", timeout=90, bad_value=True, note=f"{command}: {note}"))
    rows = [json.dumps({"src": f"a b {i}", "tgt": f"c d {i}"}) for i in range(20)]
    jsonl = _write(d / "deep.jsonl", "\n".join(rows + ['{"src": ' + DEEP + ', "tgt": "x"}']) + "\n")
    cases.append(Case("json-depth", ["data", "prepare", "--train", str(jsonl), "--src-column", "src", "--tgt-column",
                                     "tgt", "--out", str(d / "jsonl.prepared"), "--vocab-size", "40"], "cli",
                      timeout=90, bad_value=True, note="a JSONL line nested"))
    return cases


def _native(d: Path, hf: dict, text: Path) -> list[Case]:
    source = hf["gpt2"].parent.parent / "src" / "gpt2"
    tokenizer = (source / "tokenizer.json").read_text()
    cases = _imports("native", d, source, {"pre-tokenizer Split backtracks": ("tokenizer.json",
                                                                              _with(tokenizer, pre_tokenizer=SPLIT)),
                                           "normalizer Replace backtracks": ("tokenizer.json",
                                                                             _with(tokenizer, normalizer=REPLACE))})
    record = json.loads(torch.load(hf["gpt2"], weights_only=True)["tokenizers"]["src"].numpy().tobytes())
    for note in ("pre-tokenizer backtracks", "normalizer backtracks"):
        changed = json.loads(json.dumps(record))
        ENVELOPES[note](changed)
        ckpt = _payload(hf["gpt2"], d / f"{note.split()[0]}.pt", tokenizers=_stored(json.dumps(changed)))
        for command, argv in _decoding(ckpt, d, text, note.split()[0]).items():
            cases.append(Case("native", argv, "ckpt", timeout=90, bad_value=True, note=f"{command}: stored {note}"))
    return cases


def _model_rows(d: Path, hf: dict, text: Path) -> list[Case]:
    source = hf["gpt2"].parent.parent / "src" / "gpt2"
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    more = {**vocab, **{f"extra{i}": len(vocab) + 1 + i for i in range(200)}}  # past config.json's vocab_size
    cases = _imports("model-rows", d, source, {"tokenizer.json with more tokens than rows": (
        "tokenizer.json", json.dumps({**tokenizer, "model": {**tokenizer["model"], "vocab": more}}))})
    record = json.loads(torch.load(hf["gpt2"], weights_only=True)["tokenizers"]["src"].numpy().tobytes())
    for note, change in ENVELOPES.items():
        if "backtracks" in note:
            continue  # the native category's
        changed = json.loads(json.dumps(record))
        change(changed)
        name = "".join(c if c.isalnum() else "_" for c in note)
        ckpt = _payload(hf["gpt2"], d / f"{name}.pt", tokenizers=_stored(json.dumps(changed)))
        for command in ("translate", "eval"):
            cases.append(Case("model-rows", _decoding(ckpt, d, text, name)[command], "ckpt", timeout=90,
                              bad_value=True, note=f"{command}: envelope {note}"))
    for command, argv in _decoding(hf["bert"], d, text, "bert").items():
        if command != "data prepare":  # BERT's tokenizer prepares data for fine-tuning: that is allowed
            cases.append(Case("model-rows", argv, "ckpt", timeout=90, bad_value=True,
                              note=f"{command}: an encoder-only model"))
    return cases


def _data_lines(d: Path) -> list[Case]:
    from attncomp.data.text import MAX_LINE_BYTES

    rows = [json.dumps({"src": f"a b c {i}", "tgt": f"d e f {i}"}) for i in range(40)]
    files = {"jsonl line over the limit": ("long.jsonl", rows[:3] + [json.dumps({"src": "x" * (MAX_LINE_BYTES + 9),
                                                                                  "tgt": "y"})] + rows[3:]),
             "jsonl lone surrogate": ("surrogate.jsonl", rows[:3] + ['{"src": "a \\ud800", "tgt": "b"}'] + rows[3:]),
             "jsonl surrogate pair halves": ("halves.jsonl", rows + ['{"src": "\\udc00\\ud800", "tgt": "b"}'])}
    cases = []
    for note, (name, lines) in files.items():
        path = _write(d / name, "\n".join(lines) + "\n")
        cases.append(Case("data-lines", ["data", "prepare", "--train", str(path), "--src-column", "src",
                                         "--tgt-column", "tgt", "--out", str(d / f"{name}.prepared"),
                                         "--vocab-size", "40", "--workers", "1"], "cli", timeout=90, bad_value=True,
                          note=note))
    plain = [f"a b c {i}" for i in range(40)]
    _write(d / "long.xx", "\n".join(plain) + "\n")
    _write(d / "long.yy", "\n".join(plain[:7] + ["z" * (MAX_LINE_BYTES + 1)] + plain[8:]) + "\n")
    cases.append(Case("data-lines", ["data", "prepare", "--train", str(d / "long"), "--src", "xx", "--tgt", "yy",
                                     "--out", str(d / "long.prepared"), "--vocab-size", "40"], "cli", timeout=90,
                      bad_value=True, note="a text line over the limit"))
    for note, name in (("a FIFO as PREFIX.SRC", "fifo"), ("a FIFO as a JSONL file", "fifo.jsonl")):
        fifo = d / (name if name.endswith(".jsonl") else f"{name}.xx")
        if not fifo.exists():
            os.mkfifo(fifo)
        _write(d / "fifo.yy", "a\n")
        argv = [str(d / "fifo"), "--src", "xx", "--tgt", "yy"] if name == "fifo" else [str(fifo)]
        cases.append(Case("data-lines", ["data", "prepare", "--train", *argv, "--out", str(d / f"{name}.prepared")],
                          "cli", timeout=60, bad_value=True, note=note))
    return cases


def _silent_values(d: Path, hf: dict, g: Files) -> list[Case]:
    cases = []
    try:
        from tests.interop import hf_models

        gemma = d / "gemma3"
        if not (gemma / "config.json").exists():
            hf_models.save(hf_models.model("gemma3_text", torch.float32), gemma)
        config = json.loads((gemma / "config.json").read_text())
        for kind in ("chunked_attention", "linear_attention", "", 3):
            changed = {**config, "layer_types": ["sliding_attention", kind, "full_attention"]}
            cases += _imports("silent-values", d, gemma, {f"gemma3 layer_types {kind!r}": ("config.json",
                                                                                          json.dumps(changed))})
    except ImportError:
        pass
    spec = str(g["spec"])
    for value in ("inf", "-inf", "nan", "1e300", "0", "-1"):
        cases.append(Case("silent-values", ["sweep", spec, "--data", str(g["data"]), "--minutes", value, "--out",
                                            str(d / "sweep")], "cli", timeout=60, bad_value=True,
                          note=f"sweep --minutes {value}"))
        cases.append(Case("silent-values", ["train", spec, "--data", str(g["data"]), "--timeout", value, "--out",
                                            str(d / "train")], "cli", timeout=60, bad_value=True,
                          note=f"train --timeout {value}"))
    link = d / "dangling"
    if not link.is_symlink():
        link.symlink_to(d / "nowhere")
    source = hf["gpt2"].parent.parent / "src" / "gpt2"
    cases.append(Case("silent-values", ["import", str(source), "--out", str(link)], "ckpt", timeout=90,
                      bad_value=True, note="import --out a dangling link"))
    odd = _write(d / "a\nb" / "m.attn", Path(spec).read_text())
    cases.append(Case("silent-values", ["build", str(odd), "--out", str(d / "gen\nx")], "front", timeout=60,
                      note="build of a spec path holding a newline (its echo escaped)"))
    return cases
