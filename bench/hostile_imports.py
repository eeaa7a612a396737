"""Issue 23's attacks on `attncomp import`: a Hugging Face directory (a small random MarianMT model, as
tests/interop makes it) whose config, generation config, vocabulary, sentencepiece models or weights are
nested, of the wrong shape, pipes, devices or pickles with a payload. (root, hostile files, good
artifacts) -> cases; none without transformers, which makes the directory.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

from bench.hostile_harness import Case
from bench.hostile_surfaces import DEEP, Files, _Payload

CONFIG = {"nested": DEEP, "list": "[]", "string": '"x"', "empty": "", "binary": "\udcff\x00",
          "d_model string": {"d_model": "32"}, "d_model list": {"d_model": [32]}, "d_model NaN": {"d_model": float("nan")},
          "d_model inf": {"d_model": float("inf")}, "d_model zero": {"d_model": 0},
          "d_model over the size limit": {"d_model": 1 << 20, "encoder_ffn_dim": 1 << 20, "decoder_ffn_dim": 1 << 20},
          "layers negative": {"encoder_layers": -2}, "layers 10^9": {"decoder_layers": 10 ** 9},
          "heads not dividing": {"encoder_attention_heads": 5}, "dropout NaN": {"dropout": float("nan")},
          "vocab_size float": {"vocab_size": 1e9}, "vocab_size 10^400": {"vocab_size": 10 ** 400},
          "model_type unknown": {"model_type": "no-such-family"}, "model_type list": {"model_type": ["marian"]},
          "activation unknown": {"activation_function": "__import__('os')"}, "eos id out of range": {"eos_token_id": 10 ** 6}}
GENERATION = {"nested": DEEP, "list": "[]", "num_beams string": {"num_beams": "4"}, "num_beams 10^9": {"num_beams": 10 ** 9},
              "num_beams negative": {"num_beams": -1}, "max_length NaN": {"max_length": float("nan")}}
VOCAB = {"nested": DEEP, "list": "[]", "NaN id": '{"a": NaN}', "bool id": '{"a": true}', "negative id": '{"a": -1}',
         "empty": "{}", "huge id": '{"a": 1000000000000}'}


def _copy(marian: Path, root: Path, name: str) -> Path:
    d = root / "imports" / name
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(marian, d)
    return d


def _text(original: dict, change) -> str:
    return change if isinstance(change, str) else json.dumps({**original, **change})


def imports(root: Path, f: Files, g: Files) -> list[Case]:
    try:
        from tests.interop.test_marian_import import marian_directory
    except ImportError:  # transformers is missing: no directory to attack
        return []
    marian = root / "imports" / "marian"
    if not (marian / "config.json").exists():
        marian_directory(marian)
    edits: dict[str, tuple[str, str | bytes | None]] = {}  # case -> (file, its new content; None: removed)
    for key, change in CONFIG.items():
        edits[f"config.json {key}"] = ("config.json", _text(json.loads((marian / "config.json").read_text()), change))
    for key, change in GENERATION.items():
        original = json.loads((marian / "generation_config.json").read_text())
        edits[f"generation_config.json {key}"] = ("generation_config.json", _text(original, change))
    for key, text in VOCAB.items():
        edits[f"vocab.json {key}"] = ("vocab.json", text)
    for name in ("source.spm", "target.spm", "model.safetensors"):
        edits[f"{name} empty"] = (name, b"")
        edits[f"{name} garbage"] = (name, os.urandom(4096))
        edits[f"{name} truncated"] = (name, (marian / name).read_bytes()[:1000])
    edits["model.safetensors missing"] = ("model.safetensors", None)
    cases = []
    for key, (name, content) in edits.items():
        d = _copy(marian, root, key.replace(" ", "_").replace("^", ""))
        if content is None:
            (d / name).unlink()
        else:
            (d / name).write_bytes(content.encode("utf-8", errors="surrogateescape") if isinstance(content, str) else content)
        cases.append(Case("imports", ["import", str(d), "--out", str(d / "out")], "ckpt", timeout=90, bad_value=True,
                          note=key))
    for name in ("config.json", "generation_config.json", "vocab.json", "source.spm", "model.safetensors"):
        for kind, target in (("fifo", None), ("dev_zero", "/dev/zero"), ("dev_urandom", "/dev/urandom"),
                             ("broken link", "nowhere"), ("dir", None)):
            d = _copy(marian, root, f"{kind.replace(' ', '_')}_{name}")
            (d / name).unlink()
            os.mkfifo(d / name) if kind == "fifo" else (d / name).mkdir() if kind == "dir" else \
                (d / name).symlink_to(target)
            cases.append(Case("imports", ["import", str(d), "--out", str(d / "out")], "ckpt", timeout=90, bad_value=True,
                              note=f"{name} {kind}"))
    for how in ("eval", "exec", "system", "popen"):  # pytorch_model.bin in place of model.safetensors: a pickle
        d = _copy(marian, root, f"pickle_{how}")
        (d / "model.safetensors").unlink()
        canary = d / "pwned"
        (d / "pytorch_model.bin").write_bytes(pickle.dumps({"model.shared.weight": _Payload(canary, how)}))
        for extra in ([], ["--allow-pickle"]):  # refused without it; with it, torch.load's weights_only still holds
            cases.append(Case("imports", ["import", str(d), "--out", str(d / f"out{len(extra)}"), *extra], "ckpt",
                              timeout=90, bad_value=True, canary=canary, note=f"pytorch_model.bin {how} payload"))
    cases += [Case("imports", ["import", str(path), "--out", str(root / "imports" / "o")], "ckpt", timeout=60,
                   bad_value=True, note=f"directory {key}")
              for key, path in (("missing", f["missing"]), ("a file", f["a_file"]), ("a FIFO", f["fifo"]),
                                ("/dev/zero", f["dev_zero"]), ("empty", f["dir"]))]
    return cases
