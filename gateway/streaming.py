"""Server-sent events and client disconnects, shared by every HTTP face."""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, TypeVar, cast

from fastapi import Request
from fastapi.responses import StreamingResponse

from conch.gateway.errors import APIError, ClientDisconnected, openai_body, to_api_error

T = TypeVar("T")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_event(payload: Any) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"data: {data}\n\n"


def sse_named(event: str, payload: Any) -> str:
    """An event with a name (`event: NAME`), as Anthropic's streams send every event."""
    return f"event: {event}\n" + sse_event(payload)


def error_event(error: str | Exception) -> str:
    """The OpenAI error event for a failure after a /v1 stream has started: an engine's error message (an
    internal error) or an exception, mapped as a response's would be. The stream closes after it."""
    err = APIError(500, error) if isinstance(error, str) else to_api_error(error)
    return sse_event(openai_body(err))


def sse_response(events: AsyncIterator[str]) -> StreamingResponse:
    """Starlette cancels `events` when the client disconnects, which aborts the generation below it."""
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)


async def prime(agen: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
    """Run `agen` to its first item now, so that errors raise before a response has started."""
    try:
        first = await agen.__anext__()
    except StopAsyncIteration:
        first = None
        empty = True
    else:
        empty = False

    async def chained() -> AsyncGenerator[T, None]:
        try:
            if not empty:
                yield cast(T, first)    # set: not empty (mypy cannot tie `first` to `empty`)
                async for item in agen:
                    yield item
        finally:
            await agen.aclose()

    return chained()


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it if the client goes away first (non-streamed requests)."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                task.cancel()
                return

    watcher = asyncio.ensure_future(watch())
    try:
        return await task
    except asyncio.CancelledError:
        if watcher.done():
            raise ClientDisconnected() from None
        raise
    finally:
        watcher.cancel()


async def merge(streams: list[AsyncIterator[T]]) -> AsyncIterator[T]:
    """Interleave several async iterators as their items arrive; closing the merge closes them all."""
    if len(streams) == 1:
        async for item in streams[0]:
            yield item
        return
    queue: asyncio.Queue = asyncio.Queue()
    done = object()

    async def pump(stream: AsyncIterator[T]) -> None:
        try:
            async for item in stream:
                await queue.put(item)
        except BaseException as exc:  # re-raised in the consumer
            await queue.put(exc)
        finally:
            await queue.put(done)

    tasks = [asyncio.ensure_future(pump(s)) for s in streams]
    try:
        remaining = len(tasks)
        while remaining:
            item = await queue.get()
            if item is done:
                remaining -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
