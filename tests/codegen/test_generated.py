"""generated/: byte-identical to a fresh render, numerically equal to the compiled graphs, loading the
same state dict, and safe against any spec text."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import attncomp
from attncomp import ir
from attncomp.codegen import output_path, render
from attncomp.compiler import compile_spec
from attncomp.passes import DEFAULT_PASSES
from attncomp.vocab import BOS
from tests.conftest import ROOT, SPECS, spec_id
from tests.helpers import batch, small


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: FlexAttention's tracing looks its functions' module up
    spec.loader.exec_module(module)
    return module


def rendered_module(spec, tmp_path: Path, name="gen", model=None, passes=DEFAULT_PASSES):
    """The module rendered from `model`, or from `spec` compiled (on meta) with `passes`, imported."""
    path = tmp_path / f"{name}.py"
    path.write_text(render(model if model is not None else compile_spec(spec, passes, device="meta"), "inline.attn"))
    return load_module(path, f"attncomp_test_{name}")


@functools.cache
def compiled_on_meta(path: Path):
    """The optimised model of a shipped spec, shapes only: both per-spec tests read it, compiled once."""
    return attncomp.compile(path, device="meta")


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_generated_file_is_up_to_date(path):
    relative = path.relative_to(ROOT)
    expected = render(compiled_on_meta(path), str(relative))
    target = output_path(path)
    assert target.resolve() == ROOT / "generated" / relative.relative_to("specs").with_suffix(".py")
    assert target.read_text() == expected, f"{target} is stale: run `attncomp build specs`"


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_generated_file_imports_only_torch_and_loads_the_state_dict(path):
    target = output_path(path)
    tree = ast.parse(target.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"math", "torch", "typing"}
    module = load_module(target, f"generated_{spec_id(path).replace('/', '_')}")
    with torch.device("meta"):
        generated = module.Model()
    ours, theirs = compiled_on_meta(path).state_dict(), generated.state_dict()
    assert list(ours) == list(theirs)
    assert all(ours[k].shape == theirs[k].shape for k in ours)


VARIANTS = {
    "base": ("specs/base.attn", []), "lm": ("specs/examples/lm.attn", []),
    "local": ("specs/examples/local.attn", []), "B1": ("specs/table3/B1.attn", []),
    "additive": ("specs/base.attn", ["model.attention=additive", "model.cross_attention=additive"]),
    "pre_learned": ("specs/base.attn", ["model.norm=pre", "model.activation=gelu",
                                        "model.positions=learned(max_len = 64)"]),
    "untied_no_bias": ("specs/base.attn", ["model.tie=none", "model.bias=false", "model.positions=none"]),
    "separate": ("specs/base.attn", ["model.vocab=separate(src = 61, tgt = 67)", "model.tie=decoder"]),
    "local_decoder": ("specs/base.attn", ["model.decoder.attention=local(window = 2)"]),
    "encoder_only": ("specs/base.attn", ["model.decoder=none", "model.tie=none"]),
    "dropout": ("specs/big.attn", []),
    "alibi": ("specs/base.attn", ["model.positions=alibi", "model.decoder.attention=local(window = 2)"]),
    "relative_values": ("specs/base.attn", ["model.positions=relative(max_distance = 3, values = true)"]),
    "sinusoidal_halves": ("specs/base.attn", ["model.positions=sinusoidal(layout = halves)"]),
    "bert": ("specs/examples/bert.attn", []),
    "bert_choices_decoder": ("specs/base.attn", ["model.embedding_norm=true", "model.head=dense(activation = relu)",
                                                 "model.bias.output=true", "model.bias.k=false"]),
    "llama": ("specs/examples/llama.attn", []),
    "rope_gqa_encoder_decoder": ("specs/base.attn", ["model.positions=rope(fraction = 0.5)", "model.kv_heads=2",
                                                     "model.normalization=rmsnorm", "model.activation=geglu"]),
    "tie_inputs_scaled_capped_segments": ("specs/base.attn", ["model.tie=inputs", "model.logit_scale=0.25",
                                                              "model.logit_softcap=5.0", "model.segments=3",
                                                              "model.d_embed=128"]),
    "capped_factorised_lm": ("specs/base.attn", ["model.encoder=none", "model.tie=decoder", "model.logit_softcap=2.0",
                                                 "model.d_embed=256", "model.positions=rope"]),
    # umT5's bucketed bias, a table in every layer's self-attention (the stack hands them the bucket indices)
    "per_layer_buckets": ("specs/base.attn", ["model.positions=buckets(count = 8, max_distance = 20, per_layer = true)",
                                              "model.norm=pre"]),
    # rotary scaling: dynamic NTK for the stack's layers (a table of the length), YaRN for every second layer
    "scaled_rope_lm": ("specs/base.attn", ["model.encoder=none", "model.tie=decoder",
                                           "model.positions=rope(scaling = dynamic(factor = 2, original_max_len = 4))",
                                           "model.decoder.layer.global.every=2",
                                           "model.decoder.layer.global.rope_scaling=yarn(factor = 4, "
                                           "original_max_len = 4, beta_fast = 4, beta_slow = 0.5)"]),
}


@pytest.mark.parametrize("name", VARIANTS)
def test_generated_module_equals_the_compiled_graphs(name, tmp_path):
    path, overrides = VARIANTS[name]
    spec = small(ir.load(ROOT / path, overrides), dropout=0.1 if name == "dropout" else 0.0)
    compiled = attncomp.compile(spec, dtype=torch.float64).eval()
    generated = rendered_module(spec, tmp_path, name, model=compiled).Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    src, tgt = batch(spec)
    m = spec.model
    if m.encoder is not None and m.decoder is not None:
        assert (generated(src, tgt) - compiled(src, tgt)).abs().max() < 1e-9
        assert (generated.encode(src) - compiled.encode(src)).abs().max() < 1e-9
        assert (generated.hidden_dense(src, tgt) - compiled.hidden_dense(src, tgt)).abs().max() < 1e-9
        caches = [model.init_cache(src, model.encode(src)) for model in (generated, compiled)]
    elif m.decoder is not None:
        assert (generated(tgt) - compiled(tgt)).abs().max() < 1e-9
        caches = [model.init_cache(tgt) for model in (generated, compiled)]
    else:
        assert (generated(src) - compiled(src)).abs().max() < 1e-9
        return
    tokens = torch.full((src.shape[0], 1), BOS)
    for _ in range(4):
        (a, caches[0]), (b, caches[1]) = generated.decode_step(tokens, caches[0]), compiled.decode_step(tokens, caches[1])
        assert (a - b).abs().max() < 1e-9
        tokens = a.argmax(-1, keepdim=True).clamp(min=5)


@pytest.mark.parametrize("passes", [(), ("canonicalize", "fuse_attention")])
def test_generated_module_is_the_program_the_chosen_passes_made(passes, tmp_path):
    spec = small(ir.load(ROOT / "specs/base.attn"))
    text = render(compile_spec(spec, passes, device="meta"), "inline.attn")
    fused = "fuse_attention" in passes
    assert ("F.scaled_dot_product_attention(" in text) == fused
    assert ("torch.softmax(" in text) != fused
    assert "torch.cat((self.q_proj.weight" not in text  # fuse_qkv did not run
    assert "torch.cat((self.q_proj.weight" in render(compile_spec(spec, device="meta"), "inline.attn")
    compiled = attncomp.compile(spec, passes=passes, dtype=torch.float64).eval()
    generated = rendered_module(spec, tmp_path, f"p{len(passes)}", passes=passes).Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    src, tgt = batch(spec)
    assert (generated(src, tgt) - compiled(src, tgt)).abs().max() < 1e-9


def test_layers_are_a_loop_not_copies():
    spec = small(ir.load(ROOT / "specs/base.attn"))
    texts = [render(compile_spec(spec.model_copy(update={"model": spec.model.model_copy(update={
        name: getattr(spec.model, name).model_copy(update={"layers": n}) for name in ("encoder", "decoder")})}),
        device="meta"), "inline.attn") for n in (2, 3)]
    assert len(texts[0].splitlines()) == len(texts[1].splitlines())
    assert "layers.1" not in texts[1] and "layers[1]" not in texts[1]
    assert "        for layer in self.layers:\n            x = layer(x, padding_mask)" in texts[1]
    assert "self.layers = nn.ModuleList(EncoderLayer() for _ in range(3))" in texts[1]
    assert texts[1].count("class EncoderLayer(nn.Module):") == 1


def test_codegen_does_not_import_the_runtime():
    code = ("import sys, attncomp.codegen; "
            "bad = [m for m in sys.modules if m.split('.')[1:2] in (['train'], ['decode'], ['checkpoint'], ['data'])"
            " and m.startswith('attncomp.')]; print(bad); sys.exit(bool(bad))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dropout_follows_train_and_eval(tmp_path):
    spec = small(ir.load(ROOT / "specs/big.attn"), dropout=0.3)
    model = rendered_module(spec, tmp_path, "drop").Model().double()
    src, tgt = batch(spec)
    model.eval()
    assert torch.equal(model(src, tgt), model(src, tgt))
    model.train()
    assert not torch.equal(model(src, tgt), model(src, tgt))


HOSTILE = '''# """ ; import os ; os.system("echo pwned") ; """
#\u2028import os; os.system("echo pwned")\x85import os
# \x00 \x0b \x0c \u2028 end
model m {  # ''\' ) ] } {{ }} {% raw %}
  decoder { layers = 1 }
}
'''


def test_spec_text_cannot_inject_code(tmp_path):
    path = tmp_path / "hostile.attn"
    path.write_bytes(HOSTILE.encode())
    spec = ir.load(path)
    text = render(compile_spec(spec, device="meta"), str(path))
    tree = ast.parse(text)  # parses: nothing escaped its comment
    kinds = {type(node).__name__ for node in tree.body}
    assert kinds <= {"Expr", "Import", "ImportFrom", "Assign", "FunctionDef", "ClassDef"}
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "os"]
    assert "\r" not in text and "\x00" not in text and "\u2028" not in text


@pytest.mark.parametrize("passes", ["", "canonicalize,fuse_attention"])
def test_build_writes_the_program_its_passes_made(passes, tmp_path, capsys):
    from attncomp.cli.main import run

    assert run(["build", str(ROOT / "specs/examples/tiny.attn"), "-o", str(tmp_path), "--passes", passes]) == 0
    capsys.readouterr()
    text = (tmp_path / "tiny.py").read_text()
    assert f"Passes: {passes.replace(',', ', ') or 'none'};" in text
    assert ("F.scaled_dot_product_attention(" in text) == bool(passes)
    assert "torch.cat((self.q_proj.weight" not in text


@pytest.mark.parametrize("path", SPECS, ids=spec_id)
def test_every_shipped_spec_renders_a_module_equal_to_its_compiled_model(path, tmp_path):
    """Each shipped architecture, narrowed by `small`, printed and run in float64 against its compiled model."""
    spec = small(ir.load(path))
    compiled = attncomp.compile(spec, dtype=torch.float64).eval()
    generated = rendered_module(spec, tmp_path, "every", model=compiled).Model().double().eval()
    generated.load_state_dict(compiled.state_dict())
    src, tgt = batch(spec)
    m = spec.model
    inputs = (src, tgt) if m.encoder is not None and m.decoder is not None else (tgt if m.encoder is None else src,)
    assert (generated(*inputs) - compiled(*inputs)).abs().max() < 1e-9


FX_TEMPORARY = re.compile(r"\b(getitem|mul|add|cat|split|transpose|unflatten|flatten|matmul|softmax|dropout|linear|"
                          r"logical_not|masked_fill|size|arange|unsqueeze|einsum|tanh|relu|gelu|silu|repeat_interleave|"
                          r"scaled_dot_product_attention|_unnamed)_\d+\b")


def test_generated_code_reads_like_a_model():
    """No fx temporaries, no line over 120, constants as the paper writes them, base.py at most 305 lines
    with a header of at most 20, and the values named after the paper (q, k, v, heads)."""
    for path in sorted((ROOT / "generated").rglob("*.py")):
        text = path.read_text()
        assert not FX_TEMPORARY.findall(text), (path, FX_TEMPORARY.findall(text)[:3])
        assert max(len(line) for line in text.splitlines()) <= 120, path
    text = (ROOT / "generated" / "base.py").read_text()
    assert len(text.splitlines()) <= 305
    header = next(i for i, line in enumerate(text.splitlines()) if line.startswith('"""'))
    assert header <= 20  # the header's comments: fixed lines, the spec's path and hash, the passes
    assert "x = x * math.sqrt(512)" in text and "scale=1 / math.sqrt(64)" in text
    assert "heads = F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(64), is_causal=True)" in text
    assert "q, k, v = torch.split(qkv, (512, 512, 512), -1)" in text
    step = text[text.index("    def step(self, x, past_k, past_v):"):]
    assert "torch.cat((self." not in step[:step.index("\n\n")]  # decoding never concatenates weights


def test_one_class_per_unit_and_one_method_per_graph():
    model = attncomp.compile(ROOT / "specs/base.attn", device="meta")
    text = (ROOT / "generated" / "base.py").read_text()
    for unit in model.units():
        name = "Model" if unit is model.program else unit.name
        body = text[text.index(f"class {name}(nn.Module):"):]
        body = body[:body.index("\n\n\nclass ")] if "\n\n\nclass " in body else body
        assert sorted(re.findall(r"    def (\w+)\(self", body)) == sorted(["__init__", *unit.methods]), name
