"""``memstore serve --api mindlayer`` under the HTTP defence flags every memstore server takes.

Before: the Mind Layer API took the timeouts, connection caps, Host and Origin
flags and the shutdown grace, but refused ``--max-body``, ``--rate-per-second``
and ``--rate-burst`` ("MemoryProtocol's"): its body bound was 1 MiB, fixed,
answered 400, and it had no rate limit at all. Now the body bound is
``--max-body`` (default still 1 MiB) answered 413 ``payload_too_large``, and
``--rate-per-second``/``--rate-burst`` put the owner's requests in one token
bucket (no limit unless one is given), answered 429 ``rate_limited`` with
``Retry-After``. Real servers on loopback, small values, no clock thresholds:
the rate test counts 429s at a rate (0.01 a second) no test outlasts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstore import Memory
from memstore.cli._http import _size
from memstore.cli.parser import build_parser
from memstore.mindlayer import MindLayer, Scope
from memstore.mindlayer.limits import MAX_BODY_BYTES
from tests.adversarial.http_probe import Raw
from tests.mindlayer.conftest import Server, export, new_scope, refused, start, store
from tests.mindlayer.test_http_security import TOKEN, token_file

MAX_BODY = 4096
JSON_TYPE = {"Content-Type": "application/json"}


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def stored_texts(data: Path, scope: dict[str, str]) -> list[str]:
    """The scope's memories, read from the data folder of a stopped server (no HTTP: a
    rate-limited server would refuse the export that checks it)."""
    with Memory(data, embedder=None) as mem:
        return [m["text"] for m in MindLayer(mem).export(Scope(**scope))["memories"]]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose body bound is 4 KiB, whose headers must arrive within 0.5 s and hold
    at most 2 KiB."""
    folder = tmp_path_factory.mktemp("small-body")
    server = start(
        folder / "data",
        "--max-body",
        str(MAX_BODY),
        "--header-timeout",
        "0.5",
        "--max-header-bytes",
        "2048",
    )
    yield server
    assert server.stop() == 0, server.log_text()


def test_a_body_over_max_body_is_413_and_nothing_is_stored(small: Server) -> None:
    scope = new_scope()
    big = json.dumps({"scope": scope, "text": "oversized " + "x" * MAX_BODY}).encode()
    with small.client() as c:
        r = c.post("/v1/memories", content=big, headers=JSON_TYPE)
        assert r.status_code == 413, r.text
        assert r.json() == {
            "error": "payload_too_large",
            "message": f"the request body is {len(big)} bytes; the limit is {MAX_BODY} "
            "(--max-body)",
            "details": {"size": len(big), "limit": MAX_BODY},
        }
        # Sent without a length (chunked): refused as soon as it passes the limit.
        chunks = (big[i : i + 1000] for i in range(0, len(big), 1000))
        r = c.put("/v1/personality", content=chunks, headers=JSON_TYPE)
        assert r.status_code == 413 and r.json()["error"] == "payload_too_large", r.text
        assert r.json()["details"]["limit"] == MAX_BODY
        store(c, scope, "a small one")
        assert [m["text"] for m in export(c, scope)["memories"]] == ["a small one"]
        assert export(c, scope)["personality"] == ""
    assert f"body at most {MAX_BODY} bytes, no rate limit," in small.log_text()


def test_the_default_body_bound_is_still_1_mib(plain: Server) -> None:
    """Unchanged for a server started without ``--max-body``: a body of 1 MiB is read (and
    refused for what it holds), one byte more is 413 (it was 400 before)."""
    scope = new_scope()
    head = json.dumps({"scope": scope, "text": "The user likes tea.", "pad": ""})[:-2]
    fits = (head + "x" * (MAX_BODY_BYTES - len(head) - 2) + '"}').encode()
    assert len(fits) == MAX_BODY_BYTES
    with plain.client() as c:
        r = c.post("/v1/memories", content=fits, headers=JSON_TYPE)
        assert r.status_code == 400 and "unknown field" in r.json()["message"], r.text[:300]
        over = fits[:-2] + b'x"}'
        r = c.post("/v1/memories", content=over, headers=JSON_TYPE)
        assert r.status_code == 413, r.text[:300]
        assert r.json()["details"] == {"size": MAX_BODY_BYTES + 1, "limit": MAX_BODY_BYTES}
        assert export(c, scope)["memories"] == []
    assert f"body at most {MAX_BODY_BYTES} bytes, no rate limit," in plain.log_text()


def test_the_owner_is_held_to_the_rate_asked_for(tmp_path: Path) -> None:
    folder = tmp_path / "rated"
    folder.mkdir()
    token = str(token_file(folder, TOKEN))
    rate = ("--rate-per-second", "0.01", "--rate-burst", "3")
    server = start(folder / "data", "--owner-token-file", token, *rate)
    scope = new_scope()
    try:
        with server.client("wrong-" + TOKEN) as stranger, server.client(TOKEN) as owner:
            # A caller without the token takes nothing from the owner's bucket.
            assert [stranger.get("/v1/export", params=scope).status_code for _ in range(5)] == [
                401
            ] * 5
            store(owner, scope, "The user likes tea.")
            assert export(owner, scope)["memories"][0]["text"] == "The user likes tea."
            r = owner.post("/v1/search", json={"scope": scope, "query": "tea"})
            assert r.status_code == 200, r.text
            # The bucket (3) is spent: a write is refused before its body is read.
            r = owner.post("/v1/memories", json={"scope": scope, "text": "The user likes jam."})
            assert r.status_code == 429, r.text
            seconds = int(r.headers["retry-after"])
            assert seconds >= 1
            assert r.json() == {
                "error": "rate_limited",
                "message": "over the owner's rate limit (--rate-per-second, --rate-burst); "
                f"retry after {seconds} s",
                "details": {"retry_after": seconds},
            }
            # Every /v1 request takes from the one bucket, whatever its scope or route.
            other = new_scope()
            refusals = [
                owner.get("/v1/export", params=other),
                owner.put("/v1/personality", json={"scope": other, "personality": "p"}),
                owner.request("DELETE", "/v1/scope", params=scope),
            ]
            assert [r.status_code for r in refusals] == [429] * 3, [r.text for r in refusals]
            assert stranger.get("/healthz").status_code == 200  # liveness is not limited
        assert "rate 0.01/s, burst 3, answers Host" in server.log_text()
    finally:
        assert server.stop() == 0, server.log_text()
    assert stored_texts(folder / "data", scope) == ["The user likes tea."]


def test_a_header_sent_slowly_is_cut_at_the_header_timeout(small: Server) -> None:
    """The connection layer's refusals come in the API's error shape too."""
    port = port_of(small)
    raw = Raw(port)
    try:
        raw.send(b"POST /v1/memories HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port)
        answer = raw.drain()
    finally:
        raw.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert json.loads(answer.partition(b"\r\n\r\n")[2]) == {
        "error": "request_timeout",
        "message": "the request's headers did not arrive within 0.5 s",
    }


def test_headers_over_max_header_bytes_are_431(small: Server) -> None:
    """Before: 64 KiB, fixed, on every server; now ``--max-header-bytes``."""
    scope = new_scope()
    with small.client() as c:
        assert c.get("/v1/export", params=scope, headers={"X-Pad": "p" * 1000}).status_code == 200
        r = c.get("/v1/export", params=scope, headers={"X-Pad": "p" * 3000})
        assert r.status_code == 431, r.text
        assert r.json() == {
            "error": "headers_too_large",
            "message": "the request's headers exceed 2048 bytes",
        }


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        (("--sse-keepalive", "5"), "streams no answer"),
        (("--confirm-key-file", "key"), "no hard delete to confirm"),
    ],
)
def test_memory_protocol_options_are_refused_not_ignored(
    tmp_path: Path, flag: tuple[str, str], says: str
) -> None:
    """What still does not apply to the Mind Layer API is refused at start, saying why,
    with nothing created (an option the operator meant must not be silently dropped)."""
    code, out = refused(tmp_path / "data", *flag)
    assert code == 2, out
    assert f"{flag[0]} is MemoryProtocol's, not for --api mindlayer: " in out and says in out
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        (("--max-body", "0"), "--max-body: must be at least 1"),
        (("--rate-per-second", "nan"), "--rate-per-second: must be a finite number above 0"),
        (("--rate-burst", "0"), "--rate-burst: must be at least 1"),
    ],
)
def test_a_defence_value_it_cannot_take_is_refused_before_anything_opens(
    tmp_path: Path, flag: tuple[str, str], says: str
) -> None:
    code, out = refused(tmp_path / "data", *flag)
    assert code == 2 and says in out, out
    assert not (tmp_path / "data").exists()


def test_the_help_says_the_mind_layer_defaults() -> None:
    """``memstore serve --help`` types the Mind Layer's numbers (importing its package would
    slow every command's start): they must be the ones the server applies."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    actions = {a.dest: a for a in sub.choices["serve"]._actions}
    body_help = str(actions["max_body"].help)
    assert f"With --api mindlayer the default is {_size(MAX_BODY_BYTES)}" in body_help
    assert "With --api mindlayer no rate is limited" in str(actions["rate_per_second"].help)
    # Not given is None, so the server can tell "not given" from "given the default".
    args = parser.parse_args(["serve", "--api", "mindlayer"])
    assert (args.max_body, args.rate_per_second, args.rate_burst) == (None, None, None)
