"""Sentencepiece models: trained with attncomp's special ids, stored in data dirs and checkpoints."""

from __future__ import annotations

import multiprocessing
import signal
from dataclasses import replace
from pathlib import Path

import sentencepiece as spm

from attncomp.errors import DataError
from attncomp.files import read_regular
from attncomp.native import native
from attncomp.vocab import BOS, DEFAULT, EOS, PAD, SEP, UNK


MAX_MODEL_BYTES = 64 << 20  # a vocabulary of a million pieces is a few tens of megabytes


def tokenizer_of(model_bytes: bytes):
    """The tokenizer a checkpoint or data directory stores: a sentencepiece model, or an imported model's
    tokenizer.json envelope (attncomp.data.hf_tokenizer)."""
    from attncomp.data.hf_tokenizer import HFTokenizer, is_hf

    return HFTokenizer.from_bytes(model_bytes) if is_hf(model_bytes) else Tokenizer(model_bytes)


def same_vocabulary(a: bytes, b: bytes) -> bool:
    """Whether two stored tokenizers give the same ids: equal bytes, or imported envelopes that differ only in
    their language choices (`data prepare --src-lang/--tgt-lang`)."""
    from attncomp.data.hf_tokenizer import is_hf, vocabulary_record

    if bytes(a) == bytes(b):
        return True
    if not (is_hf(a) and is_hf(b)):
        return False
    try:
        return vocabulary_record(a) == vocabulary_record(b)
    except (ValueError, KeyError, TypeError, AttributeError):  # a damaged record: reading it says how
        return False


def tokenizer_file(path: Path):
    return tokenizer_of(read_regular(path, limit=MAX_MODEL_BYTES << 2, what="tokenizer", error=DataError))


class Tokenizer:
    """Text <-> token ids for one sentencepiece model (attncomp's special ids: attncomp.vocab.DEFAULT)."""

    specials = replace(DEFAULT, mask=None)  # no <mask> piece: masked-LM's is the spec's (unset: <sep>'s id)

    def __init__(self, model_bytes: bytes):
        self.model_bytes = bytes(model_bytes)
        if not self.model_bytes:
            raise DataError("the sentencepiece model is empty")
        self.sp = spm.SentencePieceProcessor()
        with native("not a sentencepiece model"):  # RuntimeError/OSError with C++ messages
            self.sp.LoadFromSerializedProto(self.model_bytes)
        ids = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id(), self.sp.piece_to_id("<sep>"))
        if ids != (PAD, UNK, BOS, EOS, SEP):
            raise DataError(f"sentencepiece model has special ids {ids}; attncomp needs {(PAD, UNK, BOS, EOS, SEP)}")

    @classmethod
    def from_file(cls, path: Path) -> "Tokenizer":
        return cls(read_regular(path, limit=MAX_MODEL_BYTES, what="sentencepiece model", error=DataError))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, lines: list[str]) -> list[list[int]]:
        with native("the sentencepiece model failed to encode the text"):
            return self.sp.encode(lines)

    def encode_with_eos(self, lines: list[str]) -> list[list[int]]:
        """Ids of each line followed by </s>, on this thread alone (`data prepare` runs one per worker)."""
        with native("the sentencepiece model failed to encode the text"):
            return self.sp.encode(lines, add_eos=True, num_threads=1)

    def frame(self, body: list[int]) -> list[int]:
        """A source as the model reads it: its text and </s>."""
        return [*body, EOS]

    def frame_size(self) -> int:
        return 1

    def with_target_language(self, code):
        if code is not None:
            raise DataError("--tgt-lang: an attncomp vocabulary has no language tokens")
        return self

    def with_source_language(self, code):
        if code is not None:
            raise DataError("--src-lang: an attncomp vocabulary has no language tokens")
        return self

    def encode_source(self, lines: list[str]) -> list[list[int]]:
        return self.encode_with_eos(lines)

    def to_bytes(self) -> bytes:
        return self.model_bytes

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Ids -> text; special tokens are dropped."""
        with native("the sentencepiece model failed to decode the model's output"):
            return self.sp.decode([[i for i in seq if i > SEP] for seq in ids])


TRAINING_THREADS = 4  # fixed: sentencepiece's model depends on its number of threads, and must not on --workers


def trainer_options(vocab_size: int, character_coverage: float) -> dict:
    """Sentencepiece's training options: BPE with attncomp's special ids, on every sentence of its input
    (`data prepare` gives it a sample it chose; bench/prepare_scale.py times its baseline with these)."""
    return dict(vocab_size=vocab_size, model_type="bpe", character_coverage=character_coverage, pad_id=PAD,
                unk_id=UNK, bos_id=BOS, eos_id=EOS, user_defined_symbols=["<sep>"], input_sentence_size=0,
                num_threads=TRAINING_THREADS, minloglevel=2)


def process_context():
    """The multiprocessing context for attncomp's data workers: fork where the system has it (Linux), else
    spawn. A forked child starts at once, with what this process has loaded, and does not import the
    caller's main module again as a spawned one does."""
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def train_sentencepiece(input_file: Path, prefix: Path, vocab_size: int, character_coverage: float,
                        seed: int) -> Path:
    """A BPE model with attncomp's special ids; a vocabulary too large for the text is a clear error.

    Sentencepiece trains in a child process: the heap it grows (about 1 GB for 2M sentences) goes back to
    the system when the child ends, instead of staying in this process, and in the encoding workers
    forked from it, for the rest of a preparation; and Ctrl-C stops it at once (sentencepiece's C++ loop
    never returns to Python to see the signal)."""
    context = process_context()
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_train_in_child, args=(send, input_file, prefix, vocab_size,
                                                          character_coverage, seed), daemon=True)
    child.start()
    send.close()
    try:
        failure = receive.recv()
    except EOFError:  # it ended without a word
        failure = None
    except BaseException:  # Ctrl-C: the child would train on for minutes
        child.terminate()
        raise
    finally:
        receive.close()
        child.join()
    if failure is None:
        raise DataError(f"sentencepiece's training died (exit code {child.exitcode}; out of memory?)")
    if failure:
        raise DataError(failure)
    model = Path(f"{prefix}.model")
    _forget_paths(model, Path(input_file).name, Path(prefix).name)
    return model


def _train_in_child(send, input_file: Path, prefix: Path, vocab_size: int, character_coverage: float,
                    seed: int) -> None:
    """The child's part: train, and send "" or the one line that says why it could not."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent ends this child
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(input=str(input_file), model_prefix=str(prefix),
                                       **trainer_options(vocab_size, character_coverage))
        failure = ""
    except RuntimeError as err:
        message = str(err).splitlines()[-1] if str(err) else "sentencepiece failed"
        failure = f"sentencepiece could not train a {vocab_size}-token vocabulary: {message}"
    send.send(failure)
    send.close()


def _forget_paths(model: Path, input_name: str, prefix_name: str) -> None:
    """Keep only the file names of the training input and prefix in the model, which records them: the
    same preparation in another (temporary) directory gives the same bytes."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    del proto.trainer_spec.input[:]
    proto.trainer_spec.input.append(input_name)
    proto.trainer_spec.model_prefix = prefix_name
    model.write_bytes(proto.SerializeToString())
