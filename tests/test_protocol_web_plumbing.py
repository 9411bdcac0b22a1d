"""memstore.web, the HTTP plumbing the protocol server uses: each piece on its own.

The connection guard runs here in-process over both of uvicorn's HTTP/1.1
parsers (h11 and httptools), with timeouts of a fraction of a second; the
policies, the JSON depth scan and the tokens file are plain functions.
The end-to-end probes against ``memstore serve`` are in tests/adversarial.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st
from uvicorn.server import ServerState

from memstore.protocol.errors import ERROR_KINDS
from memstore.web import REFUSAL_CODES, HostPolicy, OriginPolicy, TokensFile
from memstore.web.body import (
    NOT_JSON,
    RepeatedKey,
    check_json_text,
    json_depth,
    parse_unique_keys,
    unique_pairs,
)
from memstore.web.connections import ConnectionLimits, guarded_protocol
from memstore.web.guard import HostOriginGuard
from memstore.web.refusal import Refusal
from memstore.web.runner import ServeConfig, _inner_protocol, uvicorn_config
from memstore.web.security import DEFAULT_SECURITY_HEADERS, SecurityHeaders

ROOT = Path(__file__).resolve().parent.parent
Scope = MutableMapping[str, Any]


# --------------------------------------------------------------------- the guard


async def _echo(scope: Scope, receive: Callable[[], Awaitable[Any]], send: Any) -> None:
    """A tiny ASGI app: reads the whole body, answers its length (``/early``: answers at once)."""
    size = 0
    while scope["path"] != "/early":
        message = await receive()
        if message["type"] != "http.request":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = str(size).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


LIMITS = ConnectionLimits(
    header_timeout=0.3,
    body_timeout=0.3,
    keepalive_timeout=5,
    max_connections=3,
    max_connections_per_client=2,
    max_header_bytes=4096,
)


async def _serve(
    http: str, limits: ConnectionLimits = LIMITS, made: list[Any] | None = None
) -> tuple[asyncio.Server, int, Any]:
    """A server of ``_echo`` behind the guard; ``made``: gets each connection's protocol."""
    protocol = guarded_protocol(_inner_protocol(http), limits)
    config = uvicorn.Config(
        _echo, http=protocol, ws="none", lifespan="off", log_level="error", timeout_keep_alive=5
    )
    config.load()
    state = ServerState()
    loop = asyncio.get_running_loop()

    def connection() -> Any:
        one = protocol(config=config, server_state=state, app_state={}, _loop=loop)
        if made is not None:
            made.append(one)
        return one

    server = await loop.create_server(connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, port, protocol


async def _until_no_connection(protocol: Any) -> None:
    """Wait (10 s at most) until the server counts no open connection."""
    for _ in range(1000):
        if protocol.counter.open == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{protocol.counter.open} connection(s) still open after 10 s")


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout=10)  # until EOF; a hang guard


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_the_guard_over_each_parser(http: str) -> None:
    async def scenario() -> None:
        server, port, protocol = await _serve(http)
        try:
            # A half-sent header: 408, then closed.
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            assert (await _read_all(r)).startswith(b"HTTP/1.1 408 ")
            w.close()
            await w.wait_closed()
            # A whole request is answered, and the connection is kept.
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            assert (await asyncio.wait_for(r.readuntil(b"3"), 10)).startswith(b"HTTP/1.1 200")
            # A body that stops: the connection is closed, nothing answered.
            w.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nabc")
            assert await _read_all(r) == b""
            w.close()
            await w.wait_closed()
            # An answer before the body was read (as a 401 is): the rest of the body
            # is not taken for headers, and the connection goes on.
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(
                b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 6000\r\n\r\n" + b"a" * 1000
            )
            assert (await asyncio.wait_for(r.readuntil(b"\r\n\r\n0"), 10)).startswith(
                b"HTTP/1.1 200"
            )
            w.write(b"a" * 5000)  # the rest of the body, alone...
            await w.drain()
            await asyncio.sleep(0.05)
            w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # ... then the next request
            assert (await asyncio.wait_for(r.readuntil(b"\r\n\r\n0"), 10)).startswith(
                b"HTTP/1.1 200"
            )
            w.close()
            await w.wait_closed()
            # Caps: two from this address, the third refused at once with 503. On a
            # server of its own, whose header timeout outlasts a loaded machine's pauses
            # (at 0.3 s a held connection could be cut, freeing its slot, before the
            # third arrived).
            patient = replace(LIMITS, header_timeout=10.0, body_timeout=10.0)
            caps, caps_port, caps_protocol = await _serve(http, patient)
            try:
                held = [await asyncio.open_connection("127.0.0.1", caps_port) for _ in range(2)]
                r, w = await asyncio.open_connection("127.0.0.1", caps_port)
                assert (await _read_all(r)).startswith(b"HTTP/1.1 503 ")
                w.close()
                await w.wait_closed()
                assert caps_protocol.counter.refused == 1
                for _, hw in held:
                    hw.close()
                    await hw.wait_closed()
                await _until_no_connection(caps_protocol)
            finally:
                caps.close()
                await caps.wait_closed()
            # Oversized headers: 431.
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 5000 + b"\r\n")
            assert (await _read_all(r)).startswith(b"HTTP/1.1 431 ")
            w.close()
            await w.wait_closed()
            await _until_no_connection(protocol)  # every connection's slot given back
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_headers_over_the_cap_are_431_however_they_arrive(http: str) -> None:
    """Measured before the parser sees them, or the request is under way (it was: 200)."""
    pad = b"X-Pad: " + b"a" * LIMITS.max_header_bytes + b"\r\n"
    whole = [
        b"GET / HTTP/1.1\r\nHost: x\r\n" + pad + b"\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n" + pad + b"\r\nabc",
        b"\r\n\r\nGET / HTTP/1.1\n" + pad.replace(b"\r", b"") + b"\n",  # bare LFs too
    ]

    async def answer(port: int, request: bytes) -> bytes:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(request)  # one write: on loopback, one read
        out = await _read_all(r)
        w.close()
        await w.wait_closed()
        return out

    async def scenario() -> None:
        server, port, _ = await _serve(http)
        try:
            for request in whole:
                assert (await answer(port, request)).startswith(b"HTTP/1.1 431 "), request[:40]
            # A body after headers within the cap is not counted, in the same read.
            small = b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            body = b"b" * (2 * LIMITS.max_header_bytes)
            out = await answer(port, small + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"%d" % len(body)), out
            # The next request of a kept-alive connection, in one read: measured as the
            # first is (it was not: the block went to the parser whole and was served).
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await asyncio.wait_for(r.readuntil(b"\r\n\r\n0"), 10)).startswith(
                b"HTTP/1.1 200"
            )
            w.write(whole[0])
            assert (await _read_all(r)).startswith(b"HTTP/1.1 431 ")
            w.close()
            await w.wait_closed()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


def test_h11_serves_every_header_block_the_cap_allows() -> None:
    """h11 refused a header block still incomplete past 16 KiB (its own default) with a
    plain-text 400, whatever ``--max-header-bytes`` said; serve_app's configuration gives
    it the cap, so the guard alone decides: under it served, over it 431."""
    limits = replace(LIMITS, max_header_bytes=64 * 1024)
    protocol = guarded_protocol(_inner_protocol("h11"), limits)
    config = uvicorn_config(_echo, ServeConfig(http="h11"), limits, protocol)
    config.load()

    async def trickled(port: int, pad: int) -> bytes:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: " + b"a" * pad)
        await w.drain()
        await asyncio.sleep(0.1)  # two reads: the block is incomplete after the first
        w.write(b"\r\n\r\n")
        out = await _read_all(r)
        w.close()
        await w.wait_closed()
        return out

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: protocol(config=config, server_state=ServerState(), app_state={}, _loop=loop),
            "127.0.0.1",
            0,
        )
        port = server.sockets[0].getsockname()[1]
        try:
            assert (await trickled(port, 32 * 1024)).startswith(b"HTTP/1.1 200 ")
            assert (await trickled(port, 70 * 1024)).startswith(b"HTTP/1.1 431 ")
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


def _data_segments_sent(sock: Any) -> int | None:
    """The TCP segments holding data that ``sock`` sent, as Linux counts them, or None.

    ``tcp_info.tcpi_data_segs_out`` (Linux 4.6 and later), at byte 156 of the struct.
    """
    tcp_info = getattr(socket, "TCP_INFO", None)
    if tcp_info is None:
        return None
    info = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, 256)
    if len(info) < 160:
        return None
    return int.from_bytes(info[156:160], sys.byteorder)


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_each_answer_leaves_in_one_segment(http: str) -> None:
    """uvicorn writes a head, then a body: sent as one write, the kernel counts one segment
    per answer (it counted two, and the client woke up for the head alone)."""

    async def scenario() -> None:
        made: list[Any] = []
        server, port, _ = await _serve(http, made=made)
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(5):
                w.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
                answer = await asyncio.wait_for(r.readuntil(b"\r\n\r\n3"), 10)
                assert answer.startswith(b"HTTP/1.1 200 ")
            segments = _data_segments_sent(made[0]._transport.get_extra_info("socket"))
            w.close()
            await w.wait_closed()
        finally:
            server.close()
            await server.wait_closed()
        if segments is None:
            pytest.skip("this kernel does not count the data segments a socket sent")
        assert segments == 5

    asyncio.run(scenario())


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="header_timeout"):
        ConnectionLimits(header_timeout=0)
    with pytest.raises(ValueError, match="max_connections"):
        ConnectionLimits(max_connections=0)


# ----------------------------------------------------------------------- policies


def test_a_public_bind_answers_any_host_unless_told() -> None:
    assert HostPolicy.for_bind("0.0.0.0").allows("memory.example.com")
    strict = HostPolicy.for_bind("0.0.0.0", ["memory.example.com"])
    assert strict.allows("memory.example.com:8080") and strict.allows("127.0.0.1")
    assert not strict.allows("evil.example")
    assert not HostPolicy.for_bind("127.0.0.1").allows("memory.example.com")
    assert HostPolicy.for_bind("127.0.0.1", ["*"]).allows("anything.example")
    assert not HostPolicy.for_bind("0.0.0.0").allows(None)
    with pytest.raises(ValueError, match="not a host name"):
        HostPolicy(["http://x"])


def test_origins() -> None:
    policy = OriginPolicy(["https://App.Example", "http://localhost:3000"])
    assert policy.allows("https://app.example:443", "127.0.0.1")
    assert policy.allows("http://localhost:3000", "127.0.0.1:8080")
    assert not policy.allows("http://localhost:3001", "127.0.0.1:8080")
    assert policy.allows("https://memory.example", "memory.example")  # its own origin
    assert policy.allows("http://memory.example:8080", "memory.example:8080")
    assert not policy.allows("http://memory.example:8081", "memory.example:8080")
    assert policy.allows(None, None)
    assert OriginPolicy(["*"]).allows("null", "x")
    with pytest.raises(ValueError, match="not a web origin"):
        OriginPolicy(["app.example"])


def test_the_guard_answers_a_host_the_same_each_time() -> None:
    """The Host values it allowed are remembered: the verdicts stay those of the policies."""
    guard = HostOriginGuard(
        _echo, hosts=HostPolicy(["mem.example"]), origins=OriginPolicy(["https://app.example"])
    )

    def verdict(*headers: tuple[bytes, bytes]) -> str | None:
        refusal = guard.check({"headers": list(headers)})
        return None if refusal is None else f"{refusal.code}: {refusal.message}"

    host = (b"host", b"mem.example")
    cases = [
        [host],
        [(b"Host", b"MEM.example:80")],
        [(b"host", b"evil.example")],
        [host, (b"origin", b"https://evil.example")],
        [host, (b"origin", b"https://app.example")],
        [host, (b"origin", b"https://app.example"), (b"Origin", b"https://app.example")],
        [host, host],
        [],
        [(b"host", b"localhost:8080"), (b"x-other", b"1")],
    ]
    first = [verdict(*case) for case in cases]
    assert [verdict(*case) for case in cases] == first
    assert [v is None for v in first] == [True, True, False, False, True, False, False, False, True]
    assert first[3] == (
        "forbidden_origin: Origin 'https://evil.example' may not call this server "
        "(only its own origin and the allowed origins)"
    )
    # Any host: more names than it remembers are all answered, a malformed one never.
    anyone = HostOriginGuard(_echo, hosts=HostPolicy(["*"]), origins=OriginPolicy())
    for n in range(200):
        assert anyone.check({"headers": [(b"host", b"h%d.example" % n)]}) is None
    assert anyone.check({"headers": [(b"host", b"a b")]}) is not None


def test_security_headers_are_added_after_the_answers_own() -> None:
    """Each missing one, in the policy's order, after the headers the application set."""

    async def answer(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        async def app(scope: Scope, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b""})

        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        await SecurityHeaders(app)({"type": "http"}, _echo, send)
        return list(sent[0]["headers"])

    own = [(b"content-type", b"text/html")]
    policy = [(k.lower().encode(), v.encode()) for k, v in DEFAULT_SECURITY_HEADERS.items()]
    assert asyncio.run(answer(own)) == own + policy
    theirs = [(b"Cache-Control", b"max-age=60")]  # set by the application: kept, not added
    assert asyncio.run(answer(theirs)) == theirs + [h for h in policy if h[0] != b"cache-control"]


def test_every_refusal_code_is_in_the_protocol_table() -> None:
    for code, status in REFUSAL_CODES.items():
        assert ERROR_KINDS[code].status == status, code


# ---------------------------------------------------------------------- JSON depth


def _nest(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{} '),
    _nest,
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(_json)
def test_json_depth_is_the_parsed_depth(value: Any) -> None:
    assert json_depth(json.dumps(value).encode()) == _depth(value)


def _loads_unique(raw: bytes) -> Any:
    """The oracle of :func:`parse_unique_keys`: the standard library's own call."""
    try:
        return json.loads(raw, object_pairs_hook=unique_pairs)
    except RepeatedKey as e:
        return ("repeated", e.key[:64])
    except json.JSONDecodeError:
        return NOT_JSON
    except ValueError:
        return ("refused",)
    except RecursionError:
        return NOT_JSON


def _parsed_unique(raw: bytes) -> Any:
    try:
        return parse_unique_keys(raw)
    except Refusal as r:
        return ("repeated", r.details["key"]) if r.details else ("refused",)


_texts = st.one_of(
    _json.map(json.dumps),
    st.text(alphabet='ab"\\[]{}:,\ufeff 1', max_size=20),  # mostly broken JSON
    st.just('{"k": 1, "\\u006b": 2}'),
)
_encodings = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-be"])


@settings(max_examples=400, deadline=None)
@given(_texts, _encodings)
def test_parse_unique_keys_reads_as_json_loads_does(text: str, encoding: str) -> None:
    """The decoder made once reads every body as ``json.loads`` with the hook does: values,
    repeated keys, encodings (BOMs too), broken text."""
    raw = text.encode(encoding, "surrogatepass")
    assert _parsed_unique(raw) == _loads_unique(raw)


@given(st.binary(max_size=24))
def test_parse_unique_keys_reads_any_bytes_as_json_loads_does(raw: bytes) -> None:
    assert _parsed_unique(raw) == _loads_unique(raw)


def test_check_json_text_refuses_only_depth_and_encoding() -> None:
    check_json_text(b"not json at all")  # syntax is the parser's to report
    with pytest.raises(Refusal, match="64"):
        check_json_text(b"[" * 65 + b"]" * 65)
    check_json_text(b"[" * 64 + b"]" * 64)


# ---------------------------------------------------------------------- tokens file


def test_tokens_file_reloads_and_keeps_the_last_good(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"a": 1}')
    tokens = TokensFile(path, json.loads)
    assert tokens.current() == {"a": 1}
    path.write_text('{"a": 1, "b": 2}')
    assert tokens.current() == {"a": 1, "b": 2} and tokens.reloads == 1
    path.write_text("{broken")
    assert tokens.current() == {"a": 1, "b": 2} and tokens.failures == 1
    assert tokens.current() == {"a": 1, "b": 2} and tokens.failures == 1  # once per change
    path.unlink()
    assert tokens.current() == {"a": 1, "b": 2} and tokens.failures == 2
    path.write_text('{"c": 3}')
    assert tokens.current() == {"c": 3}
    assert not tokens.reload() or tokens.current() == {"c": 3}


def test_tokens_file_must_be_good_at_start(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        TokensFile(tmp_path / "missing.json", json.loads)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError):
        TokensFile(tmp_path / "bad.json", json.loads)


# -------------------------------------------------------------------- layering


def test_web_imports_no_surface_and_no_framework_at_import() -> None:
    for path in (ROOT / "memstore" / "web").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith("memstore.protocol"), (path.name, name)
                assert not name.startswith(("memstore.memory", "memstore.store")), (path.name, name)
    assert _loaded("memstore.web", "fastapi", "starlette", "uvicorn", "memstore_index") == "[]"


def test_the_connection_cap_fits_the_descriptor_limit() -> None:
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300)); "
        "from memstore.web.connections import ConnectionLimits; "
        "from memstore.web.runner import fit_to_descriptors; "
        "f = fit_to_descriptors(ConnectionLimits()); "
        "print(f.max_connections, f.max_connections_per_client)"
    )
    done = _python(code)
    assert done.stdout.split() == ["172", "128"]  # 300 - 64 headroom - 64 lingering
    assert "ulimit -n 300" in done.stderr


def test_the_engine_and_the_cli_import_no_web_framework() -> None:
    frameworks = ("fastapi", "starlette", "uvicorn", "httptools", "prometheus_client")
    assert _loaded("memstore, memstore.cli", *frameworks) == "[]"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in a fresh interpreter with this checkout first; it must succeed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, check=True, env=env)


def _loaded(modules: str, *packages: str) -> str:
    """The modules of ``packages`` loaded after ``import modules`` alone, as printed."""
    code = (
        f"import sys, {modules}; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {packages!r}))"
    )
    return _python(code).stdout.strip()
