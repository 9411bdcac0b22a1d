"""Answers a person reads in a terminal: newline-ended JSON, JSON errors that say where,
and a body limit set with ``--max-body`` (a header limit with ``--max-header-bytes``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from .conftest import Server, make_tokens, start_server, stop_server


def test_every_json_answer_ends_with_a_newline(server: Server) -> None:
    token = server.tenants.take()
    answers = [
        server.call("GET", "/healthz", None),
        server.call("POST", "/v1/ingest", token, json={"source": "s", "content": "nl"}),
        server.call("POST", "/v1/recall", token, json={"query": "nl"}),
        server.call("POST", "/v1/recall", token, json={"query": ""}),  # a 400 from validation
        server.call("POST", "/v1/recall", None, json={"query": "x"}),  # a 401 from the gate
        server.call("GET", "/nowhere", None),  # a 404 from the router
    ]
    for r in answers:
        assert r.headers["content-type"].startswith("application/json"), r.request.url
        assert r.content.endswith(b"}\n") or r.content.endswith(b"]\n"), r.content[-40:]
        json.loads(r.content)


def test_malformed_json_names_the_line_and_column(server: Server) -> None:
    token = server.tenants.take()
    body = b'{\n  "query": "x",\n  "k": ,\n}'
    r = server.call(
        "POST", "/v1/recall", token, content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400
    err = r.json()
    assert err["error"] == "invalid_request"
    assert err["details"]["line"] == 3 and err["details"]["column"] == 8
    assert "line 3, column 8" in err["message"]


def test_an_empty_body_is_not_valid_json_at_line_1_column_1(server: Server) -> None:
    """Before, it was ``invalid request body: Field required`` with an empty field name."""
    token = server.tenants.take()
    for path in ("/v1/ingest", "/v1/recall", "/v1/forget"):
        r = server.call(
            "POST", path, token, content=b"", headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400, r.text
        err = r.json()
        assert err["error"] == "invalid_request"
        assert err["message"].startswith("the body is not valid JSON: it is empty"), err
        assert err["details"] == {"line": 1, "column": 1, "position": 0}


def test_max_body_sets_the_request_body_limit(tmp_path: Path) -> None:
    tokens = make_tokens(tmp_path / "tokens.json")
    token = next(iter(tokens))
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json", "--max-body", "2000")
    try:
        headers = {"Authorization": f"Bearer {token}"}
        small = httpx.post(
            f"{url}/v1/ingest", json={"source": "s", "content": "x" * 1000}, headers=headers
        )
        assert small.status_code == 200
        big = httpx.post(
            f"{url}/v1/ingest", json={"source": "s", "content": "x" * 3000}, headers=headers
        )
        assert big.status_code == 413 and big.json()["details"]["limit"] == 2000
    finally:
        assert stop_server(proc) == 0


def test_max_header_bytes_sets_the_request_header_limit(tmp_path: Path) -> None:
    """Before: 64 KiB, fixed (``MAX_HEADER_BYTES``); now ``--max-header-bytes``."""
    make_tokens(tmp_path / "tokens.json")
    flags = ("--max-header-bytes", "2048")
    proc, url = start_server(tmp_path / "data", tmp_path / "tokens.json", *flags)
    try:
        assert httpx.get(f"{url}/healthz", headers={"X-Pad": "p" * 1000}).status_code == 200
        big = httpx.get(f"{url}/healthz", headers={"X-Pad": "p" * 3000})
        assert big.status_code == 431, big.text
        assert big.json() == {
            "error": "headers_too_large",
            "message": "the request's headers exceed 2048 bytes",
        }
    finally:
        assert stop_server(proc) == 0


def test_a_blank_query_is_refused_as_the_engine_refuses_it(server: Server) -> None:
    token = server.tenants.take()
    for query in ("", "   "):
        r = server.call("POST", "/v1/recall", token, json={"query": query})
        assert r.status_code == 400 and r.json()["error"] == "invalid_request", query


def test_line_streams_stay_one_line_per_value_for_every_line_reader(server: Server) -> None:
    """U+2028, U+2029 and U+0085 are JSON escapes in snapshots, streamed hits and events.

    httpx's ``iter_lines()`` (what memstore's client reads with) and ``str.splitlines``
    break lines there too: before, a snapshot holding this episode reached them as
    pieces that are not JSON (``MemoryClient.snapshot`` raised ProtocolTransportError).
    """
    from .test_events import frames, next_change

    token = server.tenants.take()
    content = "line\u2028separator\u2029paragraph\u0085next line"
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        with client.stream("GET", "/v1/events", headers=auth) as r:
            it = frames(r.iter_lines())
            next(it)
            server.call("POST", "/v1/ingest", token, json={"source": "ls", "content": content})
            _, change = next_change(it)
            assert change["item"]["content"] == content
        now = client.get("/healthz").json()["lsn"]
        with client.stream("GET", f"/v1/snapshot/{now}", headers=auth) as r:
            lines = [json.loads(line) for line in r.iter_lines() if line]
        texts = [x["value"].get("text", x["value"].get("content")) for x in lines]
        assert texts.count(content) == 2, texts  # the episode and its one chunk
        sse = {**auth, "Accept": "text/event-stream"}
        body = {"query": "separator paragraph"}
        with client.stream("POST", "/v1/recall", headers=sse, json=body) as r:
            hits = [f for f in frames(r.iter_lines()) if f.get("event") == "hit"]
        assert [json.loads(f["data"])["text"] for f in hits] == [content]


def test_a_number_of_too_many_digits_is_named(server: Server) -> None:
    """Valid JSON that Python will not read (an integer past 4300 digits): before, the
    400 said only "There was an error parsing the body"."""
    token = server.tenants.take()
    big = b"9" * 5000
    for path, body in (
        ("/v1/ingest", b'{"source": "s", "content": "c", "metadata": {"n": ' + big + b"}}"),
        ("/v1/recall", b'{"query": "q", "k": ' + big + b"}"),
    ):
        r = server.call(
            "POST", path, token, content=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400, r.text
        err = r.json()
        assert err["error"] == "invalid_request"
        assert "more than 4300 digits" in err["message"], err
