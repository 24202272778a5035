"""GET /metrics: Prometheus text. Triton's names where they apply, plus LLM histograms, all by model.

Triton's (counters unless noted; labels model, version):
  nv_inference_request_success, nv_inference_request_failure{reason=REJECTED|CANCELED|BACKEND},
  nv_inference_count, nv_inference_exec_count, nv_inference_request_duration_us,
  nv_inference_queue_duration_us, nv_inference_compute_input_duration_us,
  nv_inference_compute_infer_duration_us, nv_inference_compute_output_duration_us,
  nv_inference_pending_request_count (gauge),
  nv_cache_num_hits_per_model, nv_cache_num_misses_per_model.
Conch's (label model): conch_time_to_first_token_seconds, conch_inter_token_latency_seconds,
  conch_e2e_request_latency_seconds, conch_prompt_tokens, conch_generation_tokens (histograms);
  conch_num_requests_running, conch_num_requests_waiting, conch_kv_cache_usage_ratio (gauges, read from the
  backend's stats(): engine/backend.py BackendStats; the KV gauge is absent for a backend that cannot tell);
  conch_prefix_cache_queries, conch_prefix_cache_hits (counters, tokens; from stats() too);
  conch_spec_proposed_tokens, conch_spec_accepted_tokens (counters, tokens; from stats(): the transformers
  backend's multi-token decode steps, proposed and kept);
  conch_request_cancelled, conch_rate_limit_rejections{limit}, conch_response_cache_errors (counters);
  conch_upstream_healthy, conch_upstream_inflight (gauges, labels model, deployment: an openai backend's);
  conch_mcp_calls (counter) and conch_mcp_call_duration_seconds (histogram), labels server (a registered
  label or an allow-listed origin), tool, outcome (ok, refused, unreachable, timeout, tool_error, protocol,
  cancelled): the MCP tool calls the gateway ran (agents/mcp/client.py reports them to `on_mcp_call`).
  conch_record_store_memory_bytes, conch_record_store_records, conch_record_store_key_share_bytes (gauges),
  conch_record_store_evictions (counter) (label tier: memory|redis; with Redis, memory holds only what Redis
  has not taken),
  and with a Redis tier conch_record_store_redis_up (gauge), conch_record_store_redis_errors,
  conch_record_store_degraded_writes (counters): the store of responses and conversations (gateway/records).
Every model kind counts, from every face: LLM generations and tensor requests (python, ensemble, embedding,
an ensemble's steps, BLS calls) each leave a trace (engine/tensors/traced.py).
Counters carry Triton's exact names (no `_total` suffix), as Triton's own exposition does.

They list every model and its traffic, so with API keys configured a scrape of the API port needs a key with
the `metrics` (or `admin`) role (`Authorization: Bearer KEY`; Prometheus: `authorization: {credentials: KEY}`).
`--metrics-port` serves them without a key on a port of their own, bound to loopback unless `--metrics-host`
says otherwise (gateway/metrics_port.py), as Triton's port 8002.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from conch.engine.admission import Trace
from conch.engine.backend import CountsExecutions, Deployments
from conch.engine.engine import Engine
from conch.gateway.auth import require_role

router = APIRouter()

_LATENCY = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
_ITL = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5)
_E2E = (0.01, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)
_TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)
_FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND")


class Metrics:
    """An engine observer (request outcomes and latencies) plus a collector read at scrape time."""

    def __init__(self, engine: Engine, gate=None, records=None) -> None:
        self.engine, self.gate, self.records = engine, gate, records
        self.registry = CollectorRegistry(auto_describe=False)

        def hist(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, ["model"], buckets=buckets, registry=self.registry)

        self.ttft = hist("conch_time_to_first_token_seconds", "Time to first token", _LATENCY)
        self.itl = hist("conch_inter_token_latency_seconds", "Time between two tokens of a choice", _ITL)
        self.e2e = hist("conch_e2e_request_latency_seconds", "End-to-end request latency", _E2E)
        self.prompt = hist("conch_prompt_tokens", "Prompt tokens per request", _TOKENS)
        self.generated = hist("conch_generation_tokens", "Generated tokens per request", _TOKENS)
        self.mcp_latency = Histogram("conch_mcp_call_duration_seconds", "MCP tool call latency",
                                     ["server", "tool", "outcome"], buckets=_E2E, registry=self.registry)
        self.counts: dict[str, Counter] = defaultdict(Counter)     # metric -> (model, version[, reason]) -> n
        self.collector = _Collector(self)

    def on_finish(self, t: Trace) -> None:
        mv = (t.model, t.version)
        if t.succeeded:
            self.counts["success"][mv] += 1
            self.counts["count"][mv] += 1
        else:
            reason = "REJECTED" if t.rejected else "CANCELED" if t.cancelled else "BACKEND"
            self.counts["failure"][(*mv, reason)] += 1
            if t.cancelled:
                self.counts["cancelled"][mv] += 1
        if t.cache_hit is not None:
            self.counts["hits" if t.cache_hit else "misses"][mv] += 1
        # typeshed types a Counter's values as int; these hold float microseconds (a Counter adds any number)
        self.counts["queue_us"][mv] += t.queued * 1e6  # type: ignore[assignment]
        self.counts["duration_us"][mv] += t.duration * 1e6  # type: ignore[assignment]
        if t.succeeded:
            self.counts["input_us"][mv] += t.compute_input * 1e6  # type: ignore[assignment]
            self.counts["infer_us"][mv] += t.compute_infer * 1e6  # type: ignore[assignment]
            self.counts["output_us"][mv] += t.compute_output * 1e6  # type: ignore[assignment]
        if t.rejected:
            return
        model = t.model
        if t.first_token is not None:
            self.ttft.labels(model).observe(t.first_token - t.start)
        if t.gaps:
            itl = self.itl.labels(model)
            for gap in t.gaps:
                itl.observe(gap)
        if t.succeeded:
            self.e2e.labels(model).observe((t.end or t.start) - t.start)
            self.prompt.labels(model).observe(t.prompt_tokens)
            self.generated.labels(model).observe(t.completion_tokens)

    def on_mcp_call(self, server: str, tool: str, outcome: str, seconds: float) -> None:
        """conch.agents.mcp's CallObserver: one tools/call ended (labels are bounded: see agents/mcp/metrics.py)."""
        self.counts["mcp_calls"][(server, tool, outcome)] += 1
        self.mcp_latency.labels(server, tool, outcome).observe(seconds)

    def exposition(self) -> bytes:
        """Our own families rendered by hand (prometheus-client would rename counters to `*_total`)."""
        lines = []
        for m in self.collector.collect():
            lines += [f"# HELP {m.name} {m.documentation}", f"# TYPE {m.name} {m.type}"]
            lines += [f"{s.name}{_labels(s.labels)} {floatToGoString(s.value)}" for s in m.samples]
        return ("\n".join(lines) + "\n").encode() + generate_latest(self.registry)


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escaped(v)}"' for k, v in labels.items()) + "}"


def _escaped(value: object) -> str:
    """A label value as Prometheus' text format writes it: backslash, newline and double quote escaped."""
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _metric(name: str, doc: str, kind: str, samples) -> Metric:
    m = Metric(name, doc, kind)
    for labels, value in samples:
        m.add_sample(name, labels, value)
    return m


class _Collector:
    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def collect(self):
        c, engine = self.m.counts, self.m.engine
        models = [(lm.name, lm.config.version, lm) for lm in engine.all_versions()]
        mv_labels = [((n, v), {"model": n, "version": v}) for n, v, _ in models]
        for key, name, doc in (
                ("success", "nv_inference_request_success", "Number of successful inference requests"),
                ("count", "nv_inference_count", "Number of inferences performed"),
                ("duration_us", "nv_inference_request_duration_us", "Cumulative inference request duration"),
                ("queue_us", "nv_inference_queue_duration_us", "Cumulative time requests spend queued"),
                ("input_us", "nv_inference_compute_input_duration_us", "Cumulative compute input duration"),
                ("infer_us", "nv_inference_compute_infer_duration_us", "Cumulative compute inference duration"),
                ("output_us", "nv_inference_compute_output_duration_us", "Cumulative compute output duration"),
                ("hits", "nv_cache_num_hits_per_model", "Number of response cache hits per model"),
                ("misses", "nv_cache_num_misses_per_model", "Number of response cache misses per model"),
                ("cancelled", "conch_request_cancelled", "Requests aborted by the client (also counted as "
                                                         "nv_inference_request_failure{reason=CANCELED})")):
            yield _metric(name, doc, "counter", [(labels, c[key][mv]) for mv, labels in mv_labels])
        yield _metric("nv_inference_request_failure", "Number of failed inference requests", "counter",
                      [({**labels, "reason": r}, c["failure"][(*mv, r)])
                       for mv, labels in mv_labels for r in _FAILURE_REASONS])
        yield _metric("nv_inference_exec_count", "Number of model executions performed", "counter",
                      [(labels, lm.backend.steps if isinstance(lm.backend, CountsExecutions) else c["count"][mv])
                       for (mv, labels), (_, _, lm) in zip(mv_labels, models, strict=True)])
        yield _metric("nv_inference_pending_request_count", "Requests waiting for a slot", "gauge",
                      [(labels, engine.admission.pending(mv[0])) for mv, labels in mv_labels])
        yield from self._llm_gauges(models)
        yield from _upstream_gauges(models)
        yield from self._gateway_counters()
        if self.m.records is not None:
            yield from _record_metrics(self.m.records)

    def _llm_gauges(self, models):
        engine = self.m.engine
        running, waiting, kv, queries, hits, proposed, accepted = [], [], [], [], [], [], []
        for name, _, lm in models:
            stats, labels = lm.backend.stats(), {"model": name}
            running.append((labels, stats.running))
            waiting.append((labels, stats.waiting + engine.admission.pending(name)))
            if stats.kv_cache_usage is not None:
                kv.append((labels, stats.kv_cache_usage))
            queries.append((labels, stats.prefix_cache_queries))
            hits.append((labels, stats.prefix_cache_hits))
            proposed.append((labels, stats.spec_proposed_tokens))
            accepted.append((labels, stats.spec_accepted_tokens))
        yield _metric("conch_num_requests_running", "Sequences in the running batch", "gauge", running)
        yield _metric("conch_num_requests_waiting", "Sequences and requests waiting to run", "gauge", waiting)
        yield _metric("conch_kv_cache_usage_ratio", "Fraction of the KV cache budget in use", "gauge", kv)
        yield _metric("conch_prefix_cache_queries", "Prompt tokens looked up in the prefix cache", "counter", queries)
        yield _metric("conch_prefix_cache_hits", "Prompt tokens whose KV came from the prefix cache", "counter", hits)
        yield _metric("conch_spec_proposed_tokens", "Tokens proposed to multi-token decode steps", "counter", proposed)
        yield _metric("conch_spec_accepted_tokens", "Proposed tokens the decode steps kept", "counter", accepted)

    def _gateway_counters(self):
        gate, cache = self.m.gate, self.m.engine.cache
        if gate is not None:
            yield _metric("conch_rate_limit_rejections", "Requests refused by a rate limit", "counter",
                          [({"model": model, "limit": limit}, n)
                           for (model, limit), n in sorted(gate.rejections.items())])
            yield _metric("conch_unauthorized_requests", "Requests refused for a wrong or missing key", "counter",
                          [({}, gate.unauthorized)])
            yield from _limiter_fallback(gate)
        yield _metric("conch_mcp_calls", "MCP tool calls the gateway ran, by server, tool and outcome", "counter",
                      [({"server": srv, "tool": tool, "outcome": outcome}, n)
                       for (srv, tool, outcome), n in sorted(self.m.counts["mcp_calls"].items())])
        if cache is not None:
            yield _metric("conch_response_cache_errors", "Response cache store failures (served as misses)",
                          "counter", [({"store": cache.store.name}, cache.errors)])


def _limiter_fallback(gate):
    fallback = getattr(gate.limiter.buckets, "fallback", None) if gate.limiter is not None else None
    if fallback is None:                                 # in-memory buckets: nothing to fall back from
        return
    labels = {"mode": fallback.mode}
    yield _metric("conch_rate_limit_fallback", "1 while the shared rate-limit store (Redis) is unreachable and "
                  "the fallback decides", "gauge", [(labels, int(fallback.active))])
    yield _metric("conch_rate_limit_fallback_decisions", "Rate-limit checks decided by the fallback, not Redis",
                  "counter", [(labels, fallback.decisions)])


def _record_metrics(records):
    """The record store (stored responses and conversations): its memory tier, and its Redis tier's health."""
    labels = {"tier": records.tier}
    yield _metric("conch_record_store_memory_bytes", "Bytes of records held in this process's memory tier",
                  "gauge", [(labels, records.memory.size)])
    yield _metric("conch_record_store_records", "Records held in this process's memory tier", "gauge",
                  [(labels, len(records.memory))])
    yield _metric("conch_record_store_key_share_bytes", "Bytes of the memory tier each key may hold", "gauge",
                  [(labels, records.memory.share)])
    yield _metric("conch_record_store_evictions", "Records evicted from a key's share of the memory tier to stay "
                                                  "under it", "counter", [(labels, records.memory.evictions)])
    if records.redis_up is None:
        return
    yield _metric("conch_record_store_redis_up", "1 while the record store's Redis answers, 0 while it is "
                                                 "degraded to memory", "gauge", [({}, 1 if records.redis_up else 0)])
    yield _metric("conch_record_store_redis_errors", "Record store Redis commands that failed or timed out",
                  "counter", [({}, records.redis_errors)])
    yield _metric("conch_record_store_degraded_writes", "Records Redis refused, kept in memory only until it "
                                                        "answers", "counter", [({}, records.degraded_writes)])


def _upstream_gauges(models):
    """Each deployment of the upstream models: healthy (1) or cooled down (0), and its requests in flight."""
    healthy, inflight = [], []
    for name, _, lm in models:
        if not isinstance(lm.backend, Deployments):
            continue
        for deployment, ok, n in lm.backend.deployments():
            labels = {"model": name, "deployment": deployment}
            healthy.append((labels, 1 if ok else 0))
            inflight.append((labels, n))
    if healthy:
        yield _metric("conch_upstream_healthy", "1 while an upstream deployment takes requests, 0 while it is "
                                                "cooled down after repeated failures", "gauge", healthy)
        yield _metric("conch_upstream_inflight", "Requests in flight to an upstream deployment", "gauge", inflight)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    require_role(request, "metrics")
    m: Metrics | None = getattr(request.app.state, "metrics", None)
    body = m.exposition() if m is not None else b""
    return Response(body, media_type=CONTENT_TYPE_LATEST)
