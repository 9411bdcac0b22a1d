"""Prometheus metrics of the HTTP server, in a registry of their own.

Label values are bounded: ``route`` is a route template (or ``other``),
``method`` an HTTP method the routes use (or ``other``), ``status`` a status
code the server answers with, and ``tenant`` a tenant of the tokens file (or
``-`` before authentication). The number of series grows with the tokens file,
never with traffic. The tenants may be given as a function, asked at each
label: a tokens file that is re-read brings its new tenants in.

>>> m = Metrics(frozenset({"acme"}))
>>> m.observe("POST /v1/ingest", "POST", 200, "acme", 0.01)
>>> b"memstore_http_requests_total" in m.exposition()
True
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE", "NO_TENANT", "OTHER", "Metrics"]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""The exposition's media type, the one the seed names.

Spelled out rather than taken from ``prometheus_client``, whose
``CONTENT_TYPE_LATEST`` says ``version=1.0.0`` since 0.22: the text
:func:`generate_latest` writes for these metrics (legacy names, escaped as
underscores) is format 0.0.4, which every scraper reads."""
NO_TENANT: Final = "-"
"""The tenant label of a request that did not authenticate."""
OTHER: Final = "other"
"""The route or method label of anything outside the known set."""
_METHODS: Final = frozenset({"GET", "POST"})
_BATCHER_COUNTS: Final = (
    ("calls", "batches", "Embedding calls made for recalls' queries."),
    ("queries", "embedded", "Recall queries embedded (each distinct text of a call once)."),
    ("ahead", "ahead", "Of those, the queries sent ahead: for a recall still queued."),
    (
        "ahead_unused",
        "ahead_unused",
        "Of those sent ahead, the queries whose recall then used no vector.",
    ),
    ("at_hand", "at_hand", "Recall queries whose vector the query cache gave (no model run)."),
)
_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """The server's counters and histograms; thread-safe (prometheus_client is)."""

    def __init__(self, tenants: Collection[str] | Callable[[], Collection[str]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        if callable(tenants):
            self._tenants: Callable[[], Collection[str]] = tenants
        else:
            fixed = frozenset(tenants)
            self._tenants = lambda: fixed
        self.requests = Counter(
            "memstore_http_requests",
            "HTTP requests answered, by route template, method, status and tenant.",
            ["route", "method", "status", "tenant"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "memstore_http_request_duration_seconds",
            "Time from request to the end of the response, by route template.",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.episodes = Counter(
            "memstore_ingest_episodes",
            "Episodes ingested, by tenant.",
            ["tenant"],
            registry=self.registry,
        )
        self.recall_hits = Counter(
            "memstore_recall_hits",
            "Hits returned by recall, by tenant.",
            ["tenant"],
            registry=self.registry,
        )
        self.forgotten = Counter(
            "memstore_forget_items",
            "Items removed by forget, by tenant and mode (soft or hard).",
            ["tenant", "mode"],
            registry=self.registry,
        )
        # The series of the label sets seen so far, looked up without labels().
        self._request_series: dict[tuple[str, str, int, str | None], tuple[Any, Any]] = {}
        self._hits_series: dict[str, Any] = {}

    def tenant_label(self, tenant: str | None) -> str:
        """``tenant`` if the tokens file names it, else :data:`NO_TENANT`."""
        return tenant if tenant is not None and tenant in self._tenants() else NO_TENANT

    def observe(
        self, route: str, method: str, status: int, tenant: str | None, seconds: float
    ) -> None:
        """Count one answered request.

        Every request calls this: the series it counts in are looked up once
        per label set and kept (``labels()`` takes a lock and builds the key
        each time; the tenant check reads the tokens file's state). A tenant
        is checked against the tokens file the first time it is seen here.
        """
        method = method if method in _METHODS else OTHER
        key = (route, method, status, tenant)
        series = self._request_series.get(key)
        if series is None:
            label = self.tenant_label(tenant)
            series = (
                self.requests.labels(route, method, str(status), label),
                self.latency.labels(route),
            )
            if label == tenant or tenant is None:  # a tenant not named (yet) is asked again
                self._request_series[key] = series
        series[0].inc()
        series[1].observe(seconds)

    def recalled(self, tenant: str, hits: int) -> None:
        """Count ``hits`` returned by a recall to ``tenant`` (its series kept, as :meth:`observe`
        keeps its own)."""
        counter = self._hits_series.get(tenant)
        if counter is None:
            label = self.tenant_label(tenant)
            counter = self.recall_hits.labels(label)
            if label == tenant:
                self._hits_series[tenant] = counter
        counter.inc(hits)

    def count_batcher(self, batcher: Any) -> None:
        """Expose the counters of recall's query batcher
        (:class:`~memstore.web.batching.QueryBatcher`): read at each scrape."""
        self.registry.register(_BatcherCounts(batcher))

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)


class _BatcherCounts(Collector):
    """``memstore_recall_embedding_{calls,queries,ahead,ahead_unused,at_hand}_total``, read
    from a query batcher's counters when scraped."""

    def __init__(self, batcher: Any) -> None:
        self._batcher = batcher

    def collect(self) -> Iterator[CounterMetricFamily]:
        for name, attribute, help_text in _BATCHER_COUNTS:
            yield CounterMetricFamily(
                f"memstore_recall_embedding_{name}", help_text, getattr(self._batcher, attribute)
            )
