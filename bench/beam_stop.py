"""The two beam-search stopping rules side by side on one checkpoint: BLEU, brevity penalty, speed.

    python bench/beam_stop.py CHECKPOINT --src test.en --ref test.de [--lines 500] [--device cpu]

Decodes the same sources with `decode.stop = bound` (tensor2tensor's rule) and `first` (first-come),
everything else from the checkpoint's spec (beam, alpha, max_len), and prints a Markdown table:
sacreBLEU's BLEU, its brevity penalty and hypothesis/reference length ratio, sentences per second,
and how many translations differ between the two rules. docs/decoding.md has the measured table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def _read(path: str, lines: int | None) -> list[str]:
    text = Path(path).read_text(encoding="utf-8").splitlines()
    return text[:lines] if lines else text


def main(argv=None) -> dict[str, dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--src", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--lines", type=int, help="only the first N lines")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    import torch
    from sacrebleu.metrics import BLEU

    from attncomp.loading import load_checkpoint
    from attncomp.data.tokenizer import Tokenizer
    from attncomp.decode.translate import Translator

    device = torch.device(args.device)
    model, found = load_checkpoint(args.checkpoint, device=device)
    tok = {side: Tokenizer(found.header.tokenizers[side].numpy().tobytes()) for side in ("src", "tgt")}
    decode = model.spec.decode
    sources, references = _read(args.src, args.lines), _read(args.ref, args.lines)
    results, outputs = {}, {}
    for stop in ("bound", "first"):
        translator = Translator(model, tok["src"], tok["tgt"], decode.beam, decode.length_penalty, decode.max_len,
                                device=device, progress=False, stop=stop)
        start = time.perf_counter()
        outputs[stop] = [t[0].text for t in translator.translate(sources)]
        seconds = time.perf_counter() - start
        bleu = BLEU().corpus_score(outputs[stop], [references])
        results[stop] = {"bleu": round(bleu.score, 2), "bp": round(bleu.bp, 3),
                         "ratio": round(bleu.sys_len / bleu.ref_len, 3),
                         "sentences_per_s": round(len(sources) / seconds, 1)}
    differ = sum(a != b for a, b in zip(outputs["bound"], outputs["first"]))
    print(f"{len(sources)} sentences, beam {decode.beam}, alpha {decode.length_penalty}, {args.device}; "
          f"the rules' translations differ on {differ}")
    print("| stop | BLEU | brevity penalty | length ratio | sentences/s |")
    print("|------|------|-----------------|--------------|-------------|")
    for stop, r in results.items():
        print(f"| `{stop}` | {r['bleu']:.2f} | {r['bp']:.3f} | {r['ratio']:.3f} | {r['sentences_per_s']:.1f} |")
    return results


if __name__ == "__main__":
    main()
