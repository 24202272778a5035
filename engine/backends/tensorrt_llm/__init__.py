"""The `tensorrt_llm` backend: NVIDIA TensorRT-LLM's LLM API in process (extra `conch[trtllm]`, NVIDIA GPU).

mapping.py turns Conch's request and config into TensorRT-LLM's arguments, outputs.py its outputs into
Conch's deltas and stats (both pure, unit-tested without the package); backend.py drives `LLM`."""
