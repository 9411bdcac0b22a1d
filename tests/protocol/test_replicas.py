"""Two ``memstore serve`` replicas over one PostgreSQL schema, requests alternating.

Each replica is a real process with its own data folder, both given the same
tokens file and ``--journal <dsn> --journal-schema <fresh schema>``. A write
acknowledged by one replica is read on the other once that replica's
``/healthz`` ``lsn`` has reached the write's Lsn (:func:`wait_applied`: a
bounded poll, never a fixed sleep). The checks:

* ingest on A, then recall, episode and snapshot on B;
* soft forget on B: gone on A, still there ``as_of`` before;
* dry run on A, hard delete with that receipt on B, and the receipt is then
  spent on A too (redeemed receipts are shared through PostgreSQL);
* snapshots at one Lsn, and recall for a fixed query set, are identical on
  both once writes stop;
* the conformance suite itself (``test_verbs.py``, ``test_auth_rate_errors.py``,
  ``test_events.py``, ``test_openapi_fuzz.py``) passes with every request
  sent to the next replica (``MEMSTORE_PROTOCOL_REPLICAS=2``, see
  ``conftest.py``). Left out: ``test_serve.py`` (it starts single servers of
  its own) and ``test_isolation.py`` (in-process, no server). The rate-limit
  test passes but proves less: each replica has its own buckets, so through
  two replicas a tenant's burst is twice ``--rate-burst``.

Without PostgreSQL these skip with how to enable them; with ``CI`` or
``MEMSTORE_REQUIRE_PG=1`` they fail instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
from ulid import ULID

from memstore.journal import Lsn
from tests.pgtest import Schemas, require_pg

from .conftest import (
    REPLICAS_ENV,
    ROOT,
    applied,
    make_tokens,
    start_replicas,
    stop_server,
    wait_applied,
)

QUERIES = ["vault combination", "payroll Fridays", "parrot", "launch code", "nothing like this"]
"""The fixed query set whose answers must agree on both replicas."""
CONFORMANCE = [
    "test_verbs.py",
    "test_auth_rate_errors.py",
    "test_events.py",
    "test_openapi_fuzz.py",
]
"""The conformance files run against the pair (see the module docstring for the rest)."""


@dataclass
class Replica:
    """One running replica and a client for it."""

    url: str
    client: httpx.Client

    def call(self, method: str, path: str, token: str, **kw: Any) -> httpx.Response:
        return self.client.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)

    def ok(self, method: str, path: str, token: str, **kw: Any) -> Any:
        """The JSON answer of a request that must succeed."""
        r = self.call(method, path, token, **kw)
        assert r.status_code == 200, r.text
        return r.json()

    def snapshot(self, token: str, lsn: Lsn) -> list[dict[str, Any]]:
        r = self.call("GET", f"/v1/snapshot/{lsn}", token)
        assert r.status_code == 200, r.text
        return [json.loads(line) for line in r.text.splitlines() if line]


@dataclass
class Pair:
    a: Replica
    b: Replica
    tokens: list[str]
    _next: int = 0

    def token(self) -> str:
        """A full-scope token of a tenant no test here used before."""
        self._next += 1
        return self.tokens[self._next - 1]

    def settle(self, lsn: Lsn) -> None:
        """Wait until both replicas applied ``lsn``."""
        wait_applied([self.a.url, self.b.url], lsn)


def lsn_of(answer: dict[str, Any], field: str = "lsn") -> Lsn:
    return Lsn(answer[field]["wall_ms"], answer[field]["counter"])


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    require_pg()
    root = tmp_path_factory.mktemp("replicas")
    tokens = make_tokens(root / "tokens.json")
    schemas = Schemas()
    place = schemas.new("pair")
    started = start_replicas(
        root, root / "tokens.json", place.dsn, place.schema, 2, "--rate-per-second", "1000"
    )
    try:
        with (
            httpx.Client(base_url=started[0][1], timeout=30.0) as ca,
            httpx.Client(base_url=started[1][1], timeout=30.0) as cb,
        ):
            full = [t for t in tokens if t.startswith("tok-full-")]
            yield Pair(Replica(started[0][1], ca), Replica(started[1][1], cb), full)
    finally:
        codes = [stop_server(proc) for proc, _ in started]
        schemas.drop_all()
    assert codes == [0, 0], "SIGTERM must shut both replicas down cleanly"


def test_healthz_reports_the_applied_lsn(pair: Pair) -> None:
    token = pair.token()
    out = pair.a.ok("POST", "/v1/ingest", token, json={"source": "h", "content": "health"})
    assert applied(pair.a.url) >= lsn_of(out), "a replica has applied its own acknowledged write"
    pair.settle(lsn_of(out))
    assert applied(pair.b.url) >= lsn_of(out)


def test_ingest_on_a_reads_on_b(pair: Pair) -> None:
    token = pair.token()
    ulid = str(ULID())
    doc = "# vault\nThe vault combination is 1234.\n\n## payroll\nBob runs payroll on Fridays.\n"
    out = pair.a.ok("POST", "/v1/ingest", token, json={"id": ulid, "source": "s", "content": doc})
    pair.settle(lsn_of(out))
    hits = pair.b.ok("POST", "/v1/recall", token, json={"query": "vault combination"})
    assert hits and hits[0]["source"] == "s"
    episode = pair.b.ok("GET", f"/v1/episode/{ulid}", token)
    assert episode == pair.a.ok("GET", f"/v1/episode/{ulid}", token)
    at = lsn_of(out)
    on_b = pair.b.snapshot(token, at)
    assert on_b and any(ulid in line["key"] for line in on_b)
    assert on_b == pair.a.snapshot(token, at)


def test_soft_forget_on_b_is_gone_on_a_and_kept_as_of_before(pair: Pair) -> None:
    token = pair.token()
    ulid = str(ULID())
    body = {"id": ulid, "source": "parrot", "content": "the parrot is called Polly"}
    out = pair.a.ok("POST", "/v1/ingest", token, json=body)
    pair.settle(lsn_of(out))
    receipt = pair.b.ok("POST", "/v1/forget", token, json={"target": {"Id": ulid}})
    gone = lsn_of(receipt, "audit_lsn")
    pair.settle(gone)
    assert pair.a.call("GET", f"/v1/episode/{ulid}", token).status_code == 404
    assert pair.a.ok("POST", "/v1/recall", token, json={"query": "parrot Polly"}) == []
    before = Lsn(gone.wall_ms - 1, 0).to_datetime().isoformat()
    for replica in (pair.a, pair.b):
        then = replica.ok("POST", "/v1/recall", token, json={"query": "parrot", "as_of": before})
        assert [h["source"] for h in then] == ["parrot"]


def test_dry_run_on_a_confirms_a_hard_delete_on_b_once(pair: Pair) -> None:
    token = pair.token()
    ulid = str(ULID())
    body = {"id": ulid, "source": "safe", "content": "the safe code is 9876"}
    pair.settle(lsn_of(pair.a.ok("POST", "/v1/ingest", token, json=body)))
    target = {"Id": ulid}
    preview = pair.a.call("POST", "/v1/forget", token, json={"target": target, "dry_run": True})
    assert preview.status_code == 200 and preview.json()["preview"] is True
    hard = {"target": target, "hard": True, "confirmation_token": preview.text}
    done = pair.b.ok("POST", "/v1/forget", token, json=hard)
    assert done["preview"] is False and done["rows_deleted"] == 2
    pair.settle(lsn_of(done, "audit_lsn"))
    # One dry run, one hard delete: the receipt is spent on every replica.
    again = pair.a.call("POST", "/v1/forget", token, json=hard)
    assert again.status_code == 400 and again.json()["error"] == "invalid_confirmation_token"
    for replica in (pair.a, pair.b):
        assert replica.call("GET", f"/v1/episode/{ulid}", token).status_code == 404
        assert not [x for x in replica.snapshot(token, applied(replica.url)) if ulid in x["key"]]


def test_snapshots_and_recall_agree_once_writes_stop(pair: Pair) -> None:
    token = pair.token()
    contents = [
        "the vault combination is 1234",
        "Bob runs payroll on Fridays",
        "the parrot is called Polly",
        "the launch code is swordfish",
        "the vault moved to the basement",
        "payroll moved to Thursdays in December",
    ]
    last = Lsn(0, 0)
    for n, content in enumerate(contents):  # alternate the writer
        writer = (pair.a, pair.b)[n % 2]
        out = writer.ok("POST", "/v1/ingest", token, json={"source": f"s{n}", "content": content})
        last = max(last, lsn_of(out))
    drop = pair.b.ok("POST", "/v1/forget", token, json={"target": {"Scope": {"BySource": "s4"}}})
    last = max(last, lsn_of(drop, "audit_lsn"))
    pair.settle(last)
    assert pair.a.snapshot(token, last) == pair.b.snapshot(token, last)
    for query in QUERIES:
        for mode in ("semantic", "graph"):
            req = {"query": query, "k": 10, "mode": mode}
            on_a = pair.a.ok("POST", "/v1/recall", token, json=req)
            assert on_a == pair.b.ok("POST", "/v1/recall", token, json=req), (query, mode)


def test_the_conformance_suite_passes_with_requests_alternating(tmp_path: Path) -> None:
    """The protocol suite, unchanged, against two fresh replicas (a pair of its own)."""
    require_pg()
    env = {**os.environ, REPLICAS_ENV: "2", "MEMSTORE_REQUIRE_PG": "1", "PYTHONPATH": str(ROOT)}
    env.pop("MEMSTORE_PROTOCOL_URL", None)
    files = [str(Path(__file__).parent / name) for name in CONFORMANCE]
    report = tmp_path / "report.xml"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junit-xml={report}",
            *files,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    suite = ElementTree.parse(report).getroot().find("testsuite")
    assert suite is not None
    counts = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] > 50 and counts["failures"] == counts["errors"] == 0, counts
    assert counts["skipped"] == 0, "nothing may skip: the pair must really run"


def test_one_forget_sent_to_both_replicas_at_once_deletes_once(pair: Pair) -> None:
    # Each replica reads its own store: without one step from read to commit, both saw the
    # chunks live, both answered rows_written 2, and two audit items recorded one deletion.
    import concurrent.futures

    token = pair.token()
    for round in range(4):
        ulid = str(ULID())
        body = {"id": ulid, "source": f"race{round}", "content": f"race note {round}"}
        pair.settle(lsn_of(pair.a.ok("POST", "/v1/ingest", token, json=body)))
        forget = {"target": {"Id": ulid}}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            replicas = (pair.a, pair.b)
            sent = [pool.submit(r.ok, "POST", "/v1/forget", token, json=forget) for r in replicas]
            both = [f.result() for f in sent]
        assert sorted(r["rows_written"] for r in both) == [0, 2], both


def test_a_forget_on_b_finds_what_a_just_acknowledged(pair: Pair) -> None:
    """A forget on one replica right after an ingest on the other, no wait between.

    Before, B's forget read only what B had applied: most rounds it answered
    ``rows_written: 0`` (a dry run ``rows_deleted: 0``) while the episode lived on,
    a forget reported done that forgot nothing. Now it applies the journal's head first.
    """
    token = pair.token()
    for round in range(6):
        ulid = str(ULID())
        body = {"id": ulid, "source": f"fresh{round}/a", "content": f"fresh note {round}"}
        pair.a.ok("POST", "/v1/ingest", token, json=body)
        dry = pair.b.ok("POST", "/v1/forget", token, json={"target": {"Id": ulid}, "dry_run": True})
        assert dry["rows_deleted"] == 2, (round, dry)
        by_id = pair.b.ok("POST", "/v1/forget", token, json={"target": {"Id": ulid}})
        assert by_id["rows_written"] == 2, (round, by_id)
        body = {"id": str(ULID()), "source": f"scoped{round}/a", "content": f"scoped {round}"}
        pair.a.ok("POST", "/v1/ingest", token, json=body)
        scope = {"target": {"Scope": {"BySource": f"scoped{round}/"}}}
        assert pair.b.ok("POST", "/v1/forget", token, json=scope)["rows_written"] == 2, round
        pair.settle(
            lsn_of(pair.b.ok("POST", "/v1/ingest", token, json={"source": "m", "content": "m"}))
        )
        for replica in (pair.a, pair.b):
            assert replica.call("GET", f"/v1/episode/{ulid}", token).status_code == 404
            assert not [
                x
                for x in replica.snapshot(token, applied(replica.url))
                if "fresh" in str(x) or "scoped" in str(x)
            ]


def test_the_inspectors_forget_on_b_finds_what_a_just_acknowledged(pair: Pair) -> None:
    """``POST /ui/api/forget`` (the inspector ``memstore serve`` mounts) on B right after
    an ingest on A: before, it answered ``{"removed": false}`` now and then (one round in
    eight) while the episode stayed live; now it applies the journal's head first."""
    token = pair.token()
    tenant = token.replace("tok-full-", "t")  # make_tokens: tok-full-<n> acts for t<n>
    for round in range(24):
        ulid = str(ULID())
        body = {"id": ulid, "source": f"inspected{round}", "content": f"inspected note {round}"}
        pair.a.ok("POST", "/v1/ingest", token, json=body)
        out = pair.b.ok("POST", "/ui/api/forget", token, params={"id": f"ep:{tenant}:{ulid}"})
        assert out["removed"] is True, (round, out)
