"""`conch serve`: the command behind `make run`."""
from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path

from conch.engine.engine import Engine
from conch.engine.model_control import ModelControl
from conch.engine.repository import ModelRepository
from conch.engine.repository.object_store import is_remote
from conch.gateway import startup_gc
from conch.gateway.header_timeout import DEFAULT_HEADER_TIMEOUT_S, header_timeout_protocol
from conch.gateway.records.store import DEFAULT_MEMORY_MB, DEFAULT_TTL_S, open_records
from conch.gateway.state import KEEP_ALIVE_S, Settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="conch", description="Conch: an OpenAI-compatible LLM gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a .gguf file, an HF model folder or a model repository "
                                          "(default: the embedded SmolLM2)")
    serve.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                       help="a .gguf file or an HF model folder, served under its file's or folder's name "
                            "(docs/models.md)")
    serve.add_argument("--model", action="append", default=[], metavar="NAME=PATH",
                       help="serve a .gguf file or an HF model folder under NAME (repeatable)")
    serve.add_argument("--mmproj", action="append", default=[], metavar="[NAME=]PATH",
                       help="a GGUF model's llama.cpp mmproj file: its vision tower (docs/vision.md; PATH alone: "
                            "the one model named)")
    serve.add_argument("--model-repository", action="append", default=[], metavar="PATH|URL",
                       help="a model folder, or s3://[HOST:PORT/]BUCKET/PATH, gs://BUCKET/PATH, "
                            "as://ACCOUNT/CONTAINER/PATH (the [cloud] extra; docs/object-storage.md); repeatable")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--keep-alive-timeout", type=int, default=KEEP_ALIVE_S, metavar="SECONDS",
                       help="how long an idle connection stays open (default 90, as Ray Serve's proxy): longer "
                            "than a client pool's expiry (httpx, the OpenAI SDK: 5 s), so the client drops an "
                            "idle connection before the server closes it under a request")
    serve.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT_S, metavar="SECONDS",
                       help="close a connection that has not sent a request's headers within this time (slowloris)")
    serve.add_argument("--grpc-port", type=int, default=None, help="serve KServe v2 gRPC on this port (e.g. 8001)")
    serve.add_argument("--model-control-mode", choices=["none", "explicit", "poll"], default="none")
    serve.add_argument("--load-model", action="append", default=[], help="explicit mode: load at start ('*' = all)")
    serve.add_argument("--repository-poll-secs", type=float, default=15.0)
    serve.add_argument("--response-cache", default=None, metavar="memory|redis://HOST:PORT/DB",
                       help="cache deterministic responses (none by default)")
    serve.add_argument("--response-store", default="memory", metavar="memory|redis://HOST:PORT/DB",
                       help="where stored responses and conversations live (redis: shared by every replica; "
                            "default memory)")
    serve.add_argument("--response-store-ttl", type=float, default=DEFAULT_TTL_S, metavar="SECONDS",
                       help="how long a stored response or conversation is kept, from its last write (default 30 days)")
    serve.add_argument("--response-store-mb", type=float, default=DEFAULT_MEMORY_MB, metavar="N",
                       help="the store's memory tier bound in MiB; the oldest records go first (default 256)")
    serve.add_argument("--api-key", action="append", default=[], metavar="KEY",
                       help="accept this key for every model, without limits (repeatable)")
    serve.add_argument("--admin-key", action="append", default=[], metavar="KEY",
                       help="accept this key for every model and for model control and /metrics (repeatable)")
    serve.add_argument("--api-keys-file", type=Path, default=None, help="YAML/JSON keys with models and limits")
    serve.add_argument("--rate-limits", default="memory", metavar="memory|redis://HOST:PORT/DB",
                       help="where the rate-limit buckets live (redis: shared by every replica)")
    serve.add_argument("--rate-limits-fallback", choices=["local", "open", "closed"], default="local",
                       help="while Redis is down: per-process buckets (default), allow all, or refuse all (503)")
    serve.add_argument("--rate-limits-replicas", type=int, default=None, metavar="N",
                       help="processes sharing the Redis limits (each falls back to 1/N of a limit; default 1, "
                            "or --ingress-replicas with --ray)")
    serve.add_argument("--max-queue-size", type=int, default=None, metavar="N",
                       help="requests that may wait per model (overrides each config; 0 = unbounded)")
    serve.add_argument("--trace-file", type=Path, default=None,
                       help="write Triton traces here (turn them on with /v2/trace/setting trace_level)")
    serve.add_argument("--trace-config", action="append", default=[], metavar="[opentelemetry,]KEY=VALUE",
                       help="Triton's trace settings: mode=opentelemetry exports OTLP spans (the [otel] extra); "
                            "rate=N, level=OFF|TIMESTAMPS, opentelemetry,url=..., opentelemetry,resource=K=V, "
                            "opentelemetry,bsp_*=N, opentelemetry,protocol=http|grpc (docs/tracing.md)")
    serve.add_argument("--no-metrics", action="store_true", help="do not serve /metrics")
    serve.add_argument("--metrics-port", type=int, default=None,
                       help="also serve /metrics on this port, without a key (e.g. 8002)")
    serve.add_argument("--metrics-host", default="127.0.0.1", help="the metrics port's address (default loopback)")
    serve.add_argument("--mcp-servers", type=Path, default=None, metavar="FILE",
                       help="YAML/JSON: registered MCP servers, allowed origins, which keys may use them "
                            "(docs/mcp.md)")
    serve.add_argument("--mcp-allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="a request's mcp server_url may reach this exact origin, e.g. "
                            "https://mcp.example.com (repeatable; none by default)")
    serve.add_argument("--mcp-loop-timeout", type=float, default=None, metavar="SECONDS",
                       help="bound on one response's MCP loop, its model turns included (default 120)")
    serve.add_argument("--image-allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="an image part's http(s) URL may be fetched from this exact origin, and redirects only "
                            "to listed ones (repeatable; none by default: data URLs only; docs/vision.md)")
    serve.add_argument("--image-max-bytes", type=int, default=None, metavar="BYTES",
                       help="bound on one image, decoded or fetched (default 20 MiB)")
    serve.add_argument("--image-fetch-timeout", type=float, default=None, metavar="SECONDS",
                       help="bound on fetching one image URL, redirects included (default 10)")
    serve.add_argument("--model-alias", action="append", default=[], metavar="PATTERN=MODEL",
                       help="answer requests for models matching the glob PATTERN with MODEL, e.g. "
                            "'claude-*=smollm2-135m-instruct' (repeatable; the first match wins)")
    serve.add_argument("--keep-billing-header", action="store_true",
                       help="/v1/messages: keep a system block starting with x-anthropic-billing-header in the "
                            "prompt (by default it is dropped: it changes every request and defeats KV reuse)")
    serve.add_argument("--hosted-tools", choices=["drop", "refuse"], default="drop",
                       help="/v1/responses: a hosted tool (web_search, image_generation...) Conch cannot run is left "
                            "out of what the model is offered and named in the conch-hosted-tools-dropped header "
                            "(drop, the default: Codex CLI offers web_search) or refused with a 400 (refuse)")
    _ray_arguments(serve)
    return parser


def _mcp_config(args: argparse.Namespace):
    """The MCP settings, or SystemExit naming what in the flags or the file is wrong."""
    from conch.agents.mcp import McpConfig

    try:
        return McpConfig.from_flags(args.mcp_servers, args.mcp_allow_origin, args.mcp_loop_timeout)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"conch serve: MCP settings: {exc}") from None


def _images(args: argparse.Namespace):
    """Where image URLs may be fetched from, or SystemExit naming a bad origin."""
    from conch.gateway.conversation.images import ImagePolicy

    try:
        return ImagePolicy.of(args.image_allow_origin, max_bytes=args.image_max_bytes,
                              timeout_s=args.image_fetch_timeout)
    except ValueError as exc:
        raise SystemExit(f"conch serve: --image-allow-origin: {exc}") from None


def _aliases(args: argparse.Namespace):
    from conch.gateway.aliases import ModelAliases

    try:
        return ModelAliases.parse(args.model_alias)
    except ValueError as exc:
        raise SystemExit(f"conch serve: --model-alias: {exc}") from None


def _repositories(args: argparse.Namespace) -> tuple[str, ...]:
    """The repositories named: local folders made absolute, object-storage URLs as given."""
    return tuple(r if is_remote(r) else str(Path(r).resolve()) for r in args.model_repository)


def _open_repository(args: argparse.Namespace) -> ModelRepository:
    """The repository, its object-storage mirrors synced; SystemExit naming the one that cannot be read."""
    try:
        return ModelRepository(_repositories(args) or None)
    except ImportError as exc:
        raise SystemExit(f"conch serve: --model-repository: {exc.name} is not installed "
                         "(pip install 'conch[cloud]')") from None
    except (OSError, ValueError) as exc:
        raise SystemExit(f"conch serve: --model-repository: {type(exc).__name__}: {exc}") from None


def _trace_config(args: argparse.Namespace):
    from conch.gateway.telemetry import TraceConfig

    try:
        config = TraceConfig.parse(args.trace_config)
    except ValueError as exc:
        raise SystemExit(f"conch serve: {exc}") from None
    if config.opentelemetry:
        try:
            import opentelemetry.exporter.otlp.proto.http  # noqa: F401
            import opentelemetry.sdk  # noqa: F401
        except ImportError:
            raise SystemExit("conch serve: --trace-config mode=opentelemetry needs the [otel] extra "
                             "(pip install 'conch[otel]')") from None
    return config


def _repository(args: argparse.Namespace) -> ModelRepository:
    """The repositories named, or the models named by path, or the built-in one; SystemExit naming a bad path."""
    if not (args.paths or args.model):
        if args.mmproj:
            raise SystemExit("conch serve: --mmproj goes with a .gguf model path (a repository's config names "
                             "its 'mmproj')")
        return _open_repository(args)
    if args.model_repository:
        raise SystemExit("conch serve: give either model paths (PATH, --model) or --model-repository, not both")
    from conch.engine.errors import InvalidRequest
    from conch.engine.repository.paths import path_configs

    try:
        return ModelRepository(models=path_configs(args.paths, args.model, tuple(args.mmproj)))
    except InvalidRequest as exc:
        raise SystemExit(f"conch serve: {exc.message}") from None


def _ray_arguments(serve: argparse.ArgumentParser) -> None:
    ray = serve.add_argument_group("Ray Serve (needs the [ray] extra; see docs/ray.md)")
    ray.add_argument("--ray", action="store_true", help="serve as a Ray Serve application")
    ray.add_argument("--replicas", type=int, default=None, metavar="N",
                     help="replicas of every model deployment (default: each config's parameters.ray)")
    ray.add_argument("--ingress-replicas", type=int, default=1, metavar="N")
    ray.add_argument("--address", default=None, help="join this Ray cluster (ray://HOST:10001) instead of a local one")
    ray.add_argument("--ray-num-cpus", type=int, default=None, help="CPUs a local Ray offers (default: all)")
    ray.add_argument("--ray-ingress-cpus", type=float, default=1.0, help="num_cpus of an ingress replica")
    ray.add_argument("--ray-model-cpus", type=float, default=None, help="default num_cpus of a model replica")
    ray.add_argument("--ray-routing", choices=["affinity", "round-robin", "pow2"], default="affinity",
                     help="which model replica takes a request: the one holding its conversation's KV, within "
                          "--ray-affinity-slack (default), each in turn, or Ray's power-of-two least loaded")
    ray.add_argument("--ray-affinity-slack", type=int, default=None, metavar="N",
                     help="requests a conversation's replica may run beyond the least loaded replica's before "
                          "its next turn goes to the least loaded one (default: its max_ongoing_requests)")


def _serve_ray(args: argparse.Namespace) -> None:
    if args.trace_file is not None:
        raise SystemExit("conch serve --ray: --trace-file is not supported on Ray (each ingress replica would "
                         "write its own file): use --trace-config mode=opentelemetry")
    _trace_config(args)             # checked here; each ingress replica parses the same entries and exports
    for flag in ("model_control_mode", "metrics_port"):
        if getattr(args, flag) not in (None, "none"):
            raise SystemExit(f"conch serve --ray: --{flag.replace('_', '-')} is not supported on Ray")
    _mcp_config(args)               # a bad flag or file is refused before Ray starts; each ingress replica
    _aliases(args)                  # then builds its own from the same flags (RaySettings)
    _images(args)
    if args.replicas is not None and args.replicas < 1 or args.ingress_replicas < 1:
        raise SystemExit("conch serve --ray: --replicas and --ingress-replicas must be >= 1")
    from conch.gateway.ray.run import serve_ray
    from conch.gateway.ray.settings import RaySettings

    settings = RaySettings(
        repository=_repositories(args) or None,
        replicas=args.replicas, ingress_replicas=args.ingress_replicas, ingress_cpus=args.ray_ingress_cpus,
        model_cpus=args.ray_model_cpus, response_cache=args.response_cache, rate_limits=args.rate_limits,
        rate_limits_fallback=args.rate_limits_fallback,
        response_store=args.response_store, response_store_ttl=args.response_store_ttl,
        response_store_mb=args.response_store_mb,
        api_keys=tuple(args.api_key), admin_keys=tuple(args.admin_key),
        api_keys_file=str(args.api_keys_file.resolve()) if args.api_keys_file else None,
        max_queue_size=args.max_queue_size, metrics=not args.no_metrics, grpc_port=args.grpc_port,
        routing=args.ray_routing, affinity_slack=args.ray_affinity_slack,
        mcp_servers=str(args.mcp_servers.resolve()) if args.mcp_servers else None,
        mcp_allow_origin=tuple(args.mcp_allow_origin), mcp_loop_timeout=args.mcp_loop_timeout,
        model_alias=tuple(args.model_alias), keep_billing_header=args.keep_billing_header,
        image_allow_origin=tuple(args.image_allow_origin), image_max_bytes=args.image_max_bytes,
        image_fetch_timeout=args.image_fetch_timeout,
        hosted_tools=args.hosted_tools, trace_config=tuple(args.trace_config))
    from conch.gateway.ray.capacity import FleetTooLarge

    try:
        serve_ray(settings, args.host, args.port, args.address, args.ray_num_cpus, args.keep_alive_timeout)
    except FleetTooLarge as exc:
        raise SystemExit(str(exc)) from None


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.keep_alive_timeout < 0:
        raise SystemExit("conch serve: --keep-alive-timeout must be >= 0 seconds")
    if not args.header_timeout > 0:
        raise SystemExit("conch serve: --header-timeout must be > 0 seconds")
    try:                        # checked here for both paths; on Ray each ingress replica opens its own
        records = open_records(args.response_store, args.response_store_ttl, args.response_store_mb)
    except ValueError as exc:
        raise SystemExit(f"conch serve: {exc}") from None
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.ray:
        if args.paths or args.model:
            raise SystemExit("conch serve --ray: serves a --model-repository (write a config naming the file: "
                             "weights: PATH)")
        return _serve_ray(args)
    mcp = _mcp_config(args)
    startup_gc.pause()                  # until the app has started: its models loaded (app.py's lifespan)
    import uvicorn

    from conch.gateway.app import build_app

    from conch.engine.response_cache import open_cache
    from conch.gateway.auth import Gate, KeyRing
    from conch.gateway.limits import open_limiter

    engine = Engine(_repository(args), cache=open_cache(args.response_cache),
                    max_queue_size=args.max_queue_size)
    from conch.gateway.keys_file import KeysFileError

    try:
        keys = KeyRing.load(args.api_key, args.api_keys_file, args.admin_key)
    except KeysFileError as exc:
        raise SystemExit(f"conch serve: {exc}") from None
    limiter = open_limiter(args.rate_limits, args.rate_limits_fallback, args.rate_limits_replicas or 1)
    gate = Gate(keys, limiter) if not keys.open else None
    if gate is not None:              # SIGHUP reads the keys again (a bad file keeps the keys in force)
        signal.signal(signal.SIGHUP, lambda *_: gate.reload_keys())
    control = ModelControl(engine, args.model_control_mode, args.load_model, args.repository_poll_secs)
    settings = Settings(host=args.host, port=args.port, metrics_port=args.metrics_port,
                        metrics_host=args.metrics_host, mcp=mcp, aliases=_aliases(args),
                        keep_billing_header=args.keep_billing_header, trace_file=args.trace_file,
                        hosted_tools=args.hosted_tools, trace_config=_trace_config(args), images=_images(args))
    app = build_app(engine, settings, gate=gate, metrics=not args.no_metrics, control=control,
                    grpc_port=args.grpc_port, records=records)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=5,
                timeout_keep_alive=args.keep_alive_timeout, http=header_timeout_protocol(args.header_timeout),
                ws_max_size=settings.max_body_bytes)     # a WebSocket event is a body: the same limit


if __name__ == "__main__":
    main()
