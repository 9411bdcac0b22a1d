"""SIGTERM while the chat provider hangs: the client is told to retry and the process exits.

A real ``memstore serve --api mindlayer`` subprocess whose chat model is a
:class:`~tests.fake_provider.FakeProvider` on loopback that never answers
(it sleeps until the test stops it). A chat or an ingest is waiting for it
when the server gets SIGTERM: the client gets the shutdown's 503
``unavailable`` once the grace period is over, and the process exits with
status 0 right after. Before, the answer came on time but the process lived
on for the chat timeout (60 s): interpreter exit waited for the worker
thread blocked in the provider's HTTP read.
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
from tests.fake_provider import FakeProvider
from tests.mindlayer.conftest import API_KEY, new_scope, provider_env, start

GRACE = 0.5
"""``--shutdown-grace``: how long the hung request may run on after SIGTERM."""
EXIT_BOUND = 20.0
"""Seconds the process may take to exit after SIGTERM: the grace and start-up noise, far
below the 60 s chat timeout the process used to wait for."""


def _request(route: str, scope: dict[str, str]) -> tuple[str, dict[str, Any]]:
    if route == "chat":
        return "/v1/chat", {"scope": scope, "query": "what does the user eat?"}
    return "/v1/ingest", {"scope": scope, "text": "I am vegetarian and I live in Lisbon."}


@pytest.mark.parametrize("route", ["chat", "ingest"])
def test_sigterm_during_a_hung_provider_call_exits_within_the_grace(
    tmp_path: Path, route: str
) -> None:
    with FakeProvider() as provider:
        provider.chat_behaviour = "sleep"
        provider.sleep_seconds = 600.0  # never, as far as the server can tell
        server = start(
            tmp_path / "data",
            "--shutdown-grace",
            str(GRACE),
            env=provider_env(provider, embedding=None),
        )
        answers: list[httpx.Response] = []
        path, body = _request(route, new_scope())

        def ask() -> None:
            with server.client() as client:
                answers.append(client.post(path, json=body, timeout=60.0))

        asker = threading.Thread(target=ask)
        asker.start()
        try:
            deadline = time.monotonic() + 30
            while not any(r.path == "/v1/chat/completions" for r in provider.requests):
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


def test_closing_the_chat_client_releases_a_caller_waiting_on_a_hung_provider() -> None:
    """What the server does once it stops serving: the waiting worker thread is free."""
    outcome: list[BaseException] = []
    with FakeProvider() as provider:
        provider.chat_behaviour = "sleep"
        provider.sleep_seconds = 600.0
        chat = ChatClient(provider.base_url, "m", API_KEY)

        def ask() -> None:
            try:
                chat.complete([{"role": "user", "content": "hi"}])
            except ProviderError as e:
                outcome.append(e)

        asker = threading.Thread(target=ask)
        asker.start()
        deadline = time.monotonic() + 30
        while not provider.requests:
            assert time.monotonic() < deadline, "the request never reached the provider"
            time.sleep(0.01)
        chat.close()
        asker.join(EXIT_BOUND)
        assert not asker.is_alive(), "close() left the caller waiting for the provider"
    assert len(outcome) == 1
    assert "the client was closed" in str(outcome[0]) and API_KEY not in str(outcome[0])
    with pytest.raises(ProviderError, match="the client was closed"):
        chat.complete([{"role": "user", "content": "hi"}])
    assert len(provider.requests) == 1  # a closed client sends nothing
