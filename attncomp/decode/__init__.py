"""The runtime's decoding: beam search over a compiled model, translation, scoring."""
