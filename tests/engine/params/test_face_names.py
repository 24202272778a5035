"""build_sampling names a bad field as the face's client wrote it (`names`): Anthropic's `stop_sequences`,
Responses' `max_output_tokens` / `top_logprobs`, with no rewriting of the message afterwards."""
from __future__ import annotations

import pytest

from conch.engine import InvalidRequest, build_sampling

ANTHROPIC = {"stop": "stop_sequences"}
RESPONSES = {"max_tokens": "max_output_tokens", "logprobs": "top_logprobs"}


@pytest.mark.parametrize(("values", "names", "param"), [
    ({"stop": [""]}, ANTHROPIC, "stop_sequences"),
    ({"max_tokens": -1}, RESPONSES, "max_output_tokens"),
    ({"logprobs": 99}, RESPONSES, "top_logprobs"),
    ({"max_tokens": 2, "min_tokens": 3}, RESPONSES, "min_tokens"),
])
def test_a_bad_value_is_refused_in_the_faces_names(values, names, param):
    with pytest.raises(InvalidRequest) as refused:
        build_sampling(values, names=names)
    assert refused.value.param == param and f"'{param}'" in refused.value.message
    assert not any(f"'{table}'" in refused.value.message for table in names)   # no table name leaks
