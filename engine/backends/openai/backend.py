"""The `openai` backend: a model served by an OpenAI-compatible server (vLLM, TGI, llama.cpp, another Conch,
a hosted API), through one or more deployments (engine/backends/openai/deployments.py).

The gateway has already validated the request (keys, limits, cache and metrics apply as for a local model);
this backend sends the validated request upstream and streams the answer back as text deltas. A failure
before the first delta (a connection error, a 5xx, a timeout) is retried on the next deployment; once a
delta is out, a failure ends the request. When every deployment failed, the config's `fallbacks` (other
`openai` models) are tried in order, each with its own deployments. A client that goes away closes the
upstream stream (the generator is closed, which closes the HTTP response)."""
from __future__ import annotations

import asyncio
import logging
from functools import partial
from contextlib import aclosing
from dataclasses import replace
from typing import Any, AsyncGenerator, Callable, Sequence

from opentelemetry.trace import Span, Status, StatusCode

from conch.engine.backend import BackendStats, Capabilities
from conch.engine.backends.openai.client import engine_error, make_client
from conch.engine.backends.openai.convert import StreamState, upstream_kwargs
from conch.engine.backends.openai.counting import open_tokenizer
from conch.engine.backends.openai.deployments import Deployment, Router
from conch.engine.errors import BackendUnavailable, EngineError, UpstreamError
from conch.engine.repository.config import ModelConfig
from conch.engine.telemetry import detached, traceparent_headers
from conch.engine.types import GenerationDelta, GenerationRequest

log = logging.getLogger(__name__)


class OpenAIBackend:
    def __init__(self, config: ModelConfig) -> None:
        if config.upstream is None:
            raise BackendUnavailable(f"model '{config.name}': the openai backend needs base_url or routes")
        self.config, self.upstream = config, config.upstream
        self.capabilities = Capabilities(n=True, seed=True, text_output=True, chat_input=True,
                                         native_tools=self.upstream.supports_tools)
        self.context_length = config.context_length
        self.tokenizer: Any = None       # a Hugging Face or tiktoken tokenizer once started (counting.py)
        self.router = Router(self.upstream)
        self._engine = None

    def bind(self, engine) -> None:
        """The engine, to find the fallback models by name."""
        self._engine = engine

    async def start(self) -> None:
        self.tokenizer = await asyncio.to_thread(open_tokenizer, self.config.resolve(self.config.tokenizer),
                                                 self.upstream.encoding)
        for d in self.router.deployments:
            d.client = make_client(self.upstream, d.config, self.config.max_batch_size)

    async def stop(self) -> None:
        for d in self.router.deployments:
            if d.client is not None:
                await d.client.close()
                d.client = None

    def health(self) -> bool:
        return self.tokenizer is not None

    async def abort(self, request_id: str, index: int | None = None) -> None:
        return None                      # closing generate's stream closes the upstream's

    def stats(self) -> BackendStats:
        """Requests in flight upstream; the upstream's KV cache is its own business (unknown here)."""
        return BackendStats(running=sum(d.inflight for d in self.router.deployments))

    def deployments(self) -> list[tuple[str, bool, int]]:
        """(deployment label, healthy, in flight) of each deployment, for /metrics."""
        return [(d.label, self.router.healthy(d), d.inflight) for d in self.router.deployments]

    def generate(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """This model's deployments, then its fallbacks, each only while no delta has been yielded."""
        fallbacks = [(n, b) for n in self.upstream.fallbacks if (b := self._fallback_backend(n)) is not None]
        attempts = [lambda: self.routed(request)] + [
            lambda n=n, b=b: b.routed(replace(request, model=n, version=None)) for n, b in fallbacks]

        def failed(failures: list[UpstreamError]) -> UpstreamError:
            tried = "; ".join(f"fallback '{n}': {f.message}"
                              for (n, _), f in zip(fallbacks, failures[1:], strict=True))
            # the last one tried decides the kind (a fallback that timed out: UpstreamTimeout, a 504)
            return type(failures[-1])(f"{failures[0].message}; {tried}") if tried else failures[0]
        return first_started(attempts, failed)

    def routed(self, request: GenerationRequest) -> AsyncGenerator[GenerationDelta, None]:
        """The request on this model's deployments, the next one tried while nothing has been yielded."""
        kwargs = upstream_kwargs(request, self.upstream)
        attempts = [partial(self._ask, d, request, kwargs) for d in self.router.attempts()]

        def failed(failures: list[UpstreamError]) -> UpstreamError:
            if len(failures) == 1:
                return failures[0]
            return type(failures[-1])(f"every deployment of model '{self.config.name}' failed: "
                                      + "; ".join(f.message for f in failures))
        return first_started(attempts, failed)

    async def _ask(self, d: Deployment, request: GenerationRequest,
                   kwargs: dict) -> AsyncGenerator[GenerationDelta, None]:
        state = StreamState(request, self.tokenizer)
        client = d.client
        create = client.chat.completions.create if request.chat is not None else client.completions.create
        upstream = _upstream_span(request, kwargs, client)
        kwargs = {**kwargs, "extra_headers": {**(kwargs.get("extra_headers") or {}), **traceparent_headers(upstream)}}
        d.inflight += 1
        try:
            try:
                stream = await create(**kwargs)
                try:
                    async for chunk in stream:
                        for delta in state.feed(chunk):
                            yield delta
                finally:
                    await stream.close()
                finals = state.finish()
            except EngineError:
                raise
            except Exception as exc:
                error = engine_error(exc, d.label, self.upstream)
                if isinstance(error, UpstreamError):
                    self.router.failed(d)
                raise error from exc
            self.router.succeeded(d)
            for delta in finals:
                yield delta
            usage = finals[-1].usage if finals else None
            if usage is not None:
                upstream.set_attributes({"gen_ai.usage.input_tokens": usage.prompt_tokens,
                                         "gen_ai.usage.output_tokens": usage.completion_tokens})
        except BaseException as exc:
            upstream.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            d.inflight -= 1
            upstream.end()

    def _fallback_backend(self, name: str) -> "OpenAIBackend | None":
        try:
            backend = self._engine.get(name).backend if self._engine is not None else None
        except EngineError:
            backend = None
        if not isinstance(backend, OpenAIBackend):
            log.warning("model %s: fallback '%s' is not a loaded openai model; skipped", self.config.name, name)
            return None
        return backend


Attempt = Callable[[], AsyncGenerator[GenerationDelta, None]]      # one deployment's try at a request


async def first_started(attempts: Sequence[Attempt], failed: Callable[[list[UpstreamError]], UpstreamError]
                        ) -> AsyncGenerator[GenerationDelta, None]:
    """The deltas of the first attempt that yields one before an UpstreamError; an error after its first
    delta is raised as it is. When every attempt failed first, raises `failed(their errors)`."""
    failures: list[UpstreamError] = []
    for attempt in attempts:
        started = False
        try:
            async with aclosing(attempt()) as deltas:
                async for delta in deltas:
                    started = True
                    yield delta
            return
        except UpstreamError as exc:
            if started:
                raise
            log.warning("%s", exc.message)
            failures.append(exc)
    raise failed(failures)


def _upstream_span(request: GenerationRequest, kwargs: dict, client: Any) -> Span:
    """The upstream call's CLIENT span (GenAI conventions); its traceparent goes out with the request."""
    operation = "chat" if request.chat is not None else "text_completion"
    url = getattr(client, "base_url", None)
    return detached(f"{operation} {kwargs.get('model', '')}".strip(), {
        "gen_ai.operation.name": operation, "gen_ai.provider.name": "openai",
        "gen_ai.request.model": kwargs.get("model"),
        "server.address": getattr(url, "host", None), "server.port": getattr(url, "port", None)})
