"""Smoke test of the lexical benchmark: it runs, writes its JSON, and finds what it should.

Runs ``benchmarks/lexical.py --smoke`` in a subprocess, as CI's ``make
bench-smoke`` does. No timing is asserted: latencies only have to be positive.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "lexical.py"
SMOKE_SIZES = [200, 1000]
MIN_EXACT_HIT_AT_10 = 0.9


def _run_smoke(out: Path) -> dict[str, Any]:
    """Run the smoke benchmark writing to ``out``; its parsed JSON."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| target | value | status |" in proc.stdout
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _latencies(entry: dict[str, Any]) -> list[float]:
    """Every latency figure of one size entry (memstore and both peers)."""
    values: list[float] = []
    for engine in ("memstore", "bm25s", "rank_bm25"):
        lat = entry[engine]["latency"]
        values += [lat["p50_ms"], lat["p95_ms"], lat["mean_ms"]]
    return values


def test_smoke_run_writes_results(tmp_path: Path) -> None:
    data = _run_smoke(tmp_path / "x.json")

    assert data["smoke"] is True
    assert [r["size"] for r in data["results"]] == SMOKE_SIZES
    for entry in data["results"]:
        assert all(v > 0 for v in _latencies(entry)), entry["size"]
        ours = entry["memstore"]
        assert ours["upsert_per_s"] > 0
        assert ours["stored_ids"] == entry["size"]
        assert ours["quality"]["hit_at_10_exact"] >= MIN_EXACT_HIT_AT_10, entry["size"]
        assert entry["queries_by_category"]["exact"] > 0
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}
    assert data["machine"]["cpu_count"] >= 1


JOURNAL_SCRIPT = SCRIPT.parent / "journal.py"


def test_journal_smoke_run_writes_results(tmp_path: Path) -> None:
    out = tmp_path / "journal.json"
    proc = subprocess.run(
        [sys.executable, str(JOURNAL_SCRIPT), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| target | value | status |" in proc.stdout
    data = json.loads(out.read_text())
    assert data["smoke"] is True
    assert data["single"]["ours_per_s"] > 0 and data["single"]["raw_sqlite_per_s"] > 0
    assert data["batched"]["ours_items_per_s"] > 0
    assert data["restore"]["items"] == data["items"]  # every item came back
    assert data["as_of"]["all_items_returned"] == data["items"]
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}


REPLICATION_SCRIPT = SCRIPT.parent / "replication.py"


def test_replication_smoke_run_writes_results(tmp_path: Path) -> None:
    from tests.pgtest import DSN, require_pg

    require_pg()
    out = tmp_path / "replication.json"
    proc = subprocess.run(
        [sys.executable, str(REPLICATION_SCRIPT), "--smoke", "--dsn", DSN, "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| target | value | status |" in proc.stdout
    data = json.loads(out.read_text())
    assert data["smoke"] is True
    assert data["single"]["ours_per_s"] > 0 and data["batched"]["ours_items_per_s"] > 0
    assert data["lag"]["writes"] == 30 and data["lag"]["p99_ms"] >= data["lag"]["p50_ms"]
    for run in data["catch_up"]:  # every replica caught up with everything on record
        assert run["caught_up"] is True and run["versions_per_s"] > 0
    assert [r["items_after"] for r in data["catch_up"]] == [2000, 200, 2000]
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}
