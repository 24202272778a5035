"""Conch's own postprocessing for the inflight_batcher_llm layout: TOKENS_BATCH [batch, beam, tokens] and
SEQUENCE_LENGTH [batch, beam] -> OUTPUT [batch, beam] text."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.tokenizer = AutoTokenizer.from_pretrained(config["parameters"]["tokenizer_dir"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            tokens = pb_utils.get_input_tensor_by_name(request, "TOKENS_BATCH").as_numpy()
            lengths = pb_utils.get_input_tensor_by_name(request, "SEQUENCE_LENGTH").as_numpy()
            texts = [[self.tokenizer.decode(beam[:length], skip_special_tokens=True).encode()
                      for beam, length in zip(batch, batch_lengths, strict=True)]
                     for batch, batch_lengths in zip(tokens, lengths, strict=True)]
            output = pb_utils.Tensor("OUTPUT", np.array(texts, dtype=np.object_))
            responses.append(pb_utils.InferenceResponse([output]))
        return responses
