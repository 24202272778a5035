"""Credentials for a repository on object storage come from the environment or the cloud SDK's own files,
nothing of Conch's: against moto's S3 server on loopback, a process with no AWS keys in its environment reads
the bucket with the keys in a shared credentials file (AWS_SHARED_CREDENTIALS_FILE, as ~/.aws/credentials), and
fails naming the missing credentials without it; the secret is in neither process's output."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.object_stores import start_s3

LIST = "from conch.engine.repository import ModelRepository; import sys; print(ModelRepository(sys.argv[1]).names())"
SECRET = "file-only-secret-3c9d"


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("s3-credentials")
    store = start_s3(tmp)
    saved = {k: os.environ.get(k) for k in store.env}
    os.environ.update(store.env)
    fs = store.filesystem()
    fs.mkdir("bucket")
    fs.pipe_file("bucket/models/echo/config.pbtxt", b'name: "echo"\nbackend: "python"\n')
    yield store, tmp
    store.stop()
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def list_models(store, tmp, credentials: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true",
               AWS_SHARED_CREDENTIALS_FILE=credentials or str(tmp / "none"),
               CONCH_REPOSITORY_CACHE=str(tmp / "mirrors"))
    return subprocess.run([sys.executable, "-c", LIST, store.url("bucket/models")], env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_sdks_credentials_file_is_read_and_needed(bucket):
    store, tmp = bucket
    path = tmp / "credentials"
    path.write_text(f"[default]\naws_access_key_id = file-key\naws_secret_access_key = {SECRET}\n")
    done = list_models(store, tmp, str(path))
    assert done.returncode == 0 and done.stdout.strip() == "['echo']", done.stderr[-2000:]
    refused = list_models(store, tmp, None)
    assert refused.returncode != 0 and "credentials" in refused.stderr.lower()
    assert SECRET not in done.stdout + done.stderr + refused.stdout + refused.stderr
