"""A server process for the shutdown-log test: ``serve_app`` with requests that hang or fail.

``python -m tests.shutdown_app`` serves, on a loopback port of its own
choosing (printed on stdout as ``port N``, flushed), a bare ASGI app under
:func:`memstore.web.runner.serve_app` with a grace period of one second:

- ``GET /inflight``: how many ``/hang`` and ``/stream`` requests are running;
- ``GET /hang``: never answers (until the shutdown cancels it);
- ``GET /stream``: starts a 200 answer, sends one chunk, then never ends it;
- ``GET /crash``: raises ``RuntimeError("boom")`` (a real error: uvicorn's 500).

Its stderr is what the test reads: what an operator sees at shutdown.
"""

from __future__ import annotations

import asyncio
from typing import Any

from memstore.web.listen import listening
from memstore.web.runner import ServeConfig, serve_app

_running = 0


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The app; see the module documentation."""
    global _running
    path = scope["path"]
    if path == "/crash":
        raise RuntimeError("boom")
    if path == "/inflight":
        body = str(_running).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
        return
    _running += 1
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
    await asyncio.Event().wait()  # /hang and /stream: until cancelled


def main() -> None:
    with listening("127.0.0.1", 0) as sockets:
        print(f"port {sockets[0].getsockname()[1]}", flush=True)
        serve_app(app, ServeConfig(sockets=sockets, graceful_shutdown_seconds=1.0))


if __name__ == "__main__":
    main()
