"""`conch serve --ray`'s start, without a cluster: a local Ray is always a new one (address "local"), and a
fleet that needs more CPUs than the cluster has is refused at start naming the flags that fit."""
from __future__ import annotations

import pytest

from conch.gateway.ray import run
from conch.gateway.ray.app import model_options
from conch.gateway.ray.capacity import FleetTooLarge, check_fits, fleet_cpus
from conch.gateway.ray.settings import RaySettings
from tests.conftest import write_repository


@pytest.fixture
def init_calls(monkeypatch):
    calls: list[dict] = []
    monkeypatch.setattr(run.ray, "init", lambda **kwargs: calls.append(kwargs))
    return calls


def test_a_local_ray_is_a_new_one_never_a_leftover_session(init_calls):
    run.start_ray(None, 2)
    assert init_calls[0]["address"] == "local" and init_calls[0]["num_cpus"] == 2
    run.start_ray("ray://head:10001", None)
    assert init_calls[1] == {"address": "ray://head:10001", "ignore_reinit_error": True}


@pytest.fixture
def two_models(tmp_path):
    root = write_repository(tmp_path, {"a": {"weights": "builtin:tiny"}, "b": {"weights": "builtin:tiny"}})
    return str(root)


def test_two_replicas_of_two_models_do_not_fit_two_cores(two_models):
    settings = RaySettings(repository=two_models, replicas=2)
    options = model_options(settings)
    assert fleet_cpus(settings, options) == (5.0, 4)               # 1 ingress + 2 x 2 model replicas
    with pytest.raises(FleetTooLarge) as refused:
        check_fits(settings, options, available=2)
    message = str(refused.value)
    assert "needs 5 CPUs" in message and "has 2" in message
    assert "--replicas 1" in message and "--ray-model-cpus 0.25" in message


def test_what_fits_is_not_refused(two_models):
    settings = RaySettings(repository=two_models, replicas=2, ingress_cpus=0.5, model_cpus=0.25)
    check_fits(settings, model_options(settings), available=2)     # 0.5 + 4 x 0.25 = 1.5


def test_trace_config_travels_to_the_ingress_and_trace_file_is_refused(monkeypatch, two_models):
    from conch.gateway import cli

    seen: list[RaySettings] = []
    monkeypatch.setattr(run, "serve_ray", lambda settings, *args: seen.append(settings))
    entries = ["mode=opentelemetry", "opentelemetry,url=http://127.0.0.1:4318/v1/traces"]
    cli.main(["serve", "--ray", "--model-repository", two_models,
              *(a for e in entries for a in ("--trace-config", e))])
    assert seen[0].trace_config == tuple(entries)                  # each ingress replica parses the same entries
    with pytest.raises(SystemExit, match="--trace-config 'rate=0'"):
        cli.main(["serve", "--ray", "--model-repository", two_models, "--trace-config", "rate=0"])
    with pytest.raises(SystemExit, match="--trace-file is not supported on Ray"):
        cli.main(["serve", "--ray", "--model-repository", two_models, "--trace-file", "t.json"])
    assert len(seen) == 1                                          # refused before Ray starts


def test_the_image_flags_travel_to_each_ingress_replica(monkeypatch, two_models):
    from conch.gateway import cli
    from conch.gateway.ray.ingress import faces_settings

    seen: list[RaySettings] = []
    monkeypatch.setattr(run, "serve_ray", lambda settings, *args: seen.append(settings))
    cli.main(["serve", "--ray", "--model-repository", two_models, "--image-allow-origin", "https://shots.example.com",
              "--image-max-bytes", "1000", "--image-fetch-timeout", "2.5"])
    images = faces_settings(seen[0]).images                        # what the ingress replica's faces read
    assert images.max_bytes == 1000 and images.timeout_s == 2.5
    assert images.origins.allowed == {"https://shots.example.com"}
    with pytest.raises(SystemExit, match="--image-allow-origin"):
        cli.main(["serve", "--ray", "--model-repository", two_models, "--image-allow-origin", "ftp://x"])
    assert len(seen) == 1                                          # refused before Ray starts
