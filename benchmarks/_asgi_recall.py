"""One MemoryProtocol recall through an ASGI app, in process: the recall harnesses' driver.

``http_layer.py``, ``recall_threads.py`` and ``asgi_stack.py`` call the served stack
directly, without sockets, as uvicorn would: one HTTP/1.1 ``POST /v1/recall`` from a
loopback client, its body in one message, and a ``receive`` that never reports a
disconnect while the answer is being made. The scripts load this file by its path: they
take ``benchmarks/`` off ``sys.path``, where ``http.py`` would shadow the standard
library's ``http`` package.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["recall"]


async def recall(app: Any, body: bytes, token: str) -> list[bytes]:
    """``app``'s answer to one recall of ``body`` (JSON) with bearer ``token``.

    The answer's parts, in order: the status (``b"200"``), each header as
    ``b"name: value"``, then each body chunk; joined, they are what a digest of
    the answer reads.
    """
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": "/v1/recall",
        "raw_path": b"/v1/recall",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8080"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "state": {},
    }
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect while answering
        raise AssertionError("unreachable")

    parts: list[bytes] = []

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            parts.append(str(message["status"]).encode())
            parts.extend(k + b": " + v for k, v in message["headers"])
        else:
            parts.append(message.get("body", b""))

    await app(scope, receive, send)
    return parts
