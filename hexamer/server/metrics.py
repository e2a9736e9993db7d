"""Prometheus metrics of one server app (its own registry, so several apps can live in a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5)


class ServerMetrics:
    """Counters (rates are derivable), gauges of the engine's state, and latency histograms."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "hexamer_requests",
            "HTTP requests by endpoint and status code",
            ["endpoint", "status"],
            registry=r,
        )
        self.prompt_tokens = Counter("hexamer_prompt_tokens", "Prompt tokens processed", registry=r)
        self.generated_tokens = Counter(
            "hexamer_generated_tokens", "Tokens generated (all modes)", registry=r
        )
        self.generated_bp = Counter("hexamer_generated_bp", "Bases returned by DNA generation", registry=r)
        self.scored_bp = Counter(
            "hexamer_scored_bp", "Bases scored by /v1/dna/score and /v1/dna/vep", registry=r
        )
        self.queue_depth = Gauge("hexamer_queue_depth", "Sequences waiting for a KV-cache row", registry=r)
        self.running = Gauge("hexamer_running_sequences", "Sequences being decoded", registry=r)
        self.kv_rows_used = Gauge(
            "hexamer_kv_cache_rows_used", "KV-cache rows holding a sequence", registry=r
        )
        self.kv_rows = Gauge("hexamer_kv_cache_rows", "KV-cache rows allocated", registry=r)
        self.kv_bytes = Gauge(
            "hexamer_kv_cache_bytes", "Bytes of the KV block pool (resident only as blocks fill)", registry=r
        )
        self.kv_blocks = Gauge(
            "hexamer_kv_cache_blocks", "Blocks of the KV pool (16 tokens each)", registry=r
        )
        self.kv_blocks_free = Gauge("hexamer_kv_cache_blocks_free", "KV blocks holding no token", registry=r)
        self.kv_blocks_reserved = Gauge(
            "hexamer_kv_cache_blocks_reserved",
            "KV blocks set aside for or held by running sequences",
            registry=r,
        )
        self.preemptions = Gauge(
            "hexamer_preemptions",
            "Times a running sequence gave its KV blocks back for others and was computed again later",
            registry=r,
        )
        self.kv_usage = Gauge("hexamer_kv_cache_usage", "Fraction of KV blocks holding tokens", registry=r)
        self.prefix_queried = Gauge(
            "hexamer_prefix_cache_queried_blocks",
            "Full prompt blocks looked up in the prefix cache",
            registry=r,
        )
        self.prefix_hits = Gauge(
            "hexamer_prefix_cache_hit_blocks", "Full prompt blocks found in the prefix cache", registry=r
        )
        self.prefix_hit_rate = Gauge(
            "hexamer_prefix_cache_hit_rate", "Fraction of looked-up prompt blocks found cached", registry=r
        )
        self.ttft = Histogram(
            "hexamer_time_to_first_token_seconds", "Submission to first generated token",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.itl = Histogram(
            "hexamer_inter_token_latency_seconds", "Time between consecutive tokens of a sequence",
            buckets=_TOKEN_BUCKETS, registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "hexamer_request_latency_seconds", "Request start to last byte, by endpoint",
            ["endpoint"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip

    def render(self) -> bytes:
        return generate_latest(self.registry)
