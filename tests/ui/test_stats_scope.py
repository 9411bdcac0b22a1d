"""``GET /ui/api/stats``: a tenant's token sees its tenant's figures; the server's need ``admin``.

Before, every token was answered the server's search counters (every
tenant's searches), the journal's size and the number of vectors: how much
the other tenants hold and how busy they are. Now those are under
``server``, for a token holding the ``admin`` scope only, on a real
``memstore serve`` whose tokens file holds one (``tests/ui/conftest.py``).
"""

from __future__ import annotations

import httpx

from tests.ui.conftest import Server

TENANT_KEYS = {"partitions", "kinds", "statuses", "journal", "server"}


def _recall(server: Server, token: str, query: str) -> None:
    r = httpx.post(
        f"{server.url}/v1/recall",
        json={"query": query},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    r.raise_for_status()


def _stats(server: Server, token: str) -> dict[str, object]:
    r = server.api(token, "stats")
    assert r.status_code == 200, r.text
    body: dict[str, object] = r.json()
    return body


def test_a_tenant_sees_its_own_figures_only(server: Server) -> None:
    tenant, token = server.tenant()
    _, other = server.tenant()
    server.ingest(token, "Judith files the quarterly report.", source="judith.md")
    mine = _stats(server, token)
    assert set(mine) == TENANT_KEYS and mine["server"] is None
    assert mine["partitions"] == {tenant: 2}  # the episode and its chunk
    assert set(mine["journal"]) == {"head"}  # type: ignore[arg-type]
    # Another tenant writes and searches: nothing of it shows in this tenant's answer
    # but the journal's head, the log position every token is told (whoami, /healthz).
    server.ingest(other, "Karl stores twelve more notes.", source="karl.md")
    _recall(server, other, "notes")
    again = _stats(server, token)
    assert {k: v for k, v in again.items() if k != "journal"} == {
        k: v for k, v in mine.items() if k != "journal"
    }


def test_an_admin_token_sees_the_servers_figures(server: Server) -> None:
    _, token = server.tenant()
    before = _stats(server, server.admin)["server"]
    assert isinstance(before, dict)
    assert set(before) == {"search", "journal_bytes", "vectors"}
    server.ingest(token, "Lena counts every tenant's searches.", source="lena.md")
    _recall(server, token, "searches")
    after = _stats(server, server.admin)
    assert after["partitions"] == {"ops": 0}  # its own tenant holds nothing
    figures = after["server"]
    assert isinstance(figures, dict)
    assert figures["search"]["total"] > before["search"]["total"]  # another tenant's search
    assert figures["vectors"] >= before["vectors"] + 1
    assert figures["journal_bytes"] > 0
    assert figures["search"]["phases"]["lexical"]["count"] >= 1
