"""Observability as Triton's: statistics whose queue / compute times are non-zero and add up, with
batch_stats; nv_inference_* metrics for python models and ensembles over /v2 and gRPC; the logging and trace
extensions (trace files as Triton writes them); system shared memory through tritonclient's own utilities,
over HTTP and gRPC; CUDA shared memory refused by name."""
from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.gateway.kserve.keys_repo import build_observed_repository
from tests.gateway.kserve.triton_repo import start_triton


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = build_observed_repository(tmp_path_factory.mktemp("repo"))
    server = start_triton(root, "--trace-file", str(root / "trace.json"))
    server.trace_file = root / "trace.json"
    yield server
    server.stop()


def _pipe_http(server) -> None:
    with httpclient.InferenceServerClient(server.url.removeprefix("http://")) as client:
        x = httpclient.InferInput("IN", [1, 1], "INT32")
        x.set_data_from_numpy(np.array([[1]], dtype=np.int32))
        assert client.infer("pipe", [x]).as_numpy("OUT").tolist() == [[2]]


def _pipe_grpc(server) -> None:
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        x = grpcclient.InferInput("IN", [1, 1], "INT32")
        x.set_data_from_numpy(np.array([[1]], dtype=np.int32))
        assert client.infer("pipe", [x]).as_numpy("OUT").tolist() == [[2]]


def _metric(text: str, name: str, model: str) -> float:
    prefix = f'{name}{{model="{model}",version="1"}} '
    return float(next(line for line in text.splitlines() if line.startswith(prefix))[len(prefix):])


def test_statistics_times_are_non_zero_and_add_up(server):
    _pipe_http(server)
    _pipe_grpc(server)
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        stats = client.get_inference_statistics(as_json=True)["model_stats"]
    by_name = {s["name"]: s for s in stats}
    warm = by_name["warm"]                           # reached only as the ensemble's step
    inference = warm["inference_stats"]
    assert int(warm["inference_count"]) == 2
    assert int(warm["execution_count"]) == 2 + 2      # the two warmup executions ran the model too
    parts = [int(inference[p]["ns"]) for p in ("queue", "compute_input", "compute_infer", "compute_output")]
    assert all(ns > 0 for ns in parts)
    assert abs(sum(parts) - int(inference["success"]["ns"])) <= 4 * 2    # rounding to ns, per part and request
    (batch,) = warm["batch_stats"]
    assert int(batch["batch_size"]) == 1 and int(batch["compute_infer"]["count"]) == 2
    assert int(by_name["pipe"]["inference_count"]) == 2
    http_stats = httpx.get(f"{server.url}/v2/models/warm/stats").json()["model_stats"][0]
    assert http_stats["inference_stats"]["queue"]["count"] == 2


def test_nv_inference_metrics_count_python_models_and_ensembles(server):
    before = httpx.get(f"{server.url}/metrics").text
    _pipe_http(server)
    _pipe_grpc(server)
    after = httpx.get(f"{server.url}/metrics").text
    for model in ("pipe", "warm"):
        for name in ("nv_inference_request_success", "nv_inference_count"):
            assert _metric(after, name, model) - _metric(before, name, model) == 2
        assert _metric(after, "nv_inference_request_duration_us", model) > _metric(
            before, "nv_inference_request_duration_us", model)
    assert _metric(after, "nv_inference_exec_count", "warm") - _metric(before, "nv_inference_exec_count", "warm") == 2
    assert _metric(after, "nv_inference_compute_infer_duration_us", "warm") > 0


def test_logging_extension_over_http_and_grpc(server):
    with httpclient.InferenceServerClient(server.url.removeprefix("http://")) as client:
        assert client.get_log_settings()["log_verbose_level"] == 0
        assert client.update_log_settings({"log_verbose_level": 1, "log_info": False})["log_info"] is False
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        settings = client.get_log_settings(as_json=True)["settings"]
        assert settings["log_verbose_level"]["uint32_param"] == 1 and settings["log_info"]["bool_param"] is False
        client.update_log_settings({"log_info": True, "log_verbose_level": 0})
    r = httpx.post(f"{server.url}/v2/logging", json={"log_file": "/tmp/elsewhere.log"})
    assert r.status_code == 400 and "log_file" in r.json()["error"]
    r = httpx.post(f"{server.url}/v2/logging", json={"log_colour": True})
    assert r.status_code == 400 and "log_colour" in r.json()["error"]
    assert httpx.get(f"{server.url}/v2/logging").json()["log_info"] is True


def test_trace_settings_and_the_trace_file(server):
    with httpclient.InferenceServerClient(server.url.removeprefix("http://")) as client:
        assert client.get_trace_settings()["trace_level"] == ["OFF"]
        model = client.update_trace_settings("simple", {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
        assert model["trace_level"] == ["TIMESTAMPS"] and model["trace_rate"] == "1"
        assert client.get_trace_settings()["trace_level"] == ["OFF"]          # the global setting is untouched
        a = httpclient.InferInput("INPUT0", [1, 16], "INT32")
        a.set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
        b = httpclient.InferInput("INPUT1", [1, 16], "INT32")
        b.set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
        client.infer("simple", [a, b], request_id="traced-1")
        client.update_trace_settings("simple", {"trace_level": None})          # back to the global OFF
        client.infer("simple", [a, b], request_id="not-traced")
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        settings = client.get_trace_settings(model_name="simple", as_json=True)["settings"]
        assert settings["trace_level"]["value"] == ["OFF"]
    r = httpx.post(f"{server.url}/v2/trace/setting", json={"trace_level": ["TENSORS"]})
    assert r.status_code == 400 and "TENSORS" in r.json()["error"]
    r = httpx.post(f"{server.url}/v2/trace/setting", json={"trace_file": "/tmp/other.json"})
    assert r.status_code == 400 and "trace_file" in r.json()["error"]
    entries = _eventually_json(server.trace_file)
    heads = [e for e in entries if "model_name" in e]
    assert [(h["model_name"], h["request_id"]) for h in heads] == [("simple", "traced-1")]
    (stamps,) = [e["timestamps"] for e in entries if "timestamps" in e]
    names = [s["name"] for s in stamps]
    assert names[0] == "REQUEST_START" and names[-1] == "REQUEST_END" and "COMPUTE_START" in names
    assert [s["ns"] for s in stamps] == sorted(s["ns"] for s in stamps)


def _eventually_json(path):
    import time
    for _ in range(100):                      # the tracer appends from a worker thread once the request ends
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{path} was never written")


def _simple_inputs(module, shm_in: str):
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory(shm_in, 64)
    inputs[1].set_shared_memory(shm_in, 64, offset=64)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    return inputs, outputs


def test_system_shared_memory_through_tritonclient_utilities(server):
    import tritonclient.utils.shared_memory as shm

    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    handles = [shm.create_shared_memory_region("conch_in", "/conch_in_t2", 128),
               shm.create_shared_memory_region("conch_out", "/conch_out_t2", 128)]
    try:
        shm.set_shared_memory_region(handles[0], [a, b])
        for module, address in ((httpclient, server.url.removeprefix("http://")),
                                (grpcclient, f"127.0.0.1:{server.grpc_port}")):
            with module.InferenceServerClient(address) as client:
                client.unregister_system_shared_memory()
                client.register_system_shared_memory("in", "/conch_in_t2", 128)
                client.register_system_shared_memory("out", "/conch_out_t2", 128)
                status = client.get_system_shared_memory_status()
                names = sorted(r["name"] for r in status) if isinstance(status, list) else sorted(
                    r.name for r in status.regions.values())
                assert names == ["in", "out"]
                inputs, outputs = _simple_inputs(module, "in")
                outputs[0].set_shared_memory("out", 64)
                outputs[1].set_shared_memory("out", 64, offset=64)
                result = client.infer("simple", inputs, outputs=outputs)
                assert result.get_output("OUTPUT0") is not None
                total = shm.get_contents_as_numpy(handles[1], np.int32, [1, 16])
                diff = shm.get_contents_as_numpy(handles[1], np.int32, [1, 16], offset=64)
                assert total.tolist() == (a + b).tolist() and diff.tolist() == (a - b).tolist()
                shm.set_shared_memory_region(handles[1], [np.zeros((1, 32), dtype=np.int32)])   # for the next face
                client.unregister_system_shared_memory("out")
                inputs, outputs = _simple_inputs(module, "in")
                plain = client.infer("simple", inputs)                  # shared memory in, body out
                assert plain.as_numpy("OUTPUT0").tolist() == (a + b).tolist()
                client.unregister_system_shared_memory()
        r = httpx.post(f"{server.url}/v2/systemsharedmemory/region/bad/register",
                       json={"key": "/../etc/passwd", "byte_size": 8})
        assert r.status_code == 400 and "key" in r.json()["error"]
    finally:
        for handle in handles:
            shm.destroy_shared_memory_region(handle)


def test_cuda_shared_memory_is_refused_by_name(server):
    r = httpx.get(f"{server.url}/v2/cudasharedmemory/status")
    assert r.status_code == 400 and "CUDA shared memory" in r.json()["error"]
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        with pytest.raises(Exception, match="CUDA shared memory"):
            client.get_cuda_shared_memory_status()


def test_classification_extension_over_http_and_grpc(server):
    a = np.array([[5, 1, 9, 3] + [0] * 12], dtype=np.int32)
    for module, address in ((httpclient, server.url.removeprefix("http://")),
                            (grpcclient, f"127.0.0.1:{server.grpc_port}")):
        with module.InferenceServerClient(address) as client:
            inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(np.zeros((1, 16), dtype=np.int32))
            outputs = [module.InferRequestedOutput("OUTPUT0", class_count=2), module.InferRequestedOutput("OUTPUT1")]
            result = client.infer("simple", inputs, outputs=outputs)
            assert result.as_numpy("OUTPUT0").tolist() == [[b"9:2:label2", b"5:0:label0"]]
            assert result.as_numpy("OUTPUT1").tolist() == a.tolist()


def test_sequence_controls_are_refused_by_name(server):
    with grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        a = grpcclient.InferInput("INPUT0", [1, 16], "INT32")
        a.set_data_from_numpy(np.zeros((1, 16), dtype=np.int32))
        b = grpcclient.InferInput("INPUT1", [1, 16], "INT32")
        b.set_data_from_numpy(np.zeros((1, 16), dtype=np.int32))
        with pytest.raises(Exception, match="sequence_start"):
            client.infer("simple", [a, b], sequence_id=7, sequence_start=True)
        assert client.infer("simple", [a, b], sequence_id=7).as_numpy("OUTPUT0").shape == (1, 16)
