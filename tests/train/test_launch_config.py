"""The launcher's configuration on older PyTorch: PyTorch 2.11 (the GPU machines') has no
LaunchConfig.shutdown_timeout, and passing it ended every `attncomp train` there with a TypeError."""

from __future__ import annotations

import dataclasses
import signal

import torch.distributed.launcher.api as launcher_api

from attncomp.train.launch import ELASTIC_SIGNALS, Nodes, _config


def test_config_passes_only_the_fields_this_pytorch_has(monkeypatch):
    fields = [(f.name, f.type, f) for f in dataclasses.fields(launcher_api.LaunchConfig)
              if f.name not in ("shutdown_timeout", "signals_to_handle")]
    older = dataclasses.make_dataclass("LaunchConfig", fields)
    monkeypatch.setattr(launcher_api, "LaunchConfig", older)
    config = _config(2, Nodes())
    assert isinstance(config, older) and config.nproc_per_node == 2
    assert not hasattr(config, "shutdown_timeout")


def test_config_on_this_pytorch_keeps_its_signal_handling():
    """Elastic handles the terminal's signals that the command does not inherit ignored (a suite run under
    `nohup`, as a background job, starts with SIGHUP ignored: they are set to their default here)."""
    inherited = {sig: signal.getsignal(sig) for sig in ELASTIC_SIGNALS}
    try:
        for sig in ELASTIC_SIGNALS:
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
        config = _config(1, Nodes())
    finally:
        for sig, handler in inherited.items():
            signal.signal(sig, handler)
    if hasattr(config, "signals_to_handle"):
        assert "SIGHUP" in config.signals_to_handle
