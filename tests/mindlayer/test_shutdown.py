"""SIGTERM while the provider hangs: the client is told to retry and the process exits.

A real ``memstore serve --api mindlayer`` subprocess whose chat or embedding
model is a :class:`~tests.fake_provider.FakeProvider` on loopback that never
answers (it sleeps until the test stops it). A chat, an ingest, a write or a
semantic search is waiting for it when the server gets SIGTERM: the client
gets the shutdown's 503 ``unavailable`` once the grace period is over, and
the process exits with status 0 right after. Before, the answer came on time
but the process lived on for the provider's timeout (60 s for a chat, 10 s
for an embedding): interpreter exit waited for the worker thread blocked in
the provider's HTTP read.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstore.mindlayer.provider import ChatClient, ProviderError
from memstore_index.embedder import EmbeddingError
from memstore_index.openai_embedder import OpenAICompatibleEmbedder
from tests.fake_provider import FakeProvider
from tests.mindlayer.conftest import API_KEY, export, new_scope, provider_env, start

GRACE = 0.5
"""``--shutdown-grace``: how long the hung request may run on after SIGTERM."""
EXIT_BOUND = 8.0
"""Seconds the process may take to exit after SIGTERM: the grace and some slack (it takes
about 1.3 s), below the timeouts the process used to wait for (60 s for a chat request,
10 s for an embedding request)."""


def _request(route: str, scope: dict[str, str]) -> tuple[str, dict[str, Any]]:
    if route == "chat":
        return "/v1/chat", {"scope": scope, "query": "what does the user eat?"}
    if route == "ingest":
        return "/v1/ingest", {"scope": scope, "text": "I am vegetarian and I live in Lisbon."}
    if route == "memories":  # the write embeds its text before it commits
        return "/v1/memories", {"scope": scope, "text": "The user is vegetarian."}
    return "/v1/search", {"scope": scope, "query": "vegetarian", "mode": "semantic"}


@pytest.mark.parametrize(
    ("route", "hung"),
    [
        ("chat", "chat"),
        ("ingest", "chat"),
        ("memories", "embeddings"),
        ("search", "embeddings"),
    ],
)
def test_sigterm_during_a_hung_provider_call_exits_within_the_grace(
    tmp_path: Path, route: str, hung: str
) -> None:
    with FakeProvider() as provider:
        env, embedder = provider_env(provider, embedding=None), "none"
        if hung == "embeddings":  # the dimension given: start-up makes no request
            env = {**provider_env(provider), "MEMSTORE_PROVIDER_EMBEDDING_DIM": "8"}
            embedder = None  # the provider's
        server = start(
            tmp_path / "data", "--shutdown-grace", str(GRACE), env=env, embedder=embedder
        )
        provider.chat_behaviour = provider.behaviour = "sleep"
        provider.sleep_seconds = 600.0  # never, as far as the server can tell
        answers: list[httpx.Response] = []
        scope = new_scope()
        path, body = _request(route, scope)

        def ask() -> None:
            with server.client() as client:
                answers.append(client.post(path, json=body, timeout=60.0))

        asker = threading.Thread(target=ask)
        asker.start()
        try:
            deadline = time.monotonic() + 30
            while not any(r.path.startswith(f"/v1/{hung}") for r in provider.requests):
                assert time.monotonic() < deadline, "the request never reached the provider"
                time.sleep(0.01)
            sent = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            code = server.proc.wait(timeout=90)
            took = time.monotonic() - sent
        finally:
            if server.proc.poll() is None:
                server.proc.kill()
                server.proc.wait()
            asker.join(90)
        assert code == 0, server.log_text()
        assert took < EXIT_BOUND, f"exited {took:.1f}s after SIGTERM: {server.log_text()}"
        assert len(answers) == 1
        answer = answers[0]
        assert answer.status_code == 503, answer.text
        assert answer.headers.get("retry-after") == "1"
        assert answer.json()["error"] == "unavailable"
        assert "memstore: stopped" in server.log_text()
        if route in ("ingest", "memories"):  # the abandoned write stored nothing
            provider.chat_behaviour = provider.behaviour = "ok"
            again = start(tmp_path / "data", env=env, embedder=embedder)
            try:
                with again.client() as client:
                    assert export(client, scope)["memories"] == []
            finally:
                assert again.stop() == 0, again.log_text()


@pytest.mark.parametrize("client", ["chat", "embeddings"])
def test_closing_a_provider_client_releases_a_caller_waiting_on_a_hung_provider(
    client: str,
) -> None:
    """What the server does once it stops serving: the waiting worker thread is free."""
    outcome: list[BaseException] = []
    with FakeProvider() as provider:
        provider.chat_behaviour = provider.behaviour = "sleep"
        provider.sleep_seconds = 600.0
        if client == "chat":
            chat = ChatClient(provider.base_url, "m", API_KEY)
            call, close = (lambda: chat.complete([{"role": "user", "content": "hi"}])), chat.close
        else:
            emb = OpenAICompatibleEmbedder(provider.base_url, "m", API_KEY, dim=8)
            call, close = (lambda: emb.embed(["hi"])), emb.close

        def ask() -> None:
            try:
                call()
            except (ProviderError, EmbeddingError) as e:
                outcome.append(e)

        asker = threading.Thread(target=ask)
        asker.start()
        deadline = time.monotonic() + 30
        while not provider.requests:
            assert time.monotonic() < deadline, "the request never reached the provider"
            time.sleep(0.01)
        close()
        asker.join(EXIT_BOUND)
        assert not asker.is_alive(), "close() left the caller waiting for the provider"
        with pytest.raises((ProviderError, EmbeddingError), match="closed"):
            call()
    assert len(outcome) == 1
    assert "closed" in str(outcome[0]) and API_KEY not in str(outcome[0])
    assert len(provider.requests) == 1  # a closed client sends nothing
