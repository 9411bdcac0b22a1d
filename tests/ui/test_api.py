"""The inspector's JSON API and page headers, in process (FastAPI's TestClient), plus --no-ui."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient

from memstore import Item, Memory
from memstore.protocol import TokenTable
from memstore.protocol.app import create_app
from memstore.ui import install
from memstore.ui.api import STATIC_FILES
from memstore.ui.views import item_view
from memstore.web.hosts import HostPolicy
from tests.protocol.conftest import start_server, stop_server

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {
    "tok-a": {"tenant": "a", "scopes": ["ingest", "recall", "forget"]},
    "tok-b": {"tenant": "b", "scopes": ["ingest", "recall", "forget"]},
    "tok-read": {"tenant": "a", "scopes": ["recall"]},
}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with Memory(tmp_path, embedder="hash", hub=True) as mem:
        app = create_app(
            mem,
            tokens=TokenTable.from_json(json.dumps(TOKENS)),
            hosts=HostPolicy.for_bind("127.0.0.1", ()),
            mounts=[install],
        )
        with TestClient(app, base_url="http://127.0.0.1:8080") as c:
            yield c


def ingest(c: TestClient, token: str, content: str, source: str = "s.md") -> Any:
    r = c.post("/v1/ingest", headers=auth(token), json={"source": source, "content": content})
    assert r.status_code == 200, r.text
    return r.json()


def episode_of(c: TestClient, token: str, query: str) -> str:
    hits = c.get("/ui/api/search", params={"q": query, "kind": "episode"}, headers=auth(token))
    ids: list[str] = [h["item"]["id"] for h in hits.json()["hits"]]
    assert ids, hits.text
    return ids[0]


def test_the_page_and_its_files_carry_a_strict_policy(client: TestClient) -> None:
    assert client.get("/", follow_redirects=False).headers["location"] == "/ui"
    assert client.get("/ui/", follow_redirects=False).headers["location"] == "/ui"
    page = client.get("/ui")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "script-src 'self'" in csp
    documented = " ".join((ROOT / "docs" / "ui.md").read_text().split())
    assert f"Content-Security-Policy: {csp}`" in documented, "docs/ui.md names the page's policy"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page.text.replace('<script type="module" src=', "")  # no inline
    for name in STATIC_FILES:
        r = client.get(f"/ui/static/{name}")
        assert r.status_code == 200, name
        assert r.headers["x-content-type-options"] == "nosniff"
        text = r.text.replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, not a fetch
        for line in text.splitlines():
            assert "innerHTML" not in line and "http://" not in line and "https://" not in line
    assert client.get("/ui/static/../api.py").status_code == 404
    assert client.get("/ui/static/nope.js").status_code == 404
    api = client.get("/ui/api/whoami", headers=auth("tok-a"))
    assert api.headers["content-security-policy"].startswith("default-src 'none'")


def test_the_page_answers_head_and_the_browsers_icon_request(client: TestClient) -> None:
    # A link checker or a proxy's health probe asks with HEAD; every browser asks for
    # /favicon.ico on any page it shows. Neither may be an error in the server's log.
    for path in ("/ui", "/ui/static/main.js"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == 200 and head.content == b"", path
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.headers["content-security-policy"] == got.headers["content-security-policy"]
    assert client.head("/", follow_redirects=False).headers["location"] == "/ui"
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.text.startswith("<svg")
    assert '<link rel="icon" href="/ui/static/icon.svg"' in client.get("/ui").text


def test_the_guard_covers_the_inspector(client: TestClient) -> None:
    assert client.get("/ui", headers={"Host": "evil.example"}).status_code == 403
    r = client.get("/ui/api/whoami", headers={**auth("tok-a"), "Origin": "http://evil.example"})
    assert r.status_code == 403 and r.json()["error"] == "forbidden_origin"
    same = client.get(
        "/ui/api/whoami", headers={**auth("tok-a"), "Origin": "http://127.0.0.1:8080"}
    )
    assert same.status_code == 200


def test_the_api_needs_the_servers_tokens(client: TestClient) -> None:
    r = client.get("/ui/api/search")
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    r = client.get("/ui/api/search", headers=auth("nope"))
    assert r.json() == {"error": "unauthorized", "message": "unknown bearer token"}
    twice = client.get(
        "/ui/api/search",
        headers=[("Authorization", "Bearer tok-a"), ("Authorization", "Bearer tok-b")],
    )
    assert twice.status_code == 400 and twice.json()["error"] == "invalid_request"
    me = client.get("/ui/api/whoami", headers=auth("tok-read")).json()
    assert me["tenant"] == "a" and me["partitions"] == ["a"] and me["scopes"] == ["recall"]
    other = client.get("/ui/api/search", params={"partition": "b"}, headers=auth("tok-a"))
    assert other.status_code == 403


def test_a_tenant_sees_only_its_own_items(client: TestClient) -> None:
    ingest(client, "tok-a", "Alpha secret about the migration plan.")
    ingest(client, "tok-b", "Bravo note about the migration plan.")
    a_id = episode_of(client, "tok-a", "migration")
    seen = client.get("/ui/api/search", params={"q": "migration"}, headers=auth("tok-b")).json()
    assert all(h["item"]["partition"] == "b" for h in seen["hits"]) and seen["hits"]
    r = client.get(f"/ui/api/items/{a_id}", headers=auth("tok-b"))
    assert r.status_code == 404
    r = client.post("/ui/api/forget", params={"id": a_id}, headers=auth("tok-b"))
    assert r.status_code == 404
    assert client.get(f"/ui/api/items/{a_id}", headers=auth("tok-a")).json()["deleted"] is False
    counts = client.get("/ui/api/stats", headers=auth("tok-b")).json()
    assert counts["partitions"] == {"b": 2}  # the episode and its chunk


def test_the_api_shares_the_tenants_rate_limit(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None, hub=True) as mem:
        tokens = TokenTable.from_json(json.dumps(TOKENS))
        app = create_app(mem, tokens=tokens, rate_per_second=0.001, burst=2, mounts=[install])
        with TestClient(app) as c:
            statuses = [c.get("/ui/api/whoami", headers=auth("tok-a")).status_code for _ in "abc"]
            assert statuses == [200, 200, 429]
            r = c.get("/ui/api/whoami", headers=auth("tok-a"))
            assert r.json()["error"] == "rate_limited" and "retry-after" in r.headers
            assert c.get("/ui/api/whoami", headers=auth("tok-b")).status_code == 200


def test_search_explains_every_hit(client: TestClient) -> None:
    ingest(client, "tok-a", "The deploy runbook lives in the wiki.")
    hits = client.get("/ui/api/search", params={"q": "runbook"}, headers=auth("tok-a")).json()
    ex = hits["hits"][0]["explanation"]
    assert "lexical" in ex["channels"] and ex["lexical_rank"] == 0
    assert {"fused_score", "semantic_rank", "multipliers", "base_score"} <= set(ex)


def test_as_of_shows_the_past_and_refuses_nonsense(client: TestClient) -> None:
    first = ingest(client, "tok-a", "Version one of the plan.")
    ep = episode_of(client, "tok-a", "plan")
    ulid = ep.rsplit(":", 1)[1]
    r = client.post(
        "/v1/ingest",
        headers=auth("tok-a"),
        json={"id": ulid, "source": "s.md", "content": "Version two of the plan."},
    )
    assert r.status_code == 200
    at = f"{first['lsn']['wall_ms']}.{first['lsn']['counter']}"
    then = client.get(f"/ui/api/items/{ep}", params={"as_of": at}, headers=auth("tok-a")).json()
    assert then["item"]["content"] == "Version one of the plan."
    assert then["as_of"]["lsn"] == at
    assert [v["after_moment"] for v in then["history"]] == [False, True]
    past = client.get(
        "/ui/api/search", params={"q": "plan", "as_of": at}, headers=auth("tok-a")
    ).json()
    assert {h["item"]["content"] for h in past["hits"]} == {"Version one of the plan."}
    r = client.get("/ui/api/search", params={"as_of": "last tuesday"}, headers=auth("tok-a"))
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"
    r = client.get("/ui/api/search", params={"as_of": "2026-01-01T00:00:00"}, headers=auth("tok-a"))
    assert r.status_code == 400 and "time zone" in r.json()["message"]


def test_as_of_takes_any_time_and_names_a_position_out_of_range(client: TestClient) -> None:
    """Past 2248 (the journal's last millisecond) is now; a position past it is a 400.

    Before: a time past 2248 was a 400 carrying the engine's internal
    ``wall_ms ... is out of range``, where MemoryProtocol's ``as_of`` answered.
    """
    ingest(client, "tok-a", "Notes about the harbour.")
    for late in ("2248-09-26T15:10:22.208Z", "3000-01-01T00:00:00+05:00"):
        r = client.get(
            "/ui/api/search", params={"q": "harbour", "as_of": late}, headers=auth("tok-a")
        )
        assert r.status_code == 200, r.text
        assert {h["item"]["content"] for h in r.json()["hits"]} == {"Notes about the harbour."}
    r = client.get(
        "/ui/api/search", params={"q": "harbour", "as_of": "8796093022208.0"}, headers=auth("tok-a")
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"
    assert r.json()["message"].startswith("as_of '8796093022208.0': wall_ms")
    assert "2248-09-26T15:10:22.207Z" in r.json()["message"]


def test_forget_needs_the_scope_and_hard_delete_its_preview(client: TestClient) -> None:
    ingest(client, "tok-a", "Forgettable words about kiwis.")
    ep = episode_of(client, "tok-a", "kiwis")
    r = client.post("/ui/api/forget", params={"id": ep}, headers=auth("tok-read"))
    assert r.status_code == 403
    preview = client.post(
        "/ui/api/forget", params={"id": ep, "hard": "true"}, headers=auth("tok-a")
    ).json()
    assert preview["preview"] is True and preview["versions"] == 1
    wrong = client.post(
        "/ui/api/forget",
        params={"id": ep, "hard": "true", "confirmation": "0" * 64},
        headers=auth("tok-a"),
    )
    assert wrong.status_code == 409
    assert client.get(f"/ui/api/items/{ep}", headers=auth("tok-a")).status_code == 200
    done = client.post(
        "/ui/api/forget",
        params={"id": ep, "hard": "true", "confirmation": preview["confirmation"]},
        headers=auth("tok-a"),
    ).json()
    assert done["erased"] == [ep]
    assert client.get(f"/ui/api/items/{ep}", headers=auth("tok-a")).status_code == 404


def test_soft_forget_keeps_the_history(client: TestClient) -> None:
    ingest(client, "tok-a", "Soft words about lemons.")
    ep = episode_of(client, "tok-a", "lemons")
    r = client.post("/ui/api/forget", params={"id": ep}, headers=auth("tok-a")).json()
    assert r == {"mode": "soft", "id": ep, "removed": True, "preview": False}
    view = client.get(f"/ui/api/items/{ep}", headers=auth("tok-a")).json()
    assert view["deleted"] is True and [v["op"] for v in view["history"]] == ["upsert", "delete"]


def test_an_id_with_a_slash_opens_and_is_forgotten(tmp_path: Path) -> None:
    # The page asks for items/${encodeURIComponent(id)}: "/" arrives as %2F, which the
    # server decodes before routing, so the route takes the rest of the path as the id.
    odd = ("runbooks/db-failover", "q?x#y%z/", "a//b")
    with Memory(tmp_path, embedder="hash") as mem:
        for id in odd:
            mem.add(Item(id=id, kind="note", content=f"Runbook {id}."), partition="a")
        app = create_app(mem, tokens=TokenTable.from_json(json.dumps(TOKENS)), mounts=[install])
        with TestClient(app) as c:
            for id in odd:
                r = c.get(f"/ui/api/items/{quote(id, safe='')}", headers=auth("tok-a"))
                assert r.status_code == 200, (id, r.text)
                assert r.json()["id"] == id and r.json()["item"]["content"] == f"Runbook {id}."
            assert c.get("/ui/api/items/runbooks%2Fnope", headers=auth("tok-a")).status_code == 404
            for id in (*odd, "..", "."):  # the page's form: the id in the query, as it is
                mem.add(Item(id=id, kind="note", content=f"Runbook {id}."), partition="a")
                r = c.get("/ui/api/item", params={"id": id}, headers=auth("tok-a"))
                assert r.status_code == 200 and r.json()["id"] == id, (id, r.text)
            soft = c.post("/ui/api/forget", params={"id": odd[0]}, headers=auth("tok-a")).json()
            assert soft["removed"] is True
            preview = c.post(
                "/ui/api/forget", params={"id": odd[1], "hard": "true"}, headers=auth("tok-a")
            ).json()
            done = c.post(
                "/ui/api/forget",
                params={"id": odd[1], "hard": "true", "confirmation": preview["confirmation"]},
                headers=auth("tok-a"),
            ).json()
            assert done["erased"] == [odd[1]]
        assert mem.get(odd[0]) is None and mem.history(odd[1]) == []


def test_links_in_out_and_related(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        a = mem.add("Anchor note.", partition="p")
        b = mem.add("Linked note.", partition="p")
        c = mem.add("Second hop note.", partition="p")
        hidden = mem.add("Other tenant note.", partition="q")
        mem.link(a.id, b.id, "explains", 0.9)
        mem.link(b.id, c.id, "precedes", 0.8)
        mem.link(hidden.id, b.id, "explains", 0.9)
        view = item_view(mem, "p", b.id)
        assert [(x["id"], x["relation"]) for x in view["links_out"]] == [(c.id, "precedes")]
        assert [(x["id"], x["relation"]) for x in view["links_in"]] == [(a.id, "explains")]
        assert c.id in {x["id"] for x in item_view(mem, "p", a.id)["related"]}
        assert hidden.id not in {x["id"] for x in item_view(mem, "p", a.id)["related"]}


def test_the_ui_imports_no_other_surface() -> None:
    banned: tuple[str, ...] = (
        "memstore.protocol",
        "memstore.mindlayer",
        "memstore.mcp",
        "memstore.client",
    )
    banned += ("memstore.integrations",)
    for path in (ROOT / "memstore" / "ui").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                assert not name.startswith(banned), f"{path.name} imports {name}"
    for path in (ROOT / "memstore" / "protocol").glob("*.py"):
        assert "memstore.ui" not in path.read_text(encoding="utf-8"), path.name


def test_no_ui_serves_no_page(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS), encoding="utf-8")
    tokens.chmod(0o600)
    proc, url = start_server(tmp_path / "data", tokens, "--no-ui")
    try:
        assert httpx.get(f"{url}/ui").status_code == 404
        assert httpx.get(f"{url}/").status_code == 404
        assert httpx.get(f"{url}/healthz").status_code == 200
    finally:
        assert stop_server(proc) == 0


def test_search_pages_through_a_long_memory(client: TestClient) -> None:
    for n in range(7):
        ingest(client, "tok-a", f"Pager note {n}.", source=f"p{n}.md")  # 14 items
    seen: list[str] = []
    offset, more = 0, True
    while more:
        r = client.get(
            "/ui/api/search", params={"limit": 5, "offset": offset}, headers=auth("tok-a")
        )
        assert r.status_code == 200, r.text
        page = r.json()
        assert page["offset"] == offset
        seen += [h["item"]["id"] for h in page["hits"]]
        offset, more = offset + len(page["hits"]), page["more"]
    assert len(seen) == len(set(seen)) == 14  # every item once, newest first
    query = client.get(
        "/ui/api/search", params={"q": "pager note", "limit": 5, "offset": 5}, headers=auth("tok-a")
    )
    assert len(query.json()["hits"]) == 5 and query.json()["more"] is True


@pytest.mark.parametrize("offset", ["-5", "500", "99999999999999999999"])
def test_a_hostile_offset_is_refused_naming_its_range(client: TestClient, offset: str) -> None:
    # Before: held to 0..499 without a word, so a caller never learnt its page was not asked for.
    ingest(client, "tok-a", "Only note.")
    r = client.get("/ui/api/search", params={"offset": offset}, headers=auth("tok-a"))
    assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text
    assert r.json()["message"] == f"offset must be between 0 and 499, got {offset}", r.text


def test_a_non_numeric_offset_is_one_clear_error(client: TestClient) -> None:
    r = client.get("/ui/api/search", params={"offset": "NaN"}, headers=auth("tok-a"))
    assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text


def test_a_bad_query_parameter_is_named_as_one_not_as_a_body(client: TestClient) -> None:
    # Before: "invalid request body: query.limit: ..." for a GET that has no body.
    r = client.get("/ui/api/search", params={"limit": "abc"}, headers=auth("tok-a"))
    assert r.status_code == 400, r.text
    assert r.json()["message"].startswith("invalid query parameter 'limit': "), r.text
    r = client.get("/ui/api/item", headers=auth("tok-a"))
    assert r.json()["message"] == "invalid query parameter 'id': Field required", r.text
    # A body field is still named as one.
    r = client.post("/v1/recall", json={"query": "x", "k": "many"}, headers=auth("tok-a"))
    assert r.json()["message"].startswith("invalid request body: k: "), r.text


def test_a_revoked_token_stops_receiving_live_changes(tmp_path: Path) -> None:
    # The Live changes panel reads GET /v1/events; an open stream must not outlive its
    # token: once the tokens file drops it, the next change ends the stream unsent.
    tokens = tmp_path / "tokens.json"
    table = {"tok-old": TOKENS["tok-a"], "tok-new": TOKENS["tok-a"]}
    tokens.write_text(json.dumps(table))
    tokens.chmod(0o600)
    proc, url = start_server(tmp_path / "data", tokens)
    try:
        with httpx.stream("GET", f"{url}/v1/events", headers=auth("tok-old"), timeout=30) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            httpx.post(
                f"{url}/v1/ingest",
                json={"source": "before.md", "content": "Before the revocation."},
                headers=auth("tok-new"),
                timeout=30,
            ).raise_for_status()
            assert any("before.md" in line for line in lines)  # the stream works
            revoked = tmp_path / "tokens.new"
            revoked.write_text(json.dumps({"tok-new": TOKENS["tok-a"]}))
            revoked.chmod(0o600)
            revoked.replace(tokens)
            httpx.post(
                f"{url}/v1/ingest",
                json={"source": "after.md", "content": "After the revocation."},
                headers=auth("tok-new"),
                timeout=30,
            ).raise_for_status()
            # The stream ends (the token is gone) rather than carrying the new change.
            leaked = next((line for line in lines if "after.md" in line), None)
        assert leaked is None, leaked
    finally:
        assert stop_server(proc) == 0


def test_every_json_answer_of_the_api_ends_with_a_newline(client: TestClient) -> None:
    """The README promises it of every JSON answer of the server: a ``curl`` of
    ``/ui/api/...`` (ui.md shows one) must not leave the prompt on the answer's line."""
    ingest(client, "tok-a", "# Notes\nAlice joined Acme.")
    answers = {
        "whoami": client.get("/ui/api/whoami", headers=auth("tok-a")),
        "search": client.get("/ui/api/search", params={"q": "Alice"}, headers=auth("tok-a")),
        "stats": client.get("/ui/api/stats", headers=auth("tok-a")),
        "401": client.get("/ui/api/whoami"),
        "403": client.post("/ui/api/forget", params={"id": "x"}, headers=auth("tok-read")),
        "404": client.get("/ui/api/item", params={"id": "nope"}, headers=auth("tok-a")),
        "400": client.get("/ui/api/search", params={"as_of": "then"}, headers=auth("tok-a")),
    }
    for name, r in answers.items():
        assert r.headers["content-type"] == "application/json", name
        assert r.content.endswith(b"}\n"), (name, r.status_code, r.content[-40:])
        json.loads(r.content)  # still one JSON value


def test_no_answer_carrying_memory_is_kept_by_a_cache(client: TestClient) -> None:
    # A JSON answer holds a tenant's memory: a browser's disk cache (a page of an
    # --allow-origin app that fetches without cache: "no-store") or a proxy must not keep
    # it, for the next user of the machine or of the proxy to read. Refusals too: a
    # 404 names the id asked for.
    ingest(client, "tok-a", "Cached answers leak memory.")
    item = episode_of(client, "tok-a", "cached answers")
    answers = []
    for path in ("whoami", "stats", "search?q=cached", f"item?id={item}", "item?id=nope"):
        answers.append(client.get(f"/ui/api/{path}", headers=auth("tok-a")))
    answers.append(client.post("/ui/api/forget", params={"id": item}, headers=auth("tok-a")))
    answers.append(client.get("/ui/api/whoami"))  # 401
    answers.append(client.post("/v1/recall", headers=auth("tok-a"), json={"query": "cached"}))
    for r in answers:
        assert r.headers.get("cache-control") == "no-store", (r.request.url, r.headers)
    # The page and its files hold only code: they may be kept, and revalidated.
    assert client.get("/ui").headers["cache-control"] == "no-cache"
    assert client.get("/ui/static/main.js").headers["cache-control"] == "no-cache"


def test_a_page_of_another_origin_that_opens_the_inspector_keeps_no_hold_on_it(
    client: TestClient,
) -> None:
    # window.open("http://127.0.0.1:8080/ui") from another site's page hands that page a
    # handle on the inspector's tab: once the user signed in there, it could send the
    # tab to a look-alike asking for the token again (reverse tabnabbing). The page's
    # Cross-Origin-Opener-Policy puts it in a browsing context group of its own.
    for path in ("/ui", "/ui/static/main.js"):
        assert client.get(path).headers["cross-origin-opener-policy"] == "same-origin", path


def test_forget_cannot_be_sent_by_another_site_or_another_tenant(client: TestClient) -> None:
    # What a page of another site can make a browser send: a form POST (no preflight,
    # no Authorization header; the token, if it knew one, in the body, the query or a
    # cookie), or a fetch carrying its Origin. And another tenant's token, hard delete too.
    ingest(client, "tok-a", "Words another site would like gone.")
    ep = episode_of(client, "tok-a", "another site")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    sent = [
        client.post("/ui/api/forget", params={"id": ep}, content="token=tok-a", headers=form),
        client.post("/ui/api/forget", params={"id": ep, "access_token": "tok-a"}),
        client.post("/ui/api/forget", params={"id": ep}, headers={"Cookie": "token=tok-a"}),
        client.post(
            "/ui/api/forget",
            params={"id": ep},
            headers={**auth("tok-a"), **form, "Origin": "http://evil.example"},
        ),
        client.post("/ui/api/forget", params={"id": ep, "hard": "true"}, headers=auth("tok-b")),
    ]
    assert [r.status_code for r in sent] == [401, 401, 401, 403, 404]
    assert "confirmation" not in sent[-1].text
    assert (
        client.get("/ui/api/item", params={"id": ep}, headers=auth("tok-a")).json()["deleted"]
        is False
    )
