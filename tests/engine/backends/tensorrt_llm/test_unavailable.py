"""Without TensorRT-LLM installed (this machine: no CUDA), a `tensorrt_llm` model fails to load with a clear
BackendUnavailable naming the extra, through the engine and the repository; the server goes on serving."""
from __future__ import annotations

import importlib.util

import pytest
import yaml

from conch.engine.engine import Engine
from conch.engine.errors import BackendUnavailable
from conch.engine.repository import ModelRepository
from conch.engine.model_control import ModelControl

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorrt_llm") is not None,
                                reason="TensorRT-LLM is installed here: the conformance suite runs it instead")


def _repository(root):
    (root / "trt" / "1").mkdir(parents=True)
    (root / "trt" / "config.yaml").write_text(yaml.safe_dump({"backend": "tensorrt_llm", "weights": "/nowhere"}))
    return ModelRepository(root)


async def test_loading_names_the_extra(tmp_path):
    engine = Engine(_repository(tmp_path))
    with pytest.raises(BackendUnavailable, match=r"conch\[trtllm\]"):
        await engine.load("trt")
    assert engine.versions("trt") == []


async def test_the_repository_records_the_failure_and_starts(tmp_path):
    control = ModelControl(Engine(_repository(tmp_path)))
    await control.start()                                   # does not raise: the failure is the model's
    (state,) = control.index()
    assert state.name == "trt" and state.state == "UNAVAILABLE" and "conch[trtllm]" in state.reason
    await control.stop()


async def test_tritons_tensorrtllm_layout_names_this_backend(tmp_path):
    (tmp_path / "trt" / "1").mkdir(parents=True)
    (tmp_path / "trt" / "config.pbtxt").write_text(
        'backend: "tensorrtllm"\nmax_batch_size: 8\n'
        'parameters { key: "gpt_model_path" value: { string_value: "/engines/trt" } }\n')
    config = ModelRepository(tmp_path).config("trt")
    assert config.backend == "tensorrt_llm" and config.is_llm and config.parameters["gpt_model_path"] == "/engines/trt"
    with pytest.raises(BackendUnavailable, match=r"conch\[trtllm\]"):
        await Engine(ModelRepository(tmp_path)).load("trt")
