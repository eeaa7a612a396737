"""bench/decode_speed.py keeps working on a tiny architecture; attncomp and CTranslate2 decode alike."""

from __future__ import annotations

import pytest

from bench import decode_speed
from tests.conftest import ROOT

pytest.importorskip("ctranslate2")
pytest.importorskip("transformers")


@pytest.mark.slow
def test_every_engine_gets_a_row(capsys):
    rows = decode_speed.main(["--spec", str(ROOT / "specs/examples/tiny.attn"), "--vocab", "300", "--sizes", "2",
                              "--repeats", "1", "--levers", "per-row"])
    names = [name for name, _ in rows]
    assert len(names) == 5 and any("CTranslate2 int8" in n for n in names)
    assert all(x > 0 for _, figures in rows for x in figures)
    assert "| CTranslate2 float32 |" in capsys.readouterr().out


def test_ctranslate2_decodes_what_attncomp_decodes(tmp_path):
    decode_speed.main(["--spec", str(ROOT / "specs/examples/tiny.attn"), "--vocab", "300", "--sizes", "2",
                       "--repeats", "1", "--only", "nothing"])  # sets the architecture
    model = decode_speed.attncomp_model()
    src = decode_speed.sources(3)
    translator = decode_speed.ctranslate2_translator(model, "float32", 1, tmp_path)
    theirs = [[translator[1].index(t) for t in r.hypotheses[0]] for r in decode_speed.run_ctranslate2(translator, src)]
    assert theirs == decode_speed.run_attncomp(model, src)
    assert all(len(t) == decode_speed.OUT_LEN for t in theirs)
