"""Real ``memstore serve --api mindlayer`` servers on loopback for the Mind Layer suite.

Each server is a subprocess (``python -m memstore.cli serve --api mindlayer``)
on a free port, its output in a log file beside its data folder (never a
pipe, which could fill up). Two are shared by the whole session:

- ``plain``: no provider, no embedder (``--embedder none``), no owner token:
  seed 002's offline quick start;
- ``provided``: a :class:`~tests.fake_provider.FakeProvider` (a real HTTP
  server on 127.0.0.1) as its OpenAI-compatible provider, for chat and embeddings.

Tests keep out of each other's way by taking a fresh scope (:func:`new_scope`).
The provider's behaviour is reset after every test that uses ``fake``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fake_provider import FakeProvider, _default_chat
from tests.ports import PortTaken, free_port, on_free_port, wait_listening

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-fake-provider-key-0123456789"
"""The API key the provided server sends to the fake provider (must never leak)."""
_PROVIDER_VARS = ("MEMSTORE_PROVIDER_", "MIND_LAYER_")


def new_scope() -> dict[str, str]:
    """A scope no other test uses."""
    return {"agent": f"agent-{uuid.uuid4().hex[:10]}", "user": "synthetic-user"}


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment without provider settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PROVIDER_VARS)}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


def provider_env(provider: FakeProvider, *, embedding: str | None = "fake-embed") -> dict[str, str]:
    env = {
        "MEMSTORE_PROVIDER_BASE_URL": provider.base_url,
        "MEMSTORE_PROVIDER_API_KEY": API_KEY,
        "MEMSTORE_PROVIDER_CHAT_MODEL": "fake-chat",
    }
    if embedding:
        env["MEMSTORE_PROVIDER_EMBEDDING_MODEL"] = embedding
    return env


def command(data: Path, port: int, *extra: str, host: str = "127.0.0.1") -> list[str]:
    return [
        sys.executable,
        "-m",
        "memstore.cli",
        "serve",
        "--api",
        "mindlayer",
        "--data",
        str(data),
        "--host",
        host,
        "--port",
        str(port),
        *extra,
    ]


@dataclass
class Server:
    """A running server: its process, URL, data folder and log file."""

    proc: subprocess.Popen[bytes]
    url: str
    data: Path
    log: Path

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)

    def stop(self) -> int:
        """SIGTERM, and the exit status (0: a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def start(
    data: Path,
    *extra: str,
    env: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    embedder: str | None = "none",
) -> Server:
    """Start a server on ``data`` and wait until ``/healthz`` answers.

    On a free port, started again on another when it was taken before the
    server bound it (:func:`tests.ports.on_free_port`).
    """
    data.mkdir(parents=True, exist_ok=True)
    flags = ["--embedder", embedder] if embedder else []

    def on(port: int) -> Server:
        log = data.parent / f"{data.name}-{port}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                command(data, port, *flags, *extra, host=host),
                env=clean_env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = Server(proc, f"http://127.0.0.1:{port}", data, log)
        try:
            wait_listening(proc, port, server.log_text)
            _wait_healthy(server)
        except PortTaken:
            raise
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        return server

    return on_free_port(on)


def _wait_healthy(server: Server) -> None:
    """Poll ``/healthz`` until it answers; the server listens already (a hang guard only)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"the server exited with {server.proc.returncode}: {server.log_text()}"
            )
        try:
            if httpx.get(f"{server.url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{server.url} did not become healthy")


def refused(
    data: Path, *extra: str, env: Mapping[str, str] | None = None, host: str = "127.0.0.1"
) -> tuple[int, str]:
    """Run a server that must refuse to start: its exit status and output."""
    done = subprocess.run(
        command(data, free_port(), "--embedder", "none", *extra, host=host),
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def store(client: httpx.Client, scope: dict[str, str], text: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/memories", json={"scope": scope, "text": text, **fields})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def export(client: httpx.Client, scope: dict[str, str]) -> dict[str, Any]:
    r = client.get("/v1/export", params=scope)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def search(
    client: httpx.Client, scope: dict[str, str], query: str, **fields: Any
) -> list[dict[str, Any]]:
    r = client.post("/v1/search", json={"scope": scope, "query": query, **fields})
    assert r.status_code == 200, r.text
    body: list[dict[str, Any]] = r.json()
    return body


@pytest.fixture(scope="session")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The offline server: no provider, no embedder, no token."""
    server = start(tmp_path_factory.mktemp("mindlayer") / "plain")
    yield server
    assert server.stop() == 0, server.log_text()


@pytest.fixture(scope="session")
def fake_provider() -> Iterator[FakeProvider]:
    with FakeProvider(dim=8) as provider:
        yield provider


@pytest.fixture(scope="session")
def provided(
    tmp_path_factory: pytest.TempPathFactory, fake_provider: FakeProvider
) -> Iterator[Server]:
    """The server whose chat and embedding models are the fake provider's."""
    server = start(
        tmp_path_factory.mktemp("mindlayer") / "provided",
        env=provider_env(fake_provider),
        embedder=None,
    )
    yield server
    assert server.stop() == 0, server.log_text()


@pytest.fixture
def fake(fake_provider: FakeProvider) -> Iterator[FakeProvider]:
    """The shared fake provider, put back to well-behaved after the test."""
    yield fake_provider
    fake_provider.behaviour = "ok"
    fake_provider.chat_behaviour = "ok"
    fake_provider.chat_content = _default_chat
    fake_provider.error_body = b'{"error": "internal"}'
    fake_provider.sleep_seconds = 5.0
