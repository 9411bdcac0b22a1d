"""``null`` for an optional field is the field left out; for a required one, a 400, nothing changed.

Clients commonly send ``null`` for "not given" (a Python client serialising
``None``, a TypeScript one ``undefined`` turned ``null``). Every route's
request model is walked: each optional field sent as ``null`` gets the answer
the same body without the field gets, on a real server; each required field
sent as ``null`` is refused with the message naming it, and the scope's
export is the same after as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

from memstore.mindlayer.models import (
    ContextRequest,
    IngestRequest,
    PersonalityRequest,
    ScopeIn,
    SearchRequest,
    StoreRequest,
)
from tests.fake_provider import FakeProvider
from tests.mindlayer.conftest import ROOT, Server, export, new_scope, store

TEA = "The user drinks green tea every morning."


def _minimal(model: type[BaseModel], scope: dict[str, str]) -> dict[str, Any]:
    """The smallest valid body of ``model``: its required fields only."""
    if model is StoreRequest or model is IngestRequest:
        return {"scope": scope, "text": f"User: {TEA}" if model is IngestRequest else TEA}
    if model is PersonalityRequest:
        return {"scope": scope, "personality": "Be warm."}
    return {"scope": scope, "query": "green tea"}


ROUTES: tuple[tuple[str, str, type[BaseModel], str], ...] = (
    ("POST", "/v1/memories", StoreRequest, "plain"),
    ("POST", "/v1/search", SearchRequest, "plain"),
    ("POST", "/v1/context", ContextRequest, "plain"),
    ("PUT", "/v1/personality", PersonalityRequest, "plain"),
    ("POST", "/v1/ingest", IngestRequest, "provided"),
    ("POST", "/v1/chat", SearchRequest, "provided"),
)
"""Every route taking a body: method, path, request model, the server that can answer it."""


def _fields(required: bool) -> list[Any]:
    return [
        pytest.param(method, path, model, server, name, id=f"{path}:{name}")
        for method, path, model, server in ROUTES
        for name, field in model.model_fields.items()
        if field.is_required() is required
    ]


def _comparable(answer: Any) -> Any:
    """An answer without the times a write stamps (two writes never share them)."""
    if isinstance(answer, dict):
        stamps = ("created_at", "updated_at")
        return {k: _comparable(v) for k, v in answer.items() if k not in stamps}
    if isinstance(answer, list):
        return [_comparable(v) for v in answer]
    return answer


@pytest.fixture
def facts(fake: FakeProvider) -> FakeProvider:
    """The fake provider extracting one fact, so an ingest's answer says something."""

    def content(body: Any) -> str:
        if isinstance(body, dict) and "response_format" in body:
            return json.dumps({"facts": [TEA]})
        return "A fake answer."

    fake.chat_content = content
    return fake


def test_every_route_with_a_body_is_walked() -> None:
    """A new request model in the app is a new row of ``ROUTES``, not a gap."""
    app = (ROOT / "memstore" / "mindlayer" / "app.py").read_text()
    assert set(re.findall(r"parse_body\((\w+)", app)) == {m.__name__ for *_, m, _ in ROUTES}
    assert _fields(required=False), "no optional field found"


@pytest.mark.parametrize(("method", "path", "model", "server", "name"), _fields(required=False))
def test_null_for_an_optional_field_is_the_field_left_out(
    request: pytest.FixtureRequest,
    facts: FakeProvider,
    method: str,
    path: str,
    model: type[BaseModel],
    server: str,
    name: str,
) -> None:
    srv: Server = request.getfixturevalue(server)
    with srv.client() as c:
        answers = []
        for extra in ({}, {name: None}):
            scope = new_scope()  # a fresh scope each: the second answer is not the first's echo
            store(c, scope, TEA, id="tea")
            r = c.request(method, path, json={**_minimal(model, scope), **extra})
            assert r.status_code == 200, (extra, r.text)
            answers.append(_comparable(r.json()))
            exported = export(c, scope)
            answers.append(_comparable(exported))
        assert answers[0] == answers[2] and answers[1] == answers[3]


@pytest.mark.parametrize(("method", "path", "model", "server", "name"), _fields(required=True))
def test_null_for_a_required_field_is_refused_and_changes_nothing(
    request: pytest.FixtureRequest,
    facts: FakeProvider,
    method: str,
    path: str,
    model: type[BaseModel],
    server: str,
    name: str,
) -> None:
    srv: Server = request.getfixturevalue(server)
    scope = new_scope()
    with srv.client() as c:
        store(c, scope, TEA, id="tea")
        before = export(c, scope)
        r = c.request(method, path, json={**_minimal(model, scope), name: None})
        assert r.status_code == 400, r.text
        assert r.json()["error"] == "invalid_request"
        assert r.json()["message"].startswith(f"{name}: "), r.text
        assert export(c, scope) == before


@pytest.mark.parametrize("name", list(ScopeIn.model_fields))
def test_null_in_the_scope_is_refused(plain: Server, name: str) -> None:
    scope = new_scope()
    with plain.client() as c:
        r = c.post("/v1/memories", json={"scope": {**scope, name: None}, "text": TEA})
        assert r.status_code == 400
        assert r.json()["message"] == f"scope.{name}: Input should be a valid string"
        assert export(c, scope)["memories"] == []


def test_an_unknown_field_is_refused_even_when_null(plain: Server) -> None:
    scope = new_scope()
    with plain.client() as c:
        r = c.post("/v1/memories", json={"scope": scope, "text": TEA, "tags": None})
        assert r.status_code == 400 and r.json()["message"] == "tags: unknown field"
        assert export(c, scope)["memories"] == []


def test_null_session_stores_the_empty_label(plain: Server) -> None:
    scope = new_scope()
    with plain.client() as c:
        stored = store(c, scope, TEA, id=None, session=None)
        assert stored["session"] == "" and stored["id"].startswith("m-")
        r = c.post("/v1/search", json={"scope": scope, "query": "tea", "limit": None, "mode": None})
        assert [h["memory"]["id"] for h in r.json()] == [stored["id"]]
