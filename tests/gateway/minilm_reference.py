"""Module fixtures for the embedding tests: sentence-transformers' own encoding of the default embedding model
(the reference Conch's backend must match) and the model's tokenizer."""
from __future__ import annotations

import pytest

from engine.models.minilm import minilm_path


@pytest.fixture(scope="module")
def reference():
    """texts -> sentence-transformers' normalized vectors for the same model folder."""
    st = pytest.importorskip("sentence_transformers")
    model = st.SentenceTransformer(str(minilm_path()), device="cpu")
    return lambda texts: model.encode(list(texts), convert_to_numpy=True)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path())
