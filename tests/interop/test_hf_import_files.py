"""`attncomp import DIR --out OUT` on real checkpoints' layouts and on hostile directories: sharded
safetensors, bf16 kept bf16, refusals of what the spec language lacks, and bad input as one line, exit 2."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attncomp.checkpoint import load as load_checkpoint_file
from attncomp.cli.main import run
from attncomp.errors import UsageError
from attncomp.interop import hf_import
from tests.interop import hf_models

transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return hf_models.save(hf_models.model("llama", torch.float32), tmp_path_factory.mktemp("hf") / "llama")


def _one_line_error(capsys, argv: list[str]) -> str:
    capsys.readouterr()  # save_pretrained's progress bar
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


def _copy(source, tmp_path, name="copy"):
    return shutil.copytree(source, tmp_path / name)


def test_the_command_writes_a_checkpoint_of_the_stored_weights(llama_dir, tmp_path, capsys):
    assert run(["import", str(llama_dir), "--out", str(tmp_path / "out")]) == 0
    assert "a llama model" in capsys.readouterr().out
    found = load_checkpoint_file(tmp_path / "out" / "checkpoint.pt")
    imported = hf_import.import_directory(llama_dir)
    assert found.header.spec_hash and set(found.model) == set(imported.weights)
    assert all(torch.equal(found.model[k], imported.weights[k]) for k in imported.weights)
    assert json.loads(found.header.data)["imported"]["family"] == "llama"
    assert (tmp_path / "out" / "model.attn").read_text().startswith("model llama {")


def test_sharded_safetensors_import_as_one_file_does(llama_dir, tmp_path):
    hf = hf_models.model("llama", torch.float32)
    sharded = hf_models.save(hf, tmp_path / "sharded", max_shard_size="20KB")
    index = hf_models.read_json(sharded / "model.safetensors.index.json")
    assert len(set(index["weight_map"].values())) > 1
    whole, parts = hf_import.import_directory(llama_dir).weights, hf_import.import_directory(sharded).weights
    assert set(whole) == set(parts) and all(torch.equal(whole[k], parts[k]) for k in whole)


def test_bf16_weights_stay_bf16(tmp_path):
    hf = hf_models.model("qwen2", torch.bfloat16)
    directory = hf_models.save(hf, tmp_path / "bf16")
    assert run(["import", str(directory), "--out", str(tmp_path / "out")]) == 0
    found = load_checkpoint_file(tmp_path / "out" / "checkpoint.pt")
    assert {t.dtype for t in found.model.values()} == {torch.bfloat16}
    stored = hf.state_dict()
    assert torch.equal(found.model["decoder.layers.0.self_attn.q_proj.bias"],
                       stored["model.layers.0.self_attn.q_proj.bias"])


def test_a_fold_computes_in_float32_at_least(tmp_path):
    directory = hf_models.save(hf_models.model("roberta", torch.bfloat16), tmp_path / "roberta")
    weights = hf_import.import_directory(directory).weights
    assert weights["encoder.pos.weight"].dtype == torch.float32  # position + the one token type's row
    assert weights["encoder.layers.0.ffn.fc1.weight"].dtype == torch.bfloat16


REFUSALS = {
    "gpt2": (dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx"),
    "stablelm": (dict(qk_layernorm=True), "qk_layernorm"),
    "gpt_neox": (dict(hidden_act="tanh"), "activation 'tanh'"),
    "llama": (dict(rope_parameters={"rope_type": "proportional", "rope_theta": 10000.0}), "rope_type 'proportional'"),
    "qwen2": (dict(use_sliding_window=True, sliding_window=4, layer_types=["full_attention", "sliding_attention"]),
              "layer_types"),
    "bert": (dict(position_embedding_type="relative_key"), "position_embedding_type"),
    "bart": (dict(activation_function="tanh"), "activation 'tanh'"),
    "gemma": (dict(hidden_act="relu"), "hidden_act 'relu'"),
    "gemma2": (dict(layer_types=["full_attention", "sliding_attention"]), "layer_types full_attention/sliding"),
    "gemma2/bidirectional": (dict(use_bidirectional_attention=True), "use_bidirectional_attention"),
    "electra": (dict(hidden_act="tanh"), "hidden_act 'tanh'"),
    "gptj": (dict(rotary_dim=5), "rotary_dim 5 of a head's 8 dims"),  # pairs: an even count
    "gptj/head": (dict(rotary_dim=10), "rotary_dim 10 of a head's 8 dims"),
    "bloom/slow_but_exact": (dict(pretraining_tp=2, slow_but_exact=True), "slow_but_exact with pretraining_tp > 1"),
    "opt": (dict(word_embed_proj_dim=16), "word_embed_proj_dim 16 != hidden_size 32 (project_in"),
    "opt/final_norm": (dict(_remove_final_layer_norm=True), "_remove_final_layer_norm"),
}


@pytest.mark.parametrize("family", sorted(REFUSALS))
def test_what_the_language_lacks_is_refused_in_one_line(family, tmp_path, capsys):
    changes, reason = REFUSALS[family]
    family = family.partition("/")[0]  # "family/what": a second refusal of one family
    hf = hf_models.model(family, torch.float32)
    directory = hf_models.save(hf, tmp_path / family)
    config = hf_models.read_json(directory / "config.json")
    (directory / "config.json").write_text(json.dumps({**config, **changes}))
    err = _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out")])
    assert reason in err and "no spec equivalent" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("model_type", ["gemma3", "nllb-moe"])
def test_families_without_an_equivalent_are_refused_by_name(model_type, llama_dir, tmp_path, capsys):
    directory = _copy(llama_dir, tmp_path)
    (directory / "config.json").write_text(json.dumps({"model_type": model_type}))
    err = _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out")])
    assert f"cannot import a {model_type!r} model" in err and "no spec equivalent" in err


def _edit(directory, name, data):
    path = directory / name
    if data is None:
        path.unlink()
    else:
        path.write_bytes(data if isinstance(data, bytes) else data.encode())


def _header_only(length: int) -> bytes:
    return length.to_bytes(8, "little") + b"{"


HOSTILE = {
    "no config.json": ("config.json", None, "no config.json"),
    "config.json not JSON": ("config.json", "{model_type: llama", "config.json"),
    "config.json a list": ("config.json", "[1, 2]", "not an object"),
    "unknown model_type": ("config.json", '{"model_type": "wav2vec2"}', "describes a 'wav2vec2' model"),
    "hidden_size a string": ("config.json", None, "config.json"),
    "safetensors bad header": ("model.safetensors", _header_only(1 << 40), "not a readable safetensors file"),
    "safetensors truncated": ("model.safetensors", b"\x08\x00", "not a readable safetensors file"),
    "no weights": ("model.safetensors", None, "has no weights"),
    "no tokenizer": ("tokenizer.json", None, "has no tokenizer.json"),
    "tokenizer not JSON": ("tokenizer.json", "\x00\x01", "tokenizer.json is not valid JSON"),
    "tokenizer JSON but no tokenizer": ("tokenizer.json", '{"model": {"type": "BPE", "vocab": 3}}',
                                        "not a tokenizer the tokenizers library reads"),
    "tokenizer truncated": ("tokenizer.json", '{"version": "1.0", "model": {"type": "Unigram", "vocab": [["a", -1',
                            "tokenizer.json is not valid JSON"),
    "generation_config not JSON": ("generation_config.json", "{num_beams: 2", "generation_config.json"),
    "generation_config a list": ("generation_config.json", "[2]", "not an object"),
    "forced token outside the vocabulary": ("generation_config.json", '{"forced_bos_token_id": 100000}',
                                            "forced_bos_token_id = 100000 is not a token id"),
    "end token a string": ("generation_config.json", '{"eos_token_id": "</s>"}', "eos_token_id"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_directory_is_one_line_and_exit_2(case, llama_dir, tmp_path, capsys):
    directory = _copy(llama_dir, tmp_path)
    name, data, expected = HOSTILE[case]
    if case == "hidden_size a string":
        data = json.dumps({**hf_models.read_json(directory / "config.json"), "hidden_size": "32"})
    _edit(directory, name, data)
    assert expected in _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_weights_of_the_wrong_shape_are_one_line(llama_dir, tmp_path, capsys):
    directory = _copy(llama_dir, tmp_path)
    config = hf_models.read_json(directory / "config.json")
    (directory / "config.json").write_text(json.dumps({**config, "intermediate_size": 40}))
    err = _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out")])
    assert "do not fit the spec" in err and "ffn" in err


def test_a_weight_the_family_does_not_know_is_one_line(llama_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    directory = _copy(llama_dir, tmp_path)
    state = load_file(directory / "model.safetensors")
    save_file({**state, "model.layers.0.mystery.weight": torch.zeros(2)}, directory / "model.safetensors")
    with pytest.raises(UsageError, match="does not know the Llama tensor 'model.layers.0.mystery.weight'"):
        hf_import.import_directory(directory)


def test_a_sharded_index_naming_a_missing_or_outside_shard_is_one_line(tmp_path, capsys):
    hf = hf_models.model("llama", torch.float32)
    sharded = hf_models.save(hf, tmp_path / "sharded", max_shard_size="20KB")
    index = hf_models.read_json(sharded / "model.safetensors.index.json")
    first = sorted(set(index["weight_map"].values()))[0]
    for shard, expected in (("../../etc/passwd", "is not a file name"), ("missing.safetensors", "does not have")):
        name = next(iter(index["weight_map"]))
        edited = {**index, "weight_map": {**index["weight_map"], name: shard}}
        (sharded / "model.safetensors.index.json").write_text(json.dumps(edited))
        assert expected in _one_line_error(capsys, ["import", str(sharded), "--out", str(tmp_path / "out")])
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    (sharded / first).unlink()
    assert "does not have" in _one_line_error(capsys, ["import", str(sharded), "--out", str(tmp_path / "out")])


def test_a_pickle_is_read_only_when_allowed_and_with_weights_only(llama_dir, tmp_path, capsys):
    directory = _copy(llama_dir, tmp_path)
    from safetensors.torch import load_file

    torch.save(load_file(directory / "model.safetensors"), directory / "pytorch_model.bin")
    (directory / "model.safetensors").unlink()
    assert "--allow-pickle" in _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out")])
    assert run(["import", str(directory), "--out", str(tmp_path / "out"), "--allow-pickle"]) == 0
    torch.save({"weights": [1, 2], "evil": print}, directory / "pytorch_model.bin")  # not weights_only-safe
    err = _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out2"), "--allow-pickle"])
    assert "pytorch_model.bin is not readable" in err


def test_the_size_guard_does_not_refuse_weights_that_are_there(monkeypatch, tmp_path):
    """The 4 GiB guard is for specs that describe huge models by accident; an import checks on the meta
    device and never builds the model, so a limit below the model's size does not refuse it."""
    from attncomp.lower import size

    monkeypatch.setattr(size, "MAX_PARAM_BYTES", 1024)
    directory = hf_models.save(hf_models.model("llama", torch.float32), tmp_path / "llama")
    assert run(["import", str(directory), "--out", str(tmp_path / "out")]) == 0


@pytest.mark.parametrize("family", ["gpt2", "bert", "gpt_neox"])
def test_older_checkpoint_names_import_as_transformers_loads_them(family, tmp_path):
    """Hub checkpoints predate today's names: GPT-2's without the `transformer.` prefix and with its
    causal-mask buffers, BERT's with TF-era LayerNorm gamma/beta and the pre-training heads, Pythia's with
    attention mask buffers. They import to the same weights."""
    from safetensors.torch import load_file, save_file

    directory = hf_models.save(hf_models.model(family, torch.float32), tmp_path / family)
    expected = hf_import.import_directory(directory).weights
    state = load_file(directory / "model.safetensors")
    if family == "gpt2":
        state = {k.removeprefix("transformer."): v for k, v in state.items()}
        state["h.0.attn.bias"] = torch.ones(1, 1, 40, 40)
    elif family == "bert":
        state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                 for k, v in state.items()}
        state.update({"bert.pooler.dense.weight": torch.zeros(32, 32), "cls.seq_relationship.bias": torch.zeros(2)})
    else:
        state["gpt_neox.layers.0.attention.bias"] = torch.ones(1, 1, 8, 8)
        state["gpt_neox.layers.0.attention.masked_bias"] = torch.tensor(-1e9)
    save_file(state, directory / "model.safetensors")
    got = hf_import.import_directory(directory).weights
    assert set(got) == set(expected) and all(torch.equal(got[k], expected[k]) for k in expected)



# T5, ModernBERT and Gemma 3 (issue 27): a config key missing (its default then disagrees with the weights), a
# key of the wrong type, a weight of the wrong shape or missing, and what the language lacks: one line, exit 2
NEW_FAMILIES = {
    "t5/no d_model": ("t5", {"d_model": None}, "do not fit the spec"),
    "t5/no relative_attention_num_buckets": ("t5", {"relative_attention_num_buckets": None}, "relative_bias"),
    "t5/d_kv a string": ("t5", {"d_kv": "12"}, "config.json"),
    "t5/gated-relu": ("t5", {"feed_forward_proj": "gated-relu", "dense_act_fn": "relu"},
                      "feed_forward_proj 'gated-relu'"),
    "modernbert/no intermediate_size": ("modernbert", {"intermediate_size": None}, "do not fit the spec"),
    "modernbert/hidden_activation tanh": ("modernbert", {"hidden_activation": "tanh"}, "hidden_activation 'tanh'"),
    "modernbert/rope scaling": ("modernbert", {"rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 160000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}, "rotary scaling"),
    "gemma3_text/no head_dim": ("gemma3_text", {"head_dim": None}, "do not fit the spec"),
    "gemma3_text/attention soft-cap": ("gemma3_text", {"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
    "gemma3_text/irregular layers": ("gemma3_text", {"layer_types": [
        "full_attention", "full_attention", "sliding_attention"]}, "layer_types"),
    "gemma3_text/bidirectional": ("gemma3_text", {"use_bidirectional_attention": True}, "use_bidirectional_attention"),
    "gemma3_text/sliding scaled alone": ("gemma3_text", {"rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 40000.0},
        "sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}}},
        "a rotary scaling of the sliding layers that the full layers lack"),
}


@pytest.mark.parametrize("case", sorted(NEW_FAMILIES))
def test_hostile_configs_of_t5_modernbert_gemma3_are_one_line(case, tmp_path, capsys):
    family, changes, expected = NEW_FAMILIES[case]
    directory = hf_models.save(hf_models.model(family, torch.float32), tmp_path / family)
    config = hf_models.read_json(directory / "config.json")
    config.update(changes)
    (directory / "config.json").write_text(json.dumps({k: v for k, v in config.items()
                                                       if v is not None or k not in changes}))
    assert expected in _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("family,name,tensor", [
    ("t5", "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", torch.zeros(9, 4)),
    ("t5", "decoder.block.0.layer.1.EncDecAttention.q.weight", None),
    ("modernbert", "model.layers.1.mlp.Wi.weight", torch.zeros(60, 32)),
    ("gemma3_text", "model.layers.0.self_attn.q_norm.weight", torch.zeros(8)),
    ("gemma3_text", "model.layers.2.self_attn.k_norm.weight", None)])
def test_weights_of_t5_modernbert_gemma3_of_the_wrong_shape_or_missing_are_one_line(family, name, tensor, tmp_path,
                                                                                     capsys):
    from safetensors.torch import load_file, save_file

    directory = hf_models.save(hf_models.model(family, torch.float32), tmp_path / family)
    state = load_file(directory / "model.safetensors")
    assert name in state
    if tensor is None:
        del state[name]
    else:
        state[name] = tensor
    save_file(state, directory / "model.safetensors", metadata={"format": "pt"})
    err = _one_line_error(capsys, ["import", str(directory), "--out", str(tmp_path / "out")])
    assert "do not fit the spec" in err or "split" in err, err
