"""/v1/embeddings over a real server with the real all-MiniLM-L6-v2: the openai SDK (float and base64), token
ids, Matryoshka dimensions, the 400s, LangChain's OpenAIEmbeddings, and sentence-transformers as reference."""
from __future__ import annotations

import base64

import httpx
import numpy as np
import openai
import pytest

from conch.engine.weights.minilm import minilm_path
from tests.conftest import start_server, write_repository

EMB = {"backend": "embedding", "weights": "builtin:minilm", "dtype": "float32"}
TEXTS = ["The cat sits on the mat.", "Quantum chromodynamics describes the strong force.", "hello world"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_repository(root, {
        "minilm": {**EMB, "max_batch_size": 32, "dynamic_batching": {"max_queue_delay_microseconds": 1000}},
        "minilm-mrl": {**EMB, "max_batch_size": 4, "parameters": {"matryoshka_dimensions": [128, 256]}},
        "tiny": {"weights": "builtin:tiny", "dtype": "float32"},
    })
    server = start_server(["--model-repository", str(root)], root, env={"HF_HUB_OFFLINE": "1"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.v1, api_key="none", max_retries=0)


def test_listed_in_models(client):
    ids = {m.id for m in client.models.list().data}
    assert {"minilm", "minilm-mrl"} <= ids


def test_float_matches_sentence_transformers(client, reference, tokenizer):
    out = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
    got = np.array([d.embedding for d in out.data], dtype=np.float32)
    assert [d.index for d in out.data] == [0, 1, 2] and got.shape == (3, 384)
    np.testing.assert_allclose(got, reference(TEXTS), atol=2e-5)
    tokens = sum(len(ids) for ids in tokenizer(TEXTS)["input_ids"])
    assert out.usage.prompt_tokens == out.usage.total_tokens == tokens
    assert out.model == "minilm"


def test_base64_is_little_endian_float32(server, client):
    floats = client.embeddings.create(model="minilm", input="hello world", encoding_format="float")
    raw = httpx.post(f"{server.v1}/embeddings", json={"model": "minilm", "input": "hello world",
                                                      "encoding_format": "base64"}, timeout=120).json()
    decoded = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(decoded, np.array(floats.data[0].embedding, dtype=np.float32))
    sdk = client.embeddings.create(model="minilm", input="hello world")  # the SDK asks for base64 itself
    np.testing.assert_allclose(sdk.data[0].embedding, floats.data[0].embedding, atol=1e-7)


def test_token_ids_give_the_text_vector(client, tokenizer):
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    by_text = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
    by_ids = client.embeddings.create(model="minilm", input=ids, encoding_format="float")
    one = client.embeddings.create(model="minilm", input=ids[2], encoding_format="float")
    np.testing.assert_allclose([d.embedding for d in by_ids.data], [d.embedding for d in by_text.data],
                               atol=1e-5)
    np.testing.assert_allclose(one.data[0].embedding, by_text.data[2].embedding, atol=1e-5)


def test_more_inputs_than_max_batch_size_keep_their_order(client, reference):
    texts = [f"sentence number {i} about {w}" for i, w in enumerate("abcdefghij")]
    out = client.embeddings.create(model="minilm-mrl", input=texts, encoding_format="float")
    np.testing.assert_allclose([d.embedding for d in out.data], reference(texts), atol=2e-5)


def test_matryoshka_dimensions(client, reference):
    out = client.embeddings.create(model="minilm-mrl", input="hello world", dimensions=128,
                                   encoding_format="float")
    full = reference(["hello world"])[0][:128]
    np.testing.assert_allclose(out.data[0].embedding, full / np.linalg.norm(full), atol=2e-5)


@pytest.mark.parametrize("body, param", [
    ({"model": "minilm", "input": "hi", "dimensions": 128}, "dimensions"),
    ({"model": "minilm-mrl", "input": "hi", "dimensions": 100}, "dimensions"),
    ({"model": "minilm", "input": "word " * 300}, "input"),
    ({"model": "minilm", "input": [[1, 2], [10 ** 6]]}, "input"),
    ({"model": "minilm", "input": []}, "input"),
    ({"model": "minilm", "input": ""}, "input"),
    ({"model": "minilm", "input": "hi", "encoding_format": "int8"}, "encoding_format"),
    ({"model": "minilm", "input": "hi", "truncate": True}, "truncate"),
    ({"model": "tiny", "input": "hi"}, "model"),
])
def test_bad_requests_are_400_naming_the_field(server, body, param):
    with httpx.Client(base_url=server.v1) as http:
        r = http.post("/embeddings", json=body)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == param
        ok = http.post("/embeddings", json={"model": "minilm", "input": "still served"})
        assert ok.status_code == 200                   # the keep-alive connection stays usable


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="nope", input="hi")


def test_langchain_openai_embeddings(server, reference):
    from langchain_openai import OpenAIEmbeddings

    # tiktoken needs its BPE file from the internet (none here), so LangChain counts tokens with the model's
    # own Hugging Face tokenizer (tiktoken_enabled=False + the local folder); everything else is its default.
    lc = OpenAIEmbeddings(model="minilm", base_url=server.v1, api_key="none", tiktoken_enabled=False,
                          tiktoken_model_name=str(minilm_path()))
    docs = lc.embed_documents(TEXTS)
    np.testing.assert_allclose(docs, reference(TEXTS), atol=2e-5)
    np.testing.assert_allclose(lc.embed_query("hello world"), reference(["hello world"])[0], atol=2e-5)


def test_the_documented_langchain_length_splits_a_long_document_the_server_takes(server):
    from langchain_openai import OpenAIEmbeddings

    # docs/embeddings.md: chunks of 252 word pieces (254 usable with [CLS] and [SEP], less 2 that a chunk cut
    # through a word may gain when LangChain decodes it); the Hub id there, the tokenizer's local folder here
    lc = OpenAIEmbeddings(model="minilm", base_url=server.v1, api_key="none", tiktoken_enabled=False,
                          tiktoken_model_name=str(minilm_path()), embedding_ctx_length=252)
    long_document = " ".join(f"word{i} and a sentence about item {i}." for i in range(300))   # ~3,000 pieces
    (vector,) = lc.embed_documents([long_document])
    assert len(vector) == 384 and abs(np.linalg.norm(vector) - 1) < 1e-3
