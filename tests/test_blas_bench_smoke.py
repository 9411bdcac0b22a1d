"""Smoke test of ``benchmarks/blas_load.py``: it runs both thread settings and reports.

No timing is asserted: each figure only has to be a positive number.
"""

from __future__ import annotations

from pathlib import Path

from tests.benchsmoke import run_smoke_json


def test_blas_load_smoke_reports_both_thread_settings(tmp_path: Path) -> None:
    header = "| checkout | threads | phase | case |"
    data = run_smoke_json(
        "blas_load.py", tmp_path / "blas.json", "--load", "1", header=header, timeout=240
    )
    runs = data["runs"]
    assert {key.split("|")[1] for key in runs} == {"default", "1"}
    for rounds in runs.values():
        for phase in ("idle", "loaded"):
            for figures in rounds[0][phase].values():
                assert all(v > 0 for v in figures.values())
