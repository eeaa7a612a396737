"""The launcher's configuration on older PyTorch: PyTorch 2.11 (the GPU machines') has no
LaunchConfig.shutdown_timeout, and passing it ended every `attncomp train` there with a TypeError."""

from __future__ import annotations

import dataclasses

import torch.distributed.launcher.api as launcher_api

from attncomp.train.launch import Nodes, _config


def test_config_passes_only_the_fields_this_pytorch_has(monkeypatch):
    fields = [(f.name, f.type, f) for f in dataclasses.fields(launcher_api.LaunchConfig)
              if f.name not in ("shutdown_timeout", "signals_to_handle")]
    older = dataclasses.make_dataclass("LaunchConfig", fields)
    monkeypatch.setattr(launcher_api, "LaunchConfig", older)
    config = _config(2, Nodes())
    assert isinstance(config, older) and config.nproc_per_node == 2
    assert not hasattr(config, "shutdown_timeout")


def test_config_on_this_pytorch_keeps_its_signal_handling():
    config = _config(1, Nodes())
    if hasattr(config, "signals_to_handle"):
        assert "SIGHUP" in config.signals_to_handle
