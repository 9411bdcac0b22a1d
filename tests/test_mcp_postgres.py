"""Two ``memstore mcp`` servers share one memory through a PostgreSQL journal."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.mcp_harness import stdio
from tests.pgtest import PgPlace


def test_two_servers_share_one_memory(pg_place: PgPlace, tmp_path: Path) -> None:
    flags = ("--journal", pg_place.dsn, "--journal-schema", pg_place.schema)

    async def main() -> None:
        async with stdio(tmp_path / "a", *flags) as a, stdio(tmp_path / "b", *flags) as b:
            note = await a.ok("remember", {"content": "The on-call rota changes on Mondays."})
            hits: list[dict[str, object]] = []
            with anyio.fail_after(30):  # replication is asynchronous (LISTEN/NOTIFY)
                while not hits:
                    hits = (await b.ok("recall", {"query": "on-call rota"}))["hits"]
                    await anyio.sleep(0.1)
            assert [h["id"] for h in hits] == [note["id"]]
            other = await b.ok("remember", {"content": "Both servers write: no lock."})
            assert other["merged_into"] is None

    anyio.run(main)
