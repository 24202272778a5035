"""`conch serve`: the command behind `make run`."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from engine.engine import Engine
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
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import uvicorn

    from gateway.app import build_app

    engine = Engine(ModelRepository(args.model_repository))
    app = build_app(engine, Settings(host=args.host, port=args.port))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=5)


if __name__ == "__main__":
    main()
