"""Conch's own BLS model for the inflight_batcher_llm layout: preprocessing, then tensorrt_llm (streamed when
asked), then postprocessing of each of its responses, answered through the response sender (decoupled)."""
import numpy as np
import triton_python_backend_utils as pb_utils


def _get(request, name):
    return pb_utils.get_input_tensor_by_name(request, name)


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                for response in self._generate(request):
                    sender.send(response)
            except Exception as exc:
                pb_utils.Logger.log_error(f"tensorrt_llm_bls: {exc}")
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None

    def _call(self, model, inputs, outputs, decoupled=False):
        return pb_utils.InferenceRequest(model_name=model, requested_output_names=outputs,
                                         inputs=inputs).exec(decoupled=decoupled)

    def _generate(self, request):
        pre_inputs = [pb_utils.Tensor(key, _get(request, name).as_numpy()) for key, name in
                      (("QUERY", "text_input"), ("REQUEST_OUTPUT_LEN", "max_tokens"), ("BAD_WORDS_DICT", "bad_words"),
                       ("STOP_WORDS_DICT", "stop_words")) if _get(request, name) is not None]
        pre = self._call("preprocessing", pre_inputs, ["INPUT_ID", "REQUEST_INPUT_LEN", "REQUEST_OUTPUT_LEN",
                                                       "BAD_WORDS_IDS", "STOP_WORDS_IDS", "OUT_END_ID"])
        if pre.has_error():
            raise pb_utils.TritonModelException(pre.error().message())
        out = {t.name(): t.as_numpy() for t in pre.output_tensors()}
        stream = _get(request, "stream")
        streaming = stream.as_numpy() if stream is not None else np.zeros((1, 1), dtype=bool)
        llm_inputs = [pb_utils.Tensor(key, out[name]) for key, name in
                      (("input_ids", "INPUT_ID"), ("input_lengths", "REQUEST_INPUT_LEN"),
                       ("request_output_len", "REQUEST_OUTPUT_LEN"), ("bad_words_list", "BAD_WORDS_IDS"),
                       ("stop_words_list", "STOP_WORDS_IDS"), ("end_id", "OUT_END_ID"))]
        llm_inputs.append(pb_utils.Tensor("streaming", streaming))
        for llm in self._call("tensorrt_llm", llm_inputs, ["output_ids", "sequence_length"], decoupled=True):
            if llm.has_error():
                raise pb_utils.TritonModelException(llm.error().message())
            if not llm.output_tensors():
                continue
            ids = pb_utils.get_output_tensor_by_name(llm, "output_ids").as_numpy()
            lengths = pb_utils.get_output_tensor_by_name(llm, "sequence_length").as_numpy()
            post = self._call("postprocessing", [pb_utils.Tensor("TOKENS_BATCH", ids),
                                                 pb_utils.Tensor("SEQUENCE_LENGTH", lengths)], ["OUTPUT"])
            text = pb_utils.get_output_tensor_by_name(post, "OUTPUT").as_numpy()
            yield pb_utils.InferenceResponse([pb_utils.Tensor("text_output", text)])
