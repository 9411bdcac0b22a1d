"""``memstore mcp --transport http`` under ``memstore serve``'s HTTP defence flags.

Before: the MCP server took none of them. Its header, body and keep-alive
timeouts and connection caps were the defaults, fixed; its body limit 4 MiB,
fixed; its Host and Origin checks the SDK's, on a loopback bind only, with
no ``--allow-host`` (on a public bind there were none); it had no rate limit
at all. Now the flags are defined once (``memstore.cli._http``), read once
(:func:`memstore.web.settings.http_settings`) and enforced by the code paths
``memstore serve`` runs: these tests start real servers on loopback with
small values, so that every cap and timer is reached within a second or two.
Other clients are other loopback source addresses (127.0.0.2, 127.0.0.3).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memstore.cli.parser import build_parser
from memstore.web.settings import HTTP_OPTIONS
from tests.adversarial.http_probe import Answer, Raw
from tests.mcp_harness import free_port, http_server, run_cli
from tests.test_mcp_http import SSE_AND_JSON, _call, _open_session

HEADER_TIMEOUT = 0.5
MAX_BODY = 4096
PER_CLIENT = 4
MAX_CONNECTIONS = 6
MAX_HEADER_BYTES = 2048
FLAGS = (
    "--header-timeout", str(HEADER_TIMEOUT), "--body-timeout", "0.5",
    "--keepalive-timeout", "0.5", "--max-body", str(MAX_BODY),
    "--max-connections", str(MAX_CONNECTIONS),
    "--max-connections-per-client", str(PER_CLIENT),
    "--max-header-bytes", str(MAX_HEADER_BYTES),
    "--allow-host", "memory.internal", "--allow-origin", "https://app.example",
)  # fmt: skip


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server with small limits for the module (its tests leave no socket open)."""
    with http_server(tmp_path_factory.mktemp("guarded"), *FLAGS) as u:
        yield u


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def rpc_error(body: bytes) -> str:
    """The message of a JSON-RPC error with ``id`` null, as every refusal of /mcp is."""
    envelope = json.loads(body)
    assert envelope["id"] is None and envelope["error"]["code"] == -32000, envelope
    message: str = envelope["error"]["message"]
    return message


def recent_contents(http: httpx.Client, url: str, session: dict[str, str]) -> list[str]:
    """What the server holds now (``recent``), read through the session."""
    answer = http.post(url, json=_call("recent", {"limit": 50}), headers=session)
    assert answer.status_code == 200, answer.text
    reply = json.loads(answer.text.partition("data: ")[2].splitlines()[0])
    return [hit["content"] for hit in reply["result"]["structuredContent"]["items"]]


def post(raw: Raw, body: bytes, session: dict[str, str] | None = None) -> Answer:
    headers = [("Content-Type", "application/json"), ("Accept", SSE_AND_JSON["Accept"])]
    headers += list((session or {}).items())
    return raw.request("POST", "/mcp", body=body, headers=headers)


# ------------------------------------------------------------------- timeouts


def test_a_header_sent_slowly_is_cut_at_the_header_timeout(url: str) -> None:
    port = port_of(url)
    # Half a header, then nothing; and a header trickled a line every 0.1 s (each byte
    # in time, the whole never): both get the 408, naming the --header-timeout given.
    half = Raw(port)
    trickled = Raw(port)
    try:
        half.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
        trickled.send(b"POST /mcp HTTP/1.1\r\n")
        cut = False
        for i in range(100):  # 10 s of trickling, 20 times the timeout
            try:
                trickled.send(b"X-Slow-%d: y\r\n" % i)
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            time.sleep(0.1)
        assert cut or trickled.closed_by_server(), "a trickling client must be cut off"
        answer = half.drain()
    finally:
        half.close()
        trickled.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    message = rpc_error(answer.partition(b"\r\n\r\n")[2])
    assert message == f"the request's headers did not arrive within {HEADER_TIMEOUT:g} s"


def test_a_body_sent_slowly_is_cut_at_the_body_timeout_and_nothing_is_stored(url: str) -> None:
    port = port_of(url)
    with httpx.Client(headers=SSE_AND_JSON, timeout=30) as http:
        session = _open_session(http, url)
        body = json.dumps(_call("remember", {"content": "a body that never ends"})).encode()
        raw = Raw(port)
        try:
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/json\r\nAccept: {SSE_AND_JSON['Accept']}\r\n"
                f"Mcp-Session-Id: {session['Mcp-Session-Id']}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            raw.send(head.encode() + body[:-5])  # the last bytes never come
            assert raw.drain() == b"", "closed without an answer: the request is dropped"
        finally:
            raw.close()
        assert "a body that never ends" not in recent_contents(http, url, session)


def test_an_open_stream_outlives_every_timeout(url: str) -> None:
    """A session's GET stream is a request being answered: no read timeout runs on it."""
    port = port_of(url)
    with httpx.Client(headers=SSE_AND_JSON, timeout=30) as http:
        session = _open_session(http, url)
        raw = Raw(port)
        try:
            raw.send(
                b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n"
                b"Mcp-Session-Id: %s\r\n\r\n" % (port, session["Mcp-Session-Id"].encode())
            )
            while b"\r\n\r\n" not in raw._buffer:
                assert raw._fill(), raw._buffer
            assert raw._buffer.startswith(b"HTTP/1.1 200 "), raw._buffer
            assert b"content-type: text/event-stream" in raw._buffer.lower()
            raw.sock.settimeout(4 * HEADER_TIMEOUT)  # four times every timeout given
            with pytest.raises(TimeoutError):
                raw._fill()  # neither closed nor cut: still open, nothing to say
            raw.sock.settimeout(30)
            # The session goes on meanwhile; ending it ends the stream, cleanly.
            assert recent_contents(http, url, session) is not None
            assert http.delete(url, headers=session).status_code == 200
            rest = raw.drain()
        finally:
            raw.close()
    # The whole exchange is in ``rest`` (its head too): the stream's answer is the only one.
    assert rest.endswith(b"0\r\n\r\n") and rest.count(b"HTTP/1.1 ") == 1, rest


# ----------------------------------------------------------------------- body


def test_an_oversized_body_is_refused_413_and_nothing_is_stored(url: str) -> None:
    port = port_of(url)
    with httpx.Client(headers=SSE_AND_JSON, timeout=30) as http:
        session = _open_session(http, url)
        big = json.dumps(_call("remember", {"content": "oversized " + "x" * MAX_BODY})).encode()
        raw = Raw(port)
        try:
            refused = post(raw, big, session)
        finally:
            raw.close()
        assert refused.status == 413, refused
        assert str(MAX_BODY) in rpc_error(refused.body)
        # Sent without a length (chunked): refused as soon as it passes the limit.
        chunks = (big[i : i + 1000] for i in range(0, len(big), 1000))
        typed = {**session, "Content-Type": "application/json"}
        streamed = http.post(url, content=chunks, headers=typed)
        assert streamed.status_code == 413, streamed.text
        small = http.post(url, json=_call("remember", {"content": "a small one"}), headers=session)
        assert small.status_code == 200, small.text
        contents = recent_contents(http, url, session)
    assert contents == ["a small one"], contents


def test_headers_over_max_header_bytes_are_431(url: str) -> None:
    """Before: 64 KiB, fixed; now ``--max-header-bytes``, a JSON-RPC error as every refusal."""
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with httpx.Client(headers=SSE_AND_JSON, timeout=30) as http:
        padded = http.post(url, json=ping, headers={"X-Pad": "p" * 1000})
        assert padded.status_code != 431, padded.text
        refused = http.post(url, json=ping, headers={"X-Pad": "p" * 3000})
    assert refused.status_code == 431, refused.text
    assert rpc_error(refused.content) == f"the request's headers exceed {MAX_HEADER_BYTES} bytes"


# -------------------------------------------------------------- Host, Origin


def test_a_host_or_origin_not_allowed_is_refused_and_an_allowed_one_served(url: str) -> None:
    port = port_of(url)
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example"):
        raw = Raw(port)
        try:
            answer = raw.request("POST", "/mcp", body=ping, host=host)
        finally:
            raw.close()
        assert answer.status == 403, (host, answer)
        assert "is not a name this server answers to" in rpc_error(answer.body)
    # --allow-host memory.internal: that name is served (a session opens under it).
    with httpx.Client(headers={**SSE_AND_JSON, "Host": "memory.internal"}, timeout=30) as http:
        assert "Mcp-Session-Id" in _open_session(http, url)
    evil = httpx.post(url, content=ping, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403 and "may not call this server" in rpc_error(evil.content)
    assert "access-control-allow-origin" not in evil.headers
    # --allow-origin https://app.example: its pages may call, with the MCP headers.
    preflight = httpx.options(
        url,
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, mcp-session-id, mcp-protocol-version",
        },
    )
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert "mcp-session-id" in preflight.headers["access-control-allow-headers"].lower()
    app = {**SSE_AND_JSON, "Origin": "https://app.example"}
    with httpx.Client(headers=app, timeout=30) as http:
        opened = http.post(
            url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "page", "version": "0"},
                },
            },
        )
    assert opened.status_code == 200, opened.text
    assert opened.headers["access-control-allow-origin"] == "https://app.example"
    exposed = opened.headers["access-control-expose-headers"].lower()
    assert "mcp-session-id" in exposed, exposed  # a page can read its session's id


# ---------------------------------------------------------- connection caps


def test_connections_over_the_caps_are_refused_at_once(tmp_path: Path) -> None:
    # A server of its own, whose header timeout (10 s) outlasts a loaded machine's pauses:
    # a held connection cut at the module server's 0.5 s would free its slot.
    flags = list(FLAGS)
    flags[flags.index("--header-timeout") + 1] = "10"
    with http_server(tmp_path / "caps", *flags) as url:
        _over_the_caps(url)


def _over_the_caps(url: str) -> None:
    port = port_of(url)
    held: list[Raw] = []
    try:
        held += [Raw(port, "127.0.0.2") for _ in range(PER_CLIENT)]
        for s in held:  # each is admitted: idle, within its header timeout
            s.send(b"GET /mcp HTTP/1.1\r\n")
        one_more = Raw(port, "127.0.0.2")
        per_client = one_more.drain()
        one_more.close()
        assert per_client.startswith(b"HTTP/1.1 503 "), per_client
        assert b"\r\nretry-after: 1\r\n" in per_client.lower()
        message = rpc_error(per_client.partition(b"\r\n\r\n")[2])
        assert f"as many connections as one may hold ({PER_CLIENT})" in message
        held += [Raw(port, "127.0.0.3") for _ in range(MAX_CONNECTIONS - PER_CLIENT)]
        for s in held[PER_CLIENT:]:
            s.send(b"GET /mcp HTTP/1.1\r\n")
        anyone = Raw(port, "127.0.0.1")
        in_all = anyone.drain()
        anyone.close()
        assert in_all.startswith(b"HTTP/1.1 503 "), in_all
        message = rpc_error(in_all.partition(b"\r\n\r\n")[2])
        assert f"as many connections as it accepts ({MAX_CONNECTIONS})" in message
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 30  # the held ones close; the server serves again
    while True:
        answer = httpx.get(url)
        if answer.status_code == 405:
            break
        assert answer.status_code == 503 and time.monotonic() < deadline, answer.text
        time.sleep(0.05)


# ------------------------------------------------------------------ rate limit


def test_each_tenant_is_held_to_its_rate(tmp_path: Path) -> None:
    """Before: no rate limit at all. Now ``--rate-per-second`` and ``--rate-burst`` per
    tenant (the token's), as ``memstore serve``'s: a 429 with ``Retry-After``."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tok-acme": {"tenant": "acme", "scopes": ["recall"]},
                "tok-acme-2": {"tenant": "acme", "scopes": ["recall"]},
                "tok-other": {"tenant": "other", "scopes": ["recall"]},
            }
        )
    )
    rate = ("--rate-per-second", "0.01", "--rate-burst", "3")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with http_server(tmp_path / "data", "--tokens-file", str(tokens), *rate) as url:

        def status(token: str) -> httpx.Response:
            return httpx.post(url, json=ping, headers={"Authorization": f"Bearer {token}"})

        assert status("nope").status_code == 401  # takes nothing from any bucket
        first = [status("tok-acme").status_code for _ in range(2)]
        first.append(status("tok-acme-2").status_code)  # the same tenant's bucket
        assert 429 not in first, first
        refused = status("tok-acme")
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        assert "rate" in rpc_error(refused.content)
        assert status("tok-acme-2").status_code == 429
        assert status("tok-other").status_code != 429  # another tenant, another bucket


# ----------------------------------------------------------- the command line


def _actions(command: str) -> dict[str, argparse.Action]:
    """``memstore COMMAND``'s flags by the name argparse stores them under."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {a.dest: a for a in sub.choices[command]._actions}


def test_serve_and_mcp_take_the_same_defence_flags() -> None:
    """One definition: the same names, defaults and help (``--max-body``'s default is each
    surface's own: MemoryProtocol's 256 KiB, MCP's 4 MiB, the SDK's; serve's rate help adds
    what the Mind Layer API does with it)."""
    serve, mcp = _actions("serve"), _actions("mcp")
    for dest in HTTP_OPTIONS:
        a, b = serve[dest], mcp[dest]
        assert a.option_strings == b.option_strings, dest
        assert (a.type, a.metavar, a.nargs, a.default) == (b.type, b.metavar, b.nargs, b.default)
        if dest == "rate_per_second":
            assert str(a.help).startswith(str(b.help)), dest
        elif dest != "max_body":
            assert a.help == b.help, dest
    # Not given is None; the server applies its surface's default, which the help says.
    assert "(default 262144, 256 KiB)" in str(serve["max_body"].help)
    assert "(default 4194304, 4 MiB)" in str(mcp["max_body"].help)


@pytest.mark.parametrize(
    "flag",
    [
        ("--header-timeout", "1"),
        ("--allow-host", "memory.internal"),
        ("--allow-origin", "https://app.example"),
        ("--max-body", "1024"),
        ("--max-connections", "8"),
        ("--rate-burst", "3"),
        ("--shutdown-grace", "1"),
    ],
)
def test_a_defence_flag_with_stdio_is_refused_and_nothing_starts(
    tmp_path: Path, flag: tuple[str, str]
) -> None:
    """stdio has no connections, Host or HTTP bodies: a flag for them is a mistake (the
    operator meant --transport http), said at once rather than ignored."""
    data = tmp_path / "data"
    done = run_cli("mcp", "--data", str(data), *flag, stdin="")
    assert done.returncode == 2, done.stderr
    assert f"{flag[0]} is for --transport http" in done.stderr, done.stderr
    assert not data.exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--header-timeout", "0"], "header_timeout must be a positive number"),
        (["--max-connections", "0"], "max_connections must be a positive integer"),
        (["--allow-host", "http://x"], "not a host name"),
        (["--allow-origin", "app.example"], "not a web origin"),
        (["--max-body", "0"], "--max-body: must be at least 1"),
        (["--rate-per-second", "nan"], "--rate-per-second: must be a finite number above 0"),
    ],
)
def test_a_defence_flag_it_cannot_take_is_refused_before_anything_opens(
    tmp_path: Path, flags: list[str], says: str
) -> None:
    data = tmp_path / "data"
    port = str(free_port())  # refused before the bind: nothing would listen there anyway
    done = run_cli("mcp", "--data", str(data), "--transport", "http", "--port", port, *flags)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr, done.stderr
    assert not data.exists()
