"""CPU decoding speed, side by side in one run: attncomp, transformers' `generate`, CTranslate2 (float32, int8).

    python bench/decode_speed.py [--threads 1] [--repeats 3] [--sizes 32 1] [--singles 4] [--levers ...]
                                 [--spec specs/base.attn] [--vocab 8000]

One architecture for all: specs/base.attn (d_model 512, 6 + 6 layers, 8 heads, d_ff 2048) with a
vocabulary of 8000 and random weights. attncomp and CTranslate2 run the very same weights
(CTranslate2's through `attncomp.interop.ctranslate2_export`); transformers runs a MarianMTModel of
the same shapes (its own random weights: the speed does not depend on them). Every source has 20
tokens (</s> included); beam 4; every hypothesis is forced to 20 output tokens (</s> is blocked before
and forced after), so all engines do the same work. The figure is sentences per second: for 32, one
batch of 32; for 1, `--singles` single sentences one after the other. `--threads` is the intra-op
thread count of every engine (torch and CTranslate2 alike). Each cell is the median of `--repeats`
timed runs after one untimed warm-up. Levers (attncomp only, each a row of its own):

    per-row    the stepper before its levers: encoder and init_cache run on every beam row, and every
               cache entry is copied at every reordering (cross-attention keys and values too)
    unfused    without the fuse_qkv pass: decode_step then does not concatenate W_Q, W_K, W_V per step
    int8       unfused + torch.ao dynamic int8 quantisation of the nn.Linear modules (CPU)
    compile    torch.compile of decode_step (dynamic shapes)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.utils._pytree as pytree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SRC_LEN, OUT_LEN, BEAM, ALPHA = 20, 20, 4, 0.6
SPEC, VOCAB = ROOT / "specs/base.attn", 8000  # --spec, --vocab


def sources(n: int, seed: int = 0) -> torch.Tensor:
    """n sources of SRC_LEN tokens: random non-special ids, then </s>."""
    from attncomp.vocab import EOS, SPECIAL_TOKENS

    gen = torch.Generator().manual_seed(seed)
    body = torch.randint(SPECIAL_TOKENS, VOCAB, (n, SRC_LEN - 1), generator=gen)
    return torch.cat([body, torch.full((n, 1), EOS)], 1)


LEVERS = ("per-row", "unfused", "int8", "compile")


def attncomp_model(lever: str | None = None):
    import attncomp
    from attncomp.passes import DEFAULT_PASSES

    passes = [p for p in DEFAULT_PASSES if p != "fuse_qkv"] if lever in ("unfused", "int8") else DEFAULT_PASSES
    torch.manual_seed(0)
    model = attncomp.compile(SPEC, [f"model.vocab=shared({VOCAB})"], passes=passes).eval()
    model.lever = lever
    if lever == "int8":
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    if lever == "compile":
        model.decode_step = torch.compile(model.decode_step, dynamic=True)
    return model


class ForcedLength:
    """A stepper that blocks </s> for the first OUT_LEN steps (beam_search forces it right after)."""

    def __init__(self, inner):
        self.inner, self.t = inner, 0

    def start(self, rows):
        self.inner.start(rows)

    def select(self, rows):
        self.inner.select(rows)

    def step(self, tokens):
        from attncomp.vocab import EOS

        logits = self.inner.step(tokens)
        self.t += 1
        if self.t <= OUT_LEN:
            logits[:, EOS] = -float("inf")
        return logits


def per_row_stepper(model, src: torch.Tensor):
    """CachedStepper as it was before the levers (attncomp commit 43bf6da)."""
    from attncomp.decode.beam import CachedStepper

    class PerRow(CachedStepper):
        def start(self, rows):
            src = self.src.index_select(0, rows)
            self.cache = self.model.init_cache(src, self.model.encode(src))

        def select(self, rows):
            self.cache = pytree.tree_map(lambda c: c.index_select(0, rows), self.cache)

    return PerRow(model, src)


def run_attncomp(model, src: torch.Tensor) -> list[list[int]]:
    from attncomp.decode.beam import CachedStepper, beam_search

    stepper = (per_row_stepper if getattr(model, "lever", None) == "per-row" else CachedStepper)(model, src)
    with torch.no_grad():
        hyps = beam_search(ForcedLength(stepper), len(src), [OUT_LEN + 1] * len(src), BEAM, ALPHA)
    return [h[0].tokens for h in hyps]


def marian_model(spec):
    from transformers import MarianConfig, MarianMTModel

    enc, dec = spec.model.encoder, spec.model.decoder
    config = MarianConfig(vocab_size=VOCAB, d_model=enc.d_model, encoder_layers=enc.layers, decoder_layers=dec.layers,
                          encoder_attention_heads=enc.heads, decoder_attention_heads=dec.heads,
                          encoder_ffn_dim=enc.d_ff, decoder_ffn_dim=dec.d_ff, activation_function=enc.activation,
                          scale_embedding=True,
                          max_position_embeddings=512, pad_token_id=0, eos_token_id=3,
                          decoder_start_token_id=2, forced_eos_token_id=None)
    torch.manual_seed(0)
    return MarianMTModel(config).eval()


def run_transformers(model, src: torch.Tensor):
    with torch.no_grad():
        return model.generate(input_ids=src, attention_mask=torch.ones_like(src), num_beams=BEAM,
                              min_new_tokens=OUT_LEN, max_new_tokens=OUT_LEN, length_penalty=ALPHA,
                              do_sample=False)


def ctranslate2_translator(model, quantization: str, threads: int, folder: Path):
    import ctranslate2

    from attncomp.interop import ctranslate2_export

    vocab = ["<pad>", "<unk>", "<s>", "</s>", "<sep>"] + [f"w{i}" for i in range(5, VOCAB)]
    out = folder / quantization
    ctranslate2_export.write(model.spec, model.state_dict(), vocab, vocab, out, quantization)
    return ctranslate2.Translator(str(out), device="cpu", inter_threads=1, intra_threads=threads), vocab


def run_ctranslate2(translator_vocab, src: torch.Tensor):
    translator, vocab = translator_vocab
    batch = [[vocab[i] for i in row] for row in src.tolist()]
    return translator.translate_batch(batch, beam_size=BEAM, min_decoding_length=OUT_LEN,
                                      max_decoding_length=OUT_LEN, length_penalty=ALPHA, max_batch_size=0)


def speed(run, engine, n: int, repeats: int, singles: int) -> float:
    """Sentences per second, median of `repeats`: one batch of n (n > 1) or `singles` sentences one by one."""
    batches = [sources(n)] if n > 1 else [sources(singles)[i : i + 1] for i in range(singles)]
    run(engine, batches[0])  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in batches:
            run(engine, batch)
        times.append(time.perf_counter() - start)
    return sum(len(b) for b in batches) / statistics.median(times)


def profile(n: int, lever: str | None, rows: int = 12) -> str:
    """torch.profiler's table of the operators that took the most time in one attncomp decode of n sentences."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    model, src = attncomp_model(lever), sources(n)
    run_attncomp(model, src)  # warm-up
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        run_attncomp(model, src)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def engines(levers: list[str], threads: int, folder: Path):
    model = attncomp_model()
    yield "attncomp `beam_search` with the cache", run_attncomp, model
    for lever in levers:
        yield f"attncomp + {lever}", run_attncomp, attncomp_model(lever)
    yield "transformers `MarianMTModel.generate`", run_transformers, marian_model(model.spec)
    yield "CTranslate2 float32", run_ctranslate2, ctranslate2_translator(model, "float32", threads, folder)
    yield "CTranslate2 int8", run_ctranslate2, ctranslate2_translator(model, "int8", threads, folder)


def main(argv=None) -> list[tuple[str, list[float]]]:
    global SPEC, VOCAB
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--singles", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 1])
    parser.add_argument("--levers", nargs="*", default=[], choices=LEVERS)
    parser.add_argument("--only", help="run only engines whose name contains this text")
    parser.add_argument("--spec", default=str(SPEC), help="the architecture (default specs/base.attn)")
    parser.add_argument("--vocab", type=int, default=VOCAB, help="vocabulary size (default 8000)")
    parser.add_argument("--profile", action="store_true",
                        help="instead: profile attncomp (first --levers entry, if any) at each of --sizes")
    args = parser.parse_args(argv)
    SPEC, VOCAB = Path(args.spec), args.vocab
    torch.set_num_threads(args.threads)
    if args.profile:
        for n in args.sizes:
            print(f"attncomp, {n} sentence(s), lever {args.levers[0] if args.levers else 'none'}:")
            print(profile(n, args.levers[0] if args.levers else None))
        return []
    rows = []
    print("| engine | " + " | ".join(f"{n} sentence{'s' * (n > 1)}: sentences/s" for n in args.sizes) + " |")
    print("|---|" + "---|" * len(args.sizes), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for name, run, engine in engines(args.levers, args.threads, Path(folder)):
            if args.only and args.only not in name:
                continue
            figures = [speed(run, engine, n, args.repeats, args.singles) for n in args.sizes]
            rows.append((name, figures))
            print(f"| {name} | " + " | ".join(f"{x:.2f}" for x in figures) + " |", flush=True)
    return rows


if __name__ == "__main__":
    main()
