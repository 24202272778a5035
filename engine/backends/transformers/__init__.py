"""The built-in PyTorch/transformers backend with Conch's own continuous-batching scheduler."""
