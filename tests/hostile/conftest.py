"""Fixtures of the hostile tests: a sandbox that runs `attncomp` command lines, hostile files, tiny artifacts."""

from __future__ import annotations

import pytest

from bench.hostile import Sandbox
from bench.hostile_corpus import good_artifacts, hostile_files, odd_named_specs, tiny_spec_text


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory) -> Sandbox:
    """Runs a command line in a child of a fork server with attncomp imported: a time and memory limit each."""
    root = tmp_path_factory.mktemp("sandbox")
    return Sandbox(root)


@pytest.fixture(scope="session")
def hostile(tmp_path_factory) -> dict:
    """Missing paths, a directory, a FIFO, /dev/zero, NUL bytes, binary garbage, a 200 MB sparse file, odd names."""
    root = tmp_path_factory.mktemp("hostile")
    files = hostile_files(root / "files")
    files.update({f"odd_{k}": v for k, v in odd_named_specs(root / "odd", tiny_spec_text()).items()})
    return files


@pytest.fixture(scope="session")
def tiny_artifacts(tmp_path_factory, sandbox) -> dict:
    """tiny.attn resolved with one training update, a 200-pair sample corpus, and the run it makes."""
    return good_artifacts(tmp_path_factory.mktemp("good"), sandbox)
