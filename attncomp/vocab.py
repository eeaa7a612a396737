"""Special token ids, the same in every attncomp vocabulary (sentencepiece is trained with them)."""

PAD, UNK, BOS, EOS, SEP = 0, 1, 2, 3, 4
SPECIAL_TOKENS = 5
