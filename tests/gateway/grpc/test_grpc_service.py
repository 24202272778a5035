"""`inference.GRPCInferenceService` end to end with tritonclient.grpc (sync and aio): health, metadata,
config, infer, decoupled stream_infer with the LLM tensor contract, cancellation, errors, UNIMPLEMENTED."""
from __future__ import annotations

import asyncio
import json
import queue

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from tests.gateway.kserve.triton_repo import build_repository, start_triton


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start_triton(build_repository(tmp_path_factory.mktemp("repo"), vllm=False))
    yield server
    server.stop()


def llm_inputs(module, text: str, params: dict, **flags: bool) -> list:
    def tensor(name, value, datatype):
        t = module.InferInput(name, [1], datatype)
        t.set_data_from_numpy(np.array([value], dtype=np.object_ if datatype == "BYTES" else bool))
        return t
    return [tensor("text_input", text.encode(), "BYTES"),
            tensor("sampling_parameters", json.dumps(params).encode(), "BYTES"),
            *(tensor(k, v, "BOOL") for k, v in flags.items())]


def test_health_metadata_config(grpc_client):
    assert grpc_client.is_server_live() and grpc_client.is_server_ready() and grpc_client.is_model_ready("tiny")
    assert not grpc_client.is_model_ready("nope")
    assert "generate" in grpc_client.get_server_metadata(as_json=True)["extensions"]
    meta = grpc_client.get_model_metadata("tiny", as_json=True)
    assert meta["name"] == "tiny" and meta["inputs"][0]["name"] == "text_input"
    config = grpc_client.get_model_config("assistant").config
    assert config.platform == "ensemble" and [s.model_name for s in config.ensemble_scheduling.step] == [
        "preprocess", "smollm2", "postprocess"]
    assert grpc_client.get_inference_statistics("tiny", as_json=True)["model_stats"][0]["name"] == "tiny"
    names = {m.name for m in grpc_client.get_model_repository_index().models}
    assert {"tiny", "assistant", "preprocess"} <= names


def test_infer_contract(grpc_client):
    inputs = llm_inputs(grpcclient, "Hello", {"max_tokens": 3, "temperature": 0}, return_finish_reason=True,
                        return_num_output_tokens=True)
    result = grpc_client.infer("tiny", inputs, request_id="abc")
    assert result.get_response().id == "abc"
    assert result.as_numpy("text_output")[0].startswith(b"Hello")
    assert result.as_numpy("finish_reason")[0] in (b"length", b"stop")
    assert result.as_numpy("num_output_tokens")[0] <= 3


def test_infer_errors(grpc_client):
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("nope", llm_inputs(grpcclient, "x", {}))
    assert err.value.status() == "StatusCode.NOT_FOUND"
    wrong = grpcclient.InferInput("text_input", [1], "FP32")
    wrong.set_data_from_numpy(np.array([1.0], dtype=np.float32))
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("tiny", [wrong])
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and "BYTES" in err.value.message()
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("tiny", llm_inputs(grpcclient, "x", {"temperature": "hot"}))
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and "temperature" in err.value.message()


def test_stream_infer_decoupled(grpc_client):
    responses: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        for rid in ("s1", "s2"):
            inputs = llm_inputs(grpcclient, "Hello", {"max_tokens": 4}, stream=True, return_finish_reason=True)
            grpc_client.async_stream_infer("tiny", inputs, request_id=rid, enable_empty_final_response=True)
        finals, texts = set(), {"s1": [], "s2": []}
        while len(finals) < 2:
            result, error = responses.get(timeout=30)
            assert error is None
            response = result.get_response()
            if response.parameters["triton_final_response"].bool_param:
                finals.add(response.id)
                continue
            texts[response.id].append(result.as_numpy("text_output")[0])
        assert all(1 <= len(t) <= 4 for t in texts.values())
        assert not b"".join(texts["s1"]).startswith(b"Hello")      # streamed: only the new text
    finally:
        grpc_client.stop_stream()


def test_stream_infer_error_in_stream(grpc_client):
    responses: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        grpc_client.async_stream_infer("nope", llm_inputs(grpcclient, "x", {}), request_id="bad")
        _, error = responses.get(timeout=30)
        assert error is not None and "nope" in error.message()
    finally:
        grpc_client.stop_stream()


def _metrics(server) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from the server's /metrics."""
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _sample(metrics: dict, name: str, **labels: str) -> float:
    return next(v for (n, lab), v in metrics.items()
                if n in (name, name + "_total") and labels.items() <= dict(lab).items())


async def test_aio_stream_and_cancel(server):
    cancelled = _sample(_metrics(server), "conch_request_cancelled", model="tiny")
    async with aioclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as c:
        assert await c.is_server_ready()

        async def requests():
            yield {"model_name": "tiny", "request_id": "a1",
                   "inputs": llm_inputs(aioclient, "Hi", {"max_tokens": 1000, "ignore_eos": True}, stream=True)}
            await asyncio.sleep(30)

        stream = c.stream_infer(requests())
        count = 0
        async for result, error in stream:
            assert error is None and result.get_response().id == "a1"
            count += 1
            if count == 3:
                break
        stream.cancel() if hasattr(stream, "cancel") else await stream.aclose()
    # The cancelled generation ends FINISHED_ABORTED (counted as cancelled, never as a success) and its slot is
    # freed at the next step. Waiting for that is bounded only so a broken build fails instead of hanging;
    # what is asserted is the count, never the time.
    for _ in range(600):
        m = _metrics(server)
        if _sample(m, "conch_request_cancelled", model="tiny") > cancelled:
            break
        await asyncio.sleep(0.05)
    assert _sample(m, "conch_request_cancelled", model="tiny") == cancelled + 1
    for _ in range(600):
        m = _metrics(server)
        if _sample(m, "conch_num_requests_running", model="tiny") == 0:
            break
        await asyncio.sleep(0.05)
    assert _sample(m, "conch_num_requests_running", model="tiny") == 0
    assert _sample(m, "nv_inference_request_failure", model="tiny", reason="CANCELED") >= 1
    async with aioclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as c:
        result = await c.infer("tiny", llm_inputs(aioclient, "Hi", {"max_tokens": 2, "ignore_eos": True},
                                                  return_num_output_tokens=True, return_finish_reason=True))
        assert list(result.as_numpy("num_output_tokens")) == [2]         # the server generates again, whole
        assert result.as_numpy("finish_reason")[0] == b"length" and result.as_numpy("text_output").shape == (1,)


def test_ensemble_stream(grpc_client):
    responses: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        prompt = grpcclient.InferInput("prompt", [1], "BYTES")
        prompt.set_data_from_numpy(np.array([b"Hi"], dtype=np.object_))
        stream = grpcclient.InferInput("stream", [1], "BOOL")
        stream.set_data_from_numpy(np.array([True]))
        params = grpcclient.InferInput("sampling_parameters", [1], "BYTES")
        params.set_data_from_numpy(np.array([b'{"max_tokens": "3"}'], dtype=np.object_))
        grpc_client.async_stream_infer("assistant", [prompt, stream, params], request_id="e1",
                                       enable_empty_final_response=True)
        pieces = []
        while True:
            result, error = responses.get(timeout=30)
            assert error is None and result.get_response().id == "e1"
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            pieces.append(result.as_numpy("text_output")[0])
        assert 1 <= len(pieces) <= 3
    finally:
        grpc_client.stop_stream()


def test_unsupported_rpcs_are_unimplemented(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for call, request in ((stub.CudaSharedMemoryStatus, service_pb2.CudaSharedMemoryStatusRequest()),
                              (stub.CudaSharedMemoryRegister, service_pb2.CudaSharedMemoryRegisterRequest())):
            with pytest.raises(grpc.RpcError) as err:
                call(request)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED and "CUDA shared memory" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="nope"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
