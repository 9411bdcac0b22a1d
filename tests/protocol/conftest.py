"""A real ``memstore serve`` for the conformance suite, or any server given by URL.

By default the session starts ``python -m memstore.cli serve`` on a free
loopback port with the hash embedder, the seed harness's rate limit (5 rps,
burst 10) and a tokens file of many tenants, and stops it with SIGTERM at the
end (checking that it exits cleanly). To certify another server instead::

    MEMSTORE_PROTOCOL_URL=http://host:port MEMSTORE_PROTOCOL_TOKENS=tokens.json \
        pytest tests/protocol

where the tokens file holds the server's tokens: at least 12 tokens with all
three scopes (each of its own tenant), one with ``recall`` only, and one with
no scope.

Every tenant has its own bucket, so each test takes fresh tenants
(:meth:`Tenants.take`) and the 5 rps limit is only met where a test means it.

Replicas: ``MEMSTORE_PROTOCOL_REPLICAS=2 pytest tests/protocol/test_verbs.py``
starts two servers over one fresh PostgreSQL schema (``tests/pgtest.py``
says where) and sends the requests to them in turn through
:class:`ReplicaTransport`, which after each acknowledged write waits until
every replica has applied it (their ``/healthz`` ``lsn``): the suite's
read-after-write then holds whichever replica it reads from.
``test_replicas.py`` runs that as one test, and says which files are left out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstore.journal import Lsn
from tests.pgtest import Schemas, require_pg
from tests.ports import PortTaken, on_free_port, wait_listening

ROOT = Path(__file__).resolve().parents[2]
RATE_PER_SECOND = 5
RATE_BURST = 10
ALL = ["ingest", "recall", "forget"]
REPLICAS_ENV = "MEMSTORE_PROTOCOL_REPLICAS"
"""How many PostgreSQL-backed replicas the ``server`` fixture starts (unset: one, SQLite)."""
WAIT_S = 30.0
"""The longest a replica may take to apply a write (a hang guard, not a threshold)."""
_WRITES = frozenset({"/v1/ingest", "/v1/forget"})


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None, timeout: float = 60.0) -> None:
    """Poll ``/healthz`` until it answers (or the process dies, or ``timeout`` passes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"memstore serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy")


_LOGS: dict[int, tuple[Path, int]] = {}
"""Each started server's log, by its process id (:func:`stop_server` shows it)."""


def start_server(
    data: Path, tokens_file: Path | None, *extra: str, port: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``memstore serve`` on ``data``; the process and its base URL, once healthy.

    Its output goes to ``data.parent / f"serve-{port}.log"``. Without ``port`` a
    free one is picked, and started again on another when it was taken before
    the server bound it (:func:`tests.ports.on_free_port`). A server that does
    not become healthy otherwise fails the test with its log.
    """

    def start(chosen: int) -> tuple[subprocess.Popen[bytes], str]:
        proc, url, log, begin = _start(data, tokens_file, extra, chosen)
        try:
            wait_listening(proc, chosen, lambda: _said(log, begin))
            wait_healthy(url, proc)
        except PortTaken:
            raise
        except RuntimeError as e:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"{e}; its log ({log}):\n{_said(log, begin)}") from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        _LOGS[proc.pid] = (log, begin)
        return proc, url

    return on_free_port(start, port)


def _said(log: Path, start: int) -> str:
    """What the server wrote to ``log`` (from byte ``start``: a log may be appended to)."""
    with open(log, "rb") as f:
        f.seek(start)
        return f.read().decode(errors="replace")


def _start(
    data: Path, tokens_file: Path | None, extra: tuple[str, ...], port: int
) -> tuple[subprocess.Popen[bytes], str, Path, int]:
    """``memstore serve`` on ``data`` at ``port``, started: the process, its URL, its log
    and where in the log its output begins."""
    cmd = [
        sys.executable,
        "-m",
        "memstore.cli",
        "serve",
        "--data",
        str(data),
        "--embedder",
        "hash",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra,
    ]
    if tokens_file is not None:
        cmd += ["--tokens-file", str(tokens_file)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    data.mkdir(parents=True, exist_ok=True)
    log = data.parent / f"serve-{port}.log"
    with open(log, "ab") as out:  # not a pipe: it could fill up
        start = out.tell()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}", log, start


def stop_server(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    """Stop a server with ``sig``; its exit status (its log on stderr when not 0)."""
    proc.send_signal(sig)
    code = proc.wait(timeout=30)
    logged = _LOGS.pop(proc.pid, None)
    if code != 0 and logged is not None:  # pytest shows it beside the failed assertion
        print(f"memstore serve exited {code}; its log ({logged[0]}):", file=sys.stderr)
        print(_said(*logged), file=sys.stderr)
    return code


def applied(url: str) -> Lsn:
    """The journal position a server has applied (its ``/healthz`` ``lsn``)."""
    r = httpx.get(f"{url}/healthz", timeout=10.0)
    r.raise_for_status()
    return Lsn.parse(r.json()["lsn"])


def wait_applied(urls: list[str], lsn: Lsn, timeout: float = WAIT_S) -> None:
    """Poll every server until it has applied ``lsn``; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    for url in urls:
        while applied(url) < lsn:
            assert time.monotonic() < deadline, f"{url} did not apply {lsn} in {timeout} s"
            time.sleep(0.005)


class ReplicaTransport(httpx.BaseTransport):
    """Sends each request to the next replica in turn (round robin).

    After an acknowledged write (a 200 from ingest or forget), it waits until
    every replica has applied the write's Lsn (``lsn`` or ``audit_lsn`` of the
    answer) before handing the answer back: the client then reads its writes
    on any replica, as a client pinned to one replica would.
    """

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self._inner = httpx.HTTPTransport()
        self._next = 0
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = httpx.URL(self.urls[self._next % len(self.urls)])
        self._next += 1
        self.sent.append(str(url))
        request.url = request.url.copy_with(scheme=url.scheme, host=url.host, port=url.port)
        request.headers["Host"] = url.netloc.decode("ascii")
        response = self._inner.handle_request(request)
        if request.method == "POST" and request.url.path in _WRITES and response.status_code == 200:
            response.read()
            body = json.loads(response.content)
            lsn = body.get("lsn") or body.get("audit_lsn")
            wait_applied(self.urls, Lsn(lsn["wall_ms"], lsn["counter"]))
        return response

    def close(self) -> None:
        self._inner.close()


def start_replicas(
    root: Path, tokens_file: Path, dsn: str, schema: str, n: int, *extra: str
) -> list[tuple[subprocess.Popen[bytes], str]]:
    """``n`` servers (own data folders) on one PostgreSQL schema, sharing ``tokens_file``."""
    started: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for i in range(n):
            started.append(
                start_server(
                    root / f"replica{i}",
                    tokens_file,
                    "--journal",
                    dsn,
                    "--journal-schema",
                    schema,
                    *extra,
                )
            )
    except BaseException:
        for proc, _ in started:
            stop_server(proc)
        raise
    return started


@dataclass
class Tenants:
    """The tokens of the server under test, handed out so no two tests share a bucket."""

    full: list[str]
    reader: str
    noscope: str
    tenant_of: dict[str, str]
    _next: int = field(default=0)

    def take(self) -> str:
        """A full-scope token whose tenant no test used before (recycled when all were)."""
        token = self.full[self._next % len(self.full)]
        self._next += 1
        return token


@dataclass
class Server:
    url: str
    tenants: Tenants
    client: httpx.Client

    def call(self, method: str, path: str, token: str | None, **kw: Any) -> httpx.Response:
        """A request as ``token`` (None: no Authorization), waiting out any 429."""
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        while True:
            r = self.client.request(method, path, headers=headers, **kw)
            if r.status_code != 429:
                return r
            time.sleep(float(r.headers["Retry-After"]))


def make_tokens(path: Path) -> dict[str, Any]:
    tokens: dict[str, Any] = {
        f"tok-full-{n}": {"tenant": f"t{n}", "scopes": ALL} for n in range(120)
    }
    tokens["tok-reader"] = {"tenant": "readers", "scopes": ["recall"]}
    tokens["tok-noscope"] = {"tenant": "nobody", "scopes": []}
    path.write_text(json.dumps(tokens), encoding="utf-8")
    return tokens


def tenants_from(tokens: dict[str, Any]) -> Tenants:
    full, seen = [], set()
    reader = noscope = ""
    for token, entry in tokens.items():
        scopes = set(entry["scopes"])
        if scopes == set(ALL) and entry["tenant"] not in seen:
            seen.add(entry["tenant"])
            full.append(token)
        elif scopes == {"recall"} and not reader:
            reader = token
        elif not scopes and not noscope:
            noscope = token
    # A tenant shares its bucket with every token of it: keep the others' tenants apart.
    others = {tokens[reader]["tenant"], tokens[noscope]["tenant"]} if reader and noscope else set()
    full = [t for t in full if tokens[t]["tenant"] not in others]
    assert len(full) >= 12 and reader and noscope, "tokens file lacks the roles the suite needs"
    return Tenants(full, reader, noscope, {t: e["tenant"] for t, e in tokens.items()})


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    url = os.environ.get("MEMSTORE_PROTOCOL_URL")
    if url:
        tokens = json.loads(Path(os.environ["MEMSTORE_PROTOCOL_TOKENS"]).read_text("utf-8"))
        with httpx.Client(base_url=url, timeout=30.0) as client:
            yield Server(url, tenants_from(tokens), client)
        return
    root = tmp_path_factory.mktemp("serve")
    tokens = make_tokens(root / "tokens.json")
    rate = ("--rate-per-second", str(RATE_PER_SECOND), "--rate-burst", str(RATE_BURST))
    replicas = int(os.environ.get(REPLICAS_ENV) or "1")
    if replicas > 1:
        yield from _replicated(root, tokens, replicas, rate)
        return
    proc, url = start_server(root / "data", root / "tokens.json", *rate)
    try:
        with httpx.Client(base_url=url, timeout=30.0) as client:
            yield Server(url, tenants_from(tokens), client)
    finally:
        code = stop_server(proc)
    assert code == 0, "SIGTERM must shut the server down cleanly"


def _replicated(
    root: Path, tokens: dict[str, Any], n: int, rate: tuple[str, ...]
) -> Iterator[Server]:
    """The ``server`` fixture as ``n`` replicas behind a :class:`ReplicaTransport`."""
    require_pg()
    schemas = Schemas()
    place = schemas.new("replicas")
    started = start_replicas(root, root / "tokens.json", place.dsn, place.schema, n, *rate)
    urls = [url for _, url in started]
    codes: list[int] = []
    try:
        transport = ReplicaTransport(urls)
        with httpx.Client(base_url=urls[0], transport=transport, timeout=30.0) as client:
            yield Server(urls[0], tenants_from(tokens), client)
    finally:
        codes = [stop_server(proc) for proc, _ in started]
        schemas.drop_all()
    assert codes == [0] * n, "SIGTERM must shut every replica down cleanly"
