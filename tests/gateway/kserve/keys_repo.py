"""A repository of python models (and two tiny LLMs) whose config.pbtxt files use Triton's keys beyond
tensors: instance_group counts, model_warmup, response_cache, an ensemble over a warmed-up step."""
from __future__ import annotations

import textwrap
from pathlib import Path

# Each execute meets the other instance at a barrier: two requests in two instances at once both pass it
# (OVERLAP 1); with one instance the second request cannot start, the barrier times out (OVERLAP 0).
MEET = '''
    import threading
    import numpy as np
    import triton_python_backend_utils as pb_utils

    BARRIER = threading.Barrier(2, timeout={timeout})

    class TritonPythonModel:
        def initialize(self, args):
            self.instance = args["model_instance_name"]

        def execute(self, requests):
            try:
                BARRIER.wait()
                overlap = 1
            except threading.BrokenBarrierError:
                BARRIER.reset()
                overlap = 0
            return [pb_utils.InferenceResponse([
                pb_utils.Tensor("OVERLAP", np.array([overlap], dtype=np.int32)),
                pb_utils.Tensor("INSTANCE", np.array([self.instance.encode()], dtype=np.object_))])
                for _ in requests]
'''
MEET_PBTXT = '''backend: "python"
max_batch_size: 0
input [ {{ name: "X", data_type: TYPE_INT32, dims: [ 1 ] }} ]
output [ {{ name: "OVERLAP", data_type: TYPE_INT32, dims: [ 1 ] }},
         {{ name: "INSTANCE", data_type: TYPE_STRING, dims: [ 1 ] }} ]
instance_group [ {{ count: {count}, kind: KIND_CPU }} ]
'''
# Counts its executions: the first client request sees the warmup's runs.
WARM = '''
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.calls = 0

        def execute(self, requests):
            out = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
                calls = np.full(x.shape, self.calls, dtype=np.int32)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + 1), pb_utils.Tensor("CALLS", calls)]))
                self.calls += 1
            return out
'''
WARM_PBTXT = '''backend: "python"
max_batch_size: 4
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] }, { name: "CALLS", data_type: TYPE_INT32, dims: [ 1 ] } ]
model_warmup [ { name: "zeros" batch_size: 2 count: 2
                 inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } } ]
'''
PIPE_PBTXT = '''platform: "ensemble"
max_batch_size: 4
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] }, { name: "SEEN", data_type: TYPE_INT32, dims: [ 1 ] } ]
ensemble_scheduling { step [ { model_name: "warm" model_version: -1
  input_map { key: "X" value: "IN" }
  output_map { key: "Y" value: "OUT" } output_map { key: "CALLS" value: "SEEN" } } ] }
'''
LLM_PBTXT = '''backend: "transformers"
max_batch_size: 4
parameters {{ key: "weights" value: {{ string_value: "builtin:tiny" }} }}
parameters {{ key: "dtype" value: {{ string_value: "float32" }} }}
{extra}
'''
# Its warmup signals that it started, then waits for the test's go-ahead: the model is loaded but not ready.
GATED = '''
    import os
    import time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.folder = args["model_repository"]

        def execute(self, requests):
            open(os.path.join(self.folder, "started"), "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(os.path.join(self.folder, "go")) and time.monotonic() < deadline:
                time.sleep(0.05)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.zeros([1], dtype=np.int32))])
                    for _ in requests]
'''
GATED_PBTXT = '''backend: "python"
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "Y", data_type: TYPE_INT32, dims: [ 1 ] } ]
model_warmup [ { name: "w" inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } } ]
'''
# Meets any other model in a shared folder: each execution announces itself and waits (up to 8 s) for another
# model's announcement. Two models that run at once meet (MET 1); two that take turns never do (MET 0).
MEETING = '''
    import json
    import os
    import time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    def wait_for(check):
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.02)
        return None

    class TritonPythonModel:
        def initialize(self, args):
            self.folder = json.loads(args["model_config"])["parameters"]["meeting"]["string_value"]
            self.me = args["model_name"]

        def execute(self, requests):
            path = lambda name: os.path.join(self.folder, name)
            open(path(self.me + ".here"), "w").close()
            other = wait_for(lambda: next((f[:-5] for f in os.listdir(self.folder)
                                           if f.endswith(".here") and f[:-5] != self.me), None))
            if other is not None:
                open(path(self.me + ".saw"), "w").close()
                wait_for(lambda: os.path.exists(path(other + ".saw")))
            os.remove(path(self.me + ".here"))
            met = np.array([int(other is not None)], dtype=np.int32)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("MET", met)]) for _ in requests]
'''
MEETING_PBTXT = '''backend: "python"
input [ {{ name: "X", data_type: TYPE_INT32, dims: [ 1 ] }} ]
output [ {{ name: "MET", data_type: TYPE_INT32, dims: [ 1 ] }} ]
parameters {{ key: "meeting" value: {{ string_value: "{folder}" }} }}
{limiter}
'''
LIMITED = 'instance_group [ { count: 1, rate_limiter { resources [ { name: "R", count: 1 } ] priority: 1 } } ]'
BROKEN_PBTXT = 'backend: "python"\noptimization { input_pinned_memory { enable: true } }\n'
# Sums its inputs per sequence in the implicit state ACC (Triton's sequence batcher with controls).
ACCUMULATE = '''
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                get = lambda name: pb_utils.get_input_tensor_by_name(request, name).as_numpy()
                total = get("ACC_IN") + get("X")
                out.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("SUM", total), pb_utils.Tensor("ACC_OUT", total),
                    pb_utils.Tensor("CORR", get("CORRID")), pb_utils.Tensor("STARTED", get("START"))]))
            return out
'''
ACCUMULATE_PBTXT = '''backend: "python"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "SUM", data_type: TYPE_INT32, dims: [ 1 ] }, { name: "CORR", data_type: TYPE_UINT64, dims: [ 1 ] },
         { name: "STARTED", data_type: TYPE_INT32, dims: [ 1 ] } ]
instance_group [ { count: 2 } ]
sequence_batching {
  max_sequence_idle_microseconds: 600000000
  direct { }
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
                  { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
                  { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] } ]
  state [ { input_name: "ACC_IN" output_name: "ACC_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
}
'''


def _model(root: Path, name: str, pbtxt: str, code: str | None = None) -> None:
    (root / name / "1").mkdir(parents=True, exist_ok=True)
    (root / name / "config.pbtxt").write_text(pbtxt)
    if code is not None:
        (root / name / "1" / "model.py").write_text(textwrap.dedent(code))


def build_keys_repository(root: Path) -> Path:
    _model(root, "meet2", MEET_PBTXT.format(count=2), MEET.format(timeout=120))
    _model(root, "meet1", MEET_PBTXT.format(count=1), MEET.format(timeout=2))
    _model(root, "warm", WARM_PBTXT, WARM)
    _model(root, "pipe", PIPE_PBTXT)
    _model(root, "cached", LLM_PBTXT.format(extra="response_cache { enable: true }"))
    _model(root, "uncached", LLM_PBTXT.format(extra=""))
    _model(root, "stateful", BROKEN_PBTXT, WARM)
    _model(root, "accumulate", ACCUMULATE_PBTXT, ACCUMULATE)
    _model(root, "gated", GATED_PBTXT, GATED)
    (root.parent / "meeting").mkdir(exist_ok=True)
    for name, limiter in (("limited_a", LIMITED), ("limited_b", LIMITED), ("free_c", "")):
        _model(root, name, MEETING_PBTXT.format(folder=root.parent / "meeting", limiter=limiter), MEETING)
    return root


# Triton's `simple` model: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (what tritonclient's shared
# memory examples send).
SIMPLE = '''
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for request in requests:
                a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b),
                                                       pb_utils.Tensor("OUTPUT1", a - b)]))
            return out
'''
SIMPLE_PBTXT = '''backend: "python"
max_batch_size: 8
input [ { name: "INPUT0", data_type: TYPE_INT32, dims: [ 16 ] },
        { name: "INPUT1", data_type: TYPE_INT32, dims: [ 16 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 16 ], label_filename: "labels.txt" },
         { name: "OUTPUT1", data_type: TYPE_INT32, dims: [ 16 ] } ]
'''


def build_observed_repository(root: Path) -> Path:
    """python models and an ensemble, for statistics, metrics, trace, logging and shared memory."""
    _model(root, "warm", WARM_PBTXT, WARM)
    _model(root, "pipe", PIPE_PBTXT)
    _model(root, "simple", SIMPLE_PBTXT, SIMPLE)
    (root / "simple" / "labels.txt").write_text("".join(f"label{i}\n" for i in range(16)))
    return root
