"""Where each model of a Triton repository runs under Ray (gateway/ray/placement.py), without a cluster: the
inflight_batcher_llm repository deploys its LLM step only (the ensemble, the python models and BLS run in the
ingress), and a model that runs in the ingress refuses `parameters.ray` by name before Ray starts."""
from __future__ import annotations

import pytest

from conch.engine.errors import InvalidRequest
from conch.gateway.ray.app import model_options
from conch.gateway.ray.settings import RaySettings
from tests.conftest import write_repository
from tests.gateway.kserve.inflight_repo import build_inflight


def test_the_inflight_repository_deploys_its_llm_step_only(tmp_path):
    root = build_inflight(tmp_path / "repo")
    write_repository(root, {"minilm": {"backend": "embedding", "weights": "builtin:minilm"}})
    assert list(model_options(RaySettings(repository=str(root)))) == ["tensorrt_llm"]


def test_parameters_ray_on_an_ingress_model_is_refused_by_name(tmp_path):
    root = write_repository(tmp_path, {"glue": {"backend": "python", "parameters": {"ray": {"num_replicas": 2}}}})
    with pytest.raises(InvalidRequest) as refused:
        model_options(RaySettings(repository=str(root)))
    assert "model 'glue' (python backend) runs in the ingress" in refused.value.message
    assert refused.value.param == "config"
