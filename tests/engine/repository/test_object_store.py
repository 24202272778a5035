"""Repositories on object storage, against real servers of each protocol on loopback (moto's S3 server,
gcp-storage-emulator, Azurite): Triton's URL forms parse, the mirror holds exactly the bucket's objects, a
rewritten object is downloaded again and only it, a deleted one goes, and the repository reads the mirror."""
from __future__ import annotations

import os

import pytest

from conch.engine.repository import ModelRepository
from conch.engine.repository.object_store import ObjectStoreMirror, StoreLocation
from tests.object_stores import STARTERS

PBTXT = 'name: "{name}"\nbackend: "python"\ninput [ {{ name: "x", data_type: TYPE_INT32, dims: [ -1 ] }} ]\n' \
        'output [ {{ name: "y", data_type: TYPE_INT32, dims: [ -1 ] }} ]\n'


@pytest.mark.parametrize("url, scheme, root, endpoint, account", [
    ("s3://bucket/models", "s3", "bucket/models", None, None),
    ("s3://127.0.0.1:9000/bucket/models", "s3", "bucket/models", "http://127.0.0.1:9000", None),
    ("s3://https://minio.local:443/bucket", "s3", "bucket", "https://minio.local:443", None),
    ("gs://bucket/a/b/", "gs", "bucket/a/b", None, None),
    ("as://acct/container/path", "as", "container/path", None, "acct"),
])
def test_triton_url_forms(url, scheme, root, endpoint, account):
    loc = StoreLocation.parse(url)
    assert (loc.scheme, loc.root, loc.endpoint, loc.account) == (scheme, root, endpoint, account)


@pytest.mark.parametrize("url", ["s3://", "as://acct", "gs://bucket/../other", "ftp://x/y"])
def test_malformed_urls_are_refused_by_name(url):
    with pytest.raises(ValueError, match="://"):
        StoreLocation.parse(url)


@pytest.fixture(scope="module", params=sorted(STARTERS))
def store(request, tmp_path_factory):
    server = STARTERS[request.param](tmp_path_factory.mktemp(request.param))
    env = {**server.env, "CONCH_REPOSITORY_CACHE": str(tmp_path_factory.mktemp("mirrors"))}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    fs = server.filesystem()
    fs.mkdir("bucket")
    yield server, fs
    for k, v in saved.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    server.stop()


def test_mirror_follows_the_bucket(store, tmp_path):
    server, fs = store
    prefix = f"bucket/{tmp_path.name}"
    fs.pipe_file(f"{prefix}/echo/config.pbtxt", PBTXT.format(name="echo").encode())
    fs.pipe_file(f"{prefix}/echo/1/model.py", b"# v1")
    fs.pipe_file(f"{prefix}/echo/2/model.py", b"# v2")
    repository = ModelRepository(server.url(prefix))          # syncs on open
    mirror = repository.mirrors[0]
    assert repository.names() == ["echo"] and repository.versions("echo") == ["2"]
    assert (mirror.local / "echo" / "1" / "model.py").read_bytes() == b"# v1"
    v1 = (mirror.local / "echo" / "1" / "model.py").stat().st_mtime_ns

    fs.pipe_file(f"{prefix}/echo/2/model.py", b"# v2 again")      # rewritten: downloaded again, alone
    fs.rm(f"{prefix}/echo/1/model.py")                               # deleted: its folder goes too
    fs.pipe_file(f"{prefix}/other/config.pbtxt", PBTXT.format(name="other").encode())
    repository.refresh()
    assert (mirror.local / "echo" / "2" / "model.py").read_bytes() == b"# v2 again"
    assert not (mirror.local / "echo" / "1").exists()
    assert repository.names() == ["echo", "other"]
    fs.pipe_file(f"{prefix}/echo/1/model.py", b"# v1")
    repository.refresh()
    assert (mirror.local / "echo" / "1" / "model.py").stat().st_mtime_ns != v1   # came back: a new copy
    assert "testing" not in repr(vars(mirror)) and "AccountKey" not in repr(vars(mirror))


def test_mixed_with_a_local_folder_and_duplicates_refused(store, tmp_path):
    server, fs = store
    prefix = f"bucket/{tmp_path.name}"
    fs.pipe_file(f"{prefix}/remote_model/config.pbtxt", PBTXT.format(name="remote_model").encode())
    fs.pipe_file(f"{prefix}/both/config.pbtxt", PBTXT.format(name="both").encode())
    for name in ("local_model", "both"):
        (tmp_path / "local" / name).mkdir(parents=True)
        (tmp_path / "local" / name / "config.pbtxt").write_text(PBTXT.format(name=name))
    repository = ModelRepository([tmp_path / "local", server.url(prefix)])
    assert repository.names() == ["both", "local_model", "remote_model"]
    assert repository.config("remote_model").path == str(repository.mirrors[0].local / "remote_model")
    with pytest.raises(Exception, match="more than one repository") as err:
        repository.config("both")
    assert server.url(prefix) in str(err.value)


def test_the_cache_is_shared_by_url(store, tmp_path):
    server, fs = store
    prefix = f"bucket/{tmp_path.name}"
    fs.pipe_file(f"{prefix}/m/config.pbtxt", PBTXT.format(name="m").encode())
    a, b = ObjectStoreMirror(server.url(prefix)), ObjectStoreMirror(server.url(prefix))
    a.sync()
    b.sync()
    assert a.local == b.local and (a.local / "m" / "config.pbtxt").exists()
