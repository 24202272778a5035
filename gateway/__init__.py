"""The faces: HTTP (FastAPI) and gRPC servers, wire schemas, auth, rate limits, metrics exposition."""
from conch.gateway.app import build_app

__all__ = ["build_app"]
