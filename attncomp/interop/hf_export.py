"""`attncomp export CKPT --format hf --out DIR`: a checkpoint of an imported Hugging Face family back to a
save_pretrained directory (config.json, model.safetensors, tokenizer.json) that transformers loads.

The family table of attncomp.interop.families is read backwards (attncomp.interop.mapping.origins and
revert): a transformers model of the config is built on the meta device (no memory), its parameter
names are renamed forward to find where each of attncomp's tensors goes, the named transforms are
inverted (QKV fused again, Conv1D transposed back, final_logits_bias reshaped, vocabulary rows put back),
and the model takes the tensors as they are (`assign`), so their dtype is kept; save_pretrained writes
them. The config is the one the import stored; the checkpoint's model must still be the spec of that
config (training changes weights, not the architecture).

Import then export gives back every tensor bit for bit, except what the import folded: BERT, RoBERTa
and XLM-R's positions carry token type 0's row (their token-type table comes back zero), and the
position rows before BART's and RoBERTa's offset come back zero; the logits are the same.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch

from attncomp import ir
from attncomp.errors import UsageError
from attncomp.interop import families, mapping, require


def _imported(found) -> dict:
    try:
        data = json.loads(found.header.data)
    except ValueError:
        data = {}
    manifest = data.get("imported") if isinstance(data, dict) else None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise UsageError("export --format hf writes the config an `attncomp import` stored, and this checkpoint "
                         "was not imported from Hugging Face (a spec written by hand has no Hugging Face config yet)")
    if manifest.get("family") not in families.IMPORTED or manifest["family"] == "marian":
        raise UsageError(f"export --format hf does not write {manifest.get('family')!r} models yet")
    return manifest


def hf_state(family: mapping.Family, config, weights: dict[str, torch.Tensor], hf_names: list[str]) -> dict:
    """attncomp's weights under the HF names of `hf_names` (tied names sharing one tensor)."""
    state = dict(weights)
    rows = mapping.pad_rows(config) if family.pad_first else None
    if rows is not None:  # the exchange of ids 0 and pad is its own inverse
        state = mapping.regather(state, rows)
    state = mapping.revert(family, config, state)
    out = {}
    for ours, theirs in mapping.origins(family, config, hf_names).items():
        if ours not in state:
            raise UsageError(f"the checkpoint has no {ours} for the {family.label} tensor {theirs[0]}")
        for name in theirs:
            out[name] = state[ours]
    return out


def write(found, out: Path) -> list[Path]:
    """Write DIR; returns the files written."""
    transformers = require("transformers", "export --format hf")
    manifest = _imported(found)
    family = families.IMPORTED[manifest["family"]]
    try:
        config = getattr(transformers, family.config_class).from_dict(manifest["config"])
    except Exception as err:
        raise UsageError(f"the stored {family.config_class} does not load ({' '.join(str(err).split())[:160]})") \
            from None
    expected = ir.load_flat(mapping.spec_text(family, config), "<stored config>").model
    if ir.load_flat(found.header.spec, "<checkpoint>").model != expected:
        raise UsageError(f"the checkpoint's model is no longer the spec of its {family.label} config: "
                         "export --format hf writes the architecture that was imported")
    dtype = Counter(t.dtype for t in found.model.values()).most_common(1)[0][0]
    weights = {k: v.to(dtype) for k, v in found.model.items()}
    with torch.device("meta"):
        model = getattr(transformers, family.model_class)(config)
    names = list(model.state_dict())
    state = hf_state(family, config, weights, names)
    missing = [n for n in names if n not in state]
    if missing:
        raise UsageError(f"export --format hf has nothing for the {family.label} tensor {missing[0]}")
    model.load_state_dict(state, strict=True, assign=True)
    model.config.dtype = dtype
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer = found.header.tokenizers.get("tgt")
    if tokenizer is not None and manifest.get("tokenizer"):
        (out / manifest["tokenizer"]).write_bytes(tokenizer.numpy().tobytes())
    return sorted(out.iterdir())
