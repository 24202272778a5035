"""Triton's generate mapping over HTTP: `parameters` named like inputs become tensors, a batching model gets
a batch dimension, values convert by datatype, outputs map back; a native LLM honours stop_words / bad_words."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import httpx
import pytest

from tests.conftest import start_server, write_repository

PBTXT = textwrap.dedent('''
    name: "shapes"
    backend: "python"
    max_batch_size: 8
    input [ { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] },
            { name: "max_tokens", data_type: TYPE_INT32, dims: [ 1 ] },
            { name: "bad_words", data_type: TYPE_STRING, dims: [ -1 ], optional: true },
            { name: "temperature", data_type: TYPE_FP32, dims: [ 1 ], optional: true } ]
    output [ { name: "described", data_type: TYPE_STRING, dims: [ 1 ] },
             { name: "doubled", data_type: TYPE_INT32, dims: [ -1 ] } ]
''')
MODEL = textwrap.dedent('''
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                seen = {t.name(): [list(t.as_numpy().shape), str(t.as_numpy().dtype)] for t in request.inputs()}
                tokens = pb_utils.get_input_tensor_by_name(request, "max_tokens").as_numpy()
                described = np.array([[json.dumps(seen, sort_keys=True).encode()]], dtype=np.object_)
                doubled = pb_utils.Tensor("doubled", np.concatenate([tokens, tokens], 1))
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("described", described), doubled]))
            return out
''')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("repo")
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}})
    (root / "shapes" / "1").mkdir(parents=True)
    (root / "shapes" / "config.pbtxt").write_text(PBTXT)
    (root / "shapes" / "1" / "model.py").write_text(MODEL)
    server = start_server(["--model-repository", str(root)], root)
    yield server
    server.stop()


def test_parameters_named_like_inputs_become_batched_tensors(server):
    r = httpx.post(f"{server.url}/v2/models/shapes/generate",
                   json={"text_input": "hi", "parameters": {"max_tokens": 7, "bad_words": ["", "x"],
                                                            "temperature": 0.5, "not_an_input": 1}})
    assert r.status_code == 200, r.text
    body = r.json()
    seen = json.loads(body["described"])
    assert seen == {"text_input": [[1, 1], "object"], "max_tokens": [[1, 1], "int32"],
                    "bad_words": [[1, 2], "object"], "temperature": [[1, 1], "float32"]}
    assert body["doubled"] == [7, 7]                    # a [1, 2] output flattened to a list


def test_a_value_of_the_wrong_datatype_is_a_400_naming_the_input(server):
    r = httpx.post(f"{server.url}/v2/models/shapes/generate",
                   json={"text_input": "hi", "parameters": {"max_tokens": "many"}})
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]
    r = httpx.post(f"{server.url}/v2/models/shapes/generate", json={"text_input": "hi", "nope": 1})
    assert r.status_code == 400 and "nope" in r.json()["error"]


def test_documented_curl_on_a_native_llm(server):
    r = httpx.post(f"{server.url}/v2/models/tiny/generate",
                   json={"text_input": "Hello", "parameters": {"max_tokens": 4, "bad_words": [""],
                                                               "stop_words": [""], "temperature": 0}})
    assert r.status_code == 200 and r.json()["text_output"].startswith("Hello")


def _generated(server, max_tokens: int = 8, **params) -> str:
    r = httpx.post(f"{server.url}/v2/models/tiny/generate",
                   json={"text_input": "Hello", "parameters": {"max_tokens": max_tokens, "temperature": 0,
                                                               "exclude_input_in_output": True, **params}})
    assert r.status_code == 200, r.text
    return r.json()["text_output"]


def test_stop_words_end_the_text(server):
    free = _generated(server)
    word = free[3:5].strip() or free[3:5]
    assert word and _generated(server, stop_words=["", word]) == free[:free.index(word)]


def test_bad_words_are_never_generated(server):
    first = _generated(server, max_tokens=1)
    assert first and _generated(server, max_tokens=1, bad_words=[first]) != first
    r = httpx.post(f"{server.url}/v2/models/tiny/generate",
                   json={"text_input": "Hello", "parameters": {"bad_words": 3}})
    assert r.status_code == 400 and "bad_words" in r.json()["error"]
