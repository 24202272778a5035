"""The one table of sampling parameters: name, type, range, aliases, default, and which faces take it.

Every face reads its wire into a name -> value mapping and hands it to `build_sampling` (engine/params/
sampling.py), which checks each value against its row here; a new sampling parameter is one row here and one
field of SamplingParams. Limits are OpenAI's where OpenAI has one (temperature 0..2, top_p 0..1, penalties
-2..2, logit_bias -100..100, logprobs 0..20, n 1..128), vLLM's otherwise (top_k -1/0 = off, min_p 0..1,
a 64-bit seed), and Conch's where the sampler needs a bound to stay finite (repetition_penalty in
[0.01, 100]: vLLM takes any value above 0, and a logit divided by 1e-300 is inf). The name is the
SamplingParams field (vLLM's name); `aliases` are other wire names for it (OpenAI's `top_logprobs`). The
default is the SamplingParams field's default, never a second copy.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields

from conch.engine.types import SamplingParams

INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Param:
    name: str                          # the SamplingParams field
    kind: str                          # a reader in engine/params/kinds.py: int, float, bool, strings, ints, bias
    low: float | None = None           # inclusive unless low_open
    high: float | None = None          # inclusive
    low_open: bool = False
    aliases: tuple[str, ...] = ()
    tensor: bool = True                # taken by the tensor faces (/v2 generate, gRPC, sampling_parameters)
    high_open: bool = False

    @property
    def default(self):
        return _DEFAULTS[self.name]

    def bounds(self) -> str:
        left = "(" if self.low_open else "["
        right = ")" if self.high_open or self.high is None else "]"
        return f"{left}{_num(self.low)}, {_num(self.high)}{right}"


def _num(value: float | None) -> str:
    return "inf" if value is None else str(value) if isinstance(value, int) else f"{value:g}"


PARAMS: tuple[Param, ...] = (
    Param("max_tokens", "int", 0, INT_MAX, aliases=("max_completion_tokens",)),   # 0 only when scoring the prompt
    Param("min_tokens", "int", 0, INT_MAX),
    Param("temperature", "float", 0.0, 2.0),
    Param("top_p", "float", 0.0, 1.0, low_open=True),   # top_p = 0 would keep no token
    Param("top_k", "int", -1, None),                    # -1 and 0 are off; above the vocabulary is all of it
    Param("min_p", "float", 0.0, 1.0),
    Param("seed", "int", -2**63, 2**64, high_open=True),  # torch.Generator takes any 64-bit value
    Param("presence_penalty", "float", -2.0, 2.0),
    Param("frequency_penalty", "float", -2.0, 2.0),
    Param("repetition_penalty", "float", 0.01, 100.0),    # 1/100..100: logits * or / it stay finite
    Param("logit_bias", "bias", -100.0, 100.0, tensor=False),     # the range of each bias; keys are token ids
    Param("stop", "strings", 0, 16),                    # the number of stop strings; each is non-empty
    Param("stop_token_ids", "ints", 0, None),           # each id >= 0; Engine.prepare checks the vocabulary
    Param("ignore_eos", "bool"),
    Param("include_stop_str_in_output", "bool"),
    Param("n", "int", 1, 128, tensor=False),
    Param("logprobs", "int", 0, 20, aliases=("top_logprobs",), tensor=False),
    Param("prompt_logprobs", "int", 0, 20, tensor=False),
    Param("speculative_tokens", "int", 0, 64),          # a cap under the model's setting (Capabilities.speculation)
)
BY_NAME: dict[str, Param] = {p.name: p for p in PARAMS}
BY_WIRE_NAME: dict[str, Param] = {**BY_NAME, **{a: p for p in PARAMS for a in p.aliases}}
# What a model's own generation defaults may set where a request leaves it out (engine/params/model_defaults.py)
DEFAULTABLE = frozenset({"temperature", "top_p", "top_k", "min_p", "repetition_penalty"})
TENSOR_NAMES = frozenset(n for n, p in BY_WIRE_NAME.items() if p.tensor)

_DEFAULTS = {f.name: f.default for f in fields(SamplingParams) if f.default is not MISSING}   # every row has one
