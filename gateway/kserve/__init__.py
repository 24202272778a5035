"""Triton's face over HTTP: KServe v2 (metadata, health, infer) and the generate and repository extensions."""
from fastapi import APIRouter

from conch.gateway.kserve import extensions, generate, infer, models, repository
from conch.gateway.kserve.state import TritonState

# `open_router`: server metadata, open like /v2/health/*; `router`: everything that names or lists models,
# which the app puts behind the API-key guard.
open_router = models.server_router
router = APIRouter()
for _module in (models, generate, infer, repository, extensions):
    router.include_router(_module.router)

__all__ = ["TritonState", "open_router", "router"]
