"""`attncomp sweep`: train many specs with the same data and budget and tabulate them beside the paper.

state.py (the resumable sweep directory), run.py (train and score the rows), evaluate.py (validation
perplexity and BLEU), table.py (Markdown, CSV, JSON, a chart, TensorBoard HParams), paper.py (Table 3).
"""
