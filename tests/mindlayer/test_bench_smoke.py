"""Smoke test of benchmarks/mindlayer.py: it runs, writes its JSON, and scores what it ran.

No timing is asserted: the latency figures only have to be positive.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.mindlayer.conftest import ROOT, clean_env


def test_smoke_run(tmp_path: Path) -> None:
    out = tmp_path / "mindlayer.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "mindlayer.py"),
            "--smoke",
            "--embedder",
            "hash",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "| mode | recall@3 | MRR@3 |" in done.stdout
    data = json.loads(out.read_text())
    assert data["smoke"] is True and len(data["dataset_sha256"]) == 64
    for mode in ("recent", "lexical", "semantic", "hybrid"):
        entry = data["quality"][mode]
        assert 0.0 <= entry["mrr_at_3"] <= 1.0 and 0.0 <= entry["recall_at_3"] <= 1.0
        assert len(entry["per_query"]) == 12
    exact = data["quality"]["lexical"]["per_query"][0]
    assert exact["query"] == "vegetarian dinner" and exact["ranked"][0] == "diet"
    for key in ("latency", "http_latency"):
        lat = data[key]
        assert lat["records"] == 100 and lat["write_total_s"] > 0
        assert 0 < lat["query_p50_ms"] <= lat["query_p95_ms"]
