"""Post-processing: replace each banned word (the config's `banned_words`, comma separated) with ***."""
import json
import re

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        words = config["parameters"]["banned_words"]["string_value"].split(",")
        self.pattern = re.compile(r"\b(" + "|".join(map(re.escape, filter(None, words))) + r")\b", re.IGNORECASE)

    def execute(self, requests):
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "raw_text").as_numpy().reshape(-1)
            masked = [self.pattern.sub("***", t.decode("utf-8", "replace")).encode() for t in texts]
            out = pb_utils.Tensor("text_output", np.array(masked, dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
