"""Pre-processing: put the prompt into the template named by the config's `template` parameter."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.template = config["parameters"]["template"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "prompt").as_numpy().reshape(-1)[0].decode()
            text = self.template.format(prompt=prompt.strip())
            out = pb_utils.Tensor("text_input", np.array([text.encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
