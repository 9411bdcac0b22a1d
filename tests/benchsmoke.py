"""Run a benchmark script as CI's smoke does: ``benchmarks/<script> --smoke``, in a subprocess.

The smoke tests assert only that a benchmark runs, prints its report and
writes its JSON with the figures it should hold; never a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
TARGETS = "| target | value | status |"
"""The header of the targets table most benchmarks end their report with."""


def run_smoke(script: str, *args: str, timeout: float | None = None) -> str:
    """Run ``benchmarks/<script> --smoke *args``; assert it exits 0; its standard output."""
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--smoke", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def run_smoke_json(
    script: str, out: Path, *args: str, header: str = TARGETS, timeout: float | None = None
) -> dict[str, Any]:
    """:func:`run_smoke` writing to ``out``; assert the report holds ``header``; the JSON."""
    stdout = run_smoke(script, *args, "--out", str(out), timeout=timeout)
    assert header in stdout
    data: dict[str, Any] = json.loads(out.read_text())
    return data
