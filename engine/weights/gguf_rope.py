"""The RoPE a GGUF holds outside the keys transformers' GGUF config reads, made its config's rope_parameters, so
every forward built from the config (the flattened runner's rotary table, transformers' rotary embedding)
rotates as llama.cpp does. Without it a file is served with plain RoPE: logprobs off by units within 60
positions. RULES, by llama.cpp architecture: (the config's rope_parameters, the file's metadata, its rope_*
tensors' values, head_dim) -> rope_parameters; ValueError where the file's RoPE is not one it can state.

- `llama`: Llama 3.1+'s scaling, which llama.cpp's converter writes as no key but a `rope_freqs.weight` tensor,
  one factor per rotary pair (llama.cpp divides the pair's angle by it); `llama3_parameters` recovers the
  `llama3` rope_parameters that give the file's factors.
- every architecture: a scaling named by `{arch}.rope.scaling.type` (`linear`: Llama 2 long-context
  fine-tunes, Gemma 3 4B-27B's global layers; `yarn`: Qwen2.5 / Qwen3 past their native context), with its
  factor, original context and YaRN betas; Gemma 3's apply to its global layers, and `rope.freq_base_swa` sets
  its local layers' base.
- `phi3`: the partial rotary dimension (`phi3.rope.dimension_count`: Phi-4-mini rotates 96 of 128) and
  `longrope` (`rope_factors_long` / `rope_factors_short`, `phi3.rope.scaling.original_context_length` and
  `.attn_factor`: Phi-3.5, Phi-3-128k, Phi-4-mini).

Llama 3's factors:

The factors, per pair i of inverse frequency w_i = base^(-2i/D) and wavelength L_i = 2 pi / w_i (transformers'
`_compute_llama3_parameters`, llama.cpp's converter): 1 where L_i < C / high, `factor` where L_i > C / low, and
between, 1 / ((1 - s_i) / factor + s_i) with s_i = (C / L_i - low) / (high - low), linear in 1 / L_i. The pairs
between give that line, s = a / L + b; any (C, low, high) with C / (high - low) = a and -low / (high - low) = b
gives the same factors, so low is taken as 1 (Llama 3's own). With no pair between (a short rotary dimension),
any bounds in the gap between the plain and the scaled pairs give them. Factors that no llama3 scaling gives
back are refused."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

_CLOSE = 1e-4           # relative: the file's factors are float32


def llama3_parameters(factors: np.ndarray, head_dim: int, base: float) -> dict[str, Any] | None:
    """The `llama3` rope_parameters giving `factors` ((head_dim / 2,) per pair, llama.cpp's rope_freqs) over
    RoPE base `base`; None where every factor is 1 (plain RoPE). ValueError where no llama3 scaling gives them."""
    f = np.asarray(factors, dtype=np.float64)
    wavelength = _wavelengths(base, head_dim)
    if f.shape != wavelength.shape:
        raise ValueError(f"rope_freqs has {f.size} factors for a rotary dimension of {head_dim}")
    factor = float(f.max())
    if np.allclose(f, 1.0, rtol=_CLOSE, atol=0):
        return None
    between = (f > 1 + _CLOSE) & (f < factor * (1 - _CLOSE))
    if between.sum() >= 2:
        context, high = _fitted(f[between], wavelength[between], factor)
    elif not between.any():
        context, high = _step(f, wavelength, factor)
    else:
        raise ValueError("rope_freqs with one smoothed pair: which Llama 3 RoPE scaling gives it is not known")
    params = {"rope_type": "llama3", "rope_theta": float(base), "factor": float(_whole(factor)),
              "low_freq_factor": 1.0, "high_freq_factor": float(_whole(high)),
              "original_max_position_embeddings": _whole(context)}
    if not (high > 1 and context > 0 and np.allclose(llama3_factors(params, head_dim), f, rtol=_CLOSE, atol=0)):
        raise ValueError("rope_freqs that no Llama 3 RoPE scaling gives")
    return params


def _fitted(f: np.ndarray, wavelength: np.ndarray, factor: float) -> tuple[float, float]:
    """(original context, high_freq_factor) of the line s = a / L + b through the smoothed pairs (low = 1)."""
    s = (1 / f - 1 / factor) / (1 - 1 / factor)
    a, b = np.polyfit(1 / wavelength, s, 1)
    return (-a / b, 1 - 1 / b) if b < 0 else (0.0, 0.0)         # (refused by the caller's check)


def _step(f: np.ndarray, wavelength: np.ndarray, factor: float) -> tuple[float, float]:
    """(original context, high_freq_factor) of factors that step from 1 to `factor` with no pair between (a
    short rotary dimension): bounds set in the gap between the two wavelengths about it (any such gives them)."""
    plain, scaled = wavelength[f <= 1 + _CLOSE], wavelength[f >= factor * (1 - _CLOSE)]
    if not len(plain) or not len(scaled) or plain.max() >= scaled.min():
        return 0.0, 0.0                                              # (refused by the caller's check)
    context = math.sqrt(plain.max() * scaled.min())                 # C / low, low = 1: below every scaled pair
    return context, math.sqrt(context / plain.max())          # C / high: above every plain pair


def llama3_factors(params: dict[str, Any], head_dim: int) -> np.ndarray:
    """(head_dim / 2,) the factor each pair's angle is divided by under `params` (transformers' llama3 rule)."""
    wavelength = _wavelengths(params["rope_theta"], head_dim)
    factor, low, high = params["factor"], params["low_freq_factor"], params["high_freq_factor"]
    context = params["original_max_position_embeddings"]
    s = (context / wavelength - low) / (high - low)
    smoothed = 1 / ((1 - s) / factor + s)
    return np.where(wavelength < context / high, 1.0, np.where(wavelength > context / low, factor, smoothed))


def _wavelengths(base: float, head_dim: int) -> np.ndarray:
    """(head_dim / 2,) each rotary pair's wavelength 2 pi / w_i, w_i = base^(-2i / head_dim)."""
    return 2 * math.pi * base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def _whole(x: float) -> Any:
    """A value the fit gives as 8191.9996 or 3.9999995: the whole number it is (else itself)."""
    return round(x) if abs(x - round(x)) <= 1e-3 * max(1.0, abs(x)) else x


def _scaling(rope: dict[str, Any], metadata: dict[str, Any], arch: str) -> dict[str, Any]:
    """`rope` with the scaling `{arch}.rope.scaling.*` names (none, linear, yarn)."""
    key = f"{arch}.rope.scaling."
    kind = str(metadata.get(key + "type", "none"))
    factor = float(metadata.get(key + "factor", 1.0))
    if kind == "none" or (kind == "linear" and factor == 1.0):
        return rope
    if kind == "linear":
        return {**rope, "rope_type": "linear", "factor": factor}
    if kind != "yarn":
        raise ValueError(f"RoPE scaling '{kind}' on a '{arch}' model")
    if float(metadata.get(key + "yarn_ext_factor", 1.0)) != 1.0 or key + "yarn_log_multiplier" in metadata:
        raise ValueError("a YaRN extrapolation factor or log multiplier other than YaRN's own")
    out = {**rope, "rope_type": "yarn", "factor": factor,
           "original_max_position_embeddings": int(metadata[key + "original_context_length"])}
    for name, ours in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow"),
                       ("yarn_attn_factor", "attention_factor")):
        if key + name in metadata:
            out[ours] = float(metadata[key + name])
    return out


def _plain(arch: str) -> Rule:
    """A family whose RoPE a GGUF states in keys alone (qwen2, qwen3)."""
    return lambda rope, metadata, tensors, head_dim: _scaling(rope, metadata, arch)


def _llama(rope: dict[str, Any], metadata: dict[str, Any], tensors: dict[str, np.ndarray],
           head_dim: int) -> dict[str, Any]:
    factors = tensors.get("rope_freqs.weight")
    if factors is None:
        return _scaling(rope, metadata, "llama")
    if rope.get("rope_type", "default") != "default" or "llama.rope.scaling.type" in metadata:
        raise ValueError("rope_freqs beside another RoPE scaling")
    return llama3_parameters(factors, head_dim, float(rope["rope_theta"])) or rope


def _gemma3(rope: dict[str, Any], metadata: dict[str, Any], tensors: dict[str, np.ndarray],
            head_dim: int) -> dict[str, Any]:
    """rope: {"full_attention": .., "sliding_attention": ..} (transformers' Gemma 3 keeps one per layer type)."""
    out = {**rope, "full_attention": _scaling(dict(rope["full_attention"]), metadata, "gemma3")}
    if "gemma3.rope.freq_base_swa" in metadata:
        out["sliding_attention"] = {**rope["sliding_attention"],
                                    "rope_theta": float(metadata["gemma3.rope.freq_base_swa"])}
    return out


def _phi3(rope: dict[str, Any], metadata: dict[str, Any], tensors: dict[str, np.ndarray],
          head_dim: int) -> dict[str, Any]:
    out = dict(rope)
    rotary = int(metadata.get("phi3.rope.dimension_count", head_dim))
    if rotary != head_dim:
        out["partial_rotary_factor"] = rotary / head_dim
    long, short = tensors.get("rope_factors_long.weight"), tensors.get("rope_factors_short.weight")
    if long is None and short is None:
        return out
    original = metadata.get("phi3.rope.scaling.original_context_length")
    if long is None or short is None or not original:
        raise ValueError("longrope factors without both rope_factors_long and rope_factors_short and "
                         "phi3.rope.scaling.original_context_length")
    out.update(rope_type="longrope", long_factor=[float(x) for x in long], short_factor=[float(x) for x in short],
               original_max_position_embeddings=int(original))
    if metadata.get("phi3.rope.scaling.attn_factor"):
        out["attention_factor"] = float(metadata["phi3.rope.scaling.attn_factor"])
    return out


Rule = Callable[[dict[str, Any], dict[str, Any], dict[str, np.ndarray], int], dict[str, Any]]
RULES: dict[str, Rule] = {"llama": _llama, "qwen2": _plain("qwen2"), "qwen3": _plain("qwen3"),
                          "gemma3": _gemma3, "phi3": _phi3, "smollm3": _plain("smollm3"),
                          "granite": _plain("granite")}
