"""Every adapter's cap on the results of one call: defined once, documented, refused past.

The engine answers up to :data:`memstore.limits.MAX_RESULTS` results per call;
an adapter may cap fewer on purpose, and then defines its cap through
:func:`memstore.limits.adapter_cap` (never looser than the engine's), names it
on its page under ``docs/`` and refuses a request past it with an error
naming it, never cutting the request down in silence. The refusals are checked
through real servers on loopback (``memstore serve`` with the inspector, and
``memstore serve --api mindlayer``); the MCP tools' refusal is covered by
``tests/test_mcp_native.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memstore.limits import MAX_RESULTS, adapter_cap
from memstore.mcp import arguments as mcp_arguments
from memstore.mindlayer import limits as mindlayer_limits
from memstore.protocol import limits as protocol_limits
from memstore.ui import views as ui_views
from tests.mindlayer import conftest as mindlayer
from tests.protocol.conftest import start_server, stop_server

ROOT = Path(__file__).resolve().parents[1]
CAPS = [
    (protocol_limits.MAX_K, "docs/protocol.md", "MAX_K"),
    (mindlayer_limits.MAX_LIMIT, "docs/mindlayer.md", "limit"),
    (mcp_arguments.MAX_LIMIT, "docs/mcp.md", "limit"),
    (ui_views.MAX_LIMIT, "docs/ui.md", "limit"),
]
"""Each adapter's cap, its page, and the name the page gives it."""


def test_no_adapter_cap_is_looser_than_the_engines() -> None:
    for cap, _, _ in CAPS:
        assert 1 <= cap <= MAX_RESULTS
    assert ui_views.MAX_REACH < MAX_RESULTS  # the inspector's pages are cut from one search
    with pytest.raises(ValueError, match=r"MAX_RESULTS \(1000\), not 1001"):
        adapter_cap(MAX_RESULTS + 1)
    with pytest.raises(ValueError):
        adapter_cap(0)


@pytest.mark.parametrize(("cap", "page", "name"), CAPS)
def test_each_cap_is_documented_as_tighter_than_the_engines(cap: int, page: str, name: str) -> None:
    text = " ".join((ROOT / page).read_text("utf-8").split())
    assert name in text and f"{cap:,}" in text, page
    assert "MAX_RESULTS" in text, (
        f"{page} says the engine allows more (memstore.limits.MAX_RESULTS)"
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """``memstore serve`` (MemoryProtocol and the inspector) on loopback, and a token header."""
    root = tmp_path_factory.mktemp("caps")
    tokens = {"tok-caps": {"tenant": "caps", "scopes": ["ingest", "recall", "forget"]}}
    (root / "tokens.json").write_text(json.dumps(tokens), encoding="utf-8")
    proc, url = start_server(root / "data", root / "tokens.json")
    headers = {"Authorization": "Bearer tok-caps"}
    try:
        r = httpx.post(
            f"{url}/v1/ingest", json={"source": "a.md", "content": "Cap note."}, headers=headers
        )
        assert r.status_code == 200, r.text
        yield url, headers
    finally:
        assert stop_server(proc) == 0


def test_protocol_recall_past_its_cap_is_refused_naming_it(
    served: tuple[str, dict[str, str]],
) -> None:
    url, headers = served
    cap = protocol_limits.MAX_K
    ok = httpx.post(f"{url}/v1/recall", json={"query": "cap note", "k": cap}, headers=headers)
    assert ok.status_code == 200 and ok.json(), ok.text
    for k in (cap + 1, MAX_RESULTS):
        r = httpx.post(f"{url}/v1/recall", json={"query": "cap note", "k": k}, headers=headers)
        assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text
        assert re.search(rf"\bk\b.*\b{cap}\b", r.json()["message"]), r.text


@pytest.mark.parametrize("limit", [0, ui_views.MAX_LIMIT + 1, MAX_RESULTS, -5])
def test_inspector_search_past_its_cap_is_refused_naming_it(
    served: tuple[str, dict[str, str]], limit: int
) -> None:
    # Before: a limit of 101 (or 0, or -5) was held to 1..100 and answered 200.
    url, headers = served
    r = httpx.get(f"{url}/ui/api/search", params={"limit": limit}, headers=headers)
    assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text
    cap = ui_views.MAX_LIMIT
    assert r.json()["message"] == f"limit must be between 1 and {cap}, got {limit}", r.text
    ok = httpx.get(f"{url}/ui/api/search", params={"limit": cap}, headers=headers)
    assert ok.status_code == 200 and ok.json()["hits"], ok.text


def test_mindlayer_search_past_its_cap_is_refused_naming_it(tmp_path: Path) -> None:
    server = mindlayer.start(tmp_path / "ml")
    try:
        scope = mindlayer.new_scope()
        with server.client() as c:
            mindlayer.store(c, scope, "Cap note.")
            cap = mindlayer_limits.MAX_LIMIT
            for path in ("/v1/search", "/v1/context"):
                body = {"scope": scope, "query": "cap note", "limit": cap}
                assert c.post(path, json=body).status_code == 200
                r = c.post(path, json={**body, "limit": cap + 1})
                assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text
                assert r.json()["message"] == f"limit must be between 1 and {cap}, got {cap + 1}"
    finally:
        assert server.stop() == 0, server.log_text()


def _refusal(r: httpx.Response, name: str, value: int, low: int, high: int) -> None:
    """An HTTP adapter's refusal of a number out of range: 400, the engine's words and code."""
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["error"] == "invalid_request", r.text
    assert body["message"] == f"{name} must be between {low} and {high}, got {value}", r.text
    details = {"code": "arguments.out_of_range", "argument": name, "value": value}
    assert body["details"] == {**details, "min": low, "max": high}, r.text


@pytest.mark.parametrize("k", [0, -3, protocol_limits.MAX_K + 1])
def test_protocol_k_out_of_range_is_the_engines_error(
    served: tuple[str, dict[str, str]], k: int
) -> None:
    # Before: "invalid request body: k: Input should be less than or equal to 100",
    # pydantic's words, unlike every other adapter's.
    url, headers = served
    r = httpx.post(f"{url}/v1/recall", json={"query": "cap note", "k": k}, headers=headers)
    _refusal(r, "k", k, 1, protocol_limits.MAX_K)


def test_inspector_limit_out_of_range_is_the_engines_error(
    served: tuple[str, dict[str, str]],
) -> None:
    url, headers = served
    r = httpx.get(f"{url}/ui/api/search", params={"limit": 0}, headers=headers)
    _refusal(r, "limit", 0, 1, ui_views.MAX_LIMIT)


def test_mindlayer_numbers_out_of_range_are_the_engines_error(tmp_path: Path) -> None:
    # Before: "limit: Input should be less than or equal to 100" from a route, but
    # "limit: must be a whole number from 1 to 100, got 101" from the Python API.
    server = mindlayer.start(tmp_path / "ml")
    cap, chars = mindlayer_limits.MAX_LIMIT, mindlayer_limits.MAX_CONTEXT_CHARS
    try:
        scope = mindlayer.new_scope()
        with server.client() as c:
            mindlayer.store(c, scope, "Cap note.")
            body = {"scope": scope, "query": "cap note"}
            for path in ("/v1/search", "/v1/context"):
                for limit in (0, cap + 1):
                    r = c.post(path, json={**body, "limit": limit})
                    _refusal(r, "limit", limit, 1, cap)
            r = c.post("/v1/context", json={**body, "max_chars": chars + 1})
            _refusal(r, "max_chars", chars + 1, 1, chars)
    finally:
        assert server.stop() == 0, server.log_text()


def test_mcp_numbers_out_of_range_are_the_engines_error(tmp_path: Path) -> None:
    # Before: "limit: input should be greater than or equal to 1 (got 0)" for 0, but
    # "limit: at most 100 results per call ..." for 101; depth and max_chars in pydantic's
    # words. Now the engine's message and code, whatever the argument.
    import anyio

    from memstore import Memory
    from tests.mcp_harness import in_process

    cases = [
        ("recall", {"query": "note", "limit": 0}, "limit must be between 1 and 100, got 0"),
        ("recent", {"k": 101}, "limit must be between 1 and 100, got 101"),
        ("related", {"id_or_query": "note", "depth": 9}, "depth must be between 1 and 8, got 9"),
        (
            "recall",
            {"query": "note", "max_chars": 0},
            f"max_chars must be between 1 and {mcp_arguments.MAX_CHARS}, got 0",
        ),
    ]

    async def main() -> None:
        with Memory(embedder="hash") as mem:
            mem.add("a note on the ledger")
            async with in_process(mem) as c:
                for tool, args, said in cases:
                    msg = await c.fails(tool, args)
                    assert msg.startswith(f"{said} (arguments.out_of_range). {tool} takes "), msg
                assert mem.store.count_active() == 1

    anyio.run(main)
