"""Bearer tokens: the tokens file, header parsing, scopes, and the 401 / 429 / 403 gate."""

from __future__ import annotations

import hmac
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import MemstoreError
from memstore.protocol.auth import (
    MAX_TOKEN_CHARS,
    ROUTE_SCOPES,
    SCOPES,
    Principal,
    TokensFileError,
    TokenTable,
    authorize,
    new_token,
    write_tokens_file,
)
from memstore.protocol.errors import ProtocolError
from memstore.protocol.ratelimit import RateLimiter

SECRET = "s3cr3t-Token_for.acme~1"
TOKENS = {
    SECRET: {"tenant": "acme", "scopes": ["ingest", "recall", "forget"]},
    "reader": {"tenant": "acme", "scopes": ["recall"]},
    "other/tenant+token==": {"tenant": "globex-2.eu_1", "scopes": ["ingest"]},
    "nothing": {"tenant": "idle", "scopes": []},
}


@pytest.fixture
def table() -> TokenTable:
    return TokenTable.from_json(json.dumps(TOKENS))


def _status(exc: pytest.ExceptionInfo[ProtocolError]) -> tuple[int, str]:
    return exc.value.status, exc.value.code


def test_the_seeds_map_shape(table: TokenTable) -> None:
    assert len(table) == 4
    assert table.tenants == {"acme", "globex-2.eu_1", "idle"}
    assert table.lookup(SECRET) == Principal("acme", frozenset({"ingest", "recall", "forget"}))
    assert table.lookup("reader") == Principal("acme", frozenset({"recall"}))
    assert table.lookup("other/tenant+token==") == Principal("globex-2.eu_1", frozenset({"ingest"}))
    assert table.lookup("unknown") is None
    assert table.lookup("é") is None
    assert SECRET not in repr(table)


@pytest.mark.parametrize(
    "header",
    [f"Bearer {SECRET}", f"bearer {SECRET}", f"BEARER   {SECRET}  ", f"  Bearer {SECRET}"],
)
def test_authenticate(table: TokenTable, header: str) -> None:
    assert table.authenticate(header).tenant == "acme"


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing"),
        ("", "missing"),
        ("   ", "missing"),
        ("Bearer", "malformed"),
        ("Bearer ", "malformed"),
        (f"Basic {SECRET}", "malformed"),
        (SECRET, "malformed"),
        (f"Bearer {SECRET} extra", "malformed"),
        (f"Bearer\t{SECRET}", "malformed"),
        ("Bearer tök", "malformed"),
        ("Bearer a=b", "malformed"),
        ("Bearer " + "a" * (MAX_TOKEN_CHARS + 1), "malformed"),
        ("Bearer unknown", "unknown"),
        (f"Bearer {SECRET}x", "unknown"),
        (f"Bearer {SECRET[:-1]}", "unknown"),
    ],
)
def test_401s_say_why_and_never_echo_the_token(
    table: TokenTable, header: str | None, reason: str
) -> None:
    with pytest.raises(ProtocolError) as info:
        table.authenticate(header)
    assert _status(info) == (401, "unauthorized")
    assert reason in info.value.message
    assert SECRET not in info.value.message and info.value.details == {}
    assert info.value.headers["WWW-Authenticate"].startswith("Bearer")


def test_scopes(table: TokenTable) -> None:
    reader = table.authenticate("Bearer reader")
    reader.require("recall")
    with pytest.raises(ProtocolError) as info:
        reader.require("forget")
    assert _status(info) == (403, "forbidden")
    assert info.value.details == {"required_scope": "forget"}


def test_route_scopes_are_the_seeds() -> None:
    assert ROUTE_SCOPES["POST /v1/ingest"] == "ingest"
    assert ROUTE_SCOPES["POST /v1/recall"] == "recall"
    assert ROUTE_SCOPES["POST /v1/forget"] == "forget"
    assert ROUTE_SCOPES["GET /v1/snapshot/{lsn}"] == "recall"
    assert ROUTE_SCOPES["GET /v1/episode/{id}"] == "recall"
    assert set(ROUTE_SCOPES.values()) <= set(SCOPES)
    assert all(route.split()[1].startswith("/v1/") for route in ROUTE_SCOPES)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_gate_order_401_then_429_then_403(table: TokenTable) -> None:
    limiter = RateLimiter(rate_per_second=1, burst=2, clock=Clock())
    # Unauthenticated requests never spend the tenant's tokens.
    for _ in range(5):
        with pytest.raises(ProtocolError) as info:
            authorize("Bearer nope", "recall", tokens=table, limiter=limiter)
        assert info.value.status == 401
    assert limiter.tokens("acme") == 2
    # A request lacking the scope is refused with 403, and still counts.
    with pytest.raises(ProtocolError) as info:
        authorize("Bearer reader", "ingest", tokens=table, limiter=limiter)
    assert info.value.status == 403
    assert authorize(f"Bearer {SECRET}", "ingest", tokens=table, limiter=limiter).tenant == "acme"
    # The bucket is per tenant: both tokens of acme share it.
    with pytest.raises(ProtocolError) as info:
        authorize("Bearer reader", "ingest", tokens=table, limiter=limiter)
    assert info.value.status == 429 and info.value.headers == {"Retry-After": "1"}
    assert authorize("Bearer other/tenant+token==", "ingest", tokens=table, limiter=limiter)


def test_gate_without_limiter(table: TokenTable) -> None:
    for _ in range(500):
        authorize("Bearer reader", "recall", tokens=table)


def test_the_final_comparison_is_constant_time(
    table: TokenTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert table.lookup(SECRET) is not None
    assert calls == [(SECRET.encode(), SECRET.encode())]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"t": {"tenant": "a", "scopes": []}, "t": {"tenant": "b", "scopes": []}}', "twice"),
        ('{"t": "acme"}', 'expected {"tenant"'),
        ('{"t": {"tenant": "a", "scopes": [], "admin": true}}', "unknown keys ['admin']"),
        ('{"t": {"scopes": []}}', "tenant must be a string"),
        ('{"t": {"tenant": 3, "scopes": []}}', "tenant must be a string"),
        ('{"t": {"tenant": "a"}}', "scopes must be a list of strings"),
        ('{"t": {"tenant": "a", "scopes": "recall"}}', "scopes must be a list of strings"),
        ('{"t": {"tenant": "a", "scopes": ["recall", "root"]}}', "unknown scopes ['root']"),
        ('{"t": {"tenant": "*", "scopes": []}}', "tenant '*' must be"),
        ('{"t": {"tenant": "a/b", "scopes": []}}', "must be 1-64"),
        ('{"t": {"tenant": "", "scopes": []}}', "must be 1-64"),
        ('{"t": {"tenant": "-a", "scopes": []}}', "must be 1-64"),
        ('{"t": {"tenant": "' + "a" * 65 + '", "scopes": []}}', "must be 1-64"),
        ('{"has space": {"tenant": "a", "scopes": []}}', "a token must be"),
        ('{"": {"tenant": "a", "scopes": []}}', "a token must be"),
        ('{"tök": {"tenant": "a", "scopes": []}}', "a token must be"),
        ('{"' + "t" * (MAX_TOKEN_CHARS + 1) + '": {"tenant": "a", "scopes": []}}', "longer"),
        ("[" * 100_000, "not valid JSON"),
    ],
)
def test_bad_tokens_files_name_the_entry_not_the_token(text: str, complaint: str) -> None:
    with pytest.raises(TokensFileError) as info:
        TokenTable.from_json(text)
    assert complaint in str(info.value)
    assert isinstance(info.value, MemstoreError) and isinstance(info.value, ValueError)
    assert "has space" not in str(info.value) and "tök" not in str(info.value)


def test_entries_are_numbered(table: TokenTable) -> None:
    text = json.dumps({"a": {"tenant": "x", "scopes": []}, "b": {"tenant": "y", "scopes": ["x"]}})
    with pytest.raises(TokensFileError, match=r"entry #2 \(tenant 'y'\)"):
        TokenTable.from_json(text)


def test_load_and_write_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    token = new_token()
    write_tokens_file(path, {token: Principal("local", frozenset(SCOPES))})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        token: {"tenant": "local", "scopes": ["ingest", "recall", "forget", "admin"]}
    }
    assert TokenTable.load(path).authenticate(f"Bearer {token}").tenant == "local"
    assert os.listdir(tmp_path) == ["tokens.json"]  # no temporary file left behind


def test_a_write_killed_half_way_leaves_a_file_the_next_write_removes(tmp_path: Path) -> None:
    # Before: a killed write left `.tokens.json.<hex>.tmp` (half a secret) beside the file
    # forever. A real process dies (os._exit) in the middle of writing; the next write,
    # in this process, sweeps what it left, as backups and exports are swept.
    path = tmp_path / "tokens.json"
    child = (
        "import json, os, sys\n"
        "from memstore.protocol.auth import Principal, write_tokens_file\n"
        "def dies(data, f, **kw):\n"
        "    f.write('{\"half a tok')\n"
        "    f.flush()\n"
        "    os._exit(9)  # killed mid-write\n"
        "json.dump = dies\n"
        "write_tokens_file(sys.argv[1], {'t0k3n': Principal('local', frozenset({'recall'}))})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", child, str(path)], env=env, check=False)
    assert done.returncode == 9
    (left,) = os.listdir(tmp_path)
    assert left.startswith(".tokens.json.")
    token = new_token()
    write_tokens_file(path, {token: Principal("local", frozenset(SCOPES))})
    assert os.listdir(tmp_path) == ["tokens.json"]
    assert TokenTable.load(path).authenticate(f"Bearer {token}").tenant == "local"


def test_write_refuses_what_load_would_refuse(tmp_path: Path) -> None:
    with pytest.raises(TokensFileError):
        write_tokens_file(tmp_path / "t.json", {"ok": Principal("*", frozenset())})
    with pytest.raises(TokensFileError):
        write_tokens_file(tmp_path / "t.json", {"ok": Principal("a", frozenset({"root"}))})
    assert os.listdir(tmp_path) == []


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(TokensFileError, match="cannot read tokens file"):
        TokenTable.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}}")
    with pytest.raises(TokensFileError, match=str(bad)):
        TokenTable.load(bad)


def test_an_empty_map_authenticates_nobody() -> None:
    with pytest.raises(ProtocolError):
        TokenTable.from_json("{}").authenticate("Bearer anything")


def test_new_tokens_are_bearer_tokens() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    table = TokenTable({t: Principal("a", frozenset()) for t in tokens})
    assert all(table.authenticate(f"Bearer {t}") for t in tokens)
    assert all(len(t) >= 43 for t in tokens)


_B64 = st.text(alphabet="ABCXYZabcxyz0189-._~+/", min_size=1, max_size=20)


@settings(deadline=None)
@given(st.dictionaries(_B64, st.sampled_from(["a", "b"]), max_size=5), _B64)
def test_lookup_finds_exactly_the_tokens_in_the_table(
    table_spec: dict[str, str], probe: str
) -> None:
    table = TokenTable({t: Principal(ten, frozenset({"recall"})) for t, ten in table_spec.items()})
    for token, tenant in table_spec.items():
        assert table.authenticate(f"Bearer {token}").tenant == tenant
    found = table.lookup(probe)
    assert (found is not None) == (probe in table_spec)
