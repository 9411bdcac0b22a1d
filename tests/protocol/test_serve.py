"""``memstore serve`` itself: generated tokens, refused binds, clean and dirty shutdowns.

These start servers of their own, so they run only against the local code.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from ulid import ULID

from tests.pgtest import PgPlace
from tests.ports import free_port

from .conftest import ROOT, make_tokens, start_server, stop_server, wait_healthy

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMSTORE_PROTOCOL_URL")), reason="starts servers of its own"
)


def test_loopback_without_tokens_makes_a_private_tokens_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc, url = start_server(data, None)
    try:
        path = data / "tokens.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        (token, entry), *_ = json.loads(path.read_text()).items()
        assert entry == {"tenant": "default", "scopes": ["ingest", "recall", "forget", "admin"]}
        r = httpx.post(
            f"{url}/v1/recall", json={"query": "q"}, headers={"Authorization": f"Bearer {token}"}
        )
        assert r.status_code == 200
    finally:
        assert stop_server(proc, signal.SIGINT) == 0
    log = (tmp_path / f"serve-{url.rsplit(':', 1)[1]}.log").read_text()
    assert "curl" in log and "tokens.json" in log
    # The start-up line says which Host names it answers in words (before: a repr,
    # "HostPolicy(loopback + [])").
    assert "1 token(s), answers Host 127.0.0.1, localhost, [::1])" in log, log
    assert "HostPolicy" not in log


def test_the_printed_curl_line_works_on_an_ipv6_loopback(tmp_path: Path) -> None:
    """The first-start hint is a URL a shell can use: an IPv6 address goes in brackets."""
    port = free_port()
    log_path = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "memstore.cli", "serve", "--data", str(tmp_path / "data")]
    cmd += ["--embedder", "hash", "--host", "::1", "--port", str(port)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_healthy(f"http://[::1]:{port}", proc)
        line = next(x for x in log_path.read_text().splitlines() if x.strip().startswith("curl"))
        url = line.split()[2]
        token = line.split("Bearer ", 1)[1].split("'", 1)[0]
        assert url == f"http://[::1]:{port}/v1/recall", line
        r = httpx.post(url, json={"query": "q"}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200
    finally:
        assert stop_server(proc) == 0


def test_a_port_in_use_is_exit_status_1_with_one_line(tmp_path: Path) -> None:
    """The CLI's contract (memstore.cli): 1 when the command failed, never uvicorn's 3."""
    make_tokens(tmp_path / "tokens.json")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = serve_exit(tmp_path, "--tokens-file", str(tmp_path / "tokens.json"), "--port", port)
    assert done.returncode == 1, done.stderr
    assert f"memstore: cannot listen on http://127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize("api", ["protocol", "mindlayer"])
def test_a_port_in_use_is_refused_before_the_folder_or_a_token_is_made(
    tmp_path: Path, api: str
) -> None:
    """Before: the data folder and a new tokens.json were made, then uvicorn could not bind."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = serve_exit(tmp_path, "--api", api, "--port", port)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"memstore: cannot listen on http://127.0.0.1:{port}: address already in use; "
        "choose another --port or --host\n"
    )
    assert not (tmp_path / "d").exists()


MCP_HTTP = [sys.executable, "-m", "memstore.cli", "mcp", "--transport", "http"]


def test_mcp_over_http_on_a_port_in_use_is_refused_before_the_folder_opens(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [*MCP_HTTP, "--data", str(tmp_path / "d"), "--port", port],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert "memstore mcp: cannot listen on" in done.stderr and "already in use" in done.stderr
    assert not (tmp_path / "d").exists()


def test_non_loopback_bind_without_tokens_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memstore.cli",
            "serve",
            "--data",
            str(tmp_path),
            "--host",
            "0.0.0.0",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--tokens-file" in done.stderr
    assert not (tmp_path / "tokens.json").exists()


def test_metrics_disabled_is_404(tmp_path: Path) -> None:
    make_tokens(tmp_path / "tokens.json")
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json", "--metrics-disabled")
    try:
        r = httpx.get(f"{url}/metrics")
        assert r.status_code == 404 and r.json()["error"] == "not_found"
    finally:
        assert stop_server(proc) == 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_kill_during_an_ingest_burst_loses_no_acknowledged_episode(
    tmp_path: Path, sig: signal.Signals
) -> None:
    make_tokens(tmp_path / "tokens.json")
    data = tmp_path / "data"
    proc, url = start_server(data, tmp_path / "tokens.json", "--rate-per-second", "1000")
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(n: int) -> None:
        token = f"tok-full-{n}"
        with httpx.Client(base_url=url, timeout=10.0) as client:
            while not stop.is_set():
                ulid = str(ULID())
                body = {"id": ulid, "source": f"w{n}", "content": f"# burst\nepisode {ulid}\n"}
                try:
                    r = client.post(
                        "/v1/ingest", json=body, headers={"Authorization": f"Bearer {token}"}
                    )
                except httpx.TransportError:
                    return  # the server is gone: this one was never acknowledged
                if r.status_code == 200:
                    with lock:
                        acknowledged.append((token, ulid))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        while True:  # kill once a good number of episodes were acknowledged
            with lock:
                if len(acknowledged) >= 40:
                    break
            threading.Event().wait(0.01)
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
        # SIGTERM: in-flight requests finish, the Memory is closed, exit status 0.
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    finally:
        stop.set()
        for t in threads:
            t.join()
    with lock:
        acked = list(acknowledged)
    proc, url = start_server(data, tmp_path / "tokens.json", "--rate-per-second", "1000")
    try:
        with httpx.Client(base_url=url, timeout=10.0) as client:
            for token, ulid in acked:
                r = client.get(f"/v1/episode/{ulid}", headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 200, f"acknowledged episode {ulid} lost"
                assert r.json()["content"] == f"# burst\nepisode {ulid}\n"
    finally:
        assert stop_server(proc) == 0


def test_idle_event_stream_gets_keep_alive_comments(tmp_path: Path) -> None:
    make_tokens(tmp_path / "tokens.json")
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json", "--sse-keepalive", "0.2")
    try:
        headers = {"Authorization": "Bearer tok-full-0"}
        with httpx.stream("GET", f"{url}/v1/events", headers=headers, timeout=30.0) as r:
            comments = 0
            for line in r.iter_lines():
                if line == ": keep-alive":
                    comments += 1
                    if comments == 2:
                        break
    finally:
        assert stop_server(proc) == 0


def test_sigterm_ends_an_open_event_stream_instead_of_waiting_out_the_grace_period(
    tmp_path: Path,
) -> None:
    """Before: nothing told a ``/v1/events`` feed that the server was stopping, so a
    connected client held the shutdown for the whole grace period (10 s), and uvicorn
    then cancelled the stream ("timeout graceful shutdown exceeded")."""
    make_tokens(tmp_path / "tokens.json")
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json")
    ended = threading.Event()
    headers = {"Authorization": "Bearer tok-full-0"}
    with httpx.stream("GET", f"{url}/v1/events", headers=headers, timeout=60.0) as r:
        assert r.status_code == 200

        def read() -> None:
            for _ in r.iter_lines():
                pass
            ended.set()  # the server ended the stream

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert stop_server(proc) == 0
        reader.join(60)
    assert ended.is_set()
    log = (tmp_path / f"serve-{url.rsplit(':', 1)[1]}.log").read_text()
    assert "graceful shutdown exceeded" not in log, log


def serve_exit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``memstore serve`` with ``args`` expecting it to refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "memstore.cli", "serve", "--data", str(tmp_path / "d"), *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_journal_schema_needs_a_postgres_journal(tmp_path: Path) -> None:
    done = serve_exit(tmp_path, "--journal-schema", "agents")
    assert done.returncode == 2
    assert "--journal-schema needs --journal postgresql://" in done.stderr
    assert not (tmp_path / "d" / "tokens.json").exists()  # a refused start makes no token


def test_a_data_path_that_is_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "d").write_text("notes", encoding="utf-8")
    done = serve_exit(tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("is a file; --data takes a folder"), done.stderr
    assert (tmp_path / "d").read_text(encoding="utf-8") == "notes"


def test_a_short_confirm_key_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "key").write_bytes(b"short")
    done = serve_exit(tmp_path, "--confirm-key-file", str(tmp_path / "key"))
    assert done.returncode == 2
    assert "at least 16 bytes" in done.stderr
    assert not (tmp_path / "d" / "tokens.json").exists()  # a refused start makes no token


def test_an_empty_tokens_file_serves_and_authenticates_nobody(tmp_path: Path) -> None:
    """docs/protocol.md: "An empty map is allowed and authenticates nobody"."""
    (tmp_path / "tokens.json").write_text("{}", encoding="utf-8")
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json")
    try:
        r = httpx.post(
            f"{url}/v1/recall", json={"query": "q"}, headers={"Authorization": "Bearer x"}
        )
        assert r.status_code == 401
    finally:
        assert stop_server(proc) == 0


def test_a_dry_run_confirms_its_hard_delete_after_a_restart(tmp_path: Path) -> None:
    """The confirmation key comes from the tokens file, not from the process."""
    make_tokens(tmp_path / "tokens.json")
    headers = {"Authorization": "Bearer tok-full-0"}
    target = {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json")
    try:
        body = {"id": target["Id"], "source": "s", "content": "the safe code is 9876"}
        assert httpx.post(f"{url}/v1/ingest", json=body, headers=headers).status_code == 200
        preview = httpx.post(
            f"{url}/v1/forget", json={"target": target, "dry_run": True}, headers=headers
        )
        assert preview.status_code == 200
    finally:
        assert stop_server(proc) == 0
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json")
    try:
        hard = {"target": target, "hard": True, "confirmation_token": preview.text}
        r = httpx.post(f"{url}/v1/forget", json=hard, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["rows_deleted"] == 2
    finally:
        assert stop_server(proc) == 0


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--allow-origin", "app.example"], "not a web origin"),
        (["--allow-host", "http://x"], "not a host name"),
        (["--max-connections", "0"], "max_connections must be a positive integer"),
        (["--header-timeout", "-1"], "header_timeout must be a positive number"),
        # The command line refuses these itself (argparse types); serve() checks
        # them again for a caller that builds its own arguments.
        (["--rate-per-second", "0"], "--rate-per-second: must be a finite number above 0"),
        (["--rate-per-second", "nan"], "--rate-per-second: must be a finite number above 0"),
        (["--rate-burst", "0"], "--rate-burst: must be at least 1"),
        (["--sse-keepalive", "0"], "--sse-keepalive: must be a finite number above 0"),
    ],
)
def test_bad_defence_flags_are_refused(tmp_path: Path, flags: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memstore.cli", "serve", "--data", str(tmp_path), *flags],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert says in done.stderr, done.stderr
    assert not (tmp_path / "tokens.json").exists()


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"rate_per_second": 0.0}, "rate_per_second must be a positive number"),
        ({"rate_per_second": float("nan")}, "rate_per_second must be a positive number"),
        ({"rate_burst": 0}, "burst must be an integer of at least 1"),
        ({"sse_keepalive": 0.0}, "sse_keepalive must be a positive number"),
    ],
)
def test_serve_called_with_its_own_arguments_checks_the_rates_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, float], says: str
) -> None:
    # A host that builds the arguments itself (not through the command line)
    # gets the same refusal before anything is opened or written.
    from memstore.cli import build_parser
    from memstore.protocol import server

    args = build_parser().parse_args(["serve", "--data", str(tmp_path / "data")])
    for name, value in bad.items():
        setattr(args, name, value)
    assert server.serve(args) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_a_dsn_parameter_libpq_refuses_is_one_line_not_a_traceback(
    tmp_path: Path, pg_place: PgPlace
) -> None:
    # Before: the journal opened (it sets its own connect timeout), then the table of
    # redeemed receipts connected with the DSN as given and psycopg's ProgrammingError
    # ended the start-up in a traceback.
    dsn = f"{pg_place.dsn}?connect_timeout=abc"
    done = serve_exit(tmp_path, "--journal", dsn, "--journal-schema", pg_place.schema)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"memstore: cannot keep hard-delete receipts in {pg_place.schema}.protocol_redeemed: "
        "bad value for connect_timeout: 'abc'"
    )
