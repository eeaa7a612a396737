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
