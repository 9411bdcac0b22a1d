"""The error taxonomy: codes, statuses, body shapes, headers."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import MemstoreError
from memstore.protocol import errors
from memstore.protocol.errors import (
    CONFIRMATION_REQUIRED_MESSAGE,
    ERROR_KINDS,
    ErrorKind,
    ProtocolError,
    error_body,
    retry_after_header,
)
from memstore.protocol.filter import FilterSyntaxError, parse_filter


def test_the_table_is_consistent() -> None:
    assert len(ERROR_KINDS) == len({k.code for k in ERROR_KINDS.values()})
    for code, kind in ERROR_KINDS.items():
        assert code == kind.code and code.isidentifier() and code == code.lower()
        assert 400 <= kind.status <= 599 and kind.when
    # Every ErrorKind constant in the module is in the table.
    constants = [v for v in vars(errors).values() if isinstance(v, ErrorKind)]
    assert sorted(k.code for k in constants) == sorted(ERROR_KINDS)


def test_the_seeds_own_codes_and_statuses() -> None:
    seed = {
        "confirmation_required": 428,
        "invalid_confirmation_token": 400,
        "invalid_lsn": 400,
        "snapshot_out_of_range": 404,
        "invalid_episode_id": 400,
        "episode_not_found": 404,
    }
    assert {code: ERROR_KINDS[code].status for code in seed} == seed
    statuses = {k.status for k in ERROR_KINDS.values()}
    assert {400, 401, 403, 413, 429, 500, 501} <= statuses


def test_confirmation_bodies_match_the_seed_exactly() -> None:
    err = errors.confirmation_required()
    assert err.status == 428
    assert json.dumps(err.body()) == json.dumps(
        {
            "error": "confirmation_required",
            "message": "hard-delete requires confirmation_token "
            "(serialized prior ForgetReceipt JSON)",
        }
    )
    assert err.message == CONFIRMATION_REQUIRED_MESSAGE
    bad = errors.invalid_confirmation_token("Expecting value: line 1 column 1 (char 0)")
    assert bad.status == 400
    assert bad.body() == {
        "error": "invalid_confirmation_token",
        "message": "confirmation_token must be a serialized ForgetReceipt: "
        "Expecting value: line 1 column 1 (char 0)",
    }


def test_body_has_details_only_when_there_are_some() -> None:
    assert error_body("x", "y") == {"error": "x", "message": "y"}
    assert error_body("x", "y", {}) == {"error": "x", "message": "y"}
    assert error_body("x", "y", {"a": 1}) == {"error": "x", "message": "y", "details": {"a": 1}}


def test_protocol_error_is_a_memstore_error_with_a_useful_repr() -> None:
    err = ProtocolError(404, "episode_not_found", "nope", {"id": "X"})
    assert isinstance(err, MemstoreError)
    assert str(err) == "404 episode_not_found: nope"
    assert repr(err) == "ProtocolError(404, 'episode_not_found', 'nope', {'id': 'X'})"
    assert err.headers == {}
    with pytest.raises(ValueError, match="4xx or 5xx"):
        ProtocolError(200, "ok", "fine")


def test_invalid_filter_says_where() -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter("source = 'a' AND\nkind ==")
    err = errors.invalid_filter(info.value)
    assert (err.status, err.code) == (400, "invalid_filter")
    assert err.details == {
        "position": 23,
        "line": 2,
        "column": 7,
        "expected": "a string literal",
        "found": "'='",
    }
    assert "line 2, column 7" in err.message
    json.dumps(err.body())


def test_auth_and_rate_errors_carry_their_headers() -> None:
    assert errors.unauthorized("missing Authorization header").headers == {
        "WWW-Authenticate": 'Bearer realm="memstore"'
    }
    forbidden = errors.forbidden("forget")
    assert (forbidden.status, forbidden.details) == (403, {"required_scope": "forget"})
    limited = errors.rate_limited(0.2)
    assert (limited.status, limited.headers, limited.details) == (
        429,
        {"Retry-After": "1"},
        {"retry_after": 1},
    )


def test_every_constructor_uses_its_table_row() -> None:
    made = [
        errors.invalid_request("bad"),
        errors.invalid_lsn("x.y"),
        errors.snapshot_out_of_range(10, 5),
        errors.invalid_episode_id("nope"),
        errors.episode_not_found("01HZZZZZZZZZZZZZZZZZZZZZZZ"),
        errors.confirmation_required(),
        errors.invalid_confirmation_token("why"),
        errors.unauthorized("who"),
        errors.forbidden("recall"),
        errors.rate_limited(3),
        errors.payload_too_large("content", 20_000, 16_384),
        errors.internal_error(),
    ]
    for err in made:
        assert ERROR_KINDS[err.code].status == err.status
        body = json.loads(json.dumps(err.body()))
        assert body["error"] == err.code and body["message"] == err.message


def test_long_path_parameters_are_cut_in_messages() -> None:
    assert len(errors.invalid_lsn("9" * 10_000).message) < 200
    assert len(errors.invalid_episode_id("Z" * 10_000).message) < 200


@settings(deadline=None)
@given(st.floats(min_value=0, max_value=1e9))
def test_retry_after_is_whole_seconds_rounded_up(seconds: float) -> None:
    value = int(retry_after_header(seconds))
    assert value >= 1 and value >= seconds  # waiting that long is always enough
    assert value == 1 or value - 1 < seconds  # and never a whole second too long


def test_retry_after_rejects_nan() -> None:
    with pytest.raises(ValueError):
        retry_after_header(math.nan)


def test_an_unexpected_failure_is_one_500_and_one_log_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, Starlette answered 500 and then re-raised: logged twice, connection reset.

    TestClient re-raises what escapes the app, so under the old code this test
    failed with the engine's exception instead of a 500.
    """
    from fastapi.testclient import TestClient

    from memstore import Memory
    from memstore.protocol import TokenTable
    from memstore.protocol.app import create_app

    tokens = TokenTable.from_json('{"tok": {"tenant": "acme", "scopes": ["ingest"]}}')
    mem = Memory(tmp_path, embedder="hash")
    app = create_app(mem, tokens=tokens)
    mem.close()  # every write now fails inside the engine
    with caplog.at_level(logging.ERROR), TestClient(app) as client:
        r = client.post(
            "/v1/ingest",
            headers={"Authorization": "Bearer tok"},
            json={"source": "s", "content": "c"},
        )
    assert r.status_code == 500 and r.json()["error"] == "internal"
    assert "journal" not in r.text  # the message names no internals
    failures = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(failures) == 1 and failures[0].exc_info is not None


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ({"keepalive_seconds": 0}, "keepalive_seconds must be a positive number"),
        ({"keepalive_seconds": math.nan}, "keepalive_seconds must be a positive number"),
        ({"keepalive_seconds": -1.0}, "keepalive_seconds must be a positive number"),
        ({"keepalive_seconds": "15"}, "keepalive_seconds must be a positive number"),
        ({"max_body_bytes": 0}, "max_body_bytes must be at least 1, got 0"),
        ({"max_body_bytes": "x"}, "max_body_bytes must be a whole number"),
        ({"max_body_bytes": True}, "max_body_bytes must be a whole number"),
        ({"metrics_enabled": "no"}, "metrics_enabled must be True or False"),
        ({"tokens": '{"tok": {}}'}, "tokens must be a TokenTable or a TokensFile"),
    ],
)
def test_create_app_refuses_options_that_would_fail_each_request(
    tmp_path: Path, option: dict[str, object], error: str
) -> None:
    """Before, each was accepted: keep-alives of 0 s in a busy loop while a streamed
    recall ran, a 500 on every POST for ``max_body_bytes="x"`` or for a ``tokens``
    string, metrics served for ``metrics_enabled="no"``."""
    from memstore import Memory
    from memstore.protocol import TokenTable
    from memstore.protocol.app import create_app

    tokens = TokenTable.from_json('{"tok": {"tenant": "acme", "scopes": ["recall"]}}')
    with (
        Memory(tmp_path, embedder="hash") as mem,
        pytest.raises((ValueError, TypeError), match=error),
    ):
        create_app(mem, **{"tokens": tokens, **option})  # type: ignore[arg-type]
