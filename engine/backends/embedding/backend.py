"""The `embedding` backend: an encoder behind Triton's dynamic batcher.

Every input is validated here, per request, before it joins a batch (so one bad input fails only its own
request): texts are tokenized with the model's special tokens; token-id inputs are the text's tokens without
them ([CLS]/[SEP] are added, so ids and text give the same vector); a row longer than the model's maximum
length is refused (never silently truncated). A request with more rows than `max_batch_size` is split into
several batcher requests.

Tensor contract (/v2 infer, gRPC): TEXT BYTES [-1] or INPUT_IDS INT64 [-1, -1] (trailing pad ids are
padding) -> EMBEDDING FP32 [-1, dim]; parameters `dimensions`, `priority`, `timeout` (microseconds).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, AsyncGenerator, Sequence

import numpy as np

from conch.engine import torch_threads
from conch.engine.backend import BackendStats, Capabilities
from conch.engine.backends.dynamic_batcher import DynamicBatcher
from conch.engine.errors import InvalidRequest, ModelNotReady
from conch.engine.params.kinds import read_int, short_repr
from conch.engine.repository.config import ModelConfig
from conch.engine.tensors.contract import EMBEDDING_INPUTS, EMBEDDING_OUTPUTS
from conch.engine.tensors.interface import InferRequest, Tensors, check_inputs, datatype_of

if TYPE_CHECKING:
    from conch.engine.backends.embedding.encoder import Encoder

Row = tuple[int, ...]


class EmbeddingBackend:
    capabilities = Capabilities(embeddings=True)

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.encoder: Encoder | None = None       # loaded by start (torch and transformers load then)
        self.batcher: DynamicBatcher | None = None
        self.inputs, self.outputs = EMBEDDING_INPUTS, EMBEDDING_OUTPUTS

    async def start(self) -> None:
        from conch.engine.backends.embedding.encoder import Encoder

        self.encoder = encoder = await torch_threads.run(Encoder, self.config)
        self._specials = _special_tokens(encoder.tokenizer)
        self.batcher = DynamicBatcher(self.config.name, self._run, max(1, self.config.max_batch_size),
                                      self.config.dynamic_batching, batch_requests=self.config.dynamic_batching
                                      is not None, instances=self.config.instance_count)
        self.batcher.start()

    @property
    def tokenizer(self):
        return self.encoder.tokenizer if self.encoder is not None else None

    @property
    def context_length(self) -> int:
        return self.encoder.spec.max_length if self.encoder is not None else self.config.context_length

    @property
    def _started(self) -> Encoder:
        if self.encoder is None:
            raise ModelNotReady(f"model '{self.config.name}' is not started")
        return self.encoder

    @property
    def dimension(self) -> int:
        return self._started.dimension

    @property
    def steps(self) -> int:
        """Batches run (Triton's nv_inference_exec_count)."""
        return self.batcher.steps if self.batcher is not None else 0

    # ---- validation, per request ----
    def rows_from_texts(self, texts: Sequence[str], param: str = "input") -> list[Row]:
        if any(not t for t in texts):
            raise InvalidRequest("an input is an empty string; every input must hold text", param=param)
        encoded = self.tokenizer(list(texts), add_special_tokens=True)["input_ids"]
        return [self._fit(tuple(ids), i, param) for i, ids in enumerate(encoded)]

    def rows_from_ids(self, rows: Sequence[Sequence[int]], param: str = "input") -> list[Row]:
        vocab, out = len(self.tokenizer), []
        for i, ids in enumerate(rows):
            if not ids:
                raise InvalidRequest(f"input {i} holds no token ids", param=param)
            bad = next((t for t in ids if not 0 <= t < vocab), None)
            if bad is not None:
                raise InvalidRequest(f"input {i}: token id {bad} is outside the vocabulary of model "
                                     f"'{self.config.name}' (0..{vocab - 1})", param=param)
            out.append(self._fit((*self._specials[0], *ids, *self._specials[1]), i, param))
        return out

    def _fit(self, row: Row, index: int, param: str) -> Row:
        if len(row) > self.context_length:
            raise InvalidRequest(f"input {index} has {len(row)} tokens (with special tokens); model "
                                 f"'{self.config.name}' takes at most {self.context_length}", param=param)
        return row

    def check_dimensions(self, dimensions: int | None, param: str = "dimensions") -> int:
        """The output width: the model's own, or a Matryoshka truncation its config allows."""
        if dimensions is None or dimensions == self.dimension:
            return self.dimension
        allowed = _matryoshka(self.config.parameters.get("matryoshka_dimensions"), self.dimension)
        if not allowed:
            raise InvalidRequest(f"model '{self.config.name}' does not support dimensions other than its own "
                                 f"({self.dimension})", param=param)
        if dimensions not in allowed:
            raise InvalidRequest(f"dimensions must be one of {sorted(allowed)} for model "
                                 f"'{self.config.name}', got {dimensions}", param=param)
        return dimensions

    # ---- running ----
    async def embed(self, rows: list[Row], dimensions: int | None = None, priority: int = 0,
                    timeout: float | None = None) -> np.ndarray:
        """Validated rows -> (len(rows), dimensions) float32, L2-normalized after truncation."""
        if self.batcher is None:
            raise ModelNotReady(f"model '{self.config.name}' is not started")
        width = self.check_dimensions(dimensions)
        size = self.batcher.max_batch_size
        chunks = [rows[i:i + size] for i in range(0, len(rows), size)]
        parts = await asyncio.gather(*(self.batcher.submit(c, len(c), priority, timeout) for c in chunks))
        vectors = np.concatenate(parts, axis=0)
        if width != self.dimension:
            vectors = vectors[:, :width]
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors.astype(np.float32, copy=False)

    def _run(self, payloads: list[list[Row]]) -> list[np.ndarray]:
        """One forward over every row of the batch; each request gets its own rows back, in order."""
        flat = [row for rows in payloads for row in rows]
        vectors = self._started.encode(flat)
        bounds = np.cumsum([len(rows) for rows in payloads])[:-1]
        return np.split(vectors, bounds)

    async def infer(self, request: InferRequest) -> AsyncGenerator[Tensors, None]:
        rows = self.tensor_rows(request.inputs)
        params = request.parameters
        timeout = _int_param(params, "timeout", low=0)                 # microseconds; 0 = none, as Triton's
        vectors = await self.embed(rows, _int_param(params, "dimensions"), _int_param(params, "priority") or 0,
                                   timeout / 1e6 if timeout else None)
        yield {"EMBEDDING": vectors}

    def tensor_rows(self, inputs: Tensors) -> list[Row]:
        check_inputs(self.inputs, inputs, self.config.name)
        if ("TEXT" in inputs) == ("INPUT_IDS" in inputs):
            raise InvalidRequest(f"model '{self.config.name}' takes exactly one of the inputs TEXT or INPUT_IDS",
                                 param="TEXT")
        name = "TEXT" if "TEXT" in inputs else "INPUT_IDS"
        if inputs[name].size == 0:
            raise InvalidRequest(f"input {name} holds no rows (shape {list(inputs[name].shape)}); send at least one",
                                 param=name)
        if "TEXT" in inputs:
            texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                     for v in inputs["TEXT"].reshape(-1)]
            return self.rows_from_texts(texts, param="TEXT")
        ids = inputs["INPUT_IDS"]
        if datatype_of(ids) != "INT64" or ids.ndim != 2:
            raise InvalidRequest("input INPUT_IDS must be INT64 of shape [batch, tokens]", param="INPUT_IDS")
        pad = self._started.pad_id
        return self.rows_from_ids([_strip(row.tolist(), pad) for row in ids], param="INPUT_IDS")

    def stats(self) -> BackendStats:
        """Requests queued in the dynamic batcher (an encoder holds no KV cache)."""
        return BackendStats(waiting=self.batcher.pending if self.batcher is not None else 0)

    def health(self) -> bool:
        return self.encoder is not None

    async def stop(self) -> None:
        if self.batcher is not None:
            await self.batcher.stop()
        self.encoder = None


def _matryoshka(value, native: int) -> set[int]:
    """`matryoshka_dimensions`: a list of widths, a comma-separated string, or true (any width 1..native)."""
    if value is None or value is False or str(value).lower() in ("", "false", "0"):
        return set()
    if value is True or str(value).lower() == "true":
        return set(range(1, native + 1))
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return {int(v) for v in items if 0 < int(v) <= native}


def _special_tokens(tokenizer) -> tuple[Row, Row]:
    """The ids the tokenizer puts before and after a text's own tokens ([CLS] and [SEP] for BERT)."""
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    at = next(i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare)
    return tuple(full[:at]), tuple(full[at + len(bare):])


def _int_param(params: dict, name: str, low: int | None = None) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    try:
        number = read_int(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidRequest(f"parameter '{name}' must be an integer, got {short_repr(value)}", param=name) from None
    if low is not None and number < low:
        raise InvalidRequest(f"parameter '{name}' must be at least {low}, got {number}", param=name)
    return number



def _strip(row: list[int], pad: int) -> list[int]:
    while row and row[-1] == pad:
        row.pop()
    return row
