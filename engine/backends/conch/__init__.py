"""Conch's own engine: PyTorch on the CPU, its flattened forward and native kernels, continuous batching with its own
scheduler (config `backend: conch`; `transformers`, its former name, is read as it)."""
