"""Conch's own preprocessing for the inflight_batcher_llm layout: QUERY -> token ids, the word lists in
TensorRT-LLM's [batch, 2, L] format (ids padded with 0, end offsets padded with -1)."""
import csv
import json

import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer


class TritonPythonModel:
    def initialize(self, args):
        self.config = json.loads(args["model_config"])
        self.tokenizer = AutoTokenizer.from_pretrained(self.config["parameters"]["tokenizer_dir"]["string_value"])
        self.end_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end_id

    def execute(self, requests):
        return [self._one(request) for request in requests]

    def _one(self, request):
        query = pb_utils.get_input_tensor_by_name(request, "QUERY").as_numpy()          # [batch, 1]
        batch = query.shape[0]
        ids = [self.tokenizer.encode(q.reshape(-1)[0].decode()) for q in query]
        width = max(len(i) for i in ids)
        input_id = np.array([i + [self.pad_id] * (width - len(i)) for i in ids], dtype=np.int32)
        tensors = {
            "INPUT_ID": input_id,
            "REQUEST_INPUT_LEN": np.array([[len(i)] for i in ids], dtype=np.int32),
            "REQUEST_OUTPUT_LEN": pb_utils.get_input_tensor_by_name(request, "REQUEST_OUTPUT_LEN").as_numpy(),
            "BAD_WORDS_IDS": self._word_list(request, "BAD_WORDS_DICT", batch),
            "STOP_WORDS_IDS": self._word_list(request, "STOP_WORDS_DICT", batch),
            "OUT_END_ID": self._id_or(request, "END_ID", self.end_id, batch),
            "OUT_PAD_ID": self._id_or(request, "PAD_ID", self.pad_id, batch),
        }
        return pb_utils.InferenceResponse([pb_utils.Tensor(k, v) for k, v in tensors.items()])

    def _id_or(self, request, name, default, batch):
        given = pb_utils.get_input_tensor_by_name(request, name)
        return given.as_numpy() if given is not None else np.full((batch, 1), default, dtype=np.int32)

    def _word_list(self, request, name, batch):
        given = pb_utils.get_input_tensor_by_name(request, name)
        rows = []
        for b in range(batch):
            ids, offsets = [], []
            for item in (given.as_numpy()[b] if given is not None else []):
                for word in next(csv.reader([item.decode()]), []):
                    if word:
                        ids += self.tokenizer.encode(word, add_special_tokens=False)
                        offsets.append(len(ids))
            rows.append((ids, offsets))
        width = max([1] + [len(i) for i, _ in rows])
        out = np.zeros((batch, 2, width), dtype=np.int32)
        out[:, 1, :] = -1
        for b, (ids, offsets) in enumerate(rows):
            out[b, 0, :len(ids)], out[b, 1, :len(offsets)] = ids, offsets
        return out
