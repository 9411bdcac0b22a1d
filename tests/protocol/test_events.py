"""GET /v1/events: the tenant's change stream as SSE, resumable with Last-Event-ID."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.pgtest import PgPlace, Schemas, require_pg

from .conftest import Server, make_tokens, start_server, stop_server


def frames(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """SSE frames as field dicts (comments skipped)."""
    frame: dict[str, str] = {}
    for line in lines:
        if not line:
            if frame:
                yield frame
            frame = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            frame[name] = value


def next_change(it: Iterator[dict[str, str]]) -> tuple[str, dict[str, Any]]:
    for frame in it:
        if frame.get("event") == "change":
            return frame["id"], json.loads(frame["data"])
    raise AssertionError("stream ended")


@contextmanager
def server_on_postgres(tmp_path: Path, tag: str) -> Iterator[tuple[str, str, str, PgPlace]]:
    """A real server on a PostgreSQL journal of its own: its url, a full token, the token's
    tenant and the journal's place (for another process to write to); stopped after.
    """
    require_pg()
    schemas = Schemas()
    place = schemas.new(tag)
    tokens = make_tokens(tmp_path / "tokens.json")
    token = next(t for t in tokens if t.startswith("tok-full-"))
    proc, url = start_server(
        tmp_path / "data",
        tmp_path / "tokens.json",
        "--journal",
        place.dsn,
        "--journal-schema",
        place.schema,
    )
    try:
        yield url, token, tokens[token]["tenant"], place
    finally:
        assert stop_server(proc) == 0
        schemas.drop_all()


def test_events_stream_the_tenants_changes_and_resume(server: Server) -> None:
    a, b = server.tenants.take(), server.tenants.take()
    tenant_a = server.tenants.tenant_of[a]
    headers = {"Authorization": f"Bearer {a}"}
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        with client.stream("GET", "/v1/events", headers=headers) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            it = frames(r.iter_lines())
            first = next(it)  # positions the client: an id, no event
            assert "id" in first and "event" not in first
            server.call("POST", "/v1/ingest", b, json={"source": "b", "content": "not for a"})
            server.call("POST", "/v1/ingest", a, json={"source": "ev", "content": "event one"})
            seen_id, change = next_change(it)
            assert change["item"]["data"]["source"] == "ev"
            assert f"tenant/{tenant_a}" in change["item"]["tags"]
            assert change["lsn"] is not None
            ids = {change["id"]}
            while len(ids) < 2:  # the episode and its chunk
                seen_id, change = next_change(it)
                ids.add(change["id"])
        server.call("POST", "/v1/ingest", a, json={"source": "ev2", "content": "event two"})
        resumed = {**headers, "Last-Event-ID": seen_id}
        with client.stream("GET", "/v1/events", headers=resumed) as r:
            _, change = next_change(frames(r.iter_lines()))
            assert change["item"]["data"]["source"] == "ev2", "resumes after the last id seen"


def test_every_forget_is_on_the_change_stream(server: Server) -> None:
    token = server.tenants.take()
    headers = {"Authorization": f"Bearer {token}"}
    with (
        httpx.Client(base_url=server.url, timeout=30.0) as client,
        client.stream("GET", "/v1/events", headers=headers) as r,
    ):
        it = frames(r.iter_lines())
        next(it)
        server.call("POST", "/v1/forget", token, json={"target": {"Scope": {"BySource": "z"}}})
        _, change = next_change(it)
        assert change["kind"] == "audit"
        assert json.loads(change["item"]["data"]["target"]) == {"Scope": {"BySource": "z"}}


def test_a_tenants_stream_carries_no_item_outside_the_tenant(tmp_path: Path) -> None:
    """Another process on the server's PostgreSQL journal writes untagged, shared and other
    tenants' items: recall never shows them to this tenant, and neither does its stream.
    """
    from memstore import Item, Memory
    from memstore.journal import PostgresJournal

    with server_on_postgres(tmp_path, "events") as (url, token, tenant, place):
        with (
            httpx.Client(base_url=url, timeout=30.0) as client,
            client.stream("GET", "/v1/events", headers={"Authorization": f"Bearer {token}"}) as r,
        ):
            it = frames(r.iter_lines())
            next(it)  # subscribed
            journal = PostgresJournal(place.dsn, schema=place.schema)
            seen = []
            with Memory(journal=journal, embedder=None) as other:
                for id, tags in [
                    ("untagged", []),
                    ("shared", ["shared"]),
                    ("theirs-shared", ["tenant/someone-else", "shared"]),
                    ("theirs", ["tenant/someone-else"]),
                    ("mine", [f"tenant/{tenant}"]),
                ]:
                    other.store.upsert(Item(id=id, kind="note", title="a secret", tags=tags))
                # The server applies another process's writes in batches, the newest
                # state of each item: were the delete in the same batch as the upsert,
                # "mine" would never have been there to stream. So the server applies
                # the upserts first (the stream's first change is the last of them).
                _, change = next_change(it)
                seen.append((change["op"], change["id"]))
                other.store.delete("shared")
                other.store.delete("mine")
            _, change = next_change(it)
            seen.append((change["op"], change["id"]))
        assert seen == [("upsert", "mine"), ("delete", "mine")]


def test_an_item_that_leaves_the_tenant_is_withdrawn_from_its_stream(tmp_path: Path) -> None:
    """Another process moves the tenant's items away (to another tenant, made private):
    the tenant's stream withdraws each (a ``delete`` marked ``withdrawn``, no item, not
    a word of where it went), and an item moved in arrives as an upsert.
    """
    from memstore import Item, Memory
    from memstore.journal import PostgresJournal

    def note(id: str, *tags: str, scope: str = "public") -> Item:
        return Item(id=id, kind="note", title="a note", scope=scope, tags=list(tags))

    with server_on_postgres(tmp_path, "withdrawn") as (url, token, tenant, place):
        with (
            httpx.Client(base_url=url, timeout=30.0) as client,
            client.stream("GET", "/v1/events", headers={"Authorization": f"Bearer {token}"}) as r,
            Memory(journal=PostgresJournal(place.dsn, schema=place.schema), embedder=None) as other,
        ):
            it = frames(r.iter_lines())
            next(it)  # subscribed
            seen: list[tuple[str, str, bool, bool]] = []

            def step(item: Item) -> None:  # one change at a time: the server sees each
                other.store.upsert(item)
                _, change = next_change(it)
                assert "someone-else" not in json.dumps(change)
                withdrawn = change.get("withdrawn", False)
                seen.append((change["op"], change["id"], withdrawn, bool(change["item"])))

            step(note("moved", f"tenant/{tenant}"))
            step(note("moved", "tenant/someone-else"))
            step(note("hidden", f"tenant/{tenant}"))
            step(note("hidden", f"tenant/{tenant}", "user:u1", scope="private"))
            other.store.upsert(note("arrives", "tenant/someone-else"))  # not the tenant's
            step(note("arrives", f"tenant/{tenant}"))
        assert seen == [
            ("upsert", "moved", False, True),
            ("delete", "moved", True, False),
            ("upsert", "hidden", False, True),
            ("delete", "hidden", True, False),
            ("upsert", "arrives", False, True),
        ]
