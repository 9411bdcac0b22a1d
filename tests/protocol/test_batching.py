"""Concurrent recalls over a real server: batched, they answer exactly as one at a time.

``memstore serve`` embeds the queries of the recalls queued together in one
call and runs their searches on one worker thread
(:mod:`memstore.web.batching`). These tests start a server of their own
(hash embedder, rate limit out of the way), ask the same mix of recalls
one at a time and then all at once, and stop it while recalls are queued.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import make_tokens, start_server, stop_server

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("MEMSTORE_PROTOCOL_URL")), reason="starts servers of its own"
)

TOKENS = ("tok-full-0", "tok-full-1")
WORDS = (
    "payment ledger deploy rollback staging cluster queue retry timeout pool invoice "
    "customer refund webhook schedule freeze release migration index replica"
).split()


def episode(n: int) -> str:
    a, b, c = WORDS[n % len(WORDS)], WORDS[(3 * n + 1) % len(WORDS)], WORDS[(7 * n + 2) % 19]
    return (
        f"# {a.title()} notes {n}\nThe {a} service talks to the {b} every {n % 5 + 1} minutes.\n\n"
        f"# Follow-up\nAsk about the {c} and the {b} before the {a} freeze (ticket {n}).\n"
    )


def recall_mix(before: str) -> list[tuple[str, dict[str, Any]]]:
    """Recalls of every kind, for both tenants: (token, body)."""
    bodies: list[dict[str, Any]] = []
    for n, word in enumerate(WORDS):
        bodies.append({"query": word, "k": 5})  # one word: often a confident lexical answer
        bodies.append({"query": f"what did we say about the {word} and the release?", "k": 8})
        bodies.append({"query": f"{word} {WORDS[(n + 5) % len(WORDS)]} notes", "k": 3})
    bodies += [
        {"query": "zebra quokka marmalade", "k": 5},  # no word in common: vectors only
        {"query": "payment", "filter": "metadata.n IN (1, 2, 3, 20, 40)", "k": 10},
        {"query": "ledger rollback", "mode": "graph", "k": 6},
        {"query": "payment", "as_of": before},
        {"query": "Payment Ledger", "k": 1},
    ]
    return [(TOKENS[i % 2], b) for i, b in enumerate(bodies)]


def refused_mix() -> list[tuple[str, dict[str, Any]]]:
    """Requests refused before any search: each must get its own 400."""
    return [
        (TOKENS[0], {"query": "   "}),
        (TOKENS[1], {"query": "payment", "filter": "source LIKE"}),
        (TOKENS[0], {"query": "payment", "k": 0}),
        (TOKENS[1], {"query": "payment", "as_of": "yesterday"}),
    ]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Any, str, str]]:
    """A server holding 60 episodes in two tenants; (process, url, a time before them)."""
    make_tokens(tmp_path / "tokens.json")
    proc, url = start_server(
        tmp_path / "data",
        tmp_path / "tokens.json",
        "--rate-per-second",
        "1000000",
        "--rate-burst",
        "1000000",
    )
    before = _dt.datetime.now(_dt.UTC).isoformat()
    try:
        with httpx.Client(base_url=url, timeout=30.0) as client:
            for n in range(60):
                body = {"source": f"fs/n{n}.md", "content": episode(n), "metadata": {"n": n}}
                r = client.post("/v1/ingest", json=body, headers=auth(TOKENS[n % 2]))
                assert r.status_code == 200, r.text
        yield proc, url, before
    finally:
        if proc.poll() is None:
            assert stop_server(proc) == 0


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sequential(url: str, mix: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, Any]]:
    with httpx.Client(base_url=url, timeout=30.0) as client:
        out = []
        for token, body in mix:
            r = client.post("/v1/recall", json=body, headers=auth(token))
            out.append((r.status_code, r.json()))
        return out


async def concurrent(
    url: str, mix: list[tuple[str, dict[str, Any]]], connections: int
) -> list[tuple[int, Any]]:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:

        async def one(token: str, body: dict[str, Any]) -> tuple[int, Any]:
            r = await client.post("/v1/recall", json=body, headers=auth(token))
            return r.status_code, r.json()

        return list(await asyncio.gather(*(one(t, b) for t, b in mix)))


def test_concurrent_recalls_answer_exactly_as_sequential_ones(
    served: tuple[Any, str, str],
) -> None:
    _, url, before = served
    mix = recall_mix(before)
    alone = sequential(url, mix)
    assert all(status == 200 for status, _ in alone), alone
    assert sum(1 for _, hits in alone if hits) > len(mix) // 2, "the mix should find things"
    # Three rounds of the whole mix at once, shuffled against each other, with
    # refused requests among them: each answer is its own request's.
    refused = refused_mix()
    together = mix * 3 + refused
    got = asyncio.run(concurrent(url, together, connections=32))
    expected = alone * 3
    for n, (want, have) in enumerate(zip(expected, got[: len(expected)], strict=True)):
        assert have == want, f"request {n} ({mix[n % len(mix)][1]}) answered differently"
    for (_, body), (status, answer) in zip(refused, got[len(expected) :], strict=True):
        assert status == 400 and answer["error"] in ("invalid_request", "invalid_filter"), body


def test_a_shutdown_finishes_the_queued_recalls(
    served: tuple[Any, str, str], tmp_path: Path
) -> None:
    proc, url, before = served
    mix = recall_mix(before)[:48]
    alone = sequential(url, mix)
    signalled = 0.0
    outcomes: list[tuple[float, int, Any] | BaseException] = []

    async def run() -> None:
        nonlocal signalled
        limits = httpx.Limits(max_connections=len(mix), max_keepalive_connections=len(mix))
        async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:

            async def one(token: str, body: dict[str, Any]) -> tuple[float, int, Any]:
                r = await client.post("/v1/recall", json=body, headers=auth(token))
                return time.monotonic(), r.status_code, r.json()

            tasks = [asyncio.ensure_future(one(t, b)) for t, b in mix]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            proc.send_signal(signal.SIGTERM)  # the others are in flight: queued or searching
            signalled = time.monotonic()
            outcomes.extend(await asyncio.gather(*tasks, return_exceptions=True))

    asyncio.run(run())
    assert proc.wait(timeout=60) == 0
    answered_after = 0
    for want, outcome in zip(alone, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            # Only a request the server had not read may go unanswered, at the transport level.
            assert isinstance(outcome, httpx.TransportError), repr(outcome)
            continue
        at, status, hits = outcome
        assert (status, hits) == want  # never a 500, nor another request's hits
        answered_after += at > signalled
    assert answered_after > 0, "no recall was still queued when the signal came"
    log = next(tmp_path.glob("serve-*.log")).read_text()
    assert "Traceback" not in log, log
