"""Deployment options from a model's config (gateway/ray/options.py) and the shipped Ray examples; no cluster."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from conch.engine.errors import InvalidRequest
from conch.engine.repository import ModelConfig
from conch.gateway.ray.options import deployment_options
from conch.gateway.ray.settings import RaySettings

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "ray"


def config(ray: dict | None = None, **extra) -> ModelConfig:
    return ModelConfig.from_mapping("m", {"parameters": {"ray": ray} if ray is not None else {}, **extra})


def test_defaults_follow_the_model_config():
    opts = deployment_options(config(max_batch_size=12))
    assert opts.serve_options() == {"num_replicas": 1, "ray_actor_options": {"num_cpus": 1},
                                    "max_ongoing_requests": 12}


def test_autoscaling_and_resources_from_the_config():
    opts = deployment_options(config({"autoscaling_config": {"min_replicas": 1, "max_replicas": 3},
                                      "ray_actor_options": {"num_gpus": 1}}), actor={"num_cpus": 0.5})
    assert opts.max_replicas == 3
    assert opts.serve_options()["ray_actor_options"] == {"num_cpus": 0.5, "num_gpus": 1}
    assert "num_replicas" not in opts.serve_options()


def test_cli_replicas_override_autoscaling():
    opts = deployment_options(config({"autoscaling_config": {"max_replicas": 3}}), replicas=2)
    assert opts.serve_options()["num_replicas"] == 2 and opts.max_replicas == 2


@pytest.mark.parametrize("ray, words", [
    ({"replicas": 2}, "unknown parameters.ray keys ['replicas']"),
    ({"num_replicas": 2, "autoscaling_config": {}}, "not both"),
    ({"num_replicas": 0}, ">= 1"),
    ("two", "must be a mapping"),
])
def test_bad_options_are_refused_by_name(ray, words):
    with pytest.raises(InvalidRequest) as err:
        deployment_options(config(ray))
    assert words in str(err.value) and err.value.param == "config"


def test_settings_refuse_unknown_args():
    with pytest.raises(ValueError, match="unknown keys \\['replica'\\]"):
        RaySettings.from_args({"replica": 2})


def test_shipped_serve_configs_validate():
    plain = yaml.safe_load((EXAMPLES / "serve_config.yaml").read_text())
    kuberay = yaml.safe_load(yaml.safe_load((EXAMPLES / "rayservice.yaml").read_text())["spec"]["serveConfigV2"])
    for doc in (plain, kuberay):
        ServeDeploySchema.model_validate(doc)
        (app,) = doc["applications"]
        assert app["import_path"] == "conch.gateway.ray.app:build"
        RaySettings.from_args(app["args"])
    model = ModelConfig.from_yaml(EXAMPLES / "model_config.yaml", "m")
    assert deployment_options(model).max_replicas == 4
