"""`conch serve`: the command behind `make run`."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from engine.engine import Engine
from engine.model_control import ModelControl
from engine.repository import ModelRepository
from gateway.state import Settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="conch", description="Conch: an OpenAI-compatible LLM gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a model repository (default: the embedded SmolLM2)")
    serve.add_argument("--model-repository", type=Path, default=None)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--grpc-port", type=int, default=None, help="serve KServe v2 gRPC on this port (e.g. 8001)")
    serve.add_argument("--model-control-mode", choices=["none", "explicit", "poll"], default="none")
    serve.add_argument("--load-model", action="append", default=[], help="explicit mode: load at start ('*' = all)")
    serve.add_argument("--repository-poll-secs", type=float, default=15.0)
    serve.add_argument("--response-cache", default=None, metavar="memory|redis://HOST:PORT/DB",
                       help="cache deterministic responses (none by default)")
    serve.add_argument("--api-key", action="append", default=[], metavar="KEY",
                       help="accept this key for every model, without limits (repeatable)")
    serve.add_argument("--admin-key", action="append", default=[], metavar="KEY",
                       help="accept this key for every model and for model control and /metrics (repeatable)")
    serve.add_argument("--api-keys-file", type=Path, default=None, help="YAML/JSON keys with models and limits")
    serve.add_argument("--rate-limits", default="memory", metavar="memory|redis://HOST:PORT/DB",
                       help="where the rate-limit buckets live (redis: shared by every replica)")
    serve.add_argument("--max-queue-size", type=int, default=None, metavar="N",
                       help="requests that may wait per model (overrides each config; 0 = unbounded)")
    serve.add_argument("--no-metrics", action="store_true", help="do not serve /metrics")
    serve.add_argument("--metrics-port", type=int, default=None,
                       help="also serve /metrics on this port, without a key (e.g. 8002)")
    serve.add_argument("--metrics-host", default="127.0.0.1", help="the metrics port's address (default loopback)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import uvicorn

    from gateway.app import build_app

    from engine.cache import open_cache
    from gateway.auth import Gate, KeyRing
    from gateway.limits import open_limiter

    engine = Engine(ModelRepository(args.model_repository), cache=open_cache(args.response_cache),
                    max_queue_size=args.max_queue_size)
    keys = KeyRing.load(args.api_key, args.api_keys_file, args.admin_key)
    gate = Gate(keys, open_limiter(args.rate_limits)) if not keys.open else None
    control = ModelControl(engine, args.model_control_mode, args.load_model, args.repository_poll_secs)
    app = build_app(engine, Settings(host=args.host, port=args.port, metrics_port=args.metrics_port,
                                        metrics_host=args.metrics_host), gate=gate, metrics=not args.no_metrics,
                    control=control, grpc_port=args.grpc_port)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=5)


if __name__ == "__main__":
    main()
