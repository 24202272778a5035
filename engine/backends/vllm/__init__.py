"""The `vllm` backend: vLLM's AsyncLLM in process (backend.py), its engine args (args.py), the request
mapping (sampling.py), the output mapping (output.py) and its scheduler stats (stats.py)."""
