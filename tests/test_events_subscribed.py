"""``/v1/events`` is subscribed before its headers go out: a change made once they arrive is sent.

The stream's generator subscribed to the hub at its first step, which a
``StreamingResponse`` takes only after sending the headers. A client that
took the headers for "following now" (the inspector shows "live" then) and
made, or saw made, a change in that moment was never sent it: the listing of
``tests/ui/test_live_listing.py::test_an_item_changed_out_of_the_listings_filter_leaves_it``
kept an item that had left its filter, now and then, under load. Here the
client acts at the exact moment, inside the ASGI ``send`` of the headers:
one change then, another once the stream's first frame came; both must
arrive, in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from memstore import Memory
from memstore.protocol import TokenTable
from memstore.protocol.app import create_app
from memstore.web.hosts import HostPolicy

HANG_GUARD_S = 120
"""The longest the stream may take (a hang guard, not a measurement)."""


def test_a_change_made_as_the_headers_arrive_is_sent(tmp_path: Path) -> None:
    tokens = {"tok-a": {"tenant": "a", "scopes": ["ingest", "recall", "forget"]}}
    with Memory(tmp_path / "data", embedder=None, hub=True) as mem:
        app = create_app(
            mem,
            tokens=TokenTable.from_json(json.dumps(tokens)),
            hosts=HostPolicy.for_bind("127.0.0.1", ()),
        )
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/v1/events",
            "raw_path": b"/v1/events",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1:8080"),
                (b"authorization", b"Bearer tok-a"),
                (b"accept", b"text/event-stream"),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
            "state": {},
        }
        status: list[int] = []
        body = b""
        second = ""
        gone = anyio.Event()

        async def receive() -> dict[str, Any]:
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal body, second
            if message["type"] == "http.response.start":
                status.append(message["status"])
                mem.add("made as the headers arrived", id="at-headers", partition="a")
                return
            body += message.get("body", b"")
            if not second and b"\n\n" in body:  # the stream's first frame: subscribed surely
                second = mem.add("made after the first frame", id="after", partition="a").id
            if second and b'"id":"after"' in body:
                gone.set()

        async def main() -> None:
            with anyio.fail_after(HANG_GUARD_S):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(app, scope, receive, send)
                    await gone.wait()
                    tg.cancel_scope.cancel()

        anyio.run(main)
        assert status == [200]
        text = body.decode()
        assert '"id":"at-headers"' in text, text
        assert text.index('"id":"at-headers"') < text.index('"id":"after"')
