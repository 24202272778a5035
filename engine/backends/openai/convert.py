"""A validated GenerationRequest -> the upstream's request, and the upstream's stream -> GenerationDeltas.

What is forwarded: max_tokens, temperature, top_p, n, seed, stop, presence/frequency penalties, logit_bias;
with `extra_params: true` also vLLM's top_k, min_p, repetition_penalty, stop_token_ids, ignore_eos and
include_stop_str_in_output (as extra_body). Anything else that would change the answer and cannot be sent
is a 400 naming it: logprobs, a grammar (structured outputs cannot be enforced remotely), and those
extensions when `extra_params` is off. With `supports_tools`, a chat's tools, tool_choice and
response_format travel as given (ChatInput); the upstream's tool calls come back as hermes `<tool_call>`
text, which the gateway's parser turns into the client's tool calls as it does for a local model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from conch.engine.errors import InvalidRequest
from conch.engine.repository.upstream import UpstreamConfig
from conch.engine.types import GenerationDelta, GenerationRequest, RequestStatus, Usage

_FINISH = {"stop": RequestStatus.FINISHED_STOPPED, "length": RequestStatus.FINISHED_LENGTH,
           "tool_calls": RequestStatus.FINISHED_STOPPED, "function_call": RequestStatus.FINISHED_STOPPED,
           "content_filter": RequestStatus.FINISHED_STOPPED, "abort": RequestStatus.FINISHED_ABORTED,
           "error": RequestStatus.FINISHED_ERROR}

# vLLM's sampling extensions: (SamplingParams field, its value when unset)
_EXTRA = (("top_k", 0), ("min_p", 0.0), ("repetition_penalty", 1.0), ("stop_token_ids", ()),
          ("ignore_eos", False), ("include_stop_str_in_output", False))


def upstream_kwargs(request: GenerationRequest, config: UpstreamConfig) -> dict[str, Any]:
    """Keyword arguments of `chat.completions.create` (request.chat set) or `completions.create`."""
    p = request.params
    _check(request, config)
    kw: dict[str, Any] = {"model": config.upstream_model, "stream": True, "stream_options": {"include_usage": True},
                          "temperature": p.temperature, "top_p": p.top_p, "n": p.n}
    optional = {"max_tokens": p.max_tokens, "seed": p.seed, "stop": list(p.stop) or None,
                "presence_penalty": p.presence_penalty or None, "frequency_penalty": p.frequency_penalty or None,
                "logit_bias": {str(t): b for t, b in p.logit_bias} or None}
    kw.update({k: v for k, v in optional.items() if v is not None})
    extra = {name: _plain(getattr(p, name)) for name, unset in _EXTRA if getattr(p, name) != unset}
    if extra:
        kw["extra_body"] = extra
    if request.chat is None:
        kw["prompt"] = request.prompt if request.prompt is not None else list(request.prompt_token_ids or ())
        return kw
    chat = request.chat
    kw["messages"] = list(chat.messages)
    tools = {"tools": list(chat.tools) or None, "tool_choice": chat.tool_choice,
             "parallel_tool_calls": chat.parallel_tool_calls, "response_format": chat.response_format}
    kw.update({k: v for k, v in tools.items() if v is not None})
    return kw


def _check(request: GenerationRequest, config: UpstreamConfig) -> None:
    p = request.params
    if p.logprobs is not None:
        raise InvalidRequest(f"logprobs are not available from model '{request.model}' (an upstream server)",
                             param="logprobs")
    if request.grammar is not None:
        raise InvalidRequest(f"model '{request.model}' is served by an upstream server, which Conch cannot "
                             f"constrain: structured outputs are not available for it", param="response_format")
    if not config.extra_params:
        unsent = [name for name, unset in _EXTRA if getattr(p, name) != unset]
        if unsent:
            raise InvalidRequest(f"model '{request.model}' (an upstream server) does not take {unsent}; set "
                                 f"extra_params: true in its config if the upstream does", param=unsent[0])


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    calls: dict[int, dict] = field(default_factory=dict)     # upstream tool-call index -> name, arguments
    final: GenerationDelta | None = None


class StreamState:
    """Folds the upstream's chunks into deltas. A choice's finish is held until the stream ends, so that its
    final delta carries the usage (which the upstream sends after every finish); see `finish`."""

    def __init__(self, request: GenerationRequest, tokenizer) -> None:
        self.request, self.tokenizer = request, tokenizer
        self.choices: dict[int, _Choice] = {}
        self.usage: Usage | None = None

    def feed(self, chunk: Any) -> list[GenerationDelta]:
        if getattr(chunk, "usage", None) is not None:
            self.usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        out = []
        for c in chunk.choices:
            choice = self.choices.setdefault(c.index, _Choice())
            text = _text(c, choice)
            if text:
                choice.text.append(text)
                out.append(GenerationDelta(self.request.id, c.index, text=text))
            if c.finish_reason is not None:
                status = _FINISH.get(c.finish_reason, RequestStatus.FINISHED_STOPPED)
                choice.final = GenerationDelta(self.request.id, c.index, text=_calls_text(choice), status=status,
                                               stop_reason=getattr(c, "stop_reason", None))
        return out

    def finish(self) -> list[GenerationDelta]:
        """Every choice's final delta, with usage: the upstream's (all its completion tokens on the last
        choice, so that sums over choices are right), else counted here."""
        finals = [self.choices.get(i, _Choice()).final for i in range(self.request.params.n)]
        missing = [i for i, final in enumerate(finals) if final is None]
        if missing:
            raise ValueError(f"the stream ended before choice(s) {missing} finished")
        usages = self._usages()
        return [replace(f, usage=u) for f, u in zip(finals, usages, strict=True) if f is not None]

    def _usages(self) -> list[Usage]:
        n = self.request.params.n
        if self.usage is not None:
            return [Usage(self.usage.prompt_tokens, 0)] * (n - 1) + [self.usage]
        prompt = len(self.request.prompt_token_ids or ())
        return [Usage(prompt, len(self.tokenizer.encode("".join(self.choices[i].text), add_special_tokens=False)))
                for i in range(n)]


def _text(c: Any, choice: _Choice) -> str:
    """A chunk choice's new text (completions: .text; chat: .delta.content), gathering tool-call pieces."""
    delta = getattr(c, "delta", None)
    if delta is None:
        return c.text or ""
    for call in delta.tool_calls or ():
        slot = choice.calls.setdefault(call.index, {"name": "", "arguments": ""})
        if call.function is not None:
            slot["name"] += call.function.name or ""
            slot["arguments"] += call.function.arguments or ""
    return delta.content or ""


def _calls_text(choice: _Choice) -> str:
    """The upstream's tool calls as hermes blocks (what the gateway's tool parser reads)."""
    blocks = []
    for _, call in sorted(choice.calls.items()):
        try:
            arguments = json.loads(call["arguments"] or "{}")
        except ValueError:
            arguments = call["arguments"]
        blocks.append("<tool_call>\n" + json.dumps({"name": call["name"], "arguments": arguments},
                                                   ensure_ascii=False) + "\n</tool_call>")
    return ("\n" if blocks and choice.text else "") + "\n".join(blocks)
