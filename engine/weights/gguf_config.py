"""A GGUF's transformers config from its metadata (gguf_header.py's, or transformers' fast reader's: both count
a string array's elements), built as transformers' legacy GGUF loader builds it (`load_gguf_checkpoint`'s
config: its key table GGUF_CONFIG_MAPPING, its defaults, the tied head when the file has no output.weight,
the vocabulary's size from the tokens' count) without that loader's gguf GGUFReader pass, which takes seconds
over a vocabulary and which transformers runs for every architecture it has no fast builder for (each
AutoConfig and AutoTokenizer of a GGUF: tests/engine/weights/test_gguf_config.py checks the two agree).

`register()` adds the builder to transformers' own registry of fast GGUF config builders (GGUF_CONFIG_ARCHS)
for ARCHITECTURES, never over an entry transformers has."""
from __future__ import annotations

from typing import Any, cast

# the llama.cpp architectures built here: the families the engine keeps quantized (model/gguf_layers.py) and
# Phi-3; their legacy config has no architecture-specific step but Gemma 3's text model_type
ARCHITECTURES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma3", "phi3"})
_TEXT_ONLY = {"gemma3": "gemma3_text"}       # a GGUF holds the text backbone of these


def hf_config(metadata: dict[str, Any], tensor_names: tuple[str, ...]) -> dict[str, Any]:
    """The config dict transformers' AutoConfig.for_model takes (its `model_type` included)."""
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING, GGUF_CONFIG_MAPPING

    arch = metadata["general.architecture"]
    model = "mistral" if arch == "llama" and metadata.get("general.name") == "mistral" else arch
    config: dict[str, Any] = {"tie_word_embeddings": "output.weight" not in tensor_names}
    for key, default in GGUF_CONFIG_DEFAULTS_MAPPING.get(model, GGUF_CONFIG_DEFAULTS_MAPPING.get(arch) or {}).items():
        config.setdefault(key, default)
    for key, value in metadata.items():
        prefix, _, rest = key.replace(arch, model).partition(".")
        renamed = cast(dict[str, Any], GGUF_CONFIG_MAPPING.get(prefix) or {}).get(rest)
        if renamed is None or renamed == -1:
            continue
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        config[renamed] = value.replace(arch, model) if isinstance(value, str) else value
    config["model_type"] = _TEXT_ONLY.get(config["model_type"], config["model_type"])
    tokens = metadata.get("tokenizer.ggml.tokens")
    if "vocab_size" not in config and isinstance(tokens, int):
        config["vocab_size"] = tokens
    return config


def register() -> None:
    """transformers' AutoConfig and AutoTokenizer of a GGUF of ARCHITECTURES build its config here (where the
    installed transformers has that registry)."""
    try:
        from transformers.integrations.gguf import GGUF_CONFIG_ARCHS
    except ImportError:                     # an older transformers: its legacy loader builds every config
        return
    for arch in ARCHITECTURES:
        GGUF_CONFIG_ARCHS.setdefault(arch, hf_config)


def as_llama_cpp_reads(config: Any, metadata: dict[str, Any]) -> None:
    """What llama.cpp reads from a file that transformers' GGUF config leaves at its class's default, set on
    `config` (built for the file): Gemma 3's query scale (llama.cpp's gemma3.cpp: 1 / sqrt(head_dim), but 1 /
    sqrt(hidden / heads) for its 62-layer 27B; transformers' default query_pre_attn_scalar is 256, wrong for the
    27B's 168) and its final logit soft-capping where the file names one."""
    if metadata.get("general.architecture") != "gemma3":
        return
    hidden, heads = int(metadata["gemma3.embedding_length"]), int(metadata["gemma3.attention.head_count"])
    head_dim = int(metadata.get("gemma3.attention.key_length", hidden // heads))
    config.query_pre_attn_scalar = hidden // heads if int(metadata["gemma3.block_count"]) == 62 else head_dim
    if metadata.get("gemma3.final_logit_softcapping"):
        config.final_logit_softcapping = float(metadata["gemma3.final_logit_softcapping"])
