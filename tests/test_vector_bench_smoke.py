"""Smoke test of the vector benchmark: it runs, writes its JSON, and finds what it should.

Runs ``benchmarks/vector.py --smoke`` in a subprocess. No timing is asserted:
latencies and throughputs only have to be positive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.benchsmoke import run_smoke_json

SMOKE_SIZES = [3000]
FILTERS = {"1% partitions", "10% partitions", "10% visible"}
RAW_FILTERS = {"1% partitions", "10% partitions"}
TOP_K = 10
MIN_RECALL_AT_10 = 0.9


def _positive_latency(lat: dict[str, Any]) -> bool:
    return all(lat[key] > 0 for key in ("p50_ms", "p95_ms", "mean_ms", "max_ms"))


def test_smoke_run_writes_results(tmp_path: Path) -> None:
    data = run_smoke_json("vector.py", tmp_path / "vector.json")

    assert data["smoke"] is True
    assert data["config"]["dim"] == 384
    assert [r["size"] for r in data["results"]] == SMOKE_SIZES
    for entry in data["results"]:
        size = entry["size"]
        ours, raw, flat = entry["ours"], entry["hnswlib"], entry["flat"]
        for engine in (ours, raw, flat):
            assert _positive_latency(engine["latency"]), size
        assert _positive_latency(ours["repeated"]), size  # the kept walks, timed apart
        assert ours["build_per_s"] > 0 and raw["build_per_s"] > 0
        assert ours["quality"]["recall_at_10"] >= MIN_RECALL_AT_10, size
        assert ours["quality"]["min_results"] == TOP_K
        # The flat scan is the exact answer (up to float ties between matmul kernels).
        assert flat["quality"]["recall_at_10"] >= 0.99

        assert set(ours["filtered"]) == FILTERS
        for name, case in ours["filtered"].items():
            assert _positive_latency(case["latency"]), (size, name)
            assert case["visible"] >= TOP_K, (size, name)
            assert case["quality"]["min_results"] == TOP_K, (size, name)
            assert case["quality"]["mean_results"] == TOP_K, (size, name)
            assert case["quality"]["recall_at_10"] >= MIN_RECALL_AT_10, (size, name)
        assert set(raw["filtered"]) == RAW_FILTERS
        for name, case in raw["filtered"].items():
            assert _positive_latency(case["latency"]), (size, name)
            assert case["visible"] == ours["filtered"][name]["visible"]
        assert entry["ratios"]["ours_over_hnswlib_p50"] > 0

    hasher = next(e for e in data["embedders"] if e["name"].startswith("HashEmbedder"))
    assert hasher["available"] and hasher["sentences_per_s"] > 0
    for e in data["embedders"]:
        assert not e["available"] or e["sentences_per_s"] > 0, e["name"]
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}
    assert data["machine"]["cpu_count"] >= 1
    assert data["machine"]["date"]
