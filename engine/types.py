"""The messages that cross the gateway -> engine -> backend boundary. Plain frozen dataclasses only."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from conch.engine.images import ImageInput
from conch.grammars.spec import GrammarSpec


class RequestStatus(enum.IntEnum):
    """Ordered: a request is finished once its status is past RUNNING."""

    WAITING = 0
    RUNNING = 1
    FINISHED_STOPPED = 2   # EOS, a stop token id or a stop string
    FINISHED_LENGTH = 3    # max_tokens or the context length
    FINISHED_ABORTED = 4   # the client went away or the request was cancelled
    FINISHED_TOOL_CALLS = 5  # set by agents when the text parsed as tool calls
    FINISHED_ERROR = 6

    @property
    def is_finished(self) -> bool:
        return self > RequestStatus.RUNNING

    @property
    def finish_reason(self) -> str | None:
        return _FINISH_REASONS.get(self)


_FINISH_REASONS = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
    RequestStatus.FINISHED_TOOL_CALLS: "tool_calls",
    RequestStatus.FINISHED_ERROR: "error",
}


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters, built by engine/params (its table holds each one's type, range and wire names)
    and checked again by Engine.prepare."""

    max_tokens: int | None = 16  # None = up to the end of the context (filled in by Engine.prepare)
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0              # 0 = off (engine/params/sampling.py turns a face's -1 into 0)
    min_p: float = 0.0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    n: int = 1
    logprobs: int | None = None  # None = off; k = also return the k most likely tokens (k <= 20)
    include_stop_str_in_output: bool = False
    prompt_logprobs: int | None = None  # None = off; k = each prompt token's logprob and the k most likely there
    min_tokens: int = 0          # EOS, stop_token_ids and stop strings do not end a choice before this many tokens
    speculative_tokens: int | None = None  # most tokens a multi-token decode step proposes for this request, under
                                           # the model's own `speculative_tokens` (0: off); None: the model's
    model_defaults: frozenset[str] = frozenset()  # fields the client left out, which take the model's generation
                                           # defaults (its generation_config.json or GGUF sampling metadata) in
                                           # Engine.prepare; set by build_sampling, empty for params built in code

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def deterministic(self) -> bool:
        return self.greedy or self.seed is not None


@dataclass(frozen=True)
class ChatInput:
    """A chat request's validated messages, for a backend that takes chat itself (Capabilities.chat_input:
    an upstream server renders its own template). Plain OpenAI dicts, as the gateway validated them."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()       # forwarded only to a backend with Capabilities.native_tools
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """Everything the messages say, one line per message, for counting tokens."""
        return "\n".join(f"{m.get('role')}: {_content(m.get('content'))}" for m in self.messages)


def _content(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content or ""


@dataclass(frozen=True)
class ReasoningControl:
    """A reasoning model's thinking, as token ids the engine watches (agents/reasoning names the texts).

    `phase` is where the reply starts (0: the model may open thinking with `start_ids` or answer at once,
    1: inside thinking, 2: answering). While thinking, no grammar applies; once the output ends with
    `end_ids`, or after `budget` thinking tokens the engine forces `forced_ids` (the end text and its
    separator), the reply is the answer and the request's grammar starts there. budget None: unbounded;
    0: no thinking (the start is masked, or the end forced at once)."""

    start_ids: tuple[int, ...]
    end_ids: tuple[int, ...]
    forced_ids: tuple[int, ...]
    phase: int = 0
    budget: int | None = None


@dataclass(frozen=True)
class GenerationRequest:
    """One generation. Exactly one of `prompt` / `prompt_token_ids` / `chat` is given (tokenize adds ids)."""

    id: str                      # the caller's label (may repeat); Engine.generate keys the request by its own id
    model: str
    prompt: str | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    params: SamplingParams = field(default_factory=SamplingParams)
    grammar: GrammarSpec | None = None   # the output constraint (engine/params/constraint.py builds it)
    priority: int = 0            # lower runs first, as in Triton's priority levels
    deadline: float | None = None  # time.monotonic() after which the request is dropped
    stream: bool = False
    version: str | None = None
    add_special_tokens: bool = True
    use_cache: bool = True       # False: bypass the response cache (the client opted out)
    chat: ChatInput | None = None  # set instead of `prompt` for a Capabilities.chat_input backend
    # True: a max_tokens past the context's room is a ceiling, cut to that room (the request may end `length`),
    # as llama.cpp and Anthropic read it; False: such a request is refused (ContextLengthExceeded).
    max_tokens_ceiling: bool = False
    session: str | None = None   # the client's conversation key (a session header, prompt_cache_key): routing only
    reasoning: ReasoningControl | None = None  # a reasoning model's thinking: where the grammar starts, its budget
    images: tuple[ImageInput, ...] = ()  # in the order of their placeholders in the prompt (engine/images.py)


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    token: str
    logprob: float


@dataclass(frozen=True)
class PositionLogprobs:
    """The chosen token's logprob and the top-k alternatives at one position."""

    chosen: TokenLogprob
    top: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0      # prompt tokens whose KV was reused (the prefix cache or a kept slot), not computed
    reasoning_tokens: int = 0   # completion tokens spent thinking (the end text included)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class GenerationDelta:
    """New output of one sequence since its last delta. The last delta of a sequence has `status` finished."""

    request_id: str
    index: int = 0                      # which of the n choices
    token_ids: tuple[int, ...] = ()
    text: str = ""
    logprobs: tuple[PositionLogprobs, ...] = ()
    status: RequestStatus = RequestStatus.RUNNING
    usage: Usage | None = None          # set on the final delta
    error: str | None = None
    # With `error`: True when the request's own constraint failed (its grammar reached a state no token
    # continues): the request's fault, a 400 where no answer has started; else the engine's (a 500).
    error_is_request: bool = False
    stop_reason: str | int | None = None  # the stop string or token id that ended it
    # With params.prompt_logprobs: on a choice's first delta, one entry per prompt token from the second on
    # (the first token has no context), so len == prompt tokens - 1.
    prompt_logprobs: tuple[PositionLogprobs, ...] = ()
    cached_tokens: int = 0              # prompt tokens reused so far (Usage.cached_tokens, known before the end)

    @property
    def finished(self) -> bool:
        return self.status.is_finished

    @property
    def finish_reason(self) -> str | None:
        return self.status.finish_reason
