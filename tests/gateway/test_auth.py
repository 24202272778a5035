"""API keys through the /v1 face (in process, over a fake backend): 401, 404 that reveals nothing, 429s."""
from __future__ import annotations

import httpx

from conch.engine.loaded_model import LoadedModel
from conch.engine.repository import ModelConfig
from conch.gateway.app import build_app
from conch.gateway.auth import ApiKey, Gate, KeyRing, bearer
from conch.gateway.limits import open_limiter
from tests.serving_helpers import FakeBackend, fake_engine

KEYS = [ApiKey("sk-all", "all"), ApiKey("sk-m", "only-m", frozenset({"m"})),
        ApiKey("sk-rpm", "rpm", rpm=2), ApiKey("sk-tpm", "tpm", tpm=20)]


def _client(keys=KEYS) -> tuple[httpx.AsyncClient, Gate]:
    engine = fake_engine()
    hidden = ModelConfig(name="hidden", backend="fake")
    engine._models["hidden"] = {hidden.version: LoadedModel(hidden, FakeBackend(hidden))}
    gate = Gate(KeyRing(keys), open_limiter("memory")) if keys else None
    app = build_app(engine, gate=gate)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t/v1"), gate


async def _complete(client, key: str | None, model: str = "m", max_tokens: int = 8) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return await client.post("/completions", headers=headers,
                             json={"model": model, "prompt": "hi", "max_tokens": max_tokens})


def test_bearer_parsing():
    assert bearer("Bearer sk-1") == "sk-1" and bearer("bearer  sk-1 ") == "sk-1"
    assert bearer("Basic abc") is None and bearer("Bearer ") is None and bearer(None) is None


def test_key_file(tmp_path):
    f = tmp_path / "keys.yaml"
    f.write_text("keys:\n  - {key: sk-a, name: a, models: [m], rpm: 5, tpm: 100}\n  - {key: sk-b}\n")
    ring = KeyRing.load(["sk-cli"], f)
    assert len(ring) == 3 and ring.lookup("sk-a") == ApiKey("sk-a", "a", frozenset({"m"}), 5, 100)
    assert ring.lookup("sk-cli").models is None and ring.lookup("nope") is None
    assert "sk-a" not in repr(ring.lookup("sk-a"))                  # secrets stay out of logs


async def test_no_keys_configured_is_open():
    client, _ = _client(keys=None)
    async with client:
        assert (await _complete(client, None)).status_code == 200


async def test_missing_or_wrong_key_is_401_with_an_openai_body():
    client, gate = _client()
    async with client:
        for key in (None, "sk-wrong"):
            r = await _complete(client, key)
            assert r.status_code == 401
            error = r.json()["error"]
            assert set(error) == {"message", "type", "param", "code"} and error["code"] == "invalid_api_key"
        assert (await client.get("/models")).status_code == 401
        assert (await client.get("/models", headers={"Authorization": "Bearer sk-all"})).status_code == 200
        assert (await _complete(client, "sk-all")).status_code == 200
        assert (await client.get("http://t/health")).status_code == 200       # probes stay open
    assert gate.unauthorized == 3


async def test_a_model_the_key_may_not_use_looks_like_no_model():
    client, _ = _client()
    async with client:
        assert (await _complete(client, "sk-m")).status_code == 200
        refused = await _complete(client, "sk-m", model="hidden")
        missing = await _complete(client, "sk-all", model="no-such-model")
        assert (await _complete(client, "sk-all", model="hidden")).status_code == 200
    assert refused.status_code == missing.status_code == 404
    assert refused.json()["error"]["code"] == missing.json()["error"]["code"] == "model_not_found"
    assert refused.json()["error"]["message"].replace("hidden", "X") == \
        missing.json()["error"]["message"].replace("no-such-model", "X")


async def test_requests_per_minute_429_names_the_limit():
    client, gate = _client()
    async with client:
        assert [(await _complete(client, "sk-rpm")).status_code for _ in range(2)] == [200, 200]
        r = await _complete(client, "sk-rpm")
        assert (await _complete(client, "sk-all")).status_code == 200          # other keys unaffected
    assert r.status_code == 429
    assert int(r.headers["retry-after"]) >= 1 and r.headers["x-ratelimit-limit-requests"] == "2"
    error = r.json()["error"]
    assert error["code"] == "rate_limit_exceeded" and error["type"] == "requests"
    assert "requests per min (RPM)" in error["message"] and "Limit 2" in error["message"]
    assert gate.rejections[("m", "requests")] == 1


async def test_tokens_per_minute_charge_usage_after_the_fact():
    client, gate = _client()
    async with client:
        for _ in range(2):                                 # 2 prompt + 8 completion tokens each: 20 in all
            assert (await _complete(client, "sk-tpm")).status_code == 200
            await gate.limiter.flush()
        r = await _complete(client, "sk-tpm")
    assert r.status_code == 429 and r.json()["error"]["type"] == "tokens"
    assert r.headers["x-ratelimit-limit-tokens"] == "20" and int(r.headers["retry-after"]) >= 1


async def test_models_lists_only_what_the_key_may_use():
    client, _ = _client()
    async with client:
        async def ids(key: str) -> set[str]:
            r = await client.get("/models", headers={"Authorization": f"Bearer {key}"})
            return {m["id"] for m in r.json()["data"]}
        everything, only_m = await ids("sk-all"), await ids("sk-m")
        hidden = await client.get("/models/hidden", headers={"Authorization": "Bearer sk-m"})
        missing = await client.get("/models/no-such-model", headers={"Authorization": "Bearer sk-m"})
        shown = await client.get("/models/hidden", headers={"Authorization": "Bearer sk-all"})
    assert "hidden" in everything and only_m == {"m"}
    assert hidden.status_code == missing.status_code == 404 and shown.json()["id"] == "hidden"
    assert hidden.json()["error"]["message"].replace("hidden", "X") == \
        missing.json()["error"]["message"].replace("no-such-model", "X")


BAD_KEY_FILES = {
    "tpm: x": ("  - {key: sk-a, name: a, tpm: x}\n", "entry 0 (name 'a'): 'tpm'"),
    "rpm: -5": ("  - {key: sk-a, name: a, rpm: -5}\n", "entry 0 (name 'a'): 'rpm'"),
    "models a string": ("  - {key: sk-a, name: a, models: tiny}\n", "entry 0 (name 'a'): 'models'"),
    "admin a string": ("  - {key: sk-a, name: a, admin: 'yes'}\n", "'admin'"),
    "unknown field": ("  - {key: sk-a, name: a, rmp: 5}\n", "'rmp'"),
    "no secret": ("  - {name: a}\n", "'key'"),
    "duplicate names": ("  - {key: sk-a, name: a}\n  - {key: sk-b, name: a}\n", "named 'a'"),
    "duplicate secrets": ("  - {key: sk-a, name: a}\n  - {key: sk-a, name: b}\n", "'a' and 'b' share one secret"),
}


def test_a_bad_key_file_is_refused_naming_the_entry_and_the_field(tmp_path):
    from conch.gateway.keys_file import KeysFileError

    for case, (entries, named) in BAD_KEY_FILES.items():
        f = tmp_path / "keys.yaml"
        f.write_text("keys:\n" + entries)
        try:
            KeyRing.load(file=f)
        except KeysFileError as exc:
            assert named in str(exc), (case, str(exc))
            assert "sk-" not in str(exc), case                               # never the secret
        else:
            raise AssertionError(f"{case}: accepted")


def test_conch_serve_refuses_a_bad_key_file_at_start(tmp_path):
    import pytest

    from conch.gateway.cli import main

    f = tmp_path / "keys.yaml"
    f.write_text("keys:\n  - {key: sk-a, name: a, rpm: -5}\n")
    with pytest.raises(SystemExit, match="entry 0 .name 'a'.: 'rpm'"):
        main(["serve", "--api-keys-file", str(f)])


def test_a_bad_reload_keeps_the_keys_in_force(tmp_path, caplog):
    f = tmp_path / "keys.yaml"
    f.write_text("keys:\n  - {key: sk-a, name: a}\n")
    gate = Gate(KeyRing.load(file=f))
    f.write_text("keys:\n  - {key: sk-a, name: a}\n  - {key: sk-b, name: a}\n")
    assert gate.reload_keys() is False
    assert gate.keys.lookup("sk-a").name == "a" and gate.keys.lookup("sk-b") is None
    assert "reload refused" in caplog.text and "named 'a'" in caplog.text
    f.write_text("keys:\n  - {key: sk-b, name: b, models: [m]}\n")
    assert gate.reload_keys() is True
    assert gate.keys.lookup("sk-a") is None and gate.keys.lookup("sk-b").models == frozenset({"m"})
