"""Benchmarks: quality (BLEU side by side), throughput (GPU), the paper's parameter table."""
