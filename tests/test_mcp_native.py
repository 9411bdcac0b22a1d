"""The native tools in detail, through a ``ClientSession`` connected in-process.

``recall``'s budget and ``as_of``, partitions, ``related`` from words, the
read-only refusal, and validation that changes nothing.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import anyio
import pytest
from mcp import types
from mcp.shared.exceptions import McpError

from memstore.memory import Memory
from tests.mcp_harness import in_process


def test_recall_budget_spans_all_hits() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem) as c:
                for i in range(6):
                    await c.ok("remember", {"content": f"kiwi report {i}: " + "x" * 900})
                hits = await c.ok("recall", {"query": "kiwi report", "max_chars": 1000})
                total = sum(len(h["content"]) for h in hits["hits"])
                assert total <= 1000 and hits["truncated"] is True
                assert len(hits["hits"]) >= 2  # shared, not spent on the first hit
                full = await c.ok("recall", {"query": "kiwi report", "max_chars": 100_000})
                assert full["truncated"] is False
                assert all(len(h["content"]) > 900 for h in full["hits"])

    anyio.run(main)


def test_recall_as_of_sees_the_past(tmp_path: Path) -> None:
    async def main() -> None:
        with Memory(tmp_path, embedder="hash") as mem:
            async with in_process(mem) as c:
                a = await c.ok("remember", {"content": "The release train leaves on Tuesdays."})
                first = (await c.ok("history", {"id": a["id"]}))["versions"][0]
                time.sleep(0.01)
                await c.ok(
                    "update_memory",
                    {"id": a["id"], "content": "The release train leaves on Thursdays."},
                )
                await c.ok("remember", {"content": "A later release train note."})
                now = await c.ok("recall", {"query": "release train"})
                assert {h["content"] for h in now["hits"]} == {
                    "The release train leaves on Thursdays.",
                    "A later release train note.",
                }
                for at in (first["lsn"], first["at"]):
                    past = await c.ok("recall", {"query": "release train", "as_of": at})
                    assert [h["content"] for h in past["hits"]] == [
                        "The release train leaves on Tuesdays."
                    ]
                before = dt.datetime(2000, 1, 1, tzinfo=dt.UTC).isoformat()
                assert (await c.ok("recall", {"query": "train", "as_of": before}))["hits"] == []

    anyio.run(main)


def test_recall_as_of_takes_any_time_and_names_a_bad_position(tmp_path: Path) -> None:
    """Past 2248 (the journal's last millisecond) is the latest state, before 1970 none.

    Before: a time past 2248 or before 1970 was a tool error carrying the
    engine's internal ``wall_ms ... is out of range``, not naming ``as_of``.
    """

    async def main() -> None:
        with Memory(tmp_path, embedder="hash") as mem:
            async with in_process(mem) as c:
                await c.ok("remember", {"content": "The ferry leaves at noon."})
                for late in ("2248-09-26T15:10:22.208Z", "2300-01-01T00:00:00Z"):
                    got = await c.ok("recall", {"query": "ferry", "as_of": late})
                    assert [h["content"] for h in got["hits"]] == ["The ferry leaves at noon."]
                early = {"query": "ferry", "as_of": "1960-01-01T00:00:00Z"}
                assert (await c.ok("recall", early))["hits"] == []
                for bad, why in [
                    ("8796093022208.0", "out of range 0..8796093022207"),
                    ("last tuesday", "neither a log position"),
                    ("2026-01-01T00:00:00", "time zone"),
                ]:
                    msg = await c.fails("recall", {"query": "ferry", "as_of": bad})
                    assert msg.startswith(f"as_of {bad!r}") and why in msg

    anyio.run(main)


def test_partitions_do_not_see_each_other(tmp_path: Path) -> None:
    async def main() -> None:
        with Memory(tmp_path, embedder="hash") as mem:
            async with in_process(mem, partition="alpha") as a:
                note = await a.ok("remember", {"content": "alpha's secret build flag is -O3"})
            async with in_process(mem, partition="beta") as b:
                assert (await b.ok("recall", {"query": "secret build flag"}))["hits"] == []
                assert (await b.ok("get_memory", {"ids": [note["id"]]}))["missing"]
                assert "no item" in await b.fails("history", {"id": note["id"]})
                assert (await b.ok("forget", {"ids": [note["id"]]}))["forgotten"] == []
                assert (await b.ok("recent", {}))["items"] == []
            async with in_process(mem) as everyone:  # no partition: the whole memory
                hits = (await everyone.ok("recall", {"query": "secret build flag"}))["hits"]
                assert [h["id"] for h in hits] == [note["id"]]

    anyio.run(main)


def test_related_from_words_and_from_nothing() -> None:
    async def main() -> None:
        with Memory(embedder=None) as mem:  # lexical: unrelated words match nothing
            async with in_process(mem) as c:
                cause = await c.ok("remember", {"content": "The disk on db-2 filled up."})
                effect = await c.ok(
                    "remember",
                    {
                        "content": "Checkout failed for an hour.",
                        "links": [{"to_id": cause["id"], "relation": "caused_by"}],
                    },
                )
                got = await c.ok("related", {"query": "checkout failed"})
                assert got["anchors"][0] == effect["id"]
                assert [m["id"] for m in got["items"]] == [cause["id"]]
                nothing = await c.ok("related", {"id_or_query": "zzzqqq"})
                assert nothing == {"anchors": [], "items": [], "complete": True}
                # Words longer than any id, or holding a NUL, are searched, not looked up
                # as an id (which refused them: "id is 300 characters; at most 256").
                for words in ["why did checkout fail? " * 13, "checkout\x00failed"]:
                    got = await c.ok("related", {"id_or_query": words})
                    assert got["anchors"][0] == effect["id"], words

    anyio.run(main)


def test_read_only_refuses_every_write_tool() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            kept = mem.add("already here")
            async with in_process(mem, readonly="it is read-only for the test") as c:
                for name, args in [
                    ("remember", {"content": "x"}),
                    ("update_memory", {"id": kept.id, "title": "x"}),
                    ("forget", {"ids": [kept.id]}),
                    ("link", {"from_id": kept.id, "to_id": kept.id}),
                ]:
                    msg = await c.fails(name, args)
                    assert msg == f"{name} changes memory, and it is read-only for the test"
                assert (await c.ok("get_memory", {"ids": [kept.id]}))["items"][0]["title"] == ""
            assert mem.stats().items == 1

    anyio.run(main)


def test_invalid_update_changes_nothing() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem) as c:
                a = await c.ok("remember", {"content": "original", "event_date": "2024-03-01"})
                msg = await c.fails("update_memory", {"id": a["id"], "event_date": "someday"})
                assert "YYYY-MM-DD" in msg
                msg = await c.fails("update_memory", {"id": a["id"], "tags": ["a,b"]})
                assert "comma" in msg
                item = (await c.ok("get_memory", {"ids": [a["id"]]}))["items"][0]
                assert (item["content"], item["event_date"], item["tags"]) == (
                    "original",
                    "2024-03-01",
                    [],
                )

    anyio.run(main)


def test_a_merged_restatement_keeps_its_new_links() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem) as c:
                other = await c.ok("remember", {"content": "The on-call phone is in the drawer."})
                fact = {
                    "content": "The production database is PostgreSQL 16 on db-main.",
                    "kind": "stable_fact",
                    "confidence": "high",
                }
                first = await c.ok("remember", fact)
                again = await c.ok(
                    "remember",
                    {
                        **fact,
                        "content": fact["content"] + " Confirmed.",
                        "links": [{"to_id": other["id"], "relation": "correlates_with"}],
                    },
                )
                assert again == {"id": first["id"], "merged_into": first["id"]}
                item = (await c.ok("get_memory", {"ids": [first["id"]]}))["items"][0]
                assert [k["to_id"] for k in item["links"]] == [other["id"]]

    anyio.run(main)


def test_reading_an_unknown_resource_is_an_invalid_params_error() -> None:
    """SEP-2164: a resource that does not exist answers JSON-RPC -32602 naming the URI."""

    async def main() -> None:
        with Memory(embedder=None) as mem:
            hidden = mem.add("beta's note", partition="beta")
            async with in_process(mem, partition="alpha") as c:
                for uri, says in [
                    ("memory://item/memory-nope", "no item with id 'memory-nope'"),
                    (f"memory://item/{hidden.id}", f"no item with id {hidden.id!r}"),
                    ("memory://nope", "read memory://recent or memory://item/{id}"),
                ]:
                    with pytest.raises(McpError) as caught:
                        await c.resource(uri)
                    assert caught.value.error.code == types.INVALID_PARAMS
                    assert says in caught.value.error.message
                    assert caught.value.error.data == {"uri": uri}

    anyio.run(main)


def test_an_item_resource_finds_an_id_the_uri_carries_percent_encoded() -> None:
    """A URI holds non-ASCII as %XX (the SDK encodes it so): the id is read decoded."""

    async def main() -> None:
        with Memory(embedder=None) as mem:
            mem.add("the café's opening hours", id="café-hours")
            async with in_process(mem) as c:
                for uri in ("memory://item/café-hours", "memory://item/caf%C3%A9-hours"):
                    assert (await c.resource(uri))["id"] == "café-hours"

    anyio.run(main)


def test_tags_never_move_a_memory_out_of_its_partition(tmp_path: Path) -> None:
    """Placement tags (``tenant/``, ``user:``, ``shared``) are the server's, not the model's.

    A tool call can neither set them (refused, nothing written) nor drop them
    (an update's ``tags`` replaces the free tags only), and no output shows them.
    """

    async def main() -> None:
        with Memory(tmp_path, embedder=None) as mem:
            async with in_process(mem, partition="alice") as alice:
                a = await alice.ok("remember", {"content": "alice's salary is 90k", "tags": ["hr"]})
                got = await alice.ok("update_memory", {"id": a["id"], "tags": ["hr", "pay"]})
                assert got["items"][0]["tags"] == ["hr", "pay"]
                await alice.ok("update_memory", {"id": a["id"], "tags": []})
                for bad in ["tenant/bob", "user:ABC", "shared"]:
                    msg = await alice.fails("update_memory", {"id": a["id"], "tags": ["x", bad]})
                    assert f"{bad!r} is reserved" in msg
                    msg = await alice.fails("remember", {"content": "injected", "tags": [bad]})
                    assert f"{bad!r} is reserved" in msg
                assert mem.stats().items == 1
                assert mem.get(a["id"]).tags == ["tenant/alice"]  # type: ignore[union-attr]
                item = (await alice.ok("get_memory", {"ids": [a["id"]]}))["items"][0]
                assert item["tags"] == []
                assert (await alice.resource(f"memory://item/{a['id']}"))["tags"] == []
                assert (await alice.resource("memory://recent"))["items"][0]["tags"] == []
                shown = (await alice.ok("history", {"id": a["id"]}))["versions"]
                assert [v["item"]["tags"] for v in shown] == [["hr"], ["hr", "pay"], []]
            async with in_process(mem, partition="bob") as bob:
                assert (await bob.ok("get_memory", {"ids": [a["id"]]}))["missing"] == [a["id"]]
                assert (await bob.ok("recall", {"query": "salary"}))["hits"] == []
                assert (await bob.ok("recent", {}))["items"] == []

    anyio.run(main)


def test_the_tools_cap_limit_and_ids_and_say_so() -> None:
    """``limit`` and ``ids`` stop at the MCP tools' own cap, below the engine's, and the
    schema, the refusal and docs/mcp.md all name it."""
    from memstore.limits import MAX_RESULTS
    from memstore.mcp.arguments import MAX_IDS, MAX_LIMIT

    assert MAX_LIMIT < MAX_RESULTS  # a deliberate, tighter cap: not the engine's
    docs = (Path(__file__).parent.parent / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert f"`limit` (of `recall`, `related` and `recent`) is 1 to {MAX_LIMIT}" in docs
    assert f"names at most {MAX_IDS} memories" in docs
    assert f"limit must be between 1 and {MAX_LIMIT}, got 101 (arguments.out_of_range)" in docs

    async def main() -> None:
        with Memory(embedder="hash") as mem:
            ids = [mem.add(f"note number {n}").id for n in range(MAX_IDS + 1)]
            async with in_process(mem) as c:
                schemas = {t.name: t.inputSchema for t in (await c.session.list_tools()).tools}
                for tool in ("recall", "related", "recent"):
                    assert schemas[tool]["properties"]["limit"]["maximum"] == MAX_LIMIT
                assert schemas["forget"]["properties"]["ids"]["maxItems"] == MAX_IDS
                got = await c.ok("recent", {"limit": MAX_LIMIT})
                assert len(got["items"]) == MAX_LIMIT
                for tool, args, given in [
                    ("recall", {"query": "note", "limit": MAX_LIMIT + 1}, MAX_LIMIT + 1),
                    ("related", {"id_or_query": "note", "k": MAX_RESULTS}, MAX_RESULTS),
                    ("recent", {"top_k": MAX_LIMIT + 1}, MAX_LIMIT + 1),
                ]:
                    msg = await c.fails(tool, args)
                    refused = f"limit must be between 1 and {MAX_LIMIT}, got {given}"
                    assert msg.startswith(f"{refused} (arguments.out_of_range). "), msg
                msg = await c.fails("forget", {"ids": ids})
                assert f"at most {MAX_IDS} ids per call, not {MAX_IDS + 1}" in msg
                assert "MCP tools' cap" in msg
            assert mem.store.count_active() == MAX_IDS + 1  # the refused forget changed nothing

    anyio.run(main)


def test_an_id_longer_than_any_id_is_refused_naming_its_argument() -> None:
    """Every id argument advertises ``maxLength`` and a longer one is refused by its name.

    Before: the engine's "id is 300 characters; at most 256" for ``to_id``,
    ``from_id``, ``links[0].to_id`` or one of ``ids`` alike.
    """
    from memstore.limits import MAX_ID_CHARS

    long = "x" * (MAX_ID_CHARS + 1)

    async def main() -> None:
        with Memory(embedder="hash") as mem:
            mem.add("alpha note", id="alpha")
            async with in_process(mem) as c:
                schemas = {t.name: t.inputSchema for t in (await c.session.list_tools()).tools}
                assert schemas["link"]["properties"]["to_id"]["maxLength"] == MAX_ID_CHARS
                assert schemas["forget"]["properties"]["ids"]["items"]["maxLength"] == MAX_ID_CHARS
                for tool, args, named in [
                    ("link", {"from_id": "alpha", "to_id": long}, "to_id"),
                    ("link", {"from_id": long, "to_id": "alpha"}, "from_id"),
                    ("remember", {"content": "c", "links": [{"to_id": long}]}, "links.0.to_id"),
                    ("forget", {"ids": ["alpha", long]}, "ids.1"),
                    ("update_memory", {"id": long, "title": "t"}, "id"),
                    ("history", {"id": long}, "id"),
                ]:
                    msg = await c.fails(tool, args)
                    assert msg.startswith(f"{named}: string should have at most {MAX_ID_CHARS}"), (
                        msg
                    )
            assert mem.store.count_active() == 1

    anyio.run(main)


def test_text_holding_a_lone_surrogate_is_named_alike_by_every_layer() -> None:
    """Whether the argument model or the engine refuses it, the words are the same.

    Before: an argument the model checks (``query``, ``links.0.to_id``) got
    pydantic's "unable to parse raw data as a unicode string", the rest the
    engine's "not valid Unicode text (it holds a lone surrogate)".
    """

    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem) as c:
                for tool, args, where in [
                    ("recall", {"query": "a\udce9"}, "query"),
                    ("recall", {"query": "x", "kind": "a\udce9"}, "kind"),  # the engine's
                    ("remember", {"content": "x", "links": [{"to_id": "a\udce9"}]}, "to_id"),
                    ("history", {"id": "a\udce9"}, "id"),
                ]:
                    msg = await c.fails(tool, args)
                    assert msg.startswith(where) or f".{where}" in msg, msg
                    assert "not valid Unicode text (it holds a lone surrogate)" in msg, msg
                    assert "unable to parse" not in msg, msg
                assert (await c.ok("recent", {"limit": 5}))["items"] == []

    anyio.run(main)
