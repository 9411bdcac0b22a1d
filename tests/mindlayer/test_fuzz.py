"""Arbitrary bodies and query strings to every Mind Layer route of a real server.

The contract: every answer is JSON; a refusal is a 4xx in the Mind Layer
envelope (``{"error": code, "message": text}``, plus ``details`` from the
shared plumbing), never a 500 or a traceback; and a refused request changes
nothing (the scope's export is the same after it). Bodies are drawn both
wild (any JSON, raw bytes, deep nesting, huge numbers, repeated keys) and
near-valid (each route's own fields, each given a wrong or edge value), so
the models' checks are reached, not only the parser's. Kept to a few dozen
examples per route against the shared offline server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mindlayer.conftest import Server, export, new_scope, store

BODY_ROUTES = [
    ("POST", "/v1/memories"),
    ("POST", "/v1/search"),
    ("POST", "/v1/context"),
    ("PUT", "/v1/personality"),
    ("POST", "/v1/ingest"),
    ("POST", "/v1/chat"),
]
QUERY_ROUTES = [("GET", "/v1/export"), ("DELETE", "/v1/memories"), ("DELETE", "/v1/scope")]
_SEARCH = (("scope", "query"), ("mode", "limit", "min_relevance"))
ROUTE_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "/v1/memories": (("scope", "text"), ("id", "session")),
    "/v1/search": _SEARCH,
    "/v1/context": (_SEARCH[0], (*_SEARCH[1], "max_chars")),
    "/v1/personality": (("scope", "personality"), ()),
    "/v1/ingest": (("scope", "text"), ("session",)),
    "/v1/chat": _SEARCH,
}
"""Each body route's required and optional fields."""
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

leaf: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", " ", "lexical", "hybrid", "semantic", "a" * 70_000, "caf\udce9"]),
)
json_values: st.SearchStrategy[Any] = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
RAW_BODIES = [
    b"",
    b"not json",
    b"\xff\xfe\x00",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b'{"limit": ' + b"9" * 5_000 + b"}",
    b'{"limit": 1e999, "min_relevance": -1e999}',
    b'{"limit": NaN}',
    b'{"text": "a", "text": "b"}',
    b'"\\ud800"',
    b"{} {}",
    b"null",
]


def _envelope(r: httpx.Response) -> None:
    """A refusal in the Mind Layer envelope; never a 500."""
    assert r.status_code < 500, (r.status_code, r.text[:300])
    if r.status_code >= 400:
        body = r.json()
        assert isinstance(body, dict), body
        assert isinstance(body.get("error"), str) and isinstance(body.get("message"), str), body
        assert set(body) <= {"error", "message", "details"}, body
    else:
        r.json()


def _near_valid(path: str, scope: dict[str, str]) -> st.SearchStrategy[dict[str, Any]]:
    """A body with ``path``'s own fields, each plausible (mostly) or wild, maybe one unknown."""
    plausible: dict[str, st.SearchStrategy[Any]] = {
        "scope": st.just(scope),
        "text": st.text(min_size=1, max_size=30),
        "id": st.from_regex(r"[a-z0-9_.-]{1,12}", fullmatch=True),
        "session": st.text(max_size=10),
        "query": st.text(min_size=1, max_size=20),
        "mode": st.sampled_from(["lexical", "semantic", "hybrid", "other"]),
        "limit": st.integers(-5, 200),
        "min_relevance": st.floats(-1, 2, allow_nan=False),
        "max_chars": st.integers(-5, 100_000),
        "personality": st.text(max_size=20),
    }

    def value(field: str) -> st.SearchStrategy[Any]:
        return st.one_of(*[plausible[field]] * 5, json_values)

    required, optional = ROUTE_FIELDS[path]
    full = st.fixed_dictionaries(
        {f: value(f) for f in required},
        optional={f: value(f) for f in optional},
    )
    full = st.one_of(full, full, full, full.map(lambda body: {**body, "unknown": 1}))
    return full.flatmap(  # now and then a required field left out
        lambda body: st.sets(st.sampled_from(sorted(body)), max_size=1).map(
            lambda out: {k: v for k, v in body.items() if k not in out}
        )
    )


@pytest.fixture
def client(plain: Server) -> Iterator[httpx.Client]:
    with plain.client() as c:
        yield c


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_raw_bodies_get_the_envelope(client: httpx.Client, method: str, path: str) -> None:
    scope = new_scope()
    store(client, scope, "The user keeps bees on the roof.")
    before = export(client, scope)
    for raw in RAW_BODIES:
        r = client.request(method, path, content=raw, headers={"Content-Type": "application/json"})
        _envelope(r)
        assert r.status_code >= 400, (raw[:40], r.text[:200])
    assert export(client, scope) == before


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_random_bodies_get_the_envelope_and_refusals_change_nothing(
    client: httpx.Client, method: str, path: str
) -> None:
    scope = new_scope()
    store(client, scope, "The user keeps bees on the roof.")

    @FUZZ
    @given(body=st.one_of(json_values, _near_valid(path, scope), _near_valid(path, scope)))
    def attempt(body: Any) -> None:
        before = export(client, scope)
        text = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        r = client.request(method, path, content=text, headers={"Content-Type": "application/json"})
        _envelope(r)
        if r.status_code >= 400:
            assert export(client, scope) == before, (body, r.text[:200])

    attempt()


@pytest.mark.parametrize(("method", "path"), QUERY_ROUTES)
def test_random_query_strings_get_the_envelope(
    client: httpx.Client, method: str, path: str
) -> None:
    scope = new_scope()
    kept = store(client, scope, "The user keeps bees on the roof.")
    valid = [("agent", scope["agent"]), ("user", scope["user"])]
    if path == "/v1/memories":
        valid.append(("id", kept["id"]))
    names = st.sampled_from(["agent", "user", "id", "x", ""])
    values = st.one_of(
        st.text(max_size=12),
        st.sampled_from([scope["agent"], scope["user"], kept["id"], "a" * 300, "\x00"]),
    )
    mutated = st.lists(st.tuples(names, values), max_size=2).flatmap(
        lambda more: st.permutations(valid + more)
    )
    queries = st.one_of(mutated, st.lists(st.tuples(names, values), max_size=4))

    @FUZZ
    @given(params=queries)
    def attempt(params: list[tuple[str, str]]) -> None:
        before = export(client, scope)
        r = client.request(method, path, params=params)
        _envelope(r)
        if r.status_code >= 400:
            assert export(client, scope) == before, (params, r.text[:200])

    attempt()
