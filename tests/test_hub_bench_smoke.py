"""Smoke test of the hub benchmark: it runs, writes its JSON, and its counts add up.

Runs ``benchmarks/hub.py --smoke`` in a subprocess. No timing is asserted:
rates and latencies only have to be positive. What is checked exactly is the
accounting: every event a subscriber did not read, it was told it lost.
"""

from __future__ import annotations

from pathlib import Path

from tests.benchsmoke import run_smoke_json


def test_smoke_run_writes_results(tmp_path: Path) -> None:
    data = run_smoke_json("hub.py", tmp_path / "hub.json")

    assert data["smoke"] is True
    config = data["config"]
    assert [p["subscribers"] for p in data["publish"]] == [0, 1, 10, 100]
    for p in data["publish"]:
        assert p["published"]["per_s"] > 0 and p["ns_per_event"] > 0
        assert len(p["published"]["runs_per_s"]) == config["repeats"]

    cases = {(d["subscribers"], d["reader"], d["lossless"]) for d in data["delivery"]}
    for n in (1, 10):
        for reader in ("asyncio", "thread"):
            assert {(n, reader, True), (n, reader, False)} <= cases
    assert {(100, "asyncio", True), (100, "asyncio", False)} <= cases
    for d in data["delivery"]:
        events = d["delivered"]["events"]
        assert d["read"] + d["dropped"] == events * d["subscribers"], d
        assert d["delivered"]["per_s"] > 0 and d["published"]["per_s"] > 0
        if d["lossless"]:
            assert d["dropped"] == 0  # held back to the readers' pace: nothing can be lost

    assert [x["subscribers"] for x in data["latency"]] == [1, 10, 100]
    for x in data["latency"]:
        assert x["deliveries"] + x["dropped"] == x["events"] * x["subscribers"]
        assert 0 < x["p50_ms"] <= x["p99_ms"] <= x["max_ms"]

    store = data["store"]
    assert store["writes"] == config["store_writes"]
    for key in ("without_hub_per_s", "hub_no_reader_per_s", "hub_thread_reader_per_s"):
        assert store[key] > 0
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}
    assert len(data["targets"]) == 4
    assert data["machine"]["cpu_count"] >= 1 and data["machine"]["date"]
