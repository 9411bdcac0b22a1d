"""Smoke test of the mixed-workload benchmark: it runs and reports both phases.

Runs ``benchmarks/mixed.py --smoke`` in a subprocess. No timing is asserted:
the latencies only have to be positive numbers.
"""

from __future__ import annotations

from tests.benchsmoke import run_smoke


def test_the_mixed_benchmark_reports_searches_after_writes_and_reads_only() -> None:
    stdout = run_smoke("mixed.py")
    rows = [line for line in stdout.splitlines() if line.startswith("| 500 |")]
    assert len(rows) == 1, stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    figures = [float(c.rstrip("x")) for c in cells[1:]]
    assert len(figures) == 5 and all(f > 0 for f in figures)
