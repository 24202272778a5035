"""KV stores: the flattened runner's slots, the HF runner's padded cache, the prefix cache, huge-page memory."""
