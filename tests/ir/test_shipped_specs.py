"""Every shipped spec resolves to its golden IR; Table 3 rows change only what the paper changes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from attncomp import ir
from attncomp.ir import canonical
from tests.conftest import ROOT, SPECS, check_golden, spec_id

GOLDEN = ROOT / "tests" / "golden" / "ir"


def test_all_paper_specs_are_shipped():
    rows = {"A1", "A2", "A3", "A4", "B1", "B2", *(f"C{i}" for i in range(1, 8)), "D1", "D2", "D3", "D4", "E"}
    assert {p.stem for p in (ROOT / "specs" / "table3").glob("*.attn")} == rows
    assert (ROOT / "specs" / "base.attn").exists() and (ROOT / "specs" / "big.attn").exists()


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_resolved_ir_matches_golden(path):
    """The golden holds what differs from the defaults (a new key with a default rewrites none of them), and
    that with the defaults is the whole resolved spec."""
    spec = ir.load(path)
    sparse = canonical.to_sparse_json(spec)
    check_golden(GOLDEN / f"{spec_id(path)}.json", json.dumps(sparse, indent=2) + "\n")
    assert ir.Spec.model_validate_json(json.dumps({k: v for k, v in sparse.items() if k != "hash"})) == spec


def test_defaults_match_golden():
    """Every IR field's default, in one golden: a changed default shows here (and in no spec's golden)."""
    check_golden(GOLDEN / "defaults.json", json.dumps(canonical.defaults(), indent=2) + "\n")


def test_sparse_json_keeps_a_choice_and_drops_defaults():
    spec = ir.load(ROOT / "specs/examples/llama.attn")
    sparse = canonical.to_sparse_json(spec)
    assert sparse["model"]["positions"] == {"kind": "rope"}  # a choice at its defaults keeps its kind
    assert "d_model" not in sparse["model"] and "attention" not in sparse["model"]["decoder"]
    assert sparse["model"]["decoder"]["kv_heads"] == 2


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_canonical_text_round_trips(path):
    spec = ir.load(path)
    text = ir.to_text(spec)
    again = ir.load(text)
    assert again == spec
    assert ir.to_text(again) == text
    assert ir.spec_hash(again) == ir.spec_hash(spec)


def test_b1_changes_only_d_k():
    base, b1 = ir.load(ROOT / "specs/base.attn"), ir.load(ROOT / "specs/table3/B1.attn")
    assert b1.model.encoder.d_k == 16 and b1.model.encoder.d_v == 64
    assert b1.model.decoder.d_k == 16 and b1.model.decoder.d_v == 64
    changed = {key for key, _, _ in ir.diff(base, b1)}
    assert changed == {"model.name", "model.encoder.d_k", "model.decoder.d_k", "expect.params.value",
                       "train.checkpoint.average_last"}  # Table 3 used no checkpoint averaging


@pytest.mark.parametrize(
    "row, changes",
    [
        ("A1", {"heads": 1, "d_k": 512, "d_v": 512}),
        ("A4", {"heads": 32, "d_k": 16, "d_v": 16}),
        ("C1", {"layers": 2}),
        ("C4", {"d_model": 256, "d_k": 32, "d_v": 32}),
        ("C5", {"d_model": 1024, "d_k": 128, "d_v": 128, "heads": 8}),
        ("C7", {"d_ff": 4096}),
    ],
)
def test_table3_stack_rows(row, changes):
    spec = ir.load(ROOT / f"specs/table3/{row}.attn")
    for stack in (spec.model.encoder, spec.model.decoder):
        for key, value in changes.items():
            assert getattr(stack, key) == value


def test_dropout_and_smoothing_rows():
    load = lambda row: ir.load(ROOT / f"specs/table3/{row}.attn")  # noqa: E731
    assert load("D1").model.dropout.residual == 0.0 and load("D1").model.dropout.embedding == 0.0
    assert load("D2").model.dropout.residual == 0.2
    assert load("D3").train.loss.label_smoothing == 0.0
    assert load("D4").train.loss.label_smoothing == 0.2
    assert load("E").model.positions.kind == "learned"


def test_big_recipe():
    big = ir.load(ROOT / "specs/big.attn")
    assert (big.model.d_model, big.model.encoder.heads, big.model.encoder.d_ff) == (1024, 16, 4096)
    assert big.model.dropout.residual == 0.3 and big.train.steps == 300_000
    assert big.train.checkpoint.average_last == 20


def test_examples_say_what_they_claim():
    lm = ir.load(ROOT / "specs/examples/lm.attn").model
    assert lm.encoder is None and lm.decoder.norm == "pre" and lm.decoder.activation == "gelu"
    assert lm.positions.kind == "learned"
    local = ir.load(ROOT / "specs/examples/local.attn").model
    assert local.encoder.attention.kind == "local" and local.decoder.attention.kind == "scaled_dot"
    parsing = ir.load(ROOT / "specs/examples/parsing.attn")
    assert parsing.model.encoder.layers == 4 and parsing.model.d_model == 1024
    assert (parsing.decode.beam, parsing.decode.length_penalty, parsing.decode.max_len.offset) == (21, 0.3, 300)


def test_parsing_all_specs_is_fast():
    """Parse and resolve every shipped spec in a fresh process, timed after import."""
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from attncomp import ir
        paths = sorted(Path({str(ROOT / 'specs')!r}).rglob('*.attn'))
        start = time.process_time()  # CPU time: other work on a loaded machine does not count
        for p in paths:
            ir.load(p)
        print(time.process_time() - start)
        """
    )
    seconds = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert seconds < 0.02 * len(SPECS), f"parsing {len(SPECS)} specs took {seconds:.3f}s"  # 0.5 s for 25


LLAMA_KEYS = ("normalization = ", "final_norm = ", "kv_heads = ")


OWN_NORMS = ("llama", "gemma", "olmo", "local_global", "t5_capped", "macaron", "t5", "softcap", "sinks", "composed",
             "t5_v11", "mixtral", "stream", "diff_cla", "prefix_sigmoid")


@pytest.mark.parametrize("path", [p for p in SPECS if p.stem not in OWN_NORMS], ids=spec_id)
def test_canonical_text_from_before_the_llama_keys_parses_to_the_same_spec(path):
    """A checkpoint stores the canonical text of its day: without normalization, final_norm and
    kv_heads, the defaults (layernorm, a final norm exactly for pre-norm, kv_heads = heads) keep its model
    (for every spec that does not choose another norm: llama, gemma, olmo, local_global, t5_capped,
    macaron, t5, t5_v11, softcap, sinks and composed do)."""
    spec = ir.load(path)
    old = "".join(line for line in ir.to_text(spec).splitlines(True) if not line.strip().startswith(LLAMA_KEYS))
    assert old != ir.to_text(spec) and ir.load_flat(old, "<stored>") == spec
