"""The model forward: the flattened Llama-family forward, its families, weights, products and kernels."""
