"""Fixtures of the hostile tests: a sandbox that runs `attncomp` command lines, and tiny valid artifacts."""

from __future__ import annotations

import pytest

from bench.hostile import Sandbox
from bench.hostile_corpus import good_artifacts


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory) -> Sandbox:
    """Runs a command line in a child of a fork server with attncomp imported: a time and memory limit each."""
    root = tmp_path_factory.mktemp("sandbox")
    return Sandbox(root)


@pytest.fixture(scope="session")
def tiny_artifacts(tmp_path_factory, sandbox) -> dict:
    """tiny.attn resolved with one training update, a 200-pair sample corpus, and the run it makes (~10 s).

    Made here rather than taken from tests/conftest.py's `trained_tiny` (300 updates): this test then costs
    seconds when run alone, and does not depend on a long training finishing under load.
    """
    return good_artifacts(tmp_path_factory.mktemp("good"), sandbox)


@pytest.fixture(scope="session")
def imported_gpt2(tmp_path_factory) -> dict:
    """A tiny GPT-2 directory (its byte-level BPE tokenizer.json) and its import (a few seconds): the source of
    the crafted tokenizers, envelopes and model directories of issue 43's tests."""
    import torch

    from attncomp.cli.main import run
    from tests.interop import hf_models, hf_tokenizers

    root = tmp_path_factory.mktemp("gpt2")
    tok = hf_tokenizers.byte_level_bpe()
    end = tok.token_to_id("<|endoftext|>")
    hf = hf_models.model("gpt2", torch.float32, vocab_size=tok.get_vocab_size(), n_positions=64,
                         bos_token_id=end, eos_token_id=end)
    source = hf_tokenizers.save(hf, tok, root / "src")
    assert run(["import", str(source), "--out", str(root / "imported")]) == 0
    (root / "in.txt").write_text("the quick brown fox\nhello world\n")
    return {"src": source, "ckpt": root / "imported" / "checkpoint.pt", "input": root / "in.txt"}
