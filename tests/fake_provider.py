"""A tiny, real OpenAI-compatible provider for tests, on 127.0.0.1.

:class:`FakeProvider` runs :class:`http.server.ThreadingHTTPServer` on an
ephemeral port in a background thread and answers ``POST /v1/embeddings``
(and ``POST /v1/chat/completions``) the way a provider does, or misbehaves
the way a provider can (``behaviour``; ``chat_behaviour`` for chat).
Every request is recorded, so a test can count requests and read headers.

Its vectors are deterministic and deliberately not unit length (the client
must normalise), and ``data`` comes back in reverse order with correct
``index`` fields (the client must reorder)::

    with FakeProvider(dim=8) as provider:
        emb = OpenAICompatibleEmbedder(provider.base_url, model="fake")
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt

Behaviour = Literal["ok", "error", "redirect", "sleep", "wrong_dim", "not_json", "too_few", "raw"]

__all__ = ["Behaviour", "FakeProvider", "Recorded", "fake_vector"]


def fake_vector(text: str, dim: int) -> npt.NDArray[np.float64]:
    """The raw (not normalised) vector the fake provider returns for ``text``."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(seed).normal(size=dim) * 3.0


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Server(ThreadingHTTPServer):
    # Join handler threads on close, so none outlives the test that started it.
    daemon_threads = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up on a slow answer is expected here


class FakeProvider:
    """An OpenAI-compatible ``/v1/embeddings`` server on ``127.0.0.1:<ephemeral>``.

    :param dim: length of the vectors it answers with.
    :param behaviour: ``ok``; ``error`` (500 with ``error_body``); ``redirect``
        (302 to another path on itself); ``sleep`` (answers after
        ``sleep_seconds``, or when the server stops); ``wrong_dim`` (``dim + 1``
        values); ``not_json``; ``too_few`` (one vector fewer than asked);
        ``raw`` (200 with ``raw_body``, byte for byte: any answer a test can write).
    """

    def __init__(self, dim: int = 8, behaviour: Behaviour = "ok") -> None:
        self.dim = dim
        self.behaviour: Behaviour = behaviour
        self.error_body = b'{"error": "internal"}'
        self.raw_body = b""
        """What ``raw`` answers, as is."""
        self.chat_behaviour: Behaviour = "ok"
        """How ``/v1/chat/completions`` answers (``ok``, ``error``, ``redirect``, ``not_json``)."""
        self.chat_content: str | Callable[[Any], str] = _default_chat
        """The assistant message's content: text, or made from the request body."""
        self.sleep_seconds = 5.0
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self.port: int = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()  # wakes a handler in "sleep"
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def _answer(self, texts: list[str]) -> tuple[int, dict[str, str], bytes]:
        b = self.behaviour
        if b == "error":
            return 500, {"Content-Type": "application/json"}, self.error_body
        if b == "redirect":
            return 302, {"Location": f"http://127.0.0.1:{self.port}/elsewhere"}, b""
        if b == "not_json":
            return 200, {"Content-Type": "application/json"}, b"<html>oops</html>"
        if b == "raw":
            return 200, {"Content-Type": "application/json"}, self.raw_body
        if b == "sleep":
            self._stop.wait(self.sleep_seconds)
        dim = self.dim + 1 if b == "wrong_dim" else self.dim
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, dim).tolist()}
            for i, t in enumerate(texts)
        ]
        if b == "too_few":
            data = data[:-1]
        data.reverse()  # providers may answer out of order; "index" is what counts
        doc = {"object": "list", "data": data, "model": "fake", "usage": {"prompt_tokens": 0}}
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    def _chat(self, body: Any) -> tuple[int, dict[str, str], bytes]:
        b = self.chat_behaviour
        if b == "error":
            return 500, {"Content-Type": "application/json"}, self.error_body
        if b == "redirect":
            return 302, {"Location": f"http://127.0.0.1:{self.port}/elsewhere"}, b""
        if b == "not_json":
            return 200, {"Content-Type": "application/json"}, b"<html>oops</html>"
        if b == "sleep":
            self._stop.wait(self.sleep_seconds)
        content = self.chat_content if isinstance(self.chat_content, str) else None
        if content is None:
            assert callable(self.chat_content)
            content = self.chat_content(body)
        doc = {
            "object": "chat.completion",
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        }
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def do_GET(self) -> None:
                provider._record(Recorded("GET", self.path, dict(self.headers), None))
                self._reply(404, {}, b"")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.loads(raw) if raw else None
                provider._record(Recorded("POST", self.path, dict(self.headers), body))
                if self.path == "/v1/chat/completions" and isinstance(body, dict):
                    self._reply(*provider._chat(body))
                    return
                if self.path != "/v1/embeddings" or not isinstance(body, dict):
                    self._reply(404, {}, b"")
                    return
                self._reply(*provider._answer(list(body.get("input", []))))

        return Handler


def _default_chat(body: Any) -> str:
    """No facts for an extraction request (``response_format``), a fixed answer otherwise."""
    if isinstance(body, dict) and "response_format" in body:
        return '{"facts": []}'
    return "A fake answer."
