"""Smoke test of ``benchmarks/http_layer.py``: the in-process part runs and reports a figure."""

from __future__ import annotations

from pathlib import Path

from tests.benchsmoke import run_smoke_json


def test_smoke_run_reports_the_loop_threads_cpu(tmp_path: Path) -> None:
    data = run_smoke_json("http_layer.py", tmp_path / "layer.json", header='"loop_thread_us"')
    assert data["asgi"]["requests"] == 64
    assert data["asgi"]["loop_thread_us"] > 0
    assert "server" not in data
