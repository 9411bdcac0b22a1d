"""The two-step hard-delete confirmation: sealed dry-run receipts, redeemed once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore.protocol.confirm import (
    CONFIRMATION_FIELD,
    DEFAULT_CONFIRMATION_TTL_SECONDS,
    RECEIPT_FIELDS,
    Confirmations,
    canonical_json,
)
from memstore.protocol.errors import CONFIRMATION_REQUIRED_MESSAGE, ProtocolError
from tests.pgtest import PgPlace

KEY = b"0123456789abcdef0123456789abcdef"
TARGET = {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}
SCOPE_TARGET = {"Scope": {"BySource": "helios:fs/session-42/"}}


def receipt(target: dict[str, Any] = TARGET, rows: int = 3) -> dict[str, Any]:
    return {
        "target": target,
        "indices_affected": ["Kv", "Vector", "Graph"],
        "rows_written": 0,
        "rows_deleted": rows,
        "audit_lsn": {"wall_ms": 1745251800123, "counter": 0},
        "preview": True,
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1_745_251_800.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def confirmations(clock: Clock) -> Confirmations:
    return Confirmations(KEY, clock=clock)


def redeem_error(
    confirmations: Confirmations, token: Any, tenant: str = "acme", target: Any = TARGET
) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        confirmations.redeem(tenant, target, token)
    return info.value


def test_seal_adds_one_field_and_keeps_the_seed_shape(confirmations: Confirmations) -> None:
    sealed = confirmations.seal("acme", receipt())
    assert set(sealed) == {*RECEIPT_FIELDS, CONFIRMATION_FIELD}
    assert {k: v for k, v in sealed.items() if k != CONFIRMATION_FIELD} == receipt()
    assert isinstance(sealed[CONFIRMATION_FIELD], str)


def test_only_dry_runs_are_sealed(confirmations: Confirmations) -> None:
    with pytest.raises(ValueError, match="dry-run"):
        confirmations.seal("acme", {**receipt(), "preview": False})


@pytest.mark.parametrize("spelling", ["json", "indented", "object"])
def test_redeem_returns_the_receipt(confirmations: Confirmations, spelling: str) -> None:
    sealed = confirmations.seal("acme", receipt())
    token: Any = {
        "json": json.dumps(sealed),
        "indented": json.dumps(dict(reversed(sealed.items())), indent=4),
        "object": sealed,
    }[spelling]
    assert confirmations.redeem("acme", TARGET, token) == receipt()


@pytest.mark.parametrize("token", [None, "", "   \n"])
def test_no_token_is_428_with_the_seeds_body(confirmations: Confirmations, token: Any) -> None:
    err = redeem_error(confirmations, token)
    assert err.status == 428
    assert err.body() == {
        "error": "confirmation_required",
        "message": CONFIRMATION_REQUIRED_MESSAGE,
    }


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("{not json", "Expecting property name enclosed in double quotes"),
        ("[1, 2]", "expected a JSON object"),
        ('"a string"', "expected a JSON object"),
        ("[" * 50_000, "nested too deeply"),
        (json.dumps({k: v for k, v in receipt().items() if k != "audit_lsn"}), "'audit_lsn'"),
        (json.dumps({**receipt(), "preview": False}), "not a dry-run receipt"),
        (json.dumps(receipt()), "missing the 'confirmation' field"),
        (json.dumps({**receipt(), "confirmation": 7}), "missing the 'confirmation' field"),
        (json.dumps({**receipt(), "confirmation": "v1.x.y.z"}), "malformed"),
        (json.dumps({**receipt(), "confirmation": "v2.1.y.z"}), "malformed"),
        (json.dumps({**receipt(), "confirmation": "v1.1²3.y.z"}), "malformed"),
        (json.dumps({**receipt(), "confirmation": "v1.99.y.z"}), "not issued by this server"),
        (json.dumps({**receipt(), "confirmation": "v1.99.y.d\u00e9f"}), "malformed"),
        (
            json.dumps({**receipt({"Id": "\ud800"}), "confirmation": "v1.99.y.z"}),
            "not issued by this server",
        ),
        ('{"preview": true, "x": ' + "9" * 5000 + "}", "too many digits"),
    ],
)
def test_malformed_tokens_are_400(confirmations: Confirmations, token: str, reason: str) -> None:
    err = redeem_error(confirmations, token)
    assert (err.status, err.code) == (400, "invalid_confirmation_token")
    assert err.message.startswith("confirmation_token must be a serialized ForgetReceipt: ")
    assert reason in err.message


def test_a_typed_client_that_drops_unknown_fields_is_told_what_to_do(
    confirmations: Confirmations,
) -> None:
    sealed = confirmations.seal("acme", receipt())
    retyped = {k: sealed[k] for k in RECEIPT_FIELDS}
    assert "every field kept" in redeem_error(confirmations, json.dumps(retyped)).message


def test_bound_to_tenant_and_target(confirmations: Confirmations) -> None:
    token = json.dumps(confirmations.seal("acme", receipt()))
    assert "not issued" in redeem_error(confirmations, token, tenant="globex").message
    assert "different target" in redeem_error(confirmations, token, target=SCOPE_TARGET).message
    assert confirmations.redeem("acme", TARGET, token) == receipt()


def test_scope_and_before_targets(confirmations: Confirmations) -> None:
    before = {"Before": {"wall_ms": 5, "counter": 1}}
    for target in (SCOPE_TARGET, before):
        token = json.dumps(confirmations.seal("acme", receipt(target)))
        assert confirmations.redeem("acme", target, token)["target"] == target


@pytest.mark.parametrize(
    "field", ["rows_deleted", "rows_written", "indices_affected", "audit_lsn", "target"]
)
def test_any_edit_breaks_the_seal(confirmations: Confirmations, field: str) -> None:
    sealed = confirmations.seal("acme", receipt())
    edited = {**sealed, field: {"edited": True}}
    target = edited["target"] if field == "target" else TARGET
    err = redeem_error(confirmations, json.dumps(edited), target=target)
    assert "not issued by this server for this tenant, or was altered" in err.message


def test_expiry(confirmations: Confirmations, clock: Clock) -> None:
    first = json.dumps(confirmations.seal("acme", receipt()))
    second = json.dumps(confirmations.seal("acme", receipt()))
    clock.now += DEFAULT_CONFIRMATION_TTL_SECONDS
    assert confirmations.redeem("acme", TARGET, first)  # the last valid moment
    clock.now += 1
    assert "expired 1 s ago" in redeem_error(confirmations, second).message


def test_one_dry_run_one_hard_delete(confirmations: Confirmations) -> None:
    first = json.dumps(confirmations.seal("acme", receipt()))
    second = json.dumps(confirmations.seal("acme", receipt()))
    assert first != second  # each dry run gets its own nonce
    confirmations.redeem("acme", TARGET, first)
    assert "already used" in redeem_error(confirmations, first).message
    confirmations.redeem("acme", TARGET, second)


def test_redeemed_nonces_are_forgotten_after_expiry(
    confirmations: Confirmations, clock: Clock
) -> None:
    for _ in range(50):
        confirmations.redeem("acme", TARGET, confirmations.seal("acme", receipt()))
    clock.now += DEFAULT_CONFIRMATION_TTL_SECONDS + 1
    confirmations.redeem("acme", TARGET, confirmations.seal("acme", receipt()))
    assert len(confirmations._redeemed) == 1


def test_another_key_does_not_honour_the_receipt(clock: Clock) -> None:
    token = json.dumps(Confirmations(KEY, clock=clock).seal("acme", receipt()))
    assert "not issued" in redeem_error(Confirmations(clock=clock), token).message
    assert Confirmations(KEY, clock=clock).redeem("acme", TARGET, token)


def test_concurrent_redeems_let_exactly_one_through(confirmations: Confirmations) -> None:
    token = json.dumps(confirmations.seal("acme", receipt()))
    outcomes: list[bool] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        try:
            confirmations.redeem("acme", TARGET, token)
            outcomes.append(True)
        except ProtocolError:
            outcomes.append(False)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False] * 7 + [True]


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        Confirmations(b"short")
    with pytest.raises(ValueError, match="positive"):
        Confirmations(KEY, ttl_seconds=0)


def test_canonical_json_is_one_spelling() -> None:
    assert canonical_json({"b": 1, "a": [True, None]}) == '{"a":[true,null],"b":1}'
    assert canonical_json(json.loads(json.dumps({"é": "ü"}, indent=2))) == '{"é":"ü"}'


@settings(deadline=None)
@given(st.text(max_size=300))
def test_garbage_is_only_ever_a_400_or_428(token: str) -> None:
    confirmations = Confirmations(KEY)
    try:
        confirmations.redeem("acme", TARGET, token)
    except ProtocolError as e:
        assert (e.status, e.code) in {
            (400, "invalid_confirmation_token"),
            (428, "confirmation_required"),
        }
    else:  # pragma: no cover - a random string is never a sealed receipt
        raise AssertionError("accepted a random token")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=5,
)


@settings(deadline=None)
@given(st.sampled_from(sorted(RECEIPT_FIELDS)), _JSON)
def test_no_field_can_be_changed(field: str, value: Any) -> None:
    confirmations = Confirmations(KEY)
    sealed = confirmations.seal("acme", receipt())
    if canonical_json(sealed[field]) == canonical_json(value):
        return
    edited = {**sealed, field: value}
    with pytest.raises(ProtocolError) as info:
        confirmations.redeem("acme", TARGET, json.dumps(edited))
    assert info.value.status == 400


def test_a_failed_hard_delete_gives_its_receipt_back(confirmations: Confirmations) -> None:
    token = json.dumps(confirmations.seal("acme", receipt()))
    with pytest.raises(OSError), confirmations.redeeming("acme", TARGET, token) as got:
        assert got == receipt()
        raise OSError("the journal refused the write")
    with confirmations.redeeming("acme", TARGET, token):  # the retry is confirmed
        pass
    assert "already used" in redeem_error(confirmations, token).message


def test_a_record_that_cannot_release_keeps_the_receipt_used(clock: Clock) -> None:
    taken: set[str] = set()

    def claim(nonce: str, expires_ms: int, now_ms: int) -> bool:
        first = nonce not in taken
        taken.add(nonce)
        return first

    confirmations = Confirmations(KEY, clock=clock, claim=claim)
    token = json.dumps(confirmations.seal("acme", receipt()))
    with pytest.raises(OSError), confirmations.redeeming("acme", TARGET, token):
        raise OSError("the journal refused the write")
    assert "already used" in redeem_error(confirmations, token).message


def test_the_postgresql_record_takes_a_failed_hard_deletes_claim_back(
    pg_place: PgPlace, clock: Clock
) -> None:
    # Replicas share the record: a receipt given back on one confirms the retry on another.
    from memstore.protocol.pgconfirm import PostgresClaims

    pg_place.sql("CREATE SCHEMA {s}")
    a = Confirmations(KEY, clock=clock, claim=PostgresClaims(pg_place.dsn, pg_place.schema))
    b = Confirmations(KEY, clock=clock, claim=PostgresClaims(pg_place.dsn, pg_place.schema))
    token = json.dumps(a.seal("acme", receipt()))
    with pytest.raises(OSError), a.redeeming("acme", TARGET, token):
        raise OSError("the journal refused the write")
    assert pg_place.sql("SELECT count(*) FROM {s}.protocol_redeemed") == [(0,)]
    with b.redeeming("acme", TARGET, token):
        pass
    assert "already used" in redeem_error(a, token).message


_CLAIM_AND_DIE = """
import sys, time
from memstore.protocol.confirm import Confirmations
from memstore.protocol.pgconfirm import PostgresClaims
key, dsn, schema, target, token = sys.argv[1:]
import json
confirmations = Confirmations(key.encode(), claim=PostgresClaims(dsn, schema))
with confirmations.redeeming("acme", json.loads(target), token):
    print("claimed", flush=True)
    time.sleep(600)  # killed here: between the claim and the erase
"""


def test_a_receipt_claimed_by_a_server_killed_before_the_erase_confirms_a_retry(
    pg_place: PgPlace,
) -> None:
    """Before: the claim was committed at once, so a server killed (kill -9) between the
    claim and the erase left the receipt used for an erase that never happened."""
    import os
    import signal
    import subprocess
    import sys

    from memstore.protocol.pgconfirm import PostgresClaims

    pg_place.sql("CREATE SCHEMA {s}")
    b = Confirmations(KEY, claim=PostgresClaims(pg_place.dsn, pg_place.schema))
    token = json.dumps(b.seal("acme", receipt()))
    root = str(Path(__file__).resolve().parents[1])
    args = [KEY.decode(), pg_place.dsn, pg_place.schema, json.dumps(TARGET), token]
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLAIM_AND_DIE, *args],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": root},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"claimed\n"
        # While that claim is alive, no other server may redeem the receipt.
        assert "already used" in redeem_error(b, token).message
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close() if proc.stdout else None
    # Its server is gone and nothing was erased: the receipt confirms the retry, once.
    deadline = 0
    while True:  # PostgreSQL ends the dead server's session as soon as it sees the socket close
        try:
            with b.redeeming("acme", TARGET, token):
                pass
            break
        except ProtocolError:
            deadline += 1
            assert deadline < 3000, "the killed server's claim was never given up"
            threading.Event().wait(0.01)
    assert "already used" in redeem_error(b, token).message


def test_a_hard_forget_the_journal_refuses_can_be_retried_with_its_receipt(
    tmp_path: Path,
) -> None:
    # A real failure: the journal file moved away under the server (every read and write refused,
    # nothing changed), then put back. The 500 said nothing happened; the retry is confirmed.
    from fastapi.testclient import TestClient

    from memstore import Memory
    from memstore.protocol import TokenTable
    from memstore.protocol.app import create_app
    from memstore.web.hosts import HostPolicy

    tokens = {"tok-a": {"tenant": "a", "scopes": ["ingest", "recall", "forget"]}}
    auth = {"Authorization": "Bearer tok-a"}
    with Memory(tmp_path / "data", embedder="hash") as mem:
        app = create_app(
            mem,
            tokens=TokenTable.from_json(json.dumps(tokens)),
            hosts=HostPolicy.for_bind("127.0.0.1", ()),
        )
        with TestClient(app, base_url="http://127.0.0.1:8080", raise_server_exceptions=False) as c:
            r = c.post("/v1/ingest", headers=auth, json={"source": "s.md", "content": "pin 4321"})
            assert r.status_code == 200, r.text
            target = {"Scope": {"BySource": "s.md"}}
            forget = {"target": target, "hard": True}
            preview = c.post("/v1/forget", headers=auth, json={**forget, "dry_run": True})
            assert preview.status_code == 200, preview.text
            confirmed = {**forget, "confirmation_token": preview.text}
            journal = tmp_path / "data" / "journal.db"
            journal.rename(tmp_path / "moved.db")
            failed = c.post("/v1/forget", headers=auth, json=confirmed)
            assert failed.status_code == 500, failed.text
            (tmp_path / "moved.db").rename(journal)
            hits = c.post("/v1/recall", headers=auth, json={"query": "pin 4321", "k": 5})
            assert hits.status_code == 200 and hits.json(), "the failed hard forget erased nothing"
            retry = c.post("/v1/forget", headers=auth, json=confirmed)
            assert retry.status_code == 200, retry.text
            assert retry.json()["rows_deleted"] == preview.json()["rows_deleted"] > 0
            again = c.post("/v1/forget", headers=auth, json=confirmed)
            assert again.status_code == 400 and "already used" in again.json()["message"]
