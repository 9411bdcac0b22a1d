"""``memstore mcp`` as a subprocess, driven over stdio by the SDK's ``ClientSession``.

The tool list and its schemas, every native tool, the argument aliases, tool
errors that change nothing, the resources, persistence across a restart, and
a second server on a folder already being written (read-only, never corrupt).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from memstore.errors import MemstoreError
from memstore.mcp.opening import open_memory
from memstore.memory import Memory
from tests.mcp_harness import in_process, run_cli, stdio

NATIVE = [
    "remember",
    "recall",
    "get_memory",
    "update_memory",
    "forget",
    "link",
    "related",
    "history",
    "recent",
]
COMPAT = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]


def _described(schema: dict[str, Any]) -> list[str]:
    """Top-level properties that lack a description (a model reads them)."""
    return [n for n, p in schema.get("properties", {}).items() if not p.get("description")]


def test_tool_lists_and_schemas(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio(tmp_path / "a") as c:
            tools = (await c.session.list_tools()).tools
            assert [t.name for t in tools] == NATIVE
            for t in tools:
                assert t.description and t.inputSchema["type"] == "object"
                assert t.outputSchema is not None and t.outputSchema["type"] == "object"
                assert _described(t.inputSchema) == [], t.name
                assert t.annotations is not None
                assert t.annotations.readOnlyHint == (
                    t.name not in {"remember", "update_memory", "forget", "link"}
                )
            recall = next(t for t in tools if t.name == "recall")
            assert recall.inputSchema["required"] == ["query"]
            assert set(recall.inputSchema["properties"]) == {
                "query",
                "limit",
                "kind",
                "subject",
                "as_of",
                "explain",
                "min_relevance",
                "max_chars",
            }
            listed = (await c.session.list_resources()).resources
            assert [str(r.uri) for r in listed] == ["memory://recent"]
            templates = (await c.session.list_resource_templates()).resourceTemplates
            assert [t.uriTemplate for t in templates] == ["memory://item/{id}"]
        with Memory(embedder=None) as mem:
            async with in_process(mem, compat="knowledge-graph") as c:
                tools = (await c.session.list_tools()).tools
                assert [t.name for t in tools] == COMPAT
                entity = next(t for t in tools if t.name == "create_entities").inputSchema
                assert entity["required"] == ["entities"]
                relation = entity["$defs"]["EntityIn"]
                assert set(relation["required"]) == {"name", "entityType", "observations"}

    anyio.run(main)


def test_every_native_tool(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio(tmp_path) as c:
            a = await c.ok("remember", {"content": "The nightly backup runs at 02:00 UTC."})
            assert a["merged_into"] is None
            b = await c.ok(
                "remember",
                {
                    "content": "Backups are copied to the Frankfurt bucket.",
                    "kind": "decision",
                    "subject": "ops",
                    "tags": ["backup"],
                    "links": [{"to_id": a["id"], "relation": "explains"}],
                },
            )
            fact = {
                "content": "The production database is PostgreSQL 16 on db-main.",
                "kind": "stable_fact",
                "confidence": "high",
            }
            f1 = await c.ok("remember", fact)
            f2 = await c.ok(
                "remember",
                {**fact, "content": "The production database is PostgreSQL 16 on db-main!"},
            )
            assert f2 == {"id": f1["id"], "merged_into": f1["id"]}

            # recall, with the aliases models guess (q, k) and explain
            found = await c.ok("recall", {"q": "nightly backup", "k": 2, "explain": True})
            assert found["hits"][0]["id"] == a["id"]
            assert len(found["hits"]) <= 2 and found["hits"][0]["why"]
            plain = await c.ok("recall", {"text": "backup", "top_k": 5})
            assert all("why" not in h for h in plain["hits"])
            assert {a["id"], b["id"]} <= {h["id"] for h in plain["hits"]}
            tight = await c.ok("recall", {"query": "backup", "max_chars": 30})
            assert sum(len(h["content"]) for h in tight["hits"]) <= 30
            assert tight["truncated"] is True

            got = await c.ok("get_memory", {"ids": [a["id"], "memory-nope"]})
            assert [m["id"] for m in got["items"]] == [a["id"]]
            assert got["missing"] == ["memory-nope"]
            one = await c.ok("get_memory", {"id": b["id"]})  # one id as text
            item = one["items"][0]
            assert item["links"] == [{"to_id": a["id"], "relation": "explains", "weight": 1.0}]
            assert item["created_at"] and item["updated_at"] and item["tags"] == ["backup"]

            upd = await c.ok(
                "update_memory", {"id": a["id"], "content": "The backup runs at 03:00."}
            )
            assert upd["items"][0]["content"] == "The backup runs at 03:00."
            hist = await c.ok("history", {"id": a["id"]})
            assert [v["item"]["content"] for v in hist["versions"]] == [
                "The nightly backup runs at 02:00 UTC.",
                "The backup runs at 03:00.",
            ]

            linked = await c.ok("link", {"from_id": a["id"], "to_id": f1["id"]})
            assert linked["linked"] is True and linked["relation"] == "correlates_with"
            rel = await c.ok("related", {"id": a["id"], "depth": 1})
            assert rel["anchors"] == [a["id"]]
            assert {m["id"] for m in rel["items"]} == {b["id"], f1["id"]}
            assert all(m["activation"] > 0 for m in rel["items"])
            by_words = await c.ok("related", {"id_or_query": "Frankfurt bucket"})
            assert by_words["anchors"][0] == b["id"]

            recent = await c.ok("recent", {"k": 2})
            assert len(recent["items"]) == 2

            gone = await c.ok("forget", {"ids": [b["id"], "memory-nope"]})
            assert gone == {"forgotten": [b["id"]], "missing": ["memory-nope"]}
            assert (await c.ok("get_memory", {"ids": [b["id"]]}))["missing"] == [b["id"]]
            ops = [v["op"] for v in (await c.ok("history", {"id": b["id"]}))["versions"]]
            assert ops == ["upsert", "delete"]

            listed = await c.resource("memory://recent")
            assert a["id"] in [m["id"] for m in listed["items"]]
            one_item = await c.resource(f"memory://item/{a['id']}")
            assert one_item["content"] == "The backup runs at 03:00."
        async with stdio(tmp_path) as c:  # a restart keeps everything acknowledged
            hits = (await c.ok("recall", {"query": "backup runs"}))["hits"]
            assert hits[0]["id"] == a["id"]
            assert (await c.ok("get_memory", {"ids": [f1["id"]]}))["missing"] == []

    anyio.run(main)


def test_bad_arguments_are_tool_errors_that_change_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio(tmp_path) as c:
            msg = await c.fails("recall", {"limit": 3})
            assert "query is required" in msg and "recall takes query" in msg
            msg = await c.fails("recall", {"query": "x", "limit": 0})
            assert "limit must be between 1 and 100, got 0 (arguments.out_of_range)" in msg
            msg = await c.fails("remember", {"content": "x", "colour": "red"})
            assert "unknown argument 'colour'" in msg
            msg = await c.fails("remember", {"content": "a fact", "kind": "stable_fact"})
            assert "confidence 'high'" in msg
            msg = await c.fails("remember", {"content": "x", "links": [{"to_id": "memory-nope"}]})
            assert "memory-nope" in msg
            msg = await c.fails("recall", {"query": "x", "as_of": "yesterday"})
            assert "RFC 3339" in msg
            a = await c.ok("remember", {"content": "kept"})
            msg = await c.fails("link", {"from_id": a["id"], "to_id": a["id"], "relation": "likes"})
            assert "correlates_with" in msg  # the message lists what to send
            msg = await c.fails("update_memory", {"id": "memory-nope", "title": "x"})
            assert "memory-nope" in msg
            msg = await c.fails("update_memory", {"id": a["id"]})
            assert "at least one field" in msg
            recent = await c.ok("recent", {"limit": 50})
            assert [m["content"] for m in recent["items"]] == ["kept"]
            assert len((await c.ok("history", {"id": a["id"]}))["versions"]) == 1

    anyio.run(main)


def test_second_server_on_a_written_folder_is_read_only(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio(tmp_path) as writer:
            a = await writer.ok("remember", {"content": "Deploys freeze on Fridays."})
            async with stdio(tmp_path) as second:
                hits = (await second.ok("recall", {"query": "deploys friday"}))["hits"]
                assert [h["id"] for h in hits] == [a["id"]]
                msg = await second.fails("remember", {"content": "should not land"})
                assert "another memstore process is writing" in msg
                assert "read-only" in await second.fails("forget", {"ids": [a["id"]]})
            b = await writer.ok("remember", {"content": "The writer still writes."})
            assert b["merged_into"] is None
        async with stdio(tmp_path, "--readonly") as ro:
            msg = await ro.fails("remember", {"content": "nope"})
            assert "--readonly" in msg
            recent = await ro.ok("recent", {"limit": 10})
            assert {m["id"] for m in recent["items"]} == {a["id"], b["id"]}

    anyio.run(main)


def test_bad_start_options_exit_2_and_create_nothing(tmp_path: Path) -> None:
    for flags, says in [
        (("--partition", "a,b"), "partition 'a,b' must not hold commas"),
        (("--journal-schema", "s1"), "--journal-schema needs --journal"),
        # An empty schema: it opened the default schema, another memory's perhaps.
        (
            ("--journal", "postgresql://127.0.0.1/test", "--journal-schema", ""),
            "--journal-schema must be a plain identifier",
        ),
        # HTTP's options without --transport http: stdio started, silent, on the terminal.
        (("--port", "9000"), "--port is for --transport http"),
        (("--host", "0.0.0.0"), "--host is for --transport http"),
        (("--transport", "stdio", "--tokens-file", "t.json"), "--tokens-file is for --transport"),
        (("--shutdown-grace", "5"), "--shutdown-grace is for --transport http"),  # was: ignored
    ]:
        done = run_cli("mcp", "--data", str(tmp_path / "d"), "--embedder", "hash", *flags)
        assert done.returncode == 2 and says in done.stderr, done.stderr
        assert done.stdout == ""  # stdout belongs to the protocol
    assert not (tmp_path / "d").exists()


def test_a_memory_that_cannot_be_opened_now_exits_1_as_every_command(tmp_path: Path) -> None:
    # Vectors of another model, or a journal that does not answer: the command line is
    # right and the memory cannot be opened now, exit 1 as memstore serve and the data
    # commands say it (with the flag that helps); memstore mcp said 2, a usage error.
    with Memory(tmp_path / "d", embedder="hash") as mem:
        mem.add("made with the hash embedder")
    other = run_cli("mcp", "--data", str(tmp_path / "d"), "--embedder", "local", stdin="")
    assert other.returncode == 1 and other.stdout == "", other.stderr
    assert "were made by 'hash-v1-256-0'" in other.stderr
    assert "give the --embedder that made them" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1 and "Traceback" not in other.stderr
    closed = "postgresql://postgres@127.0.0.1:1/test?connect_timeout=5"
    away = run_cli("mcp", "--data", str(tmp_path / "e"), "--journal", closed, stdin="")
    assert away.returncode == 1 and "cannot connect to PostgreSQL" in away.stderr, away.stderr
    assert len(away.stderr.strip().splitlines()) == 1 and "Traceback" not in away.stderr
    empty = run_cli("mcp", "--data", str(tmp_path / "none"), "--readonly", stdin="")
    assert empty.returncode == 1 and "nothing to serve read-only" in empty.stderr, empty.stderr
    assert not (tmp_path / "none").exists()
    (tmp_path / "f").write_text("a file, not a folder")
    file = run_cli("mcp", "--data", str(tmp_path / "f"), stdin="")
    assert file.returncode == 2 and file.stderr == (
        f"memstore mcp: {tmp_path / 'f'} is a file; --data takes a folder\n"
    )


def test_a_dsn_given_as_data_is_refused_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--data postgresql://...`` once served a local folder named after the DSN, unshared."""
    monkeypatch.chdir(tmp_path)
    for dsn in ("postgresql://me@db/agents", "postgres://me@db/agents"):
        with pytest.raises(MemstoreError, match="give the DSN as --journal"):
            open_memory(dsn, embedder="hash")
    assert list(tmp_path.iterdir()) == []
