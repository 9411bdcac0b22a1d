"""Smoke test of the HTTP benchmark: it runs against a real server and its counts add up.

Runs ``benchmarks/http.py --smoke`` in a subprocess. No timing is asserted:
rates and latencies only have to be positive. What is checked exactly is the
accounting and the rate limit: no tenant is admitted more than its bucket allows.
"""

from __future__ import annotations

from pathlib import Path

from tests.benchsmoke import run_smoke_json


def test_smoke_run_writes_results(tmp_path: Path) -> None:
    data = run_smoke_json("http.py", tmp_path / "http.json", timeout=600)
    assert data["smoke"] is True
    (run,) = data["runs"]
    assert run["embedder"] == "hash" and run["chunks"] == data["config"]["chunks"]
    for verb in ("recall", "ingest"):
        phase = run[verb]
        assert phase["requests"] == sum(phase["statuses"].values()) > 0
        assert phase["errors"] == phase["requests"] - phase["statuses"].get("200", 0)
        assert phase["per_s"] > 0 and 0 < phase["p50_ms"] <= phase["p99_ms"]
        assert phase["server_cpu_ms"] > 0 and phase["client_cpu_ms"] > 0  # both sides measured
    rl = data["rate_limit"]
    assert rl["other_statuses"] == 0
    assert all(a <= rl["bound_per_tenant"] for a in rl["admitted"])
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}
