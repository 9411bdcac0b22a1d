"""``memstore mcp --transport http``: streamable HTTP at ``/mcp`` on loopback.

Tools over HTTP, the refusal of a non-loopback bind without tokens, bearer
tokens (tenant as partition, scopes per tool), and the durability promise:
every ``remember`` acknowledged before a SIGKILL is there after a restart.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.shared.exceptions import McpError

from memstore.errors import MemstoreError
from memstore.mcp.http import load_tokens
from memstore.mcp.toolkit import Caller
from tests.mcp_harness import (
    _env,
    free_port,
    http_client,
    http_server,
    mcp_command,
    run_cli,
    stdio,
)


def start_http(data: Path, port: int, *flags: str) -> subprocess.Popen[bytes]:
    """``memstore mcp --transport http`` on ``port`` with ``flags``, its output discarded."""
    return subprocess.Popen(
        mcp_command(data, "--transport", "http", "--port", str(port), *flags),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def answering(proc: subprocess.Popen[bytes], port: int) -> str:
    """The ``/mcp`` URL of the server ``proc`` once it answers (it binds before it serves)."""
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=0.5)
            return url
        except httpx.TransportError:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)


def test_tools_over_streamable_http(tmp_path: Path) -> None:
    with http_server(tmp_path) as url:

        async def main() -> None:
            async with http_client(url) as c:
                tools = (await c.session.list_tools()).tools
                assert "recall" in [t.name for t in tools]
                a = await c.ok("remember", {"content": "The VPN gateway is vpn-2."})
                hits = (await c.ok("recall", {"q": "vpn gateway"}))["hits"]
                assert hits[0]["id"] == a["id"]
                assert "query is required" in await c.fails("recall", {})

        anyio.run(main)
        # A page elsewhere cannot drive a loopback server (DNS rebinding).
        r = httpx.post(url, json={}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403  # the shared guard, as memstore serve answers it


def test_non_loopback_bind_needs_a_tokens_file(tmp_path: Path) -> None:
    done = run_cli(
        "mcp", "--data", str(tmp_path), "--embedder", "hash", "--transport", "http",
        "--host", "0.0.0.0",
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0 without --tokens-file" in done.stderr
    assert not (tmp_path / "journal.db").exists()


def test_bearer_tokens_choose_partition_and_scopes(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tok-acme-rw": {"tenant": "acme", "scopes": ["recall", "ingest", "forget"]},
                "tok-acme-ro": {"tenant": "acme", "scopes": ["recall"]},
                "tok-other": {"tenant": "other", "scopes": ["recall", "ingest"]},
            }
        )
    )
    with http_server(tmp_path / "data", "--tokens-file", str(tokens)) as url:
        assert httpx.post(url, json={}).status_code == 401
        bad = httpx.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401

        async def main() -> None:
            async with http_client(url, {"Authorization": "Bearer tok-acme-rw"}) as rw:
                a = await rw.ok("remember", {"content": "Acme's invoices go out on the 5th."})
            async with http_client(url, {"Authorization": "Bearer tok-acme-ro"}) as ro:
                hits = (await ro.ok("recall", {"query": "invoices"}))["hits"]
                assert [h["id"] for h in hits] == [a["id"]]
                msg = await ro.fails("remember", {"content": "no"})
                assert "'ingest' scope" in msg
            async with http_client(url, {"Authorization": "Bearer tok-other"}) as other:
                assert (await other.ok("recall", {"query": "invoices"}))["hits"] == []
                got = await other.ok("get_memory", {"ids": [a["id"]]})
                assert got["missing"] == [a["id"]]
                assert "'forget' scope" in await other.fails("forget", {"ids": [a["id"]]})

        anyio.run(main)


def test_resources_need_the_recall_scope_as_the_read_tools_do(tmp_path: Path) -> None:
    """A token without ``recall`` reads no memory, whether by a tool or by a resource."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tok-writer": {"tenant": "acme", "scopes": ["ingest"]},
                "tok-reader": {"tenant": "acme", "scopes": ["recall"]},
            }
        )
    )
    with http_server(tmp_path / "data", "--tokens-file", str(tokens)) as url:

        async def main() -> None:
            async with http_client(url, {"Authorization": "Bearer tok-writer"}) as w:
                note = await w.ok("remember", {"content": "Acme's merger closes in May."})
                assert "'recall' scope" in await w.fails("recall", {"query": "merger"})
                for uri in ("memory://recent", f"memory://item/{note['id']}"):
                    with pytest.raises(McpError) as refused:
                        await w.resource(uri)
                    assert "'recall' scope" in refused.value.error.message
                    assert "merger" not in str(refused.value.error)
            async with http_client(url, {"Authorization": "Bearer tok-reader"}) as r:
                recent = await r.resource("memory://recent")
                assert [i["id"] for i in recent["items"]] == [note["id"]]
                item = await r.resource(f"memory://item/{note['id']}")
                assert item["content"] == "Acme's merger closes in May."

        anyio.run(main)


def transport_error(r: httpx.Response) -> str:
    """The message of ``r``'s body, checked to be a JSON-RPC error of the transport."""
    assert r.headers["content-type"] == "application/json", r.headers
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None, body
    assert body["error"]["code"] == -32000, body
    message: str = body["error"]["message"]
    return message


def test_the_endpoint_refuses_in_json_rpc_with_the_headers_a_client_reads(tmp_path: Path) -> None:
    """401 with ``WWW-Authenticate``, 400 for a repeated header, 405 with ``Allow``: JSON-RPC.

    Before: the 401 and the 400 carried memstore serve's ``{"error", "message"}``
    envelope, and a PUT got Starlette's plain-text ``Method Not Allowed`` with an
    ``Allow`` in set order that named HEAD (which the SDK refused with a 405 of its own).
    """
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-acme": {"tenant": "acme", "scopes": ["recall"]}}))
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with http_server(tmp_path / "data", "--tokens-file", str(tokens)) as url:
        missing = httpx.post(url, json=ping)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"  # RFC 6750: no error code
        assert "Authorization: Bearer <token>" in transport_error(missing)
        for sent in ("Bearer nope", "Basic dG9rLWFjbWU6"):
            unknown = httpx.post(url, json=ping, headers={"Authorization": sent})
            assert unknown.status_code == 401
            challenge = unknown.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_token", error_description="')
            assert "not one this server knows" in transport_error(unknown)
        twice = [("Authorization", "Bearer tok-acme")] * 2
        repeated = httpx.post(url, json=ping, headers=twice)
        assert repeated.status_code == 400
        assert "appears 2 times" in transport_error(repeated)
        for auth in ({}, {"Authorization": "Bearer tok-acme"}):
            for method in ("PUT", "PATCH", "OPTIONS", "HEAD"):
                r = httpx.request(method, url, headers=auth)
                assert r.status_code == 405, (method, r.text)
                assert r.headers["allow"] == "GET, POST, DELETE"  # as the SDK sends it
                if method != "HEAD":  # a HEAD answer has no body
                    assert "Method Not Allowed" in transport_error(r)
        # A GET without a session is authenticated first, then refused with a 405.
        assert httpx.get(url).status_code == 401
        r = httpx.get(url, headers={"Authorization": "Bearer tok-acme"})
        assert r.status_code == 405 and r.headers["allow"] == "POST, DELETE"


SSE_AND_JSON = {"Accept": "application/json, text/event-stream"}


def test_a_get_opens_a_sessions_stream_and_without_a_session_is_a_405(tmp_path: Path) -> None:
    """The transport says a GET is answered ``text/event-stream`` or 405; nothing else.

    Before: a GET without ``Mcp-Session-Id`` got the SDK's 400 ``Missing session ID``,
    and the TypeScript SDK's client, which opens its stream with a GET and goes on
    without one only after a 405, stopped there (MCP Inspector could not connect).
    """
    with http_server(tmp_path) as url:
        # (a) no session: 405 whatever the Accept, GET left out of Allow; JSON-RPC body.
        for accept in ({"Accept": "text/event-stream"}, {}):
            r = httpx.get(url, headers=accept)
            assert r.status_code == 405, r.text
            assert r.headers["allow"] == "POST, DELETE"
            assert "mcp-session-id" not in r.headers  # none was opened for it
            assert "POST initialize" in transport_error(r)
        # A DELETE without a session: 400, and no session opened for it either.
        ended = httpx.delete(url)
        assert ended.status_code == 400, ended.text
        assert "mcp-session-id" not in ended.headers
        assert "none to end" in transport_error(ended)
        # (b) a session the server does not know: 404, so the client initializes again.
        sse = {"Accept": "text/event-stream"}
        unknown = httpx.get(url, headers={**sse, "Mcp-Session-Id": "f" * 32})
        assert unknown.status_code == 404
        assert unknown.json()["id"] is None
        # The client then goes on as a TypeScript client does: initialize, call a tool.
        with httpx.Client(headers=SSE_AND_JSON, timeout=30) as http:
            session = _open_session(http, url)
            call = _call("remember", {"content": "Gate code is 4411."})
            answer = http.post(url, json=call, headers=session)
            assert answer.status_code == 200, answer.text
            data = answer.text.partition("data: ")[2].splitlines()[0]  # one SSE event
            reply = json.loads(data)
            assert reply["id"] == 2 and reply["result"]["isError"] is False, reply
            # (c) a session it knows: the GET opens the session's stream (one at a time).
            with http.stream("GET", url, headers={**session, **sse}) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                assert stream.headers["mcp-session-id"] == session["Mcp-Session-Id"]
                second = http.get(url, headers={**session, **sse})
                assert second.status_code == 409
            assert http.delete(url, headers=session).status_code == 200


def test_the_bearer_scheme_is_read_as_memstore_serve_reads_it(tmp_path: Path) -> None:
    """Any case of ``Bearer`` (RFC 7235); a repeated Authorization header is refused."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-acme": {"tenant": "acme", "scopes": ["recall"]}}))
    with http_server(tmp_path / "data", "--tokens-file", str(tokens)) as url:
        twice = [("Authorization", "Bearer tok-acme"), ("Authorization", "Bearer nope")]
        refused = httpx.post(url, json={}, headers=twice)
        assert refused.status_code == 400
        assert "appears 2 times" in transport_error(refused)

        async def main() -> None:
            for scheme in ("bearer", "BEARER", "bEaReR"):
                async with http_client(url, {"Authorization": f"{scheme} tok-acme"}) as c:
                    assert (await c.ok("recall", {"query": "anything"}))["hits"] == []

        anyio.run(main)


def test_acknowledged_remembers_survive_sigkill(tmp_path: Path) -> None:
    port = free_port()
    proc = start_http(tmp_path, port)
    acked: list[str] = []
    try:
        url = answering(proc, port)

        async def writer(n: int) -> None:
            try:
                async with http_client(url) as c:
                    for i in range(1000):
                        data = await c.ok("remember", {"content": f"writer {n} note {i} kiwi"})
                        acked.append(data["id"])
            except AssertionError:
                raise
            except Exception:  # the server died under the call: expected after the kill
                return

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(writer, n)
                while len(acked) < 30:
                    await anyio.sleep(0.01)
                os.kill(proc.pid, signal.SIGKILL)  # while the writers have calls in flight
                # A client whose server died may wait on its stream for ever: stop them.
                await anyio.sleep(1.0)
                tg.cancel_scope.cancel()

        anyio.run(main)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert len(acked) >= 30

    async def check() -> None:
        async with stdio(tmp_path) as c:
            got = await c.ok("get_memory", {"ids": acked[:100]})
            assert got["missing"] == []
            for chunk in range(100, len(acked), 100):
                got = await c.ok("get_memory", {"ids": acked[chunk : chunk + 100]})
                assert got["missing"] == []

    anyio.run(check)


def test_tokens_file_entries_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    # The parser memstore serve's tokens file goes through (memstore.web.tokens), in its
    # words: entries numbered "#n", a bad tenant or token or scope said as serve says it.
    for content, says in [
        ("not json", "tokens file is not valid JSON"),
        ("[]", "tokens file must be a JSON object"),
        ('{"t": {"tenant": "a,b", "scopes": ["recall"]}}', "entry #1: tenant 'a,b' must be 1-64"),
        ('{"t": {"tenant": "acme", "scopes": ["root"]}}', "entry #1 (tenant 'acme'): unknown"),
        (
            '{"tok en": {"tenant": "acme", "scopes": ["recall"]}}',
            "entry #1 (tenant 'acme'): a token must be 1-512 of A-Z a-z 0-9",
        ),
        # As memstore serve refuses them: the last entry of a token listed twice was
        # kept in silence, an entry's unknown key ignored, deep nesting a traceback.
        (
            '{"t": {"tenant": "a", "scopes": ["recall"]}, "t": {"tenant": "b", "scopes": []}}',
            "a key appears twice in one object (a token listed twice?)",
        ),
        (
            '{"t": {"tenant": "a", "scope": ["forget"], "scopes": ["recall"]}}',
            "unknown keys ['scope']",
        ),
        ("[" * 100_000, "tokens file is not valid JSON: maximum recursion depth"),
        # Before, a scope that was not a string was a TypeError (unhashable) out of the
        # parser: a traceback at start, and an unlogged crash of the reload.
        ('{"t": {"tenant": "a", "scopes": [["recall"]]}}', "scopes must be a list of strings"),
        ('{"t": "acme"}', 'entry #1: expected {"tenant"'),
        ('{"t": {"tenant": 3, "scopes": []}}', "entry #1: tenant must be a string"),
        ('{"' + "t" * 513 + '": {"tenant": "a", "scopes": []}}', "token longer than 512"),
    ]:
        path.write_text(content)
        with pytest.raises(MemstoreError, match=re.escape(says)):
            load_tokens(path)
    path.write_text('{"tok": {"tenant": "acme", "scopes": ["recall"]}}')
    table = load_tokens(path).current()
    acme = Caller("acme", frozenset({"recall"}))
    assert table.caller("Bearer tok") == acme and table.caller("bearer  tok ") == acme
    assert table.caller("Bearer other") is None and table.caller("tok") is None
    assert table.caller("Basic tok") is None and table.caller("Bearer tok tok") is None
    # As memstore serve takes them (before, both files were refused here): a token with
    # no scope authenticates a caller who may call no tool, and an empty map lets nobody
    # in (emptying the file revokes every token; a refused file would keep the old ones).
    path.write_text('{"idle": {"tenant": "acme", "scopes": []}}')
    idle = load_tokens(path).current().caller("Bearer idle")
    assert idle == Caller("acme", frozenset()) and not idle.may("recall")
    path.write_text("{}")
    assert load_tokens(path).current().caller("Bearer idle") is None
    path.write_bytes(b'{"t\xff": {"tenant": "a", "scopes": []}}')  # not UTF-8
    with pytest.raises(MemstoreError, match="cannot read it"):
        load_tokens(path)
    with pytest.raises(MemstoreError, match="cannot read it"):  # before: "as JSON"
        load_tokens(tmp_path / "missing.json")


def test_the_http_transport_cuts_off_a_trickled_header_and_stops_cleanly(tmp_path: Path) -> None:
    """Before: the endpoint ran on bare uvicorn, with no header timeout and no connection cap
    (a client sending half a header held its connection for ever), and SIGTERM killed the
    process (uvicorn re-raised it) instead of closing the memory. It then took the default
    header timeout (10 s), which this test waited for; ``--header-timeout`` sets it now
    (``tests/test_mcp_http_defences.py`` holds the other flags to theirs)."""
    port = free_port()
    proc = start_http(tmp_path, port, "--header-timeout", "0.5")
    try:
        answering(proc, port)
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
            s.settimeout(60)  # a hang guard: the header timeout ends it long before
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        body = json.loads(answer.partition(b"\r\n\r\n")[2])  # JSON-RPC, as every refusal
        assert body["id"] is None and body["error"]["code"] == -32000, body
        assert body["error"]["message"].endswith("within 0.5 s"), body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_client_ending_its_session_prints_no_traceback(tmp_path: Path) -> None:
    """Before: every client that closed its session (as the SDK's client does on exit) left
    a 20-line ``Error in standalone SSE writer ... ClosedResourceError`` traceback on the
    server's stderr, as if something had failed. Now a goodbye is silent."""
    port = free_port()
    proc = subprocess.Popen(
        mcp_command(tmp_path, "--transport", "http", "--port", str(port)),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = answering(proc, port)

        async def session() -> None:
            async with http_client(url) as c:
                await c.ok("remember", {"content": "a session that ends normally"})

        for _ in range(2):
            anyio.run(session)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "Traceback" not in err and "Error" not in err, err
        assert "serving MCP (streamable HTTP)" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_changed_tokens_file_is_read_again_without_a_restart(tmp_path: Path) -> None:
    """Before: the file was read once at start, so a revoked token kept working."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-old": {"tenant": "acme", "scopes": ["recall"]}}))
    with http_server(tmp_path / "data", "--tokens-file", str(tokens)) as url:

        def status(token: str) -> int:
            answer = httpx.post(url, json={}, headers={"Authorization": f"Bearer {token}"})
            return answer.status_code

        assert status("tok-old") != 401 and status("tok-new") == 401
        tokens.write_text(json.dumps({"tok-new": {"tenant": "acme", "scopes": ["recall"]}}))
        assert status("tok-new") != 401 and status("tok-old") == 401
        tokens.write_text("{not json")  # unusable: the tokens read before stay
        assert status("tok-new") != 401


def test_a_path_other_than_mcp_is_a_json_rpc_404(tmp_path: Path) -> None:
    """Before: Starlette's plain-text ``Not Found``, the one answer of the server that was not
    JSON (``memstore serve`` answers an unknown route in its own JSON envelope too)."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-acme": {"tenant": "acme", "scopes": ["recall"]}}))
    for flags in ((), ("--tokens-file", str(tokens))):
        with http_server(tmp_path / f"data{len(flags)}", *flags) as url:
            base = url.removesuffix("/mcp")
            for method, path in [
                ("GET", "/"),
                ("POST", "/v1/recall"),
                ("GET", "/mcpx"),
                ("DELETE", "/mcp/session"),
                ("GET", "/" + "x" * 300),
            ]:
                r = httpx.request(method, base + path, json={"jsonrpc": "2.0", "id": 1})
                assert r.status_code == 404, (method, path, r.text)
                message = transport_error(r)
                assert message.startswith(f"Not Found: no route {path[:200]};"), message
                assert message.endswith("the MCP endpoint is /mcp") and len(message) < 300
            # /mcp itself is the endpoint as before: its own 405, not the 404.
            auth = {"Authorization": "Bearer tok-acme"} if flags else {}
            assert httpx.put(url, headers=auth).status_code == 405


def test_a_request_still_running_when_the_grace_ends_is_told_to_retry(tmp_path: Path) -> None:
    """``--shutdown-grace``, as ``memstore serve`` takes it (``tests/test_serve_crash.py``).

    Before: ``memstore mcp`` had no such option (exit status 2): a request in flight at
    SIGTERM kept the process for the fixed 10 s. Now the grace is the operator's, and a
    request still running when it ends is answered 503 with ``Retry-After``, a JSON-RPC
    error as every refusal of the endpoint, with one calm line in the log.
    """
    port, grace = free_port(), ("--shutdown-grace", "0.5")
    log = tmp_path / "mcp.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            mcp_command(tmp_path / "data", "--transport", "http", "--port", str(port), *grace),
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        url = answering(proc, port)
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(  # the rest of the body never comes
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                % port
                + b"Content-Type: application/json\r\nAccept: application/json, "
                b'text/event-stream\r\nContent-Length: 200\r\n\r\n{"jsonrpc": "2.0", "id'
            )
            assert httpx.get(url).status_code == 405  # the server is up, the request is in
            stopped = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert proc.wait(timeout=60) == 0
        assert time.monotonic() - stopped < 8, "the default grace (10 s) was used"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 "), answer
    assert b"\r\nretry-after: 1" in head.lower(), head
    envelope = json.loads(body)
    assert envelope["id"] is None and envelope["error"]["code"] == -32000, envelope
    assert "shutting down" in envelope["error"]["message"]
    text = log.read_text()
    assert "Traceback" not in text, text
    assert text.count("was still running when the grace period ran out; answered 503") == 1, text


def test_shutdown_grace_is_refused_when_it_is_not_a_positive_number(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for bad in ("0", "-1", "soon"):
        done = run_cli("mcp", "--data", str(data), "--transport", "http", "--shutdown-grace", bad)
        assert done.returncode == 2 and "--shutdown-grace" in done.stderr, done.stderr
    assert not data.exists()  # refused before anything opened


def _open_session(http: httpx.Client, url: str, token: str | None = None) -> dict[str, str]:
    """Headers for a new session opened (``initialize``, then ``initialized``) with ``token``
    (``None``: a server without a tokens file)."""
    auth = {"Authorization": f"Bearer {token}"} if token is not None else {}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    opened = http.post(url, json=init, headers=auth)
    assert opened.status_code == 200, opened.text
    session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(url, json=done, headers=session).status_code == 202
    return session


def _call(name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_a_session_answers_only_the_token_that_opened_it(tmp_path: Path) -> None:
    """Before: any valid token could use another token's session by its ``Mcp-Session-Id``.

    The session was tied to nothing, so a second tenant's token (or a second token
    of the same tenant) given the id could open the session's GET stream (its
    server messages) with a 200, call tools on it, and end it with a DELETE (200,
    the owner's next request then a 404). Now a session answers the token that
    opened it alone: to any other it is a 404, the very answer of an unknown session.
    """
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tok-acme": {"tenant": "acme", "scopes": ["recall", "ingest"]},
                "tok-acme-2": {"tenant": "acme", "scopes": ["recall", "ingest"]},
                "tok-other": {"tenant": "other", "scopes": ["recall", "ingest"]},
            }
        )
    )
    sse = {"Accept": "text/event-stream"}
    with (
        http_server(tmp_path / "data", "--tokens-file", str(tokens)) as url,
        httpx.Client(headers=SSE_AND_JSON, timeout=30) as http,
    ):
        owner = _open_session(http, url, "tok-acme")
        note = _call("remember", {"content": "Acme's vault code is 7731."})
        assert http.post(url, json=note, headers=owner).status_code == 200
        unknown = http.get(url, headers={**owner, **sse, "Mcp-Session-Id": "f" * 32})
        assert unknown.status_code == 404
        for stranger in ("tok-other", "tok-acme-2"):
            theirs = {**owner, "Authorization": f"Bearer {stranger}"}
            with http.stream("GET", url, headers={**theirs, **sse}) as stream:  # 200: endless
                assert stream.status_code == 404, (stranger, stream.headers)
                answers = [stream.read() and stream]
            answers.append(http.post(url, json=_call("recall", {"query": "vault"}), headers=theirs))
            answers.append(http.delete(url, headers=theirs))
            for r in answers:
                assert r.status_code == 404, (stranger, r.request.method, r.text)
                assert r.json() == unknown.json()
                assert "mcp-session-id" not in r.headers
        # The owner's session is untouched, its stream and tools as before.
        with http.stream("GET", url, headers={**owner, **sse}) as stream:
            assert stream.status_code == 200
        answer = http.post(url, json=_call("recall", {"query": "vault"}), headers=owner)
        assert answer.status_code == 200 and "7731" in answer.text
        assert http.delete(url, headers=owner).status_code == 200
        # Ended, it is unknown to everyone, its owner too.
        assert http.get(url, headers={**owner, **sse}).json() == unknown.json()


def test_a_sessions_binding_goes_when_the_session_ends(tmp_path: Path) -> None:
    """The table of session owners holds the open sessions only (it cannot grow unbounded).

    A real ``/mcp`` app on a loopback uvicorn in this process, so that its table
    can be read: a DELETE drops the session's owner, a session the SDK no
    longer has is dropped when the next one opens, and an id whose owner is
    gone is a 404 to its old token too.
    """
    import threading

    import uvicorn
    from mcp.server.lowlevel import Server

    from memstore.mcp.http import http_app
    from memstore.mcp.limits import MAX_BODY_BYTES
    from memstore.web.settings import http_settings

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-a": {"tenant": "acme", "scopes": ["recall"]}}))
    port = free_port()
    settings = http_settings(argparse.Namespace(host="127.0.0.1"), max_body_bytes=MAX_BODY_BYTES)
    app = http_app(Server("bare"), settings=settings, partition=None, tokens=load_tokens(tokens))
    endpoint = app.routes[0].endpoint  # type: ignore[attr-defined]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.05)
        with httpx.Client(headers=SSE_AND_JSON, timeout=30) as http:
            sessions = [_open_session(http, url, "tok-a") for _ in range(3)]
            assert len(endpoint.owners) == 3
            assert http.delete(url, headers=sessions[0]).status_code == 200
            assert len(endpoint.owners) == 2
            gone = sessions[1]["Mcp-Session-Id"]
            endpoint.manager._server_instances.pop(gone)  # ended by the SDK (as when idle)
            _open_session(http, url, "tok-a")
            assert gone.encode() not in endpoint.owners and len(endpoint.owners) == 2
            for ended in sessions[:2]:
                assert http.post(url, json=_call("recall", {}), headers=ended).status_code == 404
    finally:
        server.should_exit = True
        thread.join(30)


def test_the_endpoint_with_a_trailing_slash_is_the_endpoint(tmp_path: Path) -> None:
    """``/mcp/`` is served as ``/mcp``: same tokens, same sessions, same Host and Origin checks.

    Before: Starlette answered every request to ``/mcp/`` with a 307 to ``/mcp``, and a
    client configured with the slash had to follow a redirect of its POST (some clients
    drop the body or the ``Authorization`` header on the way).
    """
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tok-acme": {"tenant": "acme", "scopes": ["recall", "ingest"]},
                "tok-other": {"tenant": "other", "scopes": ["recall", "ingest"]},
            }
        )
    )
    sse = {"Accept": "text/event-stream"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with (
        http_server(tmp_path / "data", "--tokens-file", str(tokens)) as url,
        httpx.Client(headers=SSE_AND_JSON, timeout=30) as http,
    ):
        slash = url + "/"
        missing = http.post(slash, json=ping)  # httpx follows no redirect: a 307 shows
        assert missing.status_code == 401, missing.text
        assert missing.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer <token>" in transport_error(missing)
        for method in ("PUT", "HEAD"):
            r = http.request(method, slash, headers={"Authorization": "Bearer tok-acme"})
            assert r.status_code == 405 and r.headers["allow"] == "GET, POST, DELETE"
        r = http.get(slash, headers={"Authorization": "Bearer tok-acme"})
        assert r.status_code == 405 and r.headers["allow"] == "POST, DELETE"
        # A session opened at /mcp/ is one session, at either path, for its token alone.
        owner = _open_session(http, slash, "tok-acme")
        note = _call("remember", {"content": "Acme's vault code is 7731."})
        assert http.post(slash, json=note, headers=owner).status_code == 200
        answer = http.post(url, json=_call("recall", {"query": "vault"}), headers=owner)
        assert answer.status_code == 200 and "7731" in answer.text
        theirs = {**owner, "Authorization": "Bearer tok-other"}
        stolen = http.post(slash, json=_call("recall", {"query": "vault"}), headers=theirs)
        assert stolen.status_code == 404 and "7731" not in stolen.text
        with http.stream("GET", slash, headers={**owner, **sse}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
        assert http.delete(slash, headers=owner).status_code == 200
        assert http.post(url, json=note, headers=owner).status_code == 404  # ended for both
    with http_server(tmp_path / "open") as url:
        # Loopback without tokens: a page elsewhere cannot drive it by the slash either.
        evil = httpx.post(url + "/", json=ping, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403, evil.status_code

        async def main() -> None:  # the SDK's own client, given the URL with the slash
            async with http_client(url + "/") as c:
                a = await c.ok("remember", {"content": "The VPN gateway is vpn-2."})
                hits = (await c.ok("recall", {"query": "vpn gateway"}))["hits"]
                assert hits[0]["id"] == a["id"]

        anyio.run(main)


def test_a_coded_body_and_a_repeated_key_are_refused_before_the_sdk(tmp_path: Path) -> None:
    """The body checks MemoryProtocol makes (6a177d1, 84206b1), on ``/mcp`` too.

    Before: a gzip body was a -32700 "not UTF-8 text" (the compressed bytes read as
    text); plain JSON labelled ``Content-Encoding: br`` was served as if the label
    were not there; ``{"query": "vault", "query": "tea"}`` in a tool call's arguments
    was served with the last value (a proxy reading the first checked another
    request); an id of 5000 digits was refused in Python's words
    (``sys.set_int_max_str_digits()``).
    """
    with (
        http_server(tmp_path / "data") as url,
        httpx.Client(headers=SSE_AND_JSON, timeout=30) as http,
    ):
        session = {**_open_session(http, url), "Content-Type": "application/json"}
        call = json.dumps(_call("recall", {"query": "vault"})).encode()
        for coding, raw in (("gzip", gzip.compress(call)), ("br", call)):
            r = http.post(url, content=raw, headers={**session, "Content-Encoding": coding})
            assert r.status_code == 415, r.text
            assert r.headers["accept-encoding"] == "identity"
            assert f"Content-Encoding {coding!r} is not supported" in transport_error(r)
        sent = {**session, "Content-Encoding": "identity"}
        assert http.post(url, content=call, headers=sent).status_code == 200
        twice = call.replace(b'"query": "vault"', b'"query": "vault", "query": "tea"')
        r = http.post(url, content=twice, headers=session)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == -32700
        assert "the key 'query' is named twice" in r.json()["error"]["message"]
        digits = b'{"jsonrpc": "2.0", "id": ' + b"9" * 5000 + b', "method": "ping"}'
        r = http.post(url, content=digits, headers=session)
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700, r.text
        message = r.json()["error"]["message"]
        assert "a number of more than 4300 digits" in message and "sys." not in message
