"""`conch serve --ray`: start a local Ray (or join one with --address) and run the application on it."""
from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

import ray
from ray import serve

from conch.gateway.ray.app import application, model_options
from conch.gateway.ray.capacity import FleetTooLarge, check_fits
from conch.gateway.ray.settings import RaySettings
from conch.gateway.state import KEEP_ALIVE_S

log = logging.getLogger(__name__)

APP_NAME = "conch"
_OBJECT_STORE_BYTES = 128 * 1024 * 1024   # deltas are small: a small store keeps a local Ray light


def start_ray(address: str | None, num_cpus: int | None) -> None:
    """Join `address` (ray://HOST:10001, HOST:6379 or auto), or start a new local Ray with the dashboard off
    (address "local": never a cluster an earlier run left behind, which RAY_ADDRESS or Ray's session file
    would otherwise join, refusing the local-only options). A local Ray's workers import this checkout of
    Conch first (PYTHONPATH), as this process does."""
    if address:
        ray.init(address=address, ignore_reinit_error=True)
        return
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, object_store_memory=_OBJECT_STORE_BYTES,
             ignore_reinit_error=True, runtime_env={"env_vars": {"PYTHONPATH": path}})


def serve_ray(settings: RaySettings, host: str, port: int, address: str | None = None,
              num_cpus: int | None = None, keep_alive_s: int = KEEP_ALIVE_S) -> None:
    """Blocks until SIGINT or SIGTERM, then deletes the application (and stops a Ray it started)."""
    options = model_options(settings)                 # a bad config fails before Ray starts
    start_ray(address, num_cpus)
    try:
        check_fits(settings, options, float(ray.cluster_resources().get("CPU", 0)))
    except FleetTooLarge:
        if not address:
            ray.shutdown()
        raise
    serve.start(http_options={"host": host, "port": port, "keep_alive_timeout_s": keep_alive_s})
    serve.run(application(settings), name=APP_NAME, route_prefix="/", blocking=False)
    log.info("conch on Ray Serve: http://%s:%d (%s)", host, port, address or "local Ray")
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    if address:
        serve.delete(APP_NAME)
    else:
        serve.shutdown()
        ray.shutdown()
