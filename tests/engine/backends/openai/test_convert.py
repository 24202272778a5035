"""Request mapping (what is forwarded, what is refused naming it) and the upstream's chunks -> deltas."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from conch.engine.backends.openai.convert import StreamState, upstream_kwargs
from conch.engine.errors import InvalidRequest
from conch.engine.repository.upstream import upstream_config
from conch.engine.types import ChatInput, GenerationRequest, RequestStatus, SamplingParams
from conch.grammars import JsonObject

CONFIG = upstream_config("m", {"base_url": "http://h/v1", "upstream_model": "up"})
CHAT = ChatInput(({"role": "user", "content": "hi"},))


def _request(**params) -> GenerationRequest:
    return GenerationRequest(id="r", model="m", chat=CHAT, prompt_token_ids=(1, 2, 3), params=SamplingParams(**params))


def test_chat_kwargs_forward_the_validated_request():
    kw = upstream_kwargs(_request(max_tokens=7, temperature=0.5, stop=("x",), seed=3, n=2,
                                  logit_bias=((5, -1.0),)), CONFIG)
    assert kw["model"] == "up" and kw["messages"] == [{"role": "user", "content": "hi"}]
    assert (kw["max_tokens"], kw["temperature"], kw["stop"], kw["seed"], kw["n"]) == (7, 0.5, ["x"], 3, 2)
    assert kw["logit_bias"] == {"5": -1.0} and kw["stream"] is True and "extra_body" not in kw
    assert "presence_penalty" not in kw and "tools" not in kw


def test_completion_kwargs_send_the_text_prompt():
    kw = upstream_kwargs(GenerationRequest(id="r", model="m", prompt="hello", prompt_token_ids=(9,)), CONFIG)
    assert kw["prompt"] == "hello" and "messages" not in kw


@pytest.mark.parametrize("params, param", [({"top_k": 5}, "top_k"), ({"ignore_eos": True}, "ignore_eos"),
                                           ({"logprobs": 2}, "logprobs")])
def test_unsendable_parameters_are_refused_by_name(params, param):
    with pytest.raises(InvalidRequest) as e:
        upstream_kwargs(_request(**params), CONFIG)
    assert e.value.param == param


def test_extra_params_go_in_extra_body_when_the_config_allows():
    config = upstream_config("m", {"base_url": "http://h/v1", "extra_params": True})
    kw = upstream_kwargs(_request(top_k=5, stop_token_ids=(2,)), config)
    assert kw["extra_body"] == {"top_k": 5, "stop_token_ids": [2]}


def test_a_grammar_cannot_be_enforced_upstream():
    with pytest.raises(InvalidRequest) as e:
        upstream_kwargs(GenerationRequest(id="r", model="m", chat=CHAT, grammar=JsonObject()), CONFIG)
    assert e.value.param == "response_format"


def _chunk(choices, usage=None):
    return NS(choices=choices, usage=usage)


def _chat_choice(index, content=None, finish=None, calls=None):
    return NS(index=index, delta=NS(content=content, tool_calls=calls), finish_reason=finish)


class _Words:
    def encode(self, text, add_special_tokens=False):
        return text.split()


def test_finals_wait_for_the_usage_and_sum_right_over_choices():
    state = StreamState(_request(n=2), _Words())
    assert [d.text for d in state.feed(_chunk([_chat_choice(0, "a"), _chat_choice(1, "b")]))] == ["a", "b"]
    assert state.feed(_chunk([_chat_choice(0, finish="length"), _chat_choice(1, finish="stop")])) == []
    state.feed(_chunk([], usage=NS(prompt_tokens=4, completion_tokens=6)))
    finals = state.finish()
    assert [f.status for f in finals] == [RequestStatus.FINISHED_LENGTH, RequestStatus.FINISHED_STOPPED]
    assert [(f.usage.prompt_tokens, f.usage.completion_tokens) for f in finals] == [(4, 0), (4, 6)]


def test_usage_is_counted_when_the_upstream_sends_none():
    state = StreamState(_request(), _Words())
    state.feed(_chunk([_chat_choice(0, "one two three", finish="stop")]))
    (final,) = state.finish()
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (3, 3)   # 3 prompt ids, 3 words


def test_upstream_tool_calls_become_hermes_text():
    state = StreamState(_request(), _Words())

    def call(name, args):
        return NS(index=0, function=NS(name=name, arguments=args))

    state.feed(_chunk([_chat_choice(0, calls=[call("get_weather", '{"city": ')])]))
    state.feed(_chunk([_chat_choice(0, calls=[call(None, '"Paris"}')], finish="tool_calls")]))
    (final,) = state.finish()
    assert final.text == '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_a_stream_that_ends_early_is_an_error():
    state = StreamState(_request(), _Words())
    state.feed(_chunk([_chat_choice(0, "partial")]))
    with pytest.raises(ValueError, match="before choice"):
        state.finish()
