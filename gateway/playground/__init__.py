"""The playground: a page to try the server in a browser (GET /playground; / redirects there).

Plain HTML, CSS and JS under static/, shipped as package data: no build step, nothing from a CDN. The page
calls the public API (/v1/models, /v1/chat/completions) with the key typed into it, so it needs no route of
its own beyond the files.
"""
from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"

router = APIRouter()


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    return RedirectResponse("/playground")


@router.get("/playground", include_in_schema=False)
async def playground() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


def static_files() -> StaticFiles:
    return StaticFiles(directory=STATIC)
