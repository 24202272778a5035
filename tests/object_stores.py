"""Real object-storage servers on loopback for the repository tests: moto's S3 server, Azurite's Blob service
(npm; `make setup-dev` installs it under .venv/azurite) and gcp-storage-emulator (PyPI). Each yields a `Store`
whose `env` is what a client (and `conch serve`) needs to reach it and whose `url(path)` is Triton's URL."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import free_port

# Azurite's documented development account (public, the same in every Azurite install)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class Store:
    scheme: str
    url: Callable[[str], str]             # bucket/path -> the repository URL
    env: dict[str, str]
    process: subprocess.Popen
    log: Path
    extra: dict = field(default_factory=dict)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def filesystem(self):
        """The store's fsspec client, with the store's env applied (what the test uploads through)."""
        from conch.engine.repository.object_store import StoreLocation

        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            return StoreLocation.parse(self.url("bucket")).filesystem()
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"store exited:\n{log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"store did not listen:\n{log.read_text()[-2000:]}")


def _spawn(cmd: list[str], port: int, tmp: Path, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    log = tmp / f"store-{port}.log"
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=tmp,
                            env={**os.environ, **(env or {})})
    _wait_port(port, proc, log)
    return proc, log


def start_s3(tmp: Path, host_form: bool = True) -> Store:
    """moto's S3 server. With `host_form` the URL names the server (s3://127.0.0.1:PORT/bucket/...); else the
    endpoint comes from AWS_ENDPOINT_URL and the URL is plain s3://bucket/..."""
    port = free_port()
    proc, log = _spawn([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port, tmp)
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    if host_form:
        return Store("s3", lambda p: f"s3://127.0.0.1:{port}/{p}", env, proc, log)
    return Store("s3", lambda p: f"s3://{p}", {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}, proc, log)


def start_gcs(tmp: Path) -> Store:
    port = free_port()
    main = "import sys; from gcp_storage_emulator.__main__ import main; sys.exit(main())"
    proc, log = _spawn([sys.executable, "-c", main, "start", "--host", "127.0.0.1", "--port", str(port),
                        "--in-memory"], port, tmp)
    return Store("gs", lambda p: f"gs://{p}", {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}"}, proc, log)


def azurite_binary() -> str | None:
    local = Path(sys.prefix) / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    return str(local) if local.exists() else shutil.which("azurite-blob")


def start_azure(tmp: Path) -> Store:
    exe = azurite_binary()
    if exe is None:
        pytest.skip("azurite-blob is not installed (make setup-dev installs it with npm)")
    port = free_port()
    (tmp / "azurite").mkdir(exist_ok=True)
    proc, log = _spawn([exe, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(tmp / "azurite"),
                        "--silent", "--skipApiVersionCheck", "--loose"], port, tmp)
    conn = (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};")
    return Store("as", lambda p: f"as://{AZURITE_ACCOUNT}/{p}", {"AZURE_STORAGE_CONNECTION_STRING": conn}, proc, log)


STARTERS = {"s3": start_s3, "gs": start_gcs, "as": start_azure}


def upload_tree(fs, local: Path, remote: str) -> None:
    """Every file under `local` to `remote` (bucket/prefix), as a user's `aws s3 cp --recursive` would."""
    for path in sorted(local.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            fs.pipe_file(f"{remote}/{path.relative_to(local).as_posix()}", path.read_bytes())
