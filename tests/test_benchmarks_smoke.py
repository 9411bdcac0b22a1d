"""Smoke test of the lexical benchmark: it runs, writes its JSON, and finds what it should.

Runs ``benchmarks/lexical.py --smoke`` in a subprocess, as CI's ``make
bench-smoke`` does. No timing is asserted: latencies only have to be positive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.benchsmoke import run_smoke_json

SMOKE_SIZES = [200, 1000]
MIN_EXACT_HIT_AT_10 = 0.9


def _latencies(entry: dict[str, Any]) -> list[float]:
    """Every latency figure of one size entry (memstore and both peers)."""
    values: list[float] = []
    for engine in ("memstore", "bm25s", "rank_bm25"):
        lat = entry[engine]["latency"]
        values += [lat["p50_ms"], lat["p95_ms"], lat["mean_ms"]]
    return values


def test_smoke_run_writes_results(tmp_path: Path) -> None:
    data = run_smoke_json("lexical.py", tmp_path / "x.json")

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


def test_journal_smoke_run_writes_results(tmp_path: Path) -> None:
    data = run_smoke_json("journal.py", tmp_path / "journal.json")
    assert data["smoke"] is True
    assert data["single"]["ours_per_s"] > 0 and data["single"]["raw_sqlite_per_s"] > 0
    assert data["batched"]["ours_items_per_s"] > 0
    assert data["restore"]["items"] == data["items"]  # every item came back
    assert data["as_of"]["all_items_returned"] == data["items"]
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}


def test_replication_smoke_run_writes_results(tmp_path: Path) -> None:
    from tests.pgtest import DSN, require_pg

    require_pg()
    data = run_smoke_json("replication.py", tmp_path / "replication.json", "--dsn", DSN)
    assert data["smoke"] is True
    assert data["single"]["ours_per_s"] > 0 and data["batched"]["ours_items_per_s"] > 0
    assert data["lag"]["writes"] == 30 and data["lag"]["p99_ms"] >= data["lag"]["p50_ms"]
    for run in data["catch_up"]:  # every replica caught up with everything on record
        assert run["caught_up"] is True and run["versions_per_s"] > 0
    assert [r["items_after"] for r in data["catch_up"]] == [2000, 200, 2000]
    assert {t["status"] for t in data["targets"]} <= {"PASS", "MISS", "N/A"}
