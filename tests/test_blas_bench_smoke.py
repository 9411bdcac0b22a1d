"""Smoke test of ``benchmarks/blas_load.py``: it runs both thread settings and reports.

No timing is asserted: each figure only has to be a positive number.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "blas_load.py"


def test_blas_load_smoke_reports_both_thread_settings(tmp_path: Path) -> None:
    out = tmp_path / "blas.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--load", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| checkout | threads | phase | case |" in proc.stdout
    runs = json.loads(out.read_text())["runs"]
    assert {key.split("|")[1] for key in runs} == {"default", "1"}
    for rounds in runs.values():
        for phase in ("idle", "loaded"):
            for figures in rounds[0][phase].values():
                assert all(v > 0 for v in figures.values())
