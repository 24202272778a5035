"""The seed's `inflight_batcher_llm` repository (tests/gateway/kserve/inflight_repo.py) uploaded to each real
object store on loopback (moto's S3 in the host:port form, gcp-storage-emulator, Azurite) and served from there
in explicit mode (`preprocessing` loaded at start): the repository index reads the bucket before it answers,
loading the ensemble brings up its steps from the mirror and it answers the documented generate; a model
uploaded after the start appears in the index and loads; the store's credentials are never in the log."""
from __future__ import annotations

import os

import httpx
import pytest

from tests.conftest import start_server
from tests.gateway.kserve.inflight_repo import build_inflight
from tests.object_stores import AZURITE_KEY, STARTERS, upload_tree

PROMPT = "What is machine learning?"


@pytest.fixture(scope="module", params=sorted(STARTERS))
def served(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    store = STARTERS[request.param](tmp)
    saved = {k: os.environ.get(k) for k in store.env}
    os.environ.update(store.env)                            # the test's own uploads read them lazily
    local = build_inflight(tmp / "inflight")
    bls = tmp / "later"
    (local / "tensorrt_llm_bls").rename(bls)                 # uploaded after the server started
    fs = store.filesystem()
    fs.mkdir("bucket")
    upload_tree(fs, local, "bucket/inflight")
    server = start_server(["--model-repository", store.url("bucket/inflight"), "--model-control-mode", "explicit",
                           "--load-model", "preprocessing"],
                          tmp, env={**store.env, "CONCH_REPOSITORY_CACHE": str(tmp / "mirrors")})
    yield server, store, fs, bls
    server.stop()
    store.stop()
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def index(url: str) -> dict[str, dict]:
    return {m["name"]: m for m in httpx.post(f"{url}/v2/repository/index", json={}, timeout=60).json()}


def test_the_inflight_repository_serves_from_the_bucket(served):
    server, store, fs, bls = served
    assert set(index(server.url)) == {"ensemble", "preprocessing", "tensorrt_llm", "postprocessing"}
    r = httpx.post(f"{server.url}/v2/repository/models/ensemble/load", timeout=300)
    assert r.status_code == 200, r.text
    assert {n for n, m in index(server.url).items() if m.get("state") == "READY"} == set(index(server.url))
    r = httpx.post(f"{server.url}/v2/models/ensemble/generate", timeout=120,
                   json={"text_input": PROMPT, "parameters": {"max_tokens": 8}})
    assert r.status_code == 200 and r.json()["text_output"].startswith(PROMPT), r.text

    upload_tree(fs, bls, "bucket/inflight/tensorrt_llm_bls")
    assert "tensorrt_llm_bls" in index(server.url)                  # explicit mode reads the bucket per index
    r = httpx.post(f"{server.url}/v2/repository/models/tensorrt_llm_bls/load", timeout=300)
    assert r.status_code == 200, r.text
    assert httpx.get(f"{server.url}/v2/models/tensorrt_llm_bls/ready").status_code == 200
    log = server.log.read_text()
    assert "testing" not in log and AZURITE_KEY not in log            # S3's secret, Azurite's account key
