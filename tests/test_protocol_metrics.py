"""memstore.protocol.metrics: what the counters say, whichever way a series was found."""

from __future__ import annotations

import asyncio

from memstore.protocol.metrics import NO_TENANT, Metrics
from memstore.web.batching import QueryBatcher


def _samples(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Each sample of metric family ``name`` by its labels (sorted)."""
    out = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_requests_are_counted_in_the_series_of_their_labels() -> None:
    metrics = Metrics(frozenset({"acme"}))
    for _ in range(3):
        metrics.observe("POST /v1/recall", "POST", 200, "acme", 0.002)
    metrics.observe("POST /v1/recall", "PATCH", 405, None, 0.001)
    metrics.observe("POST /v1/recall", "BREW", 405, None, 0.001)  # methods outside the set: other
    counts = _samples(metrics, "memstore_http_requests_total")
    recall = (("method", "POST"), ("route", "POST /v1/recall"), ("status", "200"))
    assert counts[(*recall, ("tenant", "acme"))] == 3
    other = (("method", "other"), ("route", "POST /v1/recall"), ("status", "405"))
    assert counts[(*other, ("tenant", NO_TENANT))] == 2
    seconds = _samples(metrics, "memstore_http_request_duration_seconds_count")
    assert seconds[(("route", "POST /v1/recall"),)] == 5


def test_a_tenant_the_tokens_file_names_later_is_counted_under_its_name_then() -> None:
    """The series found for a label set are kept; a tenant not named yet is not kept as "-"."""
    tenants = {"acme"}
    metrics = Metrics(lambda: frozenset(tenants))
    metrics.observe("POST /v1/recall", "POST", 200, "newco", 0.001)
    metrics.recalled("newco", 4)
    tenants.add("newco")  # the tokens file re-read with a new tenant
    metrics.observe("POST /v1/recall", "POST", 200, "newco", 0.001)
    metrics.recalled("newco", 6)
    metrics.recalled("acme", 1)
    metrics.recalled("acme", 2)
    counts = _samples(metrics, "memstore_http_requests_total")
    recall = (("method", "POST"), ("route", "POST /v1/recall"), ("status", "200"))
    assert counts[(*recall, ("tenant", NO_TENANT))] == 1
    assert counts[(*recall, ("tenant", "newco"))] == 1
    hits = _samples(metrics, "memstore_recall_hits_total")
    assert hits == {
        (("tenant", NO_TENANT),): 4,
        (("tenant", "newco"),): 6,
        (("tenant", "acme"),): 3,
    }


def test_the_recall_batchers_counters_are_read_at_each_scrape() -> None:
    """The query batcher's counts (embedding calls, queries embedded, sent ahead, sent
    ahead for nothing, at hand) are exposed as counters, as they stand when scraped."""
    batcher: QueryBatcher[int] = QueryBatcher(
        lambda texts: [len(t) for t in texts],
        known=lambda texts: [7 if t == "cached" else None for t in texts],
    )
    metrics = Metrics(frozenset({"acme"}))
    metrics.count_batcher(batcher)
    assert _samples(metrics, "memstore_recall_embedding_queries_total") == {(): 0}

    async def main() -> list[int | None]:
        return [await batcher.run(t, lambda v: v) for t in ("new", "cached")]

    assert asyncio.run(main()) == [3, 7]
    batcher.close()
    counts = {
        name: _samples(metrics, f"memstore_recall_embedding_{name}_total")[()]
        for name in ("calls", "queries", "ahead", "ahead_unused", "at_hand")
    }
    # One request at a time: nothing queued, so nothing is sent ahead.
    assert counts == {"calls": 1, "queries": 1, "ahead": 0, "ahead_unused": 0, "at_hand": 1}
    batcher.batches, batcher.embedded, batcher.ahead, batcher.ahead_unused = 3, 9, 5, 2
    assert [
        _samples(metrics, f"memstore_recall_embedding_{name}_total")[()]
        for name in ("calls", "queries", "ahead", "ahead_unused", "at_hand")
    ] == [3, 9, 5, 2, 1]
