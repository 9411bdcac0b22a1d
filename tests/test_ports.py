"""The tests' one way to start a server on a free port (:mod:`tests.ports`).

Before, three harnesses each picked a port with their own ``free_port()``
and only the protocol suite's started the server again when another process
took the port first; the MCP harness took any answer on the port (the other
process's too) for its server. Here the race is made to happen: the first
port a real ``memstore serve`` is given is held by this test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.ports import PortTaken, listens_on, on_free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]


def _serve(data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "memstore.cli", "serve", "--data", str(data),
           "--embedder", "hash", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=subprocess.STDOUT
        )


def test_a_port_taken_before_the_server_binds_it_is_tried_again(tmp_path: Path) -> None:
    with socket.socket() as holder:  # another process's listener, as a racer would hold it
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        tried: list[int] = []

        def start(port: int) -> subprocess.Popen[bytes]:
            port = taken if not tried else port  # the race: the first port went meanwhile
            tried.append(port)
            log = tmp_path / f"serve-{port}.log"
            proc = _serve(tmp_path / "data", port, log)
            try:
                wait_listening(proc, port, lambda: log.read_text(errors="replace"))
            except PortTaken:
                raise
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            return proc

        proc = on_free_port(start)
        try:
            assert tried[0] == taken and len(tried) == 2 and tried[1] != taken
            assert listens_on(proc.pid, tried[1]) and not listens_on(proc.pid, taken)
            assert listens_on(os.getpid(), taken)
            r = httpx.get(f"http://127.0.0.1:{tried[1]}/healthz", timeout=60)
            assert r.status_code == 200
        finally:
            proc.terminate()
            proc.wait(30)


def test_a_port_chosen_by_the_caller_is_not_replaced(tmp_path: Path) -> None:
    """A caller that starts a server again where it was is told the port is taken."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        log = tmp_path / "serve.log"

        def start(port: int) -> subprocess.Popen[bytes]:
            proc = _serve(tmp_path / "data", port, log)
            wait_listening(proc, port, lambda: log.read_text(errors="replace"))
            return proc

        with pytest.raises(PortTaken, match=f"port {taken} was taken"):
            on_free_port(start, taken)
