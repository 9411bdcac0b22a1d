"""What an operator reads on stderr when a shutdown cuts requests off.

A real server process (:mod:`tests.shutdown_app`, ``serve_app`` around a
bare app) gets SIGTERM with two requests in flight: one not answered yet,
one whose answer had begun. Each is reported by one calm line naming it and
what its client got, with no traceback: uvicorn alone logged ``ERROR:
Exception in ASGI application`` and a whole ``CancelledError`` traceback for
each, which reads as a crash. A real error (an exception the app raises)
still logs its traceback.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def _get(port: int, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_requests_cut_off_by_the_shutdown_are_one_calm_line_each(tmp_path: Path) -> None:
    err = tmp_path / "stderr.log"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.shutdown_app"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:  # the server may take a moment to answer after binding
            try:
                assert httpx.get(f"{url}/crash").status_code == 500
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, err.read_text()
                time.sleep(0.05)
        with _get(port, "/hang") as hang, _get(port, "/stream") as stream:
            while httpx.get(f"{url}/inflight").text != "2":
                assert time.monotonic() < deadline, err.read_text()
                time.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            hung, streamed = _read_all(hang), _read_all(stream)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert hung.startswith(b"HTTP/1.1 503 "), hung
    assert streamed.startswith(b"HTTP/1.1 200 ") and b"first" in streamed, streamed
    text = err.read_text()
    lines = text.splitlines()
    cut = [line for line in lines if "shutting down" in line]
    assert len(cut) == 2, text
    assert any(
        "GET /hang was still running" in line and "answered 503 unavailable" in line for line in cut
    ), text
    assert any(
        "GET /stream was still running" in line and "connection closes" in line for line in cut
    ), text
    assert "CancelledError" not in text and "Cancel 2 running task(s)" not in text, text
    # The real error, and only it, keeps its traceback.
    assert text.count("Traceback (most recent call last)") == 1, text
    assert "RuntimeError: boom" in text, text
