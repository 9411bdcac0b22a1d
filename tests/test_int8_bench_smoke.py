"""Smoke test of ``benchmarks/int8_matmuls.py``: the rewritten graph runs and is compared.

No timing is asserted. What is checked: every weight product was rewritten (the
script asserts it), the integer graph's vectors stay close to the float graph's, and
the batch dependence the docs report is real: zero for the float graph, not zero for
the integer one (the reason the rewrite is not shipped).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchsmoke import run_smoke


def test_smoke_run_compares_the_two_graphs(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    import json

    out = tmp_path / "int8.json"
    stdout = run_smoke("int8_matmuls.py", "--out", str(out), timeout=600)
    assert "| texts a call |" in stdout
    data = json.loads(out.read_text())
    assert data["smoke"] is True and data["texts"] == 64
    assert [r["batch"] for r in data["cpu_per_text"]] == [1, 32]
    assert all(r["float_ms"] > 0 and r["int8_ms"] > 0 for r in data["cpu_per_text"])
    assert 0.9 < data["cosine_to_float"]["least"] <= data["cosine_to_float"]["mean"] < 1.0
    moved = data["batch_dependence_max_abs"]
    assert moved["float"] < 1e-5 < moved["int8"]
