"""The tokens file is live: a removed token fails from the next request, without a restart.

Before, the file was read once at start-up: a leaked token stayed valid
until the server was restarted, and SIGHUP (the usual "reload your
configuration") killed the server.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adversarial.http_probe import ALL, Raw, log_of, serving, wait_for, write_tokens

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMSTORE_PROTOCOL_URL")), reason="starts a server of its own"
)

A = {"tok-a": {"tenant": "a", "scopes": ALL}}
B = {"tok-b": {"tenant": "b", "scopes": ALL}}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Any, int, Path, Path]]:
    with serving(tmp_path, tokens=A) as (proc, port, tokens_file):
        yield proc, port, tokens_file, tmp_path


def status(port: int, token: str) -> int:
    c = Raw(port)
    try:
        return c.request(
            "POST",
            "/v1/recall",
            body=b'{"query": "q"}',
            headers=[("Authorization", f"Bearer {token}"), ("Content-Type", "application/json")],
        ).status
    finally:
        c.close()


def test_a_removed_token_fails_from_the_next_request(server: tuple[Any, int, Path, Path]) -> None:
    _, port, tokens_file, _ = server
    c = Raw(port)  # one kept-alive connection across the change
    try:
        auth = [("Authorization", "Bearer tok-a"), ("Content-Type", "application/json")]
        assert c.request("POST", "/v1/recall", body=b'{"query": "q"}', headers=auth).status == 200
        write_tokens(tokens_file, B)
        a = c.request("POST", "/v1/recall", body=b'{"query": "q"}', headers=auth)
        assert a.status == 401 and a.json()["error"] == "unauthorized"
    finally:
        c.close()
    assert status(port, "tok-b") == 200


def test_an_edit_in_place_is_seen_too(server: tuple[Any, int, Path, Path]) -> None:
    _, port, tokens_file, _ = server
    inode = tokens_file.stat().st_ino
    tokens_file.write_text('{"tok-c": {"tenant": "c", "scopes": ["recall"]}}', encoding="utf-8")
    assert tokens_file.stat().st_ino == inode
    assert status(port, "tok-c") == 200
    assert status(port, "tok-a") == 401


def test_an_invalid_file_keeps_the_last_good_tokens(server: tuple[Any, int, Path, Path]) -> None:
    _, port, tokens_file, root = server
    write_tokens(tokens_file, B)
    assert status(port, "tok-b") == 200
    broken = tokens_file.with_name("broken.json")  # replaced whole, as write_tokens does
    broken.write_text('{"tok-x": {"tenant": "x", "scope": ["recall"]}', encoding="utf-8")
    os.replace(broken, tokens_file)
    assert status(port, "tok-b") == 200
    assert status(port, "tok-x") == 401
    assert status(port, "tok-b") == 200  # still, and the error is logged once
    log = log_of(root, port)
    assert log.count("can no longer be used") == 1, log[-2000:]
    write_tokens(tokens_file, A)
    assert status(port, "tok-a") == 200 and status(port, "tok-b") == 401


def test_sighup_reloads_and_keeps_serving(server: tuple[Any, int, Path, Path]) -> None:
    proc, port, tokens_file, _ = server
    proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: status(port, "tok-a") == 200, timeout=10)
    assert proc.poll() is None, "SIGHUP must not stop the server"
    write_tokens(tokens_file, B)
    proc.send_signal(signal.SIGHUP)
    assert status(port, "tok-a") == 401 and status(port, "tok-b") == 200
