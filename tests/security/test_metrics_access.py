"""/metrics lists every model and its traffic: with API keys configured the API port serves it only to a key
with the `metrics` or `admin` role (401 without a key, 403 for another key), and `--metrics-port` serves it
without a key on a port of its own, bound to loopback."""
from __future__ import annotations

import httpx
import pytest
import yaml

from tests.conftest import free_port, start_server, write_repository

KEYS = [{"key": "sk-user"}, {"key": "sk-scrape", "metrics": True}, {"key": "sk-admin", "admin": True}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = write_repository(tmp_path_factory.mktemp("repo"), {"tiny": {"weights": "builtin:tiny", "dtype": "float32"}})
    keys = root.parent / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": KEYS}))
    port = free_port()
    server = start_server(["--model-repository", str(root), "--api-keys-file", str(keys), "--metrics-port", str(port)],
                          root)
    server.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield server
    server.stop()


def scrape(server, key: str | None) -> httpx.Response:
    return httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {key}"} if key else {})


def test_the_api_port_wants_a_metrics_or_admin_key(server):
    r = httpx.post(f"{server.v1}/completions", headers={"Authorization": "Bearer sk-user"},
                   json={"model": "tiny", "prompt": "Hi", "max_tokens": 1})
    assert r.status_code == 200
    assert scrape(server, None).status_code == 401
    refused = scrape(server, "sk-user")
    assert refused.status_code == 403 and "'metrics' role" in refused.json()["error"]
    for key in ("sk-scrape", "sk-admin"):
        r = scrape(server, key)
        assert r.status_code == 200 and 'nv_inference_request_success{model="tiny",version="1"} 1' in r.text


def test_the_metrics_port_serves_without_a_key(server):
    r = httpx.get(server.metrics_url)
    assert r.status_code == 200 and 'nv_inference_count{model="tiny",version="1"}' in r.text
    assert httpx.get(server.metrics_url.removesuffix("/metrics") + "/v1/models").status_code == 404


async def test_with_no_metrics_key_the_api_port_refuses_everyone():
    from conch.gateway.app import build_app
    from conch.gateway.auth import ApiKey, Gate, KeyRing
    from tests.serving_helpers import fake_engine

    app = build_app(fake_engine(), gate=Gate(KeyRing([ApiKey("sk-user")])))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        r = await client.get("/metrics", headers={"Authorization": "Bearer sk-user"})
    assert r.status_code == 403 and "no key with the 'metrics' role" in r.json()["error"]
