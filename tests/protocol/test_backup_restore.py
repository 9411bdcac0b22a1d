"""A ``memstore serve`` restored from ``memstore backup`` accepts the tokens its clients hold.

A server given no ``--tokens-file`` keeps its tokens in ``DATA/tokens.json``.
The backup copied the journal and vectors only, so a server started on the
restored folder made a new token: every client was refused (401), and the
hard-delete receipts it had handed out (keyed by that file) no longer redeemed.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx
import pytest

from memstore.cli import main

from .conftest import start_server, stop_server

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMSTORE_PROTOCOL_URL")), reason="starts servers of its own"
)


def test_a_server_restored_from_a_backup_accepts_the_same_token(tmp_path: Path) -> None:
    data, dest = tmp_path / "data", tmp_path / "backups" / "today"
    target = {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}
    proc, url = start_server(data, None)  # makes data/tokens.json
    try:
        (token,) = json.loads((data / "tokens.json").read_text())
        headers = {"Authorization": f"Bearer {token}"}
        body = {"id": target["Id"], "source": "s", "content": "the safe code is 9876"}
        assert httpx.post(f"{url}/v1/ingest", json=body, headers=headers).status_code == 200
        preview = httpx.post(
            f"{url}/v1/forget", json={"target": target, "dry_run": True}, headers=headers
        )
        assert preview.status_code == 200
        assert main(["backup", str(data), str(dest)]) == 0  # while it serves
    finally:
        assert stop_server(proc) == 0
    copied = dest / "tokens.json"
    assert copied.read_bytes() == (data / "tokens.json").read_bytes()
    assert stat.S_IMODE(copied.stat().st_mode) == 0o600  # the secret stays private
    proc, url = start_server(dest, None)
    try:
        r = httpx.post(f"{url}/v1/recall", json={"query": "safe code"}, headers=headers)
        assert r.status_code == 200, r.text
        assert "9876" in r.text
        hard = {"target": target, "hard": True, "confirmation_token": preview.text}
        r = httpx.post(f"{url}/v1/forget", json=hard, headers=headers)
        assert r.status_code == 200, r.text
    finally:
        assert stop_server(proc) == 0
    assert list(json.loads(copied.read_text())) == [token]  # no new token was made
