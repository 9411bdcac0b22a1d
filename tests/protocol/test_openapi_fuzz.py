"""schemathesis against /openapi.json: no route answers 5xx, responses match the schema.

In-process (the ASGI app, a real Memory on disk, a token with every scope and
no effective rate limit), every operation but the endless /v1/events stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from memstore import Memory
from memstore.protocol import TokenTable
from memstore.protocol.app import create_app

TOKENS = TokenTable.from_json(
    json.dumps({"fuzz": {"tenant": "fuzz", "scopes": ["ingest", "recall", "forget"]}})
)


OPERATIONS = [
    ("POST", "/v1/ingest"),
    ("POST", "/v1/recall"),
    ("POST", "/v1/forget"),
    ("GET", "/v1/snapshot/{lsn}"),
    ("GET", "/v1/episode/{id}"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    data: Path = tmp_path_factory.mktemp("fuzz")
    with Memory(data, embedder="hash") as memory:
        app = create_app(memory, tokens=TOKENS, rate_per_second=1e6, burst=10**6)
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_no_server_errors_and_responses_match(api: Any, method: str, path: str) -> None:
    operation = api[path][method]

    @given(case=operation.as_strategy())
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.call_and_validate(
            headers={"Authorization": "Bearer fuzz"},
            checks=[not_a_server_error, response_schema_conformance],
        )

    run()


def test_every_route_but_the_event_stream_is_fuzzed(api: Any) -> None:
    documented = {(op.method.upper(), op.path) for op in (r.ok() for r in api.get_all_operations())}
    assert documented - set(OPERATIONS) == {("GET", "/v1/events")}


def test_the_documented_hit_is_the_hit_answered(tmp_path: Path) -> None:
    """Every field a recall hit carries is in the OpenAPI document's Hit (and no other)."""
    from fastapi.testclient import TestClient

    with Memory(tmp_path, embedder="hash") as memory:
        client = TestClient(create_app(memory, tokens=TOKENS))
        auth = {"Authorization": "Bearer fuzz"}
        client.post("/v1/ingest", headers=auth, json={"source": "s", "content": "heron"})
        (hit,) = client.post("/v1/recall", headers=auth, json={"query": "heron"}).json()
        schema = client.get("/openapi.json").json()["components"]["schemas"]["HitOut"]
    assert set(schema["properties"]) == set(hit)
