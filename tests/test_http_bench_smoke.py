"""Smoke test of the HTTP benchmark: it runs against a real server and its counts add up.

Runs ``benchmarks/http.py --smoke`` in a subprocess. No timing is asserted:
rates and latencies only have to be positive. What is checked exactly is the
accounting and the rate limit: no tenant is admitted more than its bucket allows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "http.py"


def test_smoke_run_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "http.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| target | value | status |" in proc.stdout
    data = json.loads(out.read_text())
    assert data["smoke"] is True
    (run,) = data["runs"]
    assert run["embedder"] == "hash" and run["chunks"] == data["config"]["chunks"]
    for verb in ("recall", "ingest"):
        phase = run[verb]
        assert phase["requests"] == sum(phase["statuses"].values()) > 0
        assert phase["errors"] == phase["requests"] - phase["statuses"].get("200", 0)
        assert phase["per_s"] > 0 and 0 < phase["p50_ms"] <= phase["p99_ms"]
    rl = data["rate_limit"]
    assert rl["other_statuses"] == 0
    assert all(a <= rl["bound_per_tenant"] for a in rl["admitted"])
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}
