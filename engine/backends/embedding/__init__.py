"""The `embedding` backend: a sentence-transformers style encoder (transformer, pooling, normalize)."""
