"""Any model trains (issue 41): a job names a model factory and a recipe instead of a spec. The standalone
module of generated/examples/tiny.py, loaded from its file (never compiled), trains on 2 CPU workers, resumes
exactly and decodes, in processes where the compiler was never imported; bad factories are one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from attncomp import checkpoint as ckpt
from attncomp import ir
from attncomp.cli.main import run
from attncomp.errors import UsageError
from attncomp.train import factory
from tests.conftest import ROOT

RECIPE = """train {
  schedule = inverse_sqrt(peak = 3e-3, warmup = 100)
  batch    = tokens(600)
  steps    = 4
  checkpoint { every = 2  keep = 3  average_last = 2 }
}
decode { beam = 2  max_len = src + 5 }
"""
COMPILER = ("attncomp.lower", "attncomp.compiler")

# the factory: tiny.py's module loaded from its file; every process that calls it records whether the compiler
# is loaded in it (the workers included)
FACTORY = """
import importlib.util, json, os, sys

def make():
    spec = importlib.util.spec_from_file_location("tiny_generated", {tiny!r})
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loaded = sorted(m for m in sys.modules if m.startswith({compiler!r}))
    with open(os.path.join({seen!r}, f"{{os.getpid()}}.json"), "w") as f:
        json.dump({{"loaded": loaded, "rank": os.environ.get("RANK")}}, f)
    return module.Model()
"""

# what the test's subprocess runs: straight, stopped and resumed runs, then decoding with the recipe's decode block
DRIVER = """
import json, sys
import torch
from attncomp import train
from attncomp.data.dataset import PreparedData
from attncomp.decode.translate import Translator
from attncomp.train.factory import load_trained

factory, recipe, data, out = sys.argv[1:5]

def job(name, **checkpointing):
    return train.Job(model=factory, recipe=recipe, data=train.DataOptions(path=data),
                     parallelism=train.Parallelism(procs=2), logging=train.Logging(log_every=1),
                     checkpointing=train.CheckpointOptions(out=f"{out}/{name}", **checkpointing))

train.run(job("straight"))
train.run(job("resumed", stop_at=2))
train.run(job("resumed", resume=True))
model, described = load_trained(f"{out}/resumed/checkpoint_avg.pt", factory)
prepared = PreparedData(data)
d = described.decode
translator = Translator(model, prepared.tokenizer("src"), prepared.tokenizer("tgt"), d.beam, d.length_penalty,
                        d.max_len, progress=False, described=described)
texts = [t[0].text for t in translator.translate(["the small dog sees the cat", "a red house"])]
loaded = sorted(m for m in sys.modules if m.startswith(("attncomp.lower", "attncomp.compiler")))
print(json.dumps({"texts": texts, "loaded": loaded, "beam": translator.beam}))
"""


def _losses(run_dir) -> dict[int, float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return {e.step: e.value for e in events.Scalars("train/loss")}


@pytest.fixture(scope="module")
def factory_runs(sample_data, tmp_path_factory) -> dict:
    """The driver's straight and stopped-and-resumed runs of tiny.py's module on 2 workers, decoded (~40 s), and
    the records of every process that made the model, read before any other test calls the factory. Read-only:
    test_resume_checks_the_factory_and_the_recipe extends a copy of the resumed run instead of training its own."""
    root = tmp_path_factory.mktemp("factory")
    seen = root / "seen"
    seen.mkdir()
    (root / "tiny_factory.py").write_text(FACTORY.format(tiny=str(ROOT / "generated/examples/tiny.py"),
                                                         compiler=COMPILER, seen=str(seen)))
    (root / "recipe.attn").write_text(RECIPE)
    done = subprocess.run([sys.executable, "-c", DRIVER, f"{root / 'tiny_factory.py'}:make",
                           str(root / "recipe.attn"), str(sample_data), str(root)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    records = [json.loads(p.read_text()) for p in seen.glob("*.json")]
    return {"root": root, "done": done, "records": records, "factory": f"{root / 'tiny_factory.py'}:make"}


def test_a_generated_module_trains_resumes_exactly_and_decodes_without_the_compiler(factory_runs):
    done, records, root = factory_runs["done"], factory_runs["records"], factory_runs["root"]
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [] and result["beam"] == 2  # the driver: no compiler; the recipe's decode block
    assert len(result["texts"]) == 2 and all(isinstance(t, str) and t for t in result["texts"]), result
    ranks = {r["rank"] for r in records}
    assert {"0", "1"} <= ranks and None in ranks  # both workers of each run, and the host, made the model
    assert all(r["loaded"] == [] for r in records), records
    straight, resumed = root / "straight", root / "resumed"
    a, b = _losses(straight), _losses(resumed)
    assert sorted(a) == [1, 2, 3, 4] and a == b  # the same loss at every update, across the stop and resume
    wa, wb = ckpt.load(straight / "checkpoint_00000004.pt").model, ckpt.load(resumed / "checkpoint_00000004.pt").model
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert any(not torch.equal(wa[k], ckpt.load(straight / "checkpoint_00000002.pt").model[k]) for k in wa)
    header = ckpt.load(resumed / "checkpoint_00000004.pt").header
    assert header.spec == "" and header.factory.endswith("tiny_factory.py:make")
    assert ir.load_recipe(header.recipe) == ir.load_recipe(RECIPE)
    assert (resumed / "recipe.attn").read_text() == header.recipe and not (resumed / "spec.attn").exists()


def test_resume_checks_the_factory_and_the_recipe(factory_runs, sample_data, tmp_path, capfd):
    assert factory_runs["done"].returncode == 0, factory_runs["done"].stderr[-3000:]
    shutil.copytree(factory_runs["root"] / "resumed", tmp_path / "run")  # the factory's run of 4 updates
    made, recipe = factory_runs["factory"], str(factory_runs["root"] / "recipe.attn")
    common = ["--data", str(sample_data), "--out", str(tmp_path / "run"), "--procs", "1"]
    # another recipe (not only its length) is refused; a longer run extends it; a spec is another model
    assert run(["train", "--model", made, "--recipe", recipe, *common, "--resume", "--set", "train.seed=5"]) == 2
    assert "another architecture or recipe: train.seed (1 -> 5)" in capfd.readouterr().err
    assert run(["train", str(ROOT / "specs/examples/tiny.attn"), *common, "--resume"]) == 2
    assert "was trained from the model factory" in capfd.readouterr().err
    assert run(["train", "--model", made, "--recipe", recipe, *common, "--resume", "--set", "train.steps=5"]) == 0
    err = capfd.readouterr().err
    assert f"training {made} on 1 CPU worker(s)" in err and "extending the run from step 4: train.steps: 4 -> 5" in err
    with pytest.raises(ckpt.CheckpointError, match="trained from the model factory .*load_trained"):
        ckpt.stored_spec(ckpt.load(tmp_path / "run" / "checkpoint_00000005.pt"))
    with pytest.raises(UsageError, match="trained from the model factory .*tiny_factory.py:make, not other:make"):
        factory.load_trained(tmp_path / "run" / "checkpoint_00000005.pt", "other:make")  # the caller names the code


def _modules(tmp_path):
    (tmp_path / "factories.py").write_text(textwrap.dedent("""
        import torch
        def raises():
            raise RuntimeError("no weights here")
        def not_a_module():
            return 42
        class Plain(torch.nn.Module):
            pass
        def plain():
            return Plain()
        value = 3
    """))
    (tmp_path / "broken.py").write_text("import nothing_of_that_name\n")


@pytest.mark.parametrize("name, message", [
    ("factories", "name the factory as module:function or FILE.py:function"),
    ("factories:", "name the factory as module:function"),
    ("factories:no-name", "is not a Python name"),
    ("no_such_module_here:make", "cannot import no_such_module_here (ModuleNotFoundError"),
    ("broken:make", "importing broken raised ModuleNotFoundError"),
    ("broken.py:make", "loading broken.py raised ModuleNotFoundError"),
    ("missing.py:make", "no file missing.py"),
    ("factories:absent", "factories has no absent"),
    ("factories:value", "value is a int, not a function"),
    ("factories:raises", "the model factory factories:raises raised RuntimeError: no weights here"),
    ("factories:not_a_module", "returned a int, not a torch.nn.Module"),
    ("factories:plain", "does not answer the runtime's model protocol (attncomp.protocol): it lacks family"),
])
def test_a_bad_factory_is_one_line_and_exit_2(sample_data, tmp_path, monkeypatch, capsys, name, message):
    _modules(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the factory's resolution puts the working directory first
    for module in ("factories", "broken"):  # imported by an earlier case from another directory
        monkeypatch.delitem(sys.modules, module, raising=False)
    assert run(["train", "--model", name, "--data", str(sample_data), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, message", [
    ([], "give a spec, or --model module:function with --recipe FILE"),
    ([str(ROOT / "specs/examples/tiny.attn"), "--model", "m:f"], "not both"),
    ([str(ROOT / "specs/examples/tiny.attn"), "--recipe", "r.attn"], "--recipe goes with --model"),
])
def test_the_command_wants_a_spec_or_a_factory(tmp_path, capsys, args, message):
    assert run(["train", *args, "--data", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_a_recipe_holds_train_and_decode_blocks_only(tmp_path):
    with pytest.raises(Exception, match='unknown key "model" at the top level'):
        ir.load_recipe("model x { }\ntrain { steps = 3 }\n")
    recipe = ir.load_recipe(RECIPE, ["train.steps=9"])
    assert recipe.train.steps == 9 and recipe.decode.beam == 2
    assert ir.load_recipe(ir.recipe_text(recipe)) == recipe


def test_describe_reads_the_protocol_and_the_optional_attributes():
    model = factory.make(f"{ROOT / 'generated/examples/tiny.py'}:Model")
    facts = factory.describe(model, "tiny.py:Model")
    assert (facts.family.name, facts.src_vocab, facts.tgt_vocab, facts.max_positions) == \
        ("encoder-decoder", 256, 256, None)
    model.specials = "pad = 0"
    with pytest.raises(UsageError, match="not an attncomp.vocab.Specials"):
        factory.describe(model, "tiny.py:Model")


def _factory_checkpoint(path, **changes):
    """A small average checkpoint of a model factory's run, written by hand, its stored fields changed."""
    import hashlib

    recipe = ir.recipe_text(ir.load_recipe(RECIPE))
    blob = torch.ones(3, dtype=torch.uint8)
    header = ckpt.Header(attncomp="0", kind="average", spec="", spec_hash=hashlib.sha256(recipe.encode()).hexdigest(),
                         tokenizers={"src": blob, "tgt": blob}, data="{}", step=1, position=(0, 0), metrics={},
                         factory="mymodels:make", recipe=recipe)
    payload = ckpt.Checkpoint(header, model={"w": torch.arange(4.0)}).payload()
    torch.save({**payload, **changes}, path)
    return path


@pytest.mark.parametrize("changes, message", [
    ({"spec": "model x { decoder { } }\n"}, "field 'spec' should be empty in a model factory's run"),
    ({"factory": 3}, "field 'factory' should be a model factory's name (module:function), found int"),
    ({"factory": ""}, "field 'factory' should be a model factory's name"),
    ({"recipe": "train { steps = 2 }\n"}, "field 'spec_hash' does not match its stored recipe"),
])
def test_a_factory_checkpoint_is_checked_like_a_spec_one(tmp_path, changes, message):
    good = ckpt.load(_factory_checkpoint(tmp_path / "good.pt"))
    assert good.header.factory == "mymodels:make" and ckpt.stored_model(good) == "mymodels:make"
    with pytest.raises(ckpt.CheckpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ckpt.load(_factory_checkpoint(tmp_path / "bad.pt", **changes))


def test_checkpoints_of_one_factory_average_and_of_two_do_not(tmp_path):
    a, b = _factory_checkpoint(tmp_path / "a.pt"), _factory_checkpoint(tmp_path / "b.pt")
    assert torch.equal(ckpt.average([a, b]).model["w"], torch.arange(4.0))
    other = _factory_checkpoint(tmp_path / "c.pt", factory="other:make")
    with pytest.raises(ckpt.CheckpointError, match="holds another model"):
        ckpt.average([a, other])
