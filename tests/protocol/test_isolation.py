"""Tenant isolation: random requests of several tenants never reach another tenant's data.

In-process (``create_app`` behind Starlette's test client, a real Memory on
disk): each example runs a random program of ingests, recalls, forgets,
snapshots and episode reads by three tenants, then checks that

* every hit, snapshot line and episode a tenant reads is its own;
* every episode of a tenant that never forgot anything is still there,
  whatever the other tenants forgot (by id, by source prefix, before an Lsn).
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from memstore import Memory
from memstore.protocol import TokenTable
from memstore.protocol.app import create_app

TENANTS = ("red", "green", "blue")
TOKENS = TokenTable.from_json(
    json.dumps(
        {f"tok-{t}": {"tenant": t, "scopes": ["ingest", "recall", "forget"]} for t in TENANTS}
    )
)
WORDS = ("apple", "river", "stone", "cloud", "ember")

tenant = st.sampled_from(TENANTS)
ingest = st.tuples(
    st.just("ingest"), tenant, st.sampled_from(("fs/a", "fs/b", "chat")), st.sampled_from(WORDS)
)
recall = st.tuples(
    st.just("recall"), tenant, st.sampled_from(("semantic", "graph")), st.sampled_from(WORDS)
)
forget_id = st.tuples(st.just("forget_id"), tenant, st.integers(0, 20))
forget_source = st.tuples(st.just("forget_source"), tenant, st.sampled_from(("f", "fs/a", "c")))
forget_before = st.tuples(st.just("forget_before"), tenant, st.integers(0, 20))
read = st.tuples(st.sampled_from(("snapshot", "episode")), tenant, st.integers(0, 20))
programs = st.lists(
    st.one_of(ingest, ingest, recall, forget_id, forget_source, forget_before, read),
    min_size=1,
    max_size=25,
)


def marker(t: str) -> str:
    return f"owner{t}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_no_request_reaches_another_tenant(program: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d, Memory(d, embedder="hash") as memory:
        app = create_app(memory, tokens=TOKENS, rate_per_second=1e6, burst=10**6)
        client = TestClient(app)
        episodes: list[tuple[str, str, dict[str, int]]] = []  # (tenant, ulid, lsn)
        forgetters: set[str] = set()

        def call(t: str, method: str, path: str, body: Any = None) -> Any:
            r = client.request(
                method, path, json=body, headers={"Authorization": f"Bearer tok-{t}"}
            )
            assert r.status_code < 500, r.text
            return r

        def nth(n: int) -> tuple[str, str, dict[str, int]] | None:
            return episodes[n % len(episodes)] if episodes else None

        for op, t, *args in program:
            if op == "ingest":
                source, word = args
                ulid = str(ULID())
                body = {"id": ulid, "source": source, "content": f"{marker(t)} {word}"}
                lsn = call(t, "POST", "/v1/ingest", body).json()["lsn"]
                episodes.append((t, ulid, lsn))
            elif op == "recall":
                mode, word = args
                hits = call(t, "POST", "/v1/recall", {"query": word, "mode": mode}).json()
                assert all(h["text"].startswith(marker(t)) for h in hits)
            elif op == "snapshot":
                head = episodes[-1][2] if episodes else {"wall_ms": 1, "counter": 0}
                r = call(t, "GET", f"/v1/snapshot/{head['wall_ms']}.{head['counter']}")
                for line in r.text.splitlines():
                    value = json.loads(line)["value"]
                    assert (value.get("text") or value.get("content")).startswith(marker(t))
            elif op == "episode":
                got = nth(args[0])
                if got is not None:
                    r = call(t, "GET", f"/v1/episode/{got[1]}")
                    if got[0] != t:
                        assert r.status_code == 404
                    elif r.status_code == 200:
                        assert r.json()["content"].startswith(marker(t))
            else:
                forgetters.add(t)
                if op == "forget_id":
                    got = nth(args[0])
                    target: dict[str, Any] = {"Id": got[1] if got else str(ULID())}
                elif op == "forget_source":
                    target = {"Scope": {"BySource": args[0]}}
                else:
                    got = nth(args[0])
                    target = {"Before": got[2] if got else {"wall_ms": 1, "counter": 0}}
                r = call(t, "POST", "/v1/forget", {"target": target})
                assert r.status_code == 200
        for t, ulid, _ in episodes:
            if t not in forgetters:
                assert call(t, "GET", f"/v1/episode/{ulid}").status_code == 200
