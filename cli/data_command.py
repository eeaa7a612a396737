"""`attncomp data prepare | sample | info`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from attncomp.cli.args import fraction, int_at_least, language, non_negative_int, output_dir, positive_int
from attncomp.data.dataset import PreparedData
from attncomp.data.prepare import SAMPLE, PrepareOptions, given_digest, prepare
from attncomp.data.sample_corpus import write_corpus
from attncomp.errors import UsageError, printable


vocab_size = int_at_least(8)  # sentencepiece's specials and a few pieces


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def column(text: str) -> str:
    """A field name of JSONL or Parquet rows: dotted names reach into nested objects."""
    if not text or any(not part for part in text.split(".")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a field name (e.g. en, or translation.en)")
    return text


def _say(message: str) -> None:
    print(printable(message), file=sys.stderr)  # it names --out and the inputs: escaped


def _given_tokenizers(args: argparse.Namespace) -> tuple[bytes, bytes] | None:
    """--tokenizers CHECKPOINT: its (src, tgt) sentencepiece models, to prepare data it can be fine-tuned on."""
    if args.tokenizers is None:
        return None
    if args.separate_vocab or args.src_vocab_size or args.tgt_vocab_size:
        raise UsageError("--tokenizers takes the checkpoint's vocabularies; leave out --separate-vocab, "
                         "--src-vocab-size and --tgt-vocab-size")
    from attncomp import checkpoint  # here, not above: torch, which only this option needs, takes seconds to import

    found = checkpoint.read_trained(args.tokenizers)
    return _with_languages(tuple(found.header.tokenizers[side].numpy().tobytes() for side in ("src", "tgt")), args)


def _with_languages(given: tuple[bytes, bytes], args: argparse.Namespace) -> tuple[bytes, bytes]:
    """--src-lang, --tgt-lang: the checkpoint's tokenizers with those languages chosen (an imported multilingual
    model's: the source template's language, the target's labels and decoder start), written into the data so
    that training and decoding read them. One tokenizer for both sides stays one."""
    if args.src_lang is None and args.tgt_lang is None:
        return given
    from attncomp.data.tokenizer import tokenizer_of

    src, tgt = tokenizer_of(given[0]), tokenizer_of(given[1])
    if given[0] == given[1]:
        both = src.with_source_language(args.src_lang).with_target_language(args.tgt_lang).to_bytes()
        return both, both
    return src.with_source_language(args.src_lang).to_bytes(), tgt.with_target_language(args.tgt_lang).to_bytes()


def _prepare(args: argparse.Namespace) -> int:
    if (args.src_lang or args.tgt_lang) and (args.tokenizers is None or args.lang is not None):
        raise UsageError("--src-lang and --tgt-lang choose the languages of an imported multilingual model's "
                         "tokenizer: give --tokenizers CHECKPOINT, with --src and --tgt (not --lang)")
    if args.lang is not None:
        return _prepare_mono(args)
    if args.src == args.tgt:
        raise UsageError(f"--src and --tgt are both {args.src!r}; give the two languages' suffixes "
                         "(or --lang for text in one language)")
    if not args.separate_vocab and (args.src_vocab_size or args.tgt_vocab_size):
        raise UsageError("--src-vocab-size and --tgt-vocab-size need --separate-vocab (else use --vocab-size)")
    given = _given_tokenizers(args)
    options = PrepareOptions(
        src_lang=args.src, tgt_lang=args.tgt, vocab_size=args.vocab_size, separate=args.separate_vocab,
        src_vocab_size=args.src_vocab_size, tgt_vocab_size=args.tgt_vocab_size,
        character_coverage=args.character_coverage, max_len=args.max_len, seed=args.seed,
        given=given_digest(given) if given else "", sample_sentences=args.sample_sentences,
        src_column=args.src_column or "", tgt_column=args.tgt_column or "",
    )
    sources = {"train": args.train, "valid": args.valid, "test": args.test}
    manifest, changed = prepare(sources, Path(args.out), options, force=args.force, print_fn=_say, tokenizers=given,
                                workers=args.workers)
    _say(f"{args.out}: {'prepared' if changed else 'already prepared from these inputs; nothing to do'} "
         f"(vocabulary {manifest['vocab']['src_size']}"
         f"{'' if manifest['vocab']['shared'] else ' + ' + str(manifest['vocab']['tgt_size'])})")
    return 0


def _prepare_mono(args: argparse.Namespace) -> int:
    """`data prepare --lang LANG`: PREFIX.LANG, one language, for language models."""
    if args.separate_vocab or args.src_vocab_size or args.tgt_vocab_size or (args.src, args.tgt) != ("src", "tgt") \
            or args.tgt_column:
        raise UsageError("--lang prepares one language with one vocabulary; leave out --src, --tgt, --tgt-column, "
                         "--separate-vocab, --src-vocab-size and --tgt-vocab-size")
    given = _given_tokenizers(args)
    given = (given[1], given[1]) if given else None  # one language: the (decoder's) target vocabulary
    options = PrepareOptions(src_lang=args.lang, tgt_lang=args.lang, vocab_size=args.vocab_size,
                             character_coverage=args.character_coverage, max_len=args.max_len, seed=args.seed,
                             mono=True, given=given_digest(given) if given else "",
                             sample_sentences=args.sample_sentences, src_column=args.src_column or "")
    sources = {"train": args.train, "valid": args.valid, "test": args.test}
    manifest, changed = prepare(sources, Path(args.out), options, force=args.force, print_fn=_say, tokenizers=given,
                                workers=args.workers)
    _say(f"{args.out}: {'prepared' if changed else 'already prepared from these inputs; nothing to do'} "
         f"({args.lang} only, vocabulary {manifest['vocab']['src_size']})")
    return 0


def _sample(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        prefixes = write_corpus(Path(tmp), train_pairs=args.pairs, held_out=args.held_out, seed=args.seed)
        _say(f"generate the sample text: {time.monotonic() - start:.1f}s")
        sources = {split: [str(prefix)] for split, prefix in prefixes.items()}
        text = {f"text/{split}.{side}": Path(f"{prefix}.{side}") for split, prefix in prefixes.items()
                for side in ("src", "tgt")}
        options = PrepareOptions(vocab_size=args.vocab_size, max_len=128, seed=args.seed)
        if args.lang is not None:  # one side of the corpus, as monolingual text
            options = PrepareOptions(src_lang=args.lang, tgt_lang=args.lang, vocab_size=args.vocab_size, max_len=128,
                                     seed=args.seed, mono=True)
            text = {name: path for name, path in text.items() if name.endswith(f".{args.lang}")}
        manifest, changed = prepare(sources, Path(args.out), options, force=args.force, print_fn=_say,
                                    include=text)
    verb = "wrote" if changed else "already has"
    _say(f"{args.out}: {verb} the sample corpus ({manifest['splits']['train']['pairs']:,} training pairs, "
         f"vocabulary {manifest['vocab']['src_size']}; raw text in {args.out}/text/)")
    return 0


def _info(args: argparse.Namespace) -> int:
    data = PreparedData(args.dir)
    print(json.dumps({k: data.manifest[k] for k in ("languages", "vocab", "splits")}, indent=2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="prepare training data: sentencepiece + binarised token arrays")
    verbs = data.add_subparsers(dest="data_command", required=True, metavar="{prepare,sample,info}")

    p = verbs.add_parser("prepare", help="parallel text (plain, .gz, TSV, JSONL or Parquet) -> a prepared data "
                                         "directory")
    p.add_argument("--train", action="extend", nargs="+", required=True, metavar="SOURCE",
                   help="PREFIX (PREFIX.SRC and PREFIX.TGT, each may be .gz), or a .tsv, .jsonl (each may be .gz) "
                        "or .parquet file; several sources are read one after the other")
    p.add_argument("--valid", action="extend", nargs="+", default=[], metavar="SOURCE")
    p.add_argument("--test", action="extend", nargs="+", default=[], metavar="SOURCE")
    p.add_argument("--src", type=language, default="src", help="source language suffix (default: src)")
    p.add_argument("--tgt", type=language, default="tgt", help="target language suffix (default: tgt)")
    p.add_argument("--lang", type=language, metavar="LANG",
                   help="one language instead: PREFIX.LANG, for a language model (decoder-only or masked)")
    p.add_argument("--out", type=output_dir, required=True, metavar="DIR")
    p.add_argument("--vocab-size", type=vocab_size, default=8000, help="BPE vocabulary size, specials included")
    p.add_argument("--separate-vocab", action="store_true", help="one vocabulary per language")
    p.add_argument("--src-vocab-size", type=vocab_size)
    p.add_argument("--tgt-vocab-size", type=vocab_size)
    p.add_argument("--character-coverage", type=fraction, default=1.0, help="in (0, 1] (default 1.0)")
    p.add_argument("--max-len", type=int_at_least(2), default=256,
                   help="drop training pairs longer than this (tokens, </s> included; at least 2)")
    p.add_argument("--seed", type=non_negative_int, default=1)
    p.add_argument("--src-column", metavar="NAME", type=column,
                   help="JSONL and Parquet: the field holding the source text (default: the --src suffix; "
                        "a dotted name reaches into nested objects: translation.en)")
    p.add_argument("--tgt-column", metavar="NAME", type=column, help="... the target text (default: the --tgt suffix)")
    p.add_argument("--sample-sentences", type=positive_int, default=SAMPLE, metavar="N",
                   help=f"train sentencepiece on a seeded sample of N sentences, or all when fewer "
                        f"(default {SAMPLE:,})")
    p.add_argument("--workers", type=positive_int, default=cores(), metavar="N",
                   help="processes encoding the text (default: every core, here %(default)s); the output is the "
                        "same for any number")
    p.add_argument("--force", action="store_true", help="prepare again, replacing what --out holds")
    p.add_argument("--tokenizers", metavar="CHECKPOINT",
                   help="encode with this checkpoint's (or export's) tokenizers (sentencepiece models, or an imported "
                        "model's tokenizer.json with its special ids) instead of training new ones, so that "
                        "`train --init CHECKPOINT` can fine-tune it (e.g. an `attncomp import`)")
    p.add_argument("--src-lang", metavar="CODE",
                   help="with --tokenizers of an imported mBART, M2M100 or NLLB model: the source language code "
                        "(en_XX, __en__, eng_Latn) its template puts around each source")
    p.add_argument("--tgt-lang", metavar="CODE",
                   help="... the target language code: the labels and the decoder input framed as transformers' "
                        "tokenizer(src, text_target=tgt) with tgt_lang and the model's shift frame them "
                        "(default: generation_config.json's forced language)")
    p.set_defaults(handler=_prepare)

    p = verbs.add_parser("sample", help="generate the built-in sample corpus and prepare it")
    p.add_argument("--out", type=output_dir, required=True, metavar="DIR")
    p.add_argument("--pairs", type=positive_int, default=20000, help="training pairs (default 20000)")
    p.add_argument("--held-out", type=positive_int, default=500, help="valid and test pairs each (default 500)")
    p.add_argument("--seed", type=non_negative_int, default=1)
    p.add_argument("--vocab-size", type=vocab_size, default=256)
    p.add_argument("--lang", choices=("src", "tgt"), help="prepare one side only, as monolingual text")
    p.add_argument("--force", action="store_true")
    p.set_defaults(handler=_sample)

    p = verbs.add_parser("info", help="summarise a prepared data directory")
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(handler=_info)
