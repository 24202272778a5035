"""A GGUF's transformers config from its metadata (gguf_header.py's, or transformers' fast reader's: both count
a string array's elements), built as transformers' legacy GGUF loader builds it (`load_gguf_checkpoint`'s
config: its key table GGUF_CONFIG_MAPPING, its defaults, the tied head when the file has no output.weight,
the vocabulary's size from the tokens' count) without that loader's gguf GGUFReader pass, which takes seconds
over a vocabulary and which transformers runs for every architecture it has no fast builder for (each
AutoConfig and AutoTokenizer of a GGUF: tests/engine/weights/test_gguf_config.py checks the two agree).

`register()` adds the builder to transformers' own registry of fast GGUF config builders (GGUF_CONFIG_ARCHS)
for ARCHITECTURES, never over an entry transformers has."""
from __future__ import annotations

import math
import numbers
from typing import Any, cast

# the llama.cpp architectures built here: the families the engine keeps quantized (model/gguf_layers.py); their
# legacy config has no architecture-specific step but Gemma 3's text model_type
ARCHITECTURES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma3", "phi3", "smollm3", "granite"})
_TEXT_ONLY = {"gemma3": "gemma3_text"}       # a GGUF holds the text backbone of these
# llama.cpp architectures that transformers' GGUF tables do not know, whose keys read as llama's, each the HF
# model_type of its own name (SmolLM3: a llama whose every 4th layer has no RoPE, as its HF config's default
# says; Granite: a llama with four multipliers, _OWN_KEYS)
AS_LLAMA = frozenset({"smollm3", "granite"})
# such an architecture's own keys (after "{arch}."), by the config field they set (llama.cpp's granite.py)
_OWN_KEYS = {"granite": {"attention.scale": "attention_multiplier", "embedding_scale": "embedding_multiplier",
                         "residual_scale": "residual_multiplier", "logit_scale": "logits_scaling"}}


def unreadable_keys(metadata: dict[str, Any]) -> list[str]:
    """The file's architecture's own keys (_OWN_KEYS) that hf_config cannot read as a multiplier: present and not
    a finite number (gguf_file.check_loadable refuses the file naming them)."""
    arch = str(metadata.get("general.architecture"))
    keys = (f"{arch}.{rest}" for rest in _OWN_KEYS.get(arch, {}))
    return [key for key in keys if key in metadata and not _finite_number(metadata[key])]


def _finite_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def hf_config(metadata: dict[str, Any], tensor_names: tuple[str, ...]) -> dict[str, Any]:
    """The config dict transformers' AutoConfig.for_model takes (its `model_type` included)."""
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING, GGUF_CONFIG_MAPPING

    arch = metadata["general.architecture"]
    model = "mistral" if arch == "llama" and metadata.get("general.name") == "mistral" else arch
    model = "llama" if arch in AS_LLAMA else model                   # (whose key table it reads)
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
    for rest, field in _OWN_KEYS.get(arch, {}).items():
        if f"{arch}.{rest}" in metadata:
            config[field] = float(metadata[f"{arch}.{rest}"])
    config["model_type"] = arch if arch in AS_LLAMA else _TEXT_ONLY.get(config["model_type"], config["model_type"])
    tokens = metadata.get("tokenizer.ggml.tokens")
    if "vocab_size" not in config and isinstance(tokens, int):
        config["vocab_size"] = tokens
    return config


# transformers' LlamaConfig's fields and defaults (its class), for `light`: importing that class imports
# torch.distributed.tensor through transformers.utils.type_validators (~1 s of a start, which a Qwen3's or a
# Gemma 3's config class does not pay); tests/engine/weights/test_gguf_config.py holds a light config to
# LlamaConfig's own, attribute for attribute, so a transformers that changes them fails there.
_LLAMA = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu", "max_position_embeddings": 2048,
          "initializer_range": 0.02, "rms_norm_eps": 1e-6, "use_cache": True, "pad_token_id": None, "bos_token_id": 1,
          "eos_token_id": 2, "pretraining_tp": 1, "tie_word_embeddings": False, "rope_parameters": None,
          "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "head_dim": None}
LIGHT = {"llama": _LLAMA}           # model_type -> its config class's defaults


def light(config: dict[str, Any]) -> Any | None:
    """A transformers PreTrainedConfig with the attributes the model type's own config class would give
    `config` (hf_config's dict), built without importing that class; None for a type outside LIGHT. What reads
    only a config's attributes (gguf_skeleton.py, the flattened runner) takes it; transformers' modeling needs
    `full` of it."""
    defaults = LIGHT.get(config["model_type"])
    if defaults is None:
        return None
    from transformers.configuration_utils import PreTrainedConfig

    values = {**defaults, **config}
    values["head_dim"] = values["head_dim"] or values["hidden_size"] // values["num_attention_heads"]
    values["num_key_value_heads"] = values["num_key_value_heads"] or values["num_attention_heads"]
    out = PreTrainedConfig(**values)
    out.standardize_rope_params()
    return out


def full(config: Any) -> Any:
    """transformers' own config class for a `light` config (its modeling builds from that class); any other
    config as it is."""
    from transformers.configuration_utils import PreTrainedConfig

    if type(config) is not PreTrainedConfig:
        return config
    from transformers import AutoConfig

    defaults = LIGHT[config.model_type]
    return AutoConfig.for_model(config.model_type, **{key: getattr(config, key, default)   # (use_cache: not kept
                                                      for key, default in defaults.items()})  # by the base class)


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
