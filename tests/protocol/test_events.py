"""GET /v1/events: the tenant's change stream as SSE, resumable with Last-Event-ID."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from .conftest import Server


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
