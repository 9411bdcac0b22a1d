"""A raw HTTP/1.1 client for the adversarial probes: it sends exactly the bytes asked for.

httpx and friends fix up what they send (one Host, a Content-Type, a
well-formed body) and reconnect silently when a server drops a keep-alive
connection; the probes need the opposite. :class:`Raw` is one socket to
127.0.0.1 (optionally from another loopback source address, to look like
another client), writes requests byte for byte and reads answers by
``Content-Length``. Every read has a timeout: a probe never hangs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.protocol.conftest import start_server, stop_server

HANG_GUARD_S = 30.0
"""The longest any single read waits (a hang guard, not a threshold)."""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Raw:
    """One TCP connection to the server under test."""

    def __init__(self, port: int, source: str = "127.0.0.1", timeout: float = HANG_GUARD_S):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.port = port
        self._buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: list[tuple[str, str]] | None = None,
        host: str | None = "default",
    ) -> Answer:
        """Send one request (``host=None``: no Host header) and read its answer."""
        lines = [f"{method} {path} HTTP/1.1"]
        if host == "default":
            host = f"127.0.0.1:{self.port}"
        if host is not None:
            lines.append(f"Host: {host}")
        lines += [f"{k}: {v}" for k, v in headers or []]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        return self.answer()

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self._buffer += chunk
        return bool(chunk)

    def answer(self) -> Answer:
        """Read one whole answer (headers, then Content-Length bytes)."""
        while b"\r\n\r\n" not in self._buffer:
            if not self._fill():
                raise ConnectionError(f"closed before an answer: {self._buffer[:200]!r}")
        head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self._buffer) < length:
            if not self._fill():
                raise ConnectionError("closed in the middle of a body")
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return Answer(int(status_line.split()[1]), headers, body)

    def closed_by_server(self) -> bool:
        """Read until the server closes (True) or the hang guard passes (False)."""
        try:
            while self._fill():
                pass
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return True

    def drain(self) -> bytes:
        """Everything the server sends until it closes (raises TimeoutError past the guard)."""
        try:
            while self._fill():
                pass
        except ConnectionResetError:
            pass
        out, self._buffer = self._buffer, b""
        return out

    def close(self) -> None:
        self.sock.close()


def write_tokens(path: Path, tokens: dict[str, dict[str, Any]]) -> None:
    """Replace the tokens file the way an operator's tool would: a new file renamed over it."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(json.dumps(tokens), encoding="utf-8")
    os.replace(tmp, path)


ALL = ["ingest", "recall", "forget"]


@contextmanager
def serving(
    root: Path, *extra: str, tokens: dict[str, dict[str, Any]] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """A real ``memstore serve`` (hash embedder, rate limit out of the way) and its port.

    Stopped with SIGTERM at the end, which must exit it cleanly.
    """
    tokens_file = root / "tokens.json"
    write_tokens(tokens_file, tokens or {"tok-a": {"tenant": "a", "scopes": ALL}})
    rate = ("--rate-per-second", "1000", "--rate-burst", "1000")
    proc, url = start_server(root / "data", tokens_file, *rate, *extra)
    try:
        yield proc, int(url.rsplit(":", 1)[1]), tokens_file
    finally:
        code = stop_server(proc)
        assert code == 0, "SIGTERM must shut the server down cleanly"


def log_of(root: Path, port: int) -> str:
    """What the server on ``port`` wrote to its log (start_server keeps it beside the data)."""
    return (root / f"serve-{port}.log").read_text(encoding="utf-8", errors="replace")


def wait_for(predicate: Any, *, timeout: float = HANG_GUARD_S, every: float = 0.05) -> bool:
    """Poll ``predicate()`` until it is true (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return bool(predicate())
