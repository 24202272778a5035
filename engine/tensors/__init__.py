"""Triton's tensor interface: named numpy tensors in and out of a model (interface.py), the LLM tensor contract
(contract.py) over `Engine.generate` (llm.py), its parameters (sampling.py, structured.py), and a config as
Triton's message (triton_config.py). The KServe v2 and gRPC faces and ensembles speak it."""
