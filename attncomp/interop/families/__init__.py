"""The Hugging Face families attncomp imports: one table entry each (attncomp.interop.mapping reads them),
and the families it refuses, each with the one thing it lacks.

A spec key's value is a config attribute (`Key`), a function of transformers' config object or a
constant; dropout is the config's own where it has one. docs/interop.md prints this table in words.
"""

from __future__ import annotations

from attncomp.interop.families.decoders import (BLOOM, FALCON, GEMMA, GEMMA2, GEMMA3_TEXT, GPT2, GPT_NEOX, GPTJ, LLAMA,
                                                MISTRAL, OLMO, OLMO2, OPT, PHI, PHI3, QWEN2, QWEN3, STABLELM)
from attncomp.interop.families.experts import MIXTRAL, OLMOE, QWEN2_MOE, QWEN3_MOE
from attncomp.interop.families.encoders import ALBERT, BERT, DISTILBERT, ELECTRA, MODERNBERT, ROBERTA, XLM_ROBERTA
from attncomp.interop.families.seq2seq import BART, M2M100, MARIAN, MBART, MT5, T5, UMT5

IMPORTED = {f.model_type: f for f in (MARIAN, BART, MBART, M2M100, T5, MT5, UMT5, LLAMA, MISTRAL, QWEN2, QWEN3, OLMO, OLMO2,
                                      STABLELM, GEMMA, GEMMA2, GEMMA3_TEXT, GPT2, GPT_NEOX, BLOOM, OPT, PHI, PHI3, GPTJ,
                                      FALCON, BERT, ROBERTA, XLM_ROBERTA, DISTILBERT, ELECTRA, MODERNBERT, ALBERT,
                                      MIXTRAL, QWEN2_MOE, QWEN3_MOE, OLMOE)}

# model_type -> what has no spec equivalent (refused before anything else is read)
REFUSED = {
    "gemma3": "a vision tower (Gemma3ForConditionalGeneration; the text-only model_type gemma3_text imports)",
    "nllb-moe": "mixture-of-experts feed-forwards in an encoder-decoder (expert capacity, sparse steps)",
}
