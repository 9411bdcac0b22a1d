"""Malformed JSON-RPC to ``memstore mcp``: a protocol error for each, over both transports.

Each case is sent as raw bytes to a real server (a subprocess on stdio, a
real loopback HTTP server), and the answer read off the wire: -32700 with
``id`` ``null`` for what is not JSON, -32600 for a batch or an object that
is not a request, -32601 for an unknown method, nothing for a notification
nobody can use, -32602 naming the problem for params a method cannot take,
and JSON-RPC error bodies for the transport's own refusals.
Over stdio, requests read before the client closes stdin are all answered.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.mcp.framing import REQUEST_METHODS, frame
from memstore.memory import Memory
from tests.mcp_harness import ROOT, _env, http_server, mcp_command

INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

# (raw message, expected code, expected id); code None: no answer at all.
CASES: list[tuple[bytes, int | None, Any]] = [
    (b"not json", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, None),
    (b'\xff\xfe{"jsonrpc": "2.0"}', -32700, None),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}', -32700, None),
    (b"[" * 100_000 + b"]" * 100_000, -32700, None),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600, None),
    (b"[]", -32600, None),
    (b'"ping"', -32600, None),
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 11}', -32600, 11),
    (b'{"jsonrpc": "2.0", "id": 12, "method": 5}', -32600, 12),
    (b'{"jsonrpc": "1.0", "id": 13, "method": "ping"}', -32600, 13),
    (b'{"jsonrpc": "2.0", "id": "p", "method": "ping", "params": [1]}', -32600, "p"),
    (b'{"jsonrpc": "2.0", "id": 14, "method": "no/such/method"}', -32601, 14),
    (b'{"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": {}}', -32602, 15),
    (b'{"jsonrpc": "2.0", "id": 16, "method": "initialize"}', -32602, 16),
    (
        b'{"jsonrpc": "2.0", "id": 17, "method": "tools/call",'
        b' "params": {"name": "recall", "arguments": [1]}}',
        -32602,
        17,
    ),
    # Lone surrogates: legal JSON escapes, but no UTF-8 answer can echo them raw.
    (b'{"jsonrpc": "2.0", "id": 18, "method": "\\ud800"}', -32601, 18),
    (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}', -32600, None),
    (
        b'{"jsonrpc": "2.0", "id": 19, "method": "tools/call",'
        b' "params": {"name": "recall", "arguments": {"\\udc00": 1}}}',
        -32602,
        19,
    ),
    (b'{"jsonrpc": "2.0", "method": "no/such/notification"}', None, None),
    (b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 3}', None, None),
]


def _ids(case: tuple[bytes, int | None, Any]) -> str:
    return case[0][:40].decode("utf-8", "replace")


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_frame_answers_each_malformed_message(case: tuple[bytes, int | None, Any]) -> None:
    raw, code, request_id = case
    framed = frame(raw)
    assert framed.message is None
    if code is None:
        assert framed.error is None
    else:
        assert framed.error is not None
        assert framed.error["jsonrpc"] == "2.0"
        assert (framed.error["error"]["code"], framed.error["id"]) == (code, request_id)
        assert framed.error["error"]["message"]


def test_frame_passes_requests_notifications_and_responses() -> None:
    for ok in (
        INIT,
        INITIALIZED,
        {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "recall"}},
        {"jsonrpc": "2.0", "id": 3, "result": {}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}},
    ):
        framed = frame(json.dumps(ok).encode())
        assert framed.error is None and framed.message is not None, ok


def _stdio_exchange(data: Path, lines: list[bytes]) -> tuple[list[dict[str, Any]], str]:
    """Write ``lines`` to a stdio server, close stdin; every line it wrote, and its stderr."""
    head = [json.dumps(INIT).encode(), json.dumps(INITIALIZED).encode()]
    done = subprocess.run(
        mcp_command(data),
        input=b"\n".join(head + lines) + b"\n",
        capture_output=True,
        env=_env(),
        cwd=str(ROOT),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    out = [json.loads(line) for line in done.stdout.decode().splitlines()]
    return out, done.stderr.decode()


def test_stdio_answers_every_malformed_line_and_keeps_serving(tmp_path: Path) -> None:
    lines = [raw for raw, _, _ in CASES] + [b'{"jsonrpc": "2.0", "id": 99, "method": "ping"}']
    out, err = _stdio_exchange(tmp_path, lines)
    assert out[0]["id"] == "init" and "result" in out[0]
    answers = [(m["error"]["code"], m["id"]) for m in out[1:] if "error" in m]
    assert answers == [(code, rid) for _, code, rid in CASES if code is not None]
    assert out[-1] == {"jsonrpc": "2.0", "id": 99, "result": {}}
    assert "Traceback" not in err and "validation error" not in err


def test_stdio_answers_requests_read_before_stdin_closed(tmp_path: Path) -> None:
    calls = [
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": f"Fact number {n} is true."}},
        }
        for n in [*range(1, 31), 30]  # a client may reuse an id: both calls are answered
    ]
    out, _ = _stdio_exchange(tmp_path, [json.dumps(c).encode() for c in calls])
    answered = sorted(m["id"] for m in out if m.get("id") != "init")
    assert answered == [*range(1, 31), 30]
    assert all(not m["result"]["isError"] for m in out[1:])
    with Memory(tmp_path, embedder="hash") as mem:
        assert len(mem.recent(100)) == 31


def test_stdio_refuses_an_over_long_line_and_reads_on(tmp_path: Path) -> None:
    huge = (
        b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"x": "'
        + b"a" * (5 << 20)
        + b'"}}'
    )
    out, _ = _stdio_exchange(tmp_path, [huge, b'{"jsonrpc": "2.0", "id": 6, "method": "ping"}'])
    assert out[1]["error"]["code"] == -32600 and out[1]["id"] is None
    assert out[2] == {"jsonrpc": "2.0", "id": 6, "result": {}}


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A loopback HTTP server with one initialised session: its URL and the headers to use."""
    with http_server(tmp_path_factory.mktemp("http")) as url:
        r = httpx.post(url, json=INIT, headers=HEADERS)
        assert r.status_code == 200
        headers = dict(HEADERS)
        headers["mcp-session-id"] = r.headers["mcp-session-id"]
        headers["mcp-protocol-version"] = "2025-06-18"
        assert httpx.post(url, json=INITIALIZED, headers=headers).status_code == 202
        yield url, headers


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_http_answers_each_malformed_body(
    session: tuple[str, dict[str, str]], case: tuple[bytes, int | None, Any]
) -> None:
    url, headers = session
    raw, code, request_id = case
    r = httpx.post(url, content=raw, headers=headers)
    if code is None:
        assert (r.status_code, r.content) == (202, b"")
        return
    assert r.status_code == (400 if code in (-32700, -32600) else 200)
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert (body["jsonrpc"], body["error"]["code"], body["id"]) == ("2.0", code, request_id)
    # The session still serves.
    ok = httpx.post(url, json={"jsonrpc": "2.0", "id": 7, "method": "ping"}, headers=headers)
    assert ok.status_code == 200 and '"id":7,"result":{}' in ok.text


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ({"Content-Type": "text/plain"}, 400),
        ({"Origin": "http://evil.example"}, 403),
        ({"Host": "evil.example"}, 403),  # as `memstore serve` answers it
        ({"mcp-session-id": "not-a-session"}, 404),
        ({"Accept": "text/plain"}, 406),
    ],
)
def test_http_transport_refusals_are_json_rpc_errors(
    session: tuple[str, dict[str, str]], extra: dict[str, str], status: int
) -> None:
    url, headers = session
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    r = httpx.post(url, content=ping, headers={**headers, **extra})
    assert r.status_code == status
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert isinstance(body["error"]["code"], int) and body["error"]["message"]


def test_http_body_over_4_mib_is_413_before_the_body_ends(
    session: tuple[str, dict[str, str]],
) -> None:
    url, headers = session
    declared = httpx.post(url, content=b" " * ((4 << 20) + 1), headers=headers)
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == -32000 and declared.json()["id"] is None
    # Chunked, no length given, and never finished: the answer must come as
    # soon as the limit is passed (a server reading to the end would hang).
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k != "Content-Type")
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b"100000\r\n" + b" " * (1 << 20) + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        with contextlib.suppress(OSError):  # the server may stop reading once it answered
            for _ in range(5):
                sock.sendall(chunk)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:100]


json_leaf: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "a\udc00b", "ping"]),  # JSON escapes of lone surrogates
)
json_any: st.SearchStrategy[Any] = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)
methods = st.one_of(st.sampled_from(sorted(REQUEST_METHODS)), st.text(max_size=12), json_leaf)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.one_of(st.just("2.0"), json_leaf),
        "id": st.one_of(st.integers(), st.text(max_size=6), json_leaf),
        "method": methods,
        "params": st.one_of(st.dictionaries(st.text(max_size=8), json_any), json_any),
        "result": json_any,
        "error": json_any,
    },
)
FUZZ = settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=40), json_any.map(json.dumps), messages.map(json.dumps)))
def test_frame_never_raises_and_answers_in_the_json_rpc_shape(raw: Any) -> None:
    framed = frame(raw)
    assert framed.message is None or framed.error is None
    if framed.error is not None:
        assert set(framed.error) == {"jsonrpc", "id", "error"}
        assert framed.error["error"]["code"] in (-32700, -32600, -32601, -32602)
        request_id = framed.error["id"]
        assert request_id is None or isinstance(request_id, str | int)
        json.dumps(framed.error)


def test_http_random_messages_get_json_rpc_answers_never_a_500(
    session: tuple[str, dict[str, str]],
) -> None:
    url, headers = session

    @FUZZ
    @given(message=messages)
    def attempt(message: dict[str, Any]) -> None:
        r = httpx.post(url, content=json.dumps(message), headers=headers)
        assert r.status_code in (200, 202, 400), (message, r.status_code, r.text[:200])
        if r.status_code == 202:
            return
        text = r.text
        if r.headers["content-type"].startswith("text/event-stream"):
            # SSE ends a line at CR LF, CR or LF only: a message's text may hold U+2028 raw,
            # where str.splitlines would break the data line in two
            lines = re.split("\r\n|\r|\n", text)
            text = next(line[6:] for line in lines if line.startswith("data: "))
        body = json.loads(text)
        assert body["jsonrpc"] == "2.0" and ("result" in body) != ("error" in body), body

    attempt()


@settings(max_examples=5, deadline=None, database=None)
@given(lines=st.lists(st.one_of(messages.map(json.dumps), st.binary(max_size=30)), max_size=60))
def test_stdio_survives_any_stream_of_lines(lines: list[Any]) -> None:
    raw = [line.encode() if isinstance(line, str) else line.replace(b"\n", b" ") for line in lines]
    last = b'{"jsonrpc": "2.0", "id": "last", "method": "ping"}'
    with tempfile.TemporaryDirectory() as data:
        out, err = _stdio_exchange(Path(data), [*raw, last])
    assert {"jsonrpc": "2.0", "id": "last", "result": {}} in out
    assert "Traceback" not in err


def test_stdio_lines_hold_no_character_a_line_reader_breaks_at(tmp_path: Path) -> None:
    # U+2028, U+2029 and U+0085 went out raw inside a JSON string: a client reading stdout
    # with str.splitlines (as _stdio_exchange does) got two lines, neither of them JSON.
    # The hypothesis test above met it now and then, with a request id holding one.
    text = "first\u2028second\u2029third\x85fourth"

    def call(request_id: int, tool: str, arguments: dict[str, Any]) -> bytes:
        params = {"name": tool, "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return json.dumps(message, ensure_ascii=False).encode()

    ping = {"jsonrpc": "2.0", "id": "a\u2028b", "method": "ping"}
    unknown = {"jsonrpc": "2.0", "id": "c\x85d", "method": "nope"}
    written = [json.dumps(m, ensure_ascii=False).encode() for m in (ping, unknown)]
    out, err = _stdio_exchange(tmp_path, [*written, call(1, "remember", {"content": text})])
    by_id = {m["id"]: m for m in out}
    assert by_id["a\u2028b"]["result"] == {} and by_id["c\x85d"]["error"]["code"] == -32601
    assert by_id[1]["result"]["isError"] is False
    # a second server on the folder (requests of one exchange may be answered in any order)
    out, err2 = _stdio_exchange(tmp_path, [call(2, "recall", {"query": "fourth"})])
    hits = {m["id"]: m for m in out}[2]["result"]["structuredContent"]["hits"]
    assert [h["content"] for h in hits] == [text]
    assert "Traceback" not in err + err2
