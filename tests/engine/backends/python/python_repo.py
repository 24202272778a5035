"""A repository of python models exercising Triton's Python-backend surface (tests/engine/backends/python)."""
from __future__ import annotations

import textwrap
from pathlib import Path

from tests.conftest import write_repository

ADDER_PBTXT = 'name: "adder"\nbackend: "python"\nmax_batch_size: 0\n'   # tensors come from auto_complete_config
ADDER = '''
    import numpy as np
    import torch
    import triton_python_backend_utils as pb_utils
    from lib.arith import add_one            # <version>/lib/arith.py: the version folder is on sys.path

    class TritonPythonModel:
        @staticmethod
        def auto_complete_config(config):
            config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [-1]})
            config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]})
            return config

        def initialize(self, args):
            pb_utils.Logger.log_info("adder initialized: conch-logger-line")

        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X")
                assert x.is_cpu()
                if (x.as_numpy() < 0).any():
                    out.append(pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("X must be non-negative", pb_utils.TritonError.INVALID_ARG)))
                    continue
                y = add_one(torch.from_dlpack(x))               # DLPack both ways, no copy
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("Y", y)]))
            return out
'''
COUNTER_PBTXT = '''
name: "counter"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "N", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "I", data_type: TYPE_INT32, dims: [ 1 ] } ]
'''
COUNTER = '''
    import json
    import threading
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            assert pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))

        def execute(self, requests):
            for request in requests:
                n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().reshape(-1)[0])
                threading.Thread(target=self._count, args=(request.get_response_sender(), n)).start()
            return None

        def _count(self, sender, n):
            for i in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''
BLS_PBTXT = '''
name: "{name}"
backend: "python"
max_batch_size: 0
input [ { name: "N", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "SUM", data_type: TYPE_FP32, dims: [ 1 ] }, { name: "COUNTED", data_type: TYPE_INT32, dims: [ -1 ] },
         { name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] }, { name: "ERROR", data_type: TYPE_STRING, dims: [ 1 ] } ]
'''
BLS_SYNC = '''
    import numpy as np
    import triton_python_backend_utils as pb_utils

    def call(name, outputs, inputs, decoupled=False):
        return pb_utils.InferenceRequest(model_name=name, requested_output_names=outputs,
                                         inputs=inputs).exec(decoupled=decoupled)

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                n = pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
                x = pb_utils.Tensor("X", np.arange(int(n[0]), dtype=np.float32))
                y = pb_utils.get_output_tensor_by_name(call("adder", ["Y"], [x]), "Y").as_numpy()
                counted = [int(pb_utils.get_output_tensor_by_name(r, "I").as_numpy()[0])
                           for r in call("counter", ["I"], [pb_utils.Tensor("N", n)], decoupled=True)]
                text = call("tiny", ["text_output"], [
                    pb_utils.Tensor("text_input", np.array([b"Hello"], dtype=np.object_)),
                    pb_utils.Tensor("sampling_parameters", np.array([b'{"max_tokens": 2}'], dtype=np.object_))])
                bad = call("adder", ["Y"], [pb_utils.Tensor("X", np.array([-1.0], dtype=np.float32))])
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("SUM", np.array([y.sum()], dtype=np.float32)),
                    pb_utils.Tensor("COUNTED", np.array(counted, dtype=np.int32)),
                    pb_utils.Tensor("TEXT", pb_utils.get_output_tensor_by_name(text, "text_output").as_numpy()),
                    pb_utils.Tensor("ERROR", np.array([bad.error().message().encode()], dtype=np.object_))]))
            return out
'''
BLS_ASYNC = '''
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        async def execute(self, requests):
            out = []
            for request in requests:
                n = pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
                x = pb_utils.Tensor("X", np.arange(int(n[0]), dtype=np.float32))
                first = await pb_utils.InferenceRequest(model_name="adder", requested_output_names=["Y"],
                                                        inputs=[x]).async_exec()
                stream = await pb_utils.InferenceRequest(model_name="counter", requested_output_names=["I"],
                                                         inputs=[pb_utils.Tensor("N", n)]).async_exec(decoupled=True)
                counted = [int(r.output_tensors()[0].as_numpy()[0]) async for r in stream]
                y = first.output_tensors()[0].as_numpy()
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("SUM", np.array([y.sum()], dtype=np.float32)),
                    pb_utils.Tensor("COUNTED", np.array(counted, dtype=np.int32)),
                    pb_utils.Tensor("TEXT", np.array([b"async"], dtype=np.object_)),
                    pb_utils.Tensor("ERROR", np.array([b""], dtype=np.object_))]))
            return out
'''
ENV_PBTXT = '''
name: "withenv"
backend: "python"
max_batch_size: 0
input [ { name: "N", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "WHERE", data_type: TYPE_STRING, dims: [ 1 ] } ]
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/venv" } }
'''
ENV_MODEL = '''
    import numpy as np
    import triton_python_backend_utils as pb_utils
    import conch_only_here                       # installed in this model's venv only

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor("WHERE", np.array([conch_only_here.WHERE.encode()],
                                                                                   dtype=np.object_))])
                    for _ in requests]
'''


def _model(root: Path, name: str, pbtxt: str, source: str) -> Path:
    folder = root / name / "1"
    folder.mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(pbtxt)
    (folder / "model.py").write_text(textwrap.dedent(source))
    return folder


def build(root: Path) -> Path:
    write_repository(root, {"tiny": {"weights": "builtin:tiny", "dtype": "float32", "max_batch_size": 4}})
    adder = _model(root, "adder", ADDER_PBTXT, ADDER)
    (adder / "lib").mkdir()
    (adder / "lib" / "__init__.py").write_text("")
    (adder / "lib" / "arith.py").write_text("def add_one(t):\n    return t + 1\n")
    _model(root, "counter", COUNTER_PBTXT, COUNTER)
    _model(root, "bls", BLS_PBTXT.replace("{name}", "bls"), BLS_SYNC)
    _model(root, "bls_async", BLS_PBTXT.replace("{name}", "bls_async"), BLS_ASYNC)
    _model(root, "withenv", ENV_PBTXT, ENV_MODEL)
    site = root / "withenv" / "venv" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (site / "conch_only_here.py").write_text('WHERE = "the model venv"\n')
    return root
