"""The seed's Verbs section over real HTTP: ingest, recall, forget, snapshot, episode."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

import httpx
from ulid import ULID

from .conftest import Server
from .test_auth_rate_errors import assert_error

HIT_KEYS = {
    "episode",
    "id",
    "score",
    "text",
    "source",
    "heading_path",
    "valid_from",
    "valid_to",
    "degraded",
    "rerank_applied",
    "source_op",
    "relevance",
    "graph_complete",
}
DOC = "# onboarding\nAlice joined Acme on 2024-08-12.\n\n## payroll\nBob runs payroll on Fridays.\n"


def ingest(server: Server, token: str, **body: Any) -> dict[str, Any]:
    r = server.call("POST", "/v1/ingest", token, json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def recall(server: Server, token: str, **body: Any) -> list[dict[str, Any]]:
    r = server.call("POST", "/v1/recall", token, json=body)
    assert r.status_code == 200, r.text
    hits: list[dict[str, Any]] = r.json()
    return hits


def forget(server: Server, token: str, **body: Any) -> httpx.Response:
    return server.call("POST", "/v1/forget", token, json=body)


def snapshot(server: Server, token: str, lsn: str) -> list[dict[str, Any]]:
    r = server.call("GET", f"/v1/snapshot/{lsn}", token)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in r.text.splitlines() if line]


def now_lsn() -> str:
    return f"{time.time_ns() // 1_000_000}.0"


def rfc3339_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


# ----------------------------------------------------------------------------- ingest


def test_ingest_answers_an_lsn_and_the_episode_reads_back(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    meta = {"team": "people", "n": [1, 2], "nested": {"ok": True}}
    out = ingest(
        server,
        token,
        id=ulid,
        source="helios:fs/notes.md",
        content=DOC,
        t_ref="2026-04-21T10:30:00Z",
        metadata=meta,
    )
    assert set(out) == {"lsn", "queue_lag_warn"}
    assert out["queue_lag_warn"] is False
    assert set(out["lsn"]) == {"wall_ms", "counter"}
    assert all(isinstance(v, int) for v in out["lsn"].values())
    r = server.call("GET", f"/v1/episode/{ulid}", token)
    assert r.status_code == 200
    episode = r.json()
    assert episode["id"] == ulid
    assert episode["source"] == "helios:fs/notes.md"
    assert episode["content"] == DOC
    assert episode["metadata"] == meta
    # The seed: the same bytes POST /v1/ingest wrote, so t_ref as sent (not re-spelled).
    assert episode["t_ref"] == "2026-04-21T10:30:00Z"
    # Lower-case ULIDs name the same episode.
    assert server.call("GET", f"/v1/episode/{ulid.lower()}", token).json()["id"] == ulid


def test_ingest_lsns_increase(server: Server) -> None:
    token = server.tenants.take()
    a = ingest(server, token, source="s", content="first")["lsn"]
    b = ingest(server, token, source="s", content="second")["lsn"]
    assert (b["wall_ms"], b["counter"]) > (a["wall_ms"], a["counter"])


def test_ingest_of_a_long_source_and_blank_content(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    ingest(server, token, id=ulid, source="s" * 1024, content="   ")
    assert server.call("GET", f"/v1/episode/{ulid}", token).json()["source"] == "s" * 1024


def test_ingest_of_the_same_id_replaces_the_episode(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    ingest(server, token, id=ulid, source="v1", content="the old wording about tangerines")
    out = ingest(server, token, id=ulid, source="v2", content="the new wording about lychees")
    assert server.call("GET", f"/v1/episode/{ulid}", token).json()["source"] == "v2"
    assert not [h for h in recall(server, token, query="tangerines") if "tangerines" in h["text"]]
    lsn = f"{out['lsn']['wall_ms']}.{out['lsn']['counter']}"
    texts = [x["value"].get("text") for x in snapshot(server, token, lsn)]
    assert [t for t in texts if t] == ["the new wording about lychees"]


def test_ingest_rejects_bad_episodes(server: Server) -> None:
    token = server.tenants.take()
    bad = [
        ({"content": "no source"}, 400, "invalid_request"),
        ({"source": "s"}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "id": "not-a-ulid"}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "t_ref": "yesterday"}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "t_ref": ""}, 400, "invalid_request"),
        # ISO 8601 forms that are not RFC 3339 (the episode keeps t_ref as sent)
        ({"source": "s", "content": "c", "t_ref": "20260421T103000Z"}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "t_ref": "2026-W17-2T10:30:00Z"}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "t_ref": "2026-04-21T10:30Z"}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "t_ref": "2026-04-21T10:30:00"}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "metadata": [1]}, 400, "invalid_request"),
        ({"source": "s", "content": "c", "extra": 1}, 400, "invalid_request"),
        ({"source": "s", "content": "x" * 20_000}, 413, "payload_too_large"),
        (
            {"source": "s", "content": "c", "metadata": {"x": "y" * 20_000}},
            413,
            "payload_too_large",
        ),
        ({"source": "  ", "content": ""}, 400, "invalid_request"),  # fuzzing found it
    ]
    for body, status, code in bad:
        assert_error(server.call("POST", "/v1/ingest", token, json=body), status, code)


def test_ingest_of_too_many_chunks_is_a_400_that_changes_nothing(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    ingest(server, token, id=ulid, source="keep", content="# Keep\noriginal armadillo")
    before = server.call("GET", f"/v1/episode/{ulid}", token).json()
    r = server.call(
        "POST", "/v1/ingest", token, json={"id": ulid, "source": "keep", "content": "# a\n" * 3000}
    )
    body = assert_error(r, 400, "invalid_request")
    assert "chunks" in str(body["message"]), body
    assert server.call("GET", f"/v1/episode/{ulid}", token).json() == before
    assert [h["text"] for h in recall(server, token, query="armadillo")] == [
        "# Keep\noriginal armadillo"
    ]


def test_ingest_refuses_numbers_json_cannot_carry(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    for number in ("NaN", "Infinity", "-Infinity", "1e400", "[1, -1e999]"):
        raw = f'{{"id": "{ulid}", "source": "s", "content": "c", "metadata": {{"n": {number}}}}}'
        r = server.call("POST", "/v1/ingest", token, content=raw.encode())
        body = assert_error(r, 400, "invalid_request")
        assert "is not a JSON number" in str(body["message"]), body
    assert_error(server.call("GET", f"/v1/episode/{ulid}", token), 404, "episode_not_found")
    assert snapshot(server, token, now_lsn()) == []


# ----------------------------------------------------------------------------- recall


def test_recall_hits_have_the_seed_shape(server: Server) -> None:
    token = server.tenants.take()
    episode = str(ULID())
    ingest(server, token, id=episode, source="helios:fs/notes.md", content=DOC)
    hits = recall(server, token, query="When did Alice join Acme?")
    assert hits, "the chunk about Alice is found"
    top = hits[0]
    assert set(top) == HIT_KEYS
    assert top["episode"] == episode, "a hit names its episode, for GET /v1/episode/{id}"
    assert server.call("GET", f"/v1/episode/{top['episode']}", token).status_code == 200
    assert "Alice joined Acme" in top["text"]
    assert top["source"] == "helios:fs/notes.md"
    assert top["heading_path"] == ["onboarding"]
    assert len(top["id"]) == 16 and all(isinstance(b, int) and 0 <= b < 256 for b in top["id"])
    assert set(top["valid_from"]) == {"wall_ms", "counter", "node_id"}
    assert top["valid_to"] is None
    assert top["degraded"] is False
    assert isinstance(top["rerank_applied"], bool)
    assert isinstance(top["score"], float)
    # The id is the chunk's ULID: the snapshot names the same chunk.
    keys = {line["key"] for line in snapshot(server, token, now_lsn())}
    assert f"chunk:{ULID(bytes(top['id']))}" in keys


def test_recall_k_filter_and_modes(server: Server) -> None:
    token = server.tenants.take()
    for n in range(4):
        ingest(server, token, source=f"helios:fs/{n}.md", content=f"release notes number {n}")
    ingest(server, token, source="slack:general", content="release notes from chat")
    assert len(recall(server, token, query="release notes", k=2)) == 2
    fs = recall(server, token, query="release notes", filter="source LIKE 'helios:fs/%'")
    assert fs and all(h["source"].startswith("helios:fs/") for h in fs)
    chat = recall(server, token, query="release notes", filter="source = 'slack:general'")
    assert [h["source"] for h in chat] == ["slack:general"]
    graph = recall(server, token, query="release notes", mode="graph")
    assert graph and set(graph[0]) == HIT_KEYS


def test_recall_hits_carry_relevance_and_min_relevance_cuts(server: Server) -> None:
    token = server.tenants.take()
    ingest(server, token, source="helios:fs/notes.md", content=DOC)
    hits = recall(server, token, query="When did Alice join Acme?")
    assert hits and all(0.0 <= h["relevance"] <= 1.0 for h in hits)
    top = hits[0]["relevance"]
    kept = recall(server, token, query="When did Alice join Acme?", min_relevance=top)
    assert kept and all(h["relevance"] >= top for h in kept)
    assert recall(server, token, query="When did Alice join Acme?", min_relevance=1.0) == []
    for bad in (True, 1.5, -0.1, "0.5"):
        r = server.call("POST", "/v1/recall", token, json={"query": "Alice", "min_relevance": bad})
        assert r.status_code == 400, (bad, r.text)


def test_recall_filter_on_metadata(server: Server) -> None:
    token = server.tenants.take()
    ingest(server, token, source="a", content="quarterly plan", metadata={"phase": 2})
    ingest(server, token, source="b", content="quarterly plan draft", metadata={"phase": 1})
    hits = recall(server, token, query="quarterly plan", filter="metadata.phase = 2")
    assert [h["source"] for h in hits] == ["a"]


def test_recall_filter_syntax_error_says_where(server: Server) -> None:
    token = server.tenants.take()
    r = server.call("POST", "/v1/recall", token, json={"query": "q", "filter": "source = 'a' AND"})
    body = assert_error(r, 400, "invalid_filter")
    assert body["details"]["position"] == 16  # type: ignore[index]
    assert "line 1, column 17" in str(body["message"])


def test_recall_graph_follows_links_between_chunks(server: Server) -> None:
    token = server.tenants.take()
    long_doc = "# one\nzebra crossing rules.\n\n# two\nthe second section mentions nothing.\n"
    ingest(server, token, source="g", content=long_doc)
    semantic = recall(server, token, query="zebra crossing", k=5)
    graph = recall(server, token, query="zebra crossing", k=5, mode="graph")
    assert len(graph) >= len(semantic)
    assert any(h["source_op"] == "Graph" for h in graph) or len(semantic) == 2


def test_recall_sse_streams_hits_then_done(server: Server) -> None:
    token = server.tenants.take()
    ingest(server, token, source="sse", content="streaming events are fun")
    r = server.call(
        "POST",
        "/v1/recall",
        token,
        json={"query": "streaming events"},
        headers={"Accept": "text/event-stream"},
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f.strip()]
    events = [dict(line.split(": ", 1) for line in f.splitlines()) for f in frames]
    assert [e["event"] for e in events[:-1]] == ["hit"] * (len(events) - 1)
    assert events[-1] == {"event": "done", "data": "{}"}
    assert len(events) >= 2
    assert set(json.loads(events[0]["data"])) == HIT_KEYS


def test_recall_sse_media_type_is_case_insensitive(server: Server) -> None:
    token = server.tenants.take()
    ingest(server, token, source="sse", content="streaming events are fun")
    for accept, stream in (
        ("TEXT/EVENT-STREAM", True),
        ("application/json, Text/Event-Stream; charset=utf-8", True),
        ("text/event-stream;q=0, application/json", False),
        ("application/json", False),
    ):
        r = server.call(
            "POST", "/v1/recall", token, json={"query": "streaming"}, headers={"Accept": accept}
        )
        assert r.status_code == 200
        media = "text/event-stream" if stream else "application/json"
        assert r.headers["content-type"].startswith(media), accept


def test_recall_as_of_answers_from_the_past(server: Server) -> None:
    token = server.tenants.take()
    before = rfc3339_now()
    time.sleep(0.01)
    ingest(server, token, source="past", content="the vault combination is 1234")
    time.sleep(0.01)
    between = rfc3339_now()
    assert recall(server, token, query="vault combination", as_of=before) == []
    then = recall(server, token, query="vault combination", as_of=between)
    assert [h["source"] for h in then] == ["past"]
    assert set(then[0]) == HIT_KEYS
    r = server.call("POST", "/v1/recall", token, json={"query": "q", "as_of": "last week"})
    assert_error(r, 400, "invalid_request")


def test_rfc3339_timestamps_in_every_spelling_rfc3339_allows(server: Server) -> None:
    """RFC 3339 (5.6, note) allows a lower-case ``t`` and ``z``; ``Z`` and offsets too."""
    token = server.tenants.take()
    ulid = str(ULID())
    for t_ref in ("2026-04-21t10:30:00z", "2026-04-21T10:30:00.5Z", "2026-04-21T12:30:00+02:00"):
        ingest(
            server, token, id=ulid, source="times", content="the ibis roosts at dusk", t_ref=t_ref
        )
        assert server.call("GET", f"/v1/episode/{ulid}", token).json()["t_ref"] == t_ref
    for as_of in ("2000-01-01t00:00:00z", "2000-01-01T00:00:00Z", "1969-07-20T20:17:40Z"):
        assert recall(server, token, query="ibis", as_of=as_of) == []
    # Any RFC 3339 time is a moment: past the journal's range is after every write.
    assert [
        h["source"] for h in recall(server, token, query="ibis", as_of="9999-12-31T23:59:59Z")
    ] == ["times"]
    assert [
        h["source"] for h in recall(server, token, query="ibis", as_of="2200-01-01t00:00:00z")
    ] == ["times"]
    for edge in ("2248-09-26T15:10:22.207Z", "2248-09-26T15:10:22.208Z", "2248-09-26T15:10:23Z"):
        assert [h["source"] for h in recall(server, token, query="ibis", as_of=edge)] == ["times"]
    assert recall(server, token, query="ibis", as_of="1969-12-31T23:59:59.999Z") == []


def test_recall_never_crosses_tenants(server: Server) -> None:
    a, b = server.tenants.take(), server.tenants.take()
    ingest(server, a, source="secret", content="the launch code of tenant a is swordfish")
    assert recall(server, a, query="launch code swordfish")
    assert recall(server, b, query="launch code swordfish") == []
    assert recall(server, b, query="launch code swordfish", mode="graph") == []


# ----------------------------------------------------------------------------- forget


def test_soft_forget_by_id_closes_versions(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    ingest(server, token, id=ulid, source="soft", content="the parrot is called Polly")
    time.sleep(0.01)
    before = rfc3339_now()
    r = forget(server, token, target={"Id": ulid})
    assert r.status_code == 200, r.text
    receipt = r.json()
    assert set(receipt) == {
        "target",
        "indices_affected",
        "rows_written",
        "rows_deleted",
        "audit_lsn",
        "preview",
    }
    assert receipt["target"] == {"Id": ulid}
    assert receipt["preview"] is False
    assert receipt["rows_written"] == 2  # the episode and its one chunk
    assert receipt["rows_deleted"] == 0
    assert "Kv" in receipt["indices_affected"]
    assert set(receipt["audit_lsn"]) == {"wall_ms", "counter"}
    assert recall(server, token, query="parrot Polly") == []
    assert_error(server.call("GET", f"/v1/episode/{ulid}", token), 404, "episode_not_found")
    # Gone now, visible as of before.
    assert [h["source"] for h in recall(server, token, query="parrot Polly", as_of=before)] == [
        "soft"
    ]


def test_forget_by_chunk_id(server: Server) -> None:
    token = server.tenants.take()
    ingest(
        server,
        token,
        source="c",
        content="# a\nfirst chunk about apples\n# b\nsecond about pears\n",
    )
    hit = recall(server, token, query="apples")[0]
    chunk = str(ULID(bytes(hit["id"])))
    assert forget(server, token, target={"Id": chunk}).json()["rows_written"] == 1
    assert not [h for h in recall(server, token, query="apples") if "apples" in h["text"]]
    assert recall(server, token, query="pears")


def test_forget_by_source_prefix_stays_in_the_tenant(server: Server) -> None:
    a, b = server.tenants.take(), server.tenants.take()
    ingest(server, a, source="helios:fs/session-42/x.md", content="kiwi notes")
    ingest(server, a, source="helios:fs/other.md", content="kiwi elsewhere")
    ingest(server, b, source="helios:fs/session-42/x.md", content="kiwi of tenant b")
    r = forget(server, a, target={"Scope": {"BySource": "helios:fs/session-42/"}})
    assert r.status_code == 200
    assert r.json()["rows_written"] == 2  # episode + chunk, tenant a only
    assert [h["source"] for h in recall(server, a, query="kiwi")] == ["helios:fs/other.md"]
    assert [h["source"] for h in recall(server, b, query="kiwi")] == ["helios:fs/session-42/x.md"]


def test_forget_before_an_lsn(server: Server) -> None:
    token = server.tenants.take()
    first = ingest(server, token, source="old", content="mango report")["lsn"]
    ingest(server, token, source="new", content="mango update")
    r = forget(server, token, target={"Before": first})
    assert r.status_code == 200
    assert r.json()["rows_written"] == 2
    assert [h["source"] for h in recall(server, token, query="mango")] == ["new"]


def test_hard_forget_two_steps(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    ingest(server, token, id=ulid, source="hard", content="the safe code is 9876")
    time.sleep(0.01)
    before = rfc3339_now()
    target = {"Id": ulid}
    # Without step 1: 428 with the seed's body, byte for byte.
    r = forget(server, token, target=target, hard=True)
    assert r.status_code == 428
    assert r.json() == {
        "error": "confirmation_required",
        "message": "hard-delete requires confirmation_token (serialized prior ForgetReceipt JSON)",
    }
    r = forget(server, token, target=target, hard=True, confirmation_token="{nope")
    body = assert_error(r, 400, "invalid_confirmation_token")
    assert str(body["message"]).startswith(
        "confirmation_token must be a serialized ForgetReceipt: "
    )
    # Step 1: a dry run deletes nothing and previews.
    preview = forget(server, token, target=target, dry_run=True)
    assert preview.status_code == 200
    assert preview.json()["preview"] is True
    assert preview.json()["rows_deleted"] == 2
    assert server.call("GET", f"/v1/episode/{ulid}", token).status_code == 200
    # Another tenant cannot use the receipt.
    other = forget(
        server, server.tenants.take(), target=target, hard=True, confirmation_token=preview.text
    )
    assert_error(other, 400, "invalid_confirmation_token")
    # Step 2: the receipt confirms the hard delete.
    r = forget(server, token, target=target, hard=True, confirmation_token=preview.text)
    assert r.status_code == 200, r.text
    assert r.json()["preview"] is False
    assert r.json()["rows_deleted"] == 2
    # Erased from the past too.
    assert recall(server, token, query="safe code", as_of=before) == []
    assert not [x for x in snapshot(server, token, now_lsn()) if ulid in x["key"]]
    # A receipt is good for one hard delete.
    again = forget(server, token, target=target, hard=True, confirmation_token=preview.text)
    assert_error(again, 400, "invalid_confirmation_token")


def hard_forget(server: Server, token: str, target: dict[str, Any]) -> tuple[int, int]:
    """Both steps of a hard forget: the preview's and the delete's ``rows_deleted``."""
    preview = forget(server, token, target=target, dry_run=True, hard=True)
    assert preview.status_code == 200, preview.text
    r = forget(server, token, target=target, hard=True, confirmation_token=preview.text)
    assert r.status_code == 200, r.text
    return preview.json()["rows_deleted"], r.json()["rows_deleted"]


def lsn_text(lsn: dict[str, int]) -> str:
    return f"{lsn['wall_ms']}.{lsn['counter']}"


def test_hard_forget_erases_every_version_of_a_reingested_episode(server: Server) -> None:
    token = server.tenants.take()
    ulid = str(ULID())
    first = ingest(server, token, id=ulid, source="v", content="old passphrase walrusfeather")
    time.sleep(0.01)
    ingest(server, token, id=ulid, source="v", content="nothing to see here")
    # The episode, its current chunk and the chunk of the version replaced.
    assert hard_forget(server, token, {"Id": ulid}) == (3, 3)
    assert "walrusfeather" not in json.dumps(snapshot(server, token, lsn_text(first["lsn"])))
    at = dt.datetime.fromtimestamp(first["lsn"]["wall_ms"] / 1000 + 0.0005, dt.UTC).isoformat()
    assert recall(server, token, query="walrusfeather passphrase", as_of=at) == []


def test_hard_forget_before_erases_what_was_soft_deleted(server: Server) -> None:
    token = server.tenants.take()
    old, new = str(ULID()), str(ULID())
    first = ingest(server, token, id=old, source="b", content="the vault code is quokkalantern")
    time.sleep(0.01)
    second = ingest(server, token, id=new, source="b", content="the vault is in the cellar")
    # Existed at the Lsn, soft-deleted after it.
    assert forget(server, token, target={"Id": old}).json()["rows_written"] == 2
    assert hard_forget(server, token, {"Before": first["lsn"]}) == (2, 2)
    assert snapshot(server, token, lsn_text(first["lsn"])) == []
    assert server.call("GET", f"/v1/episode/{new}", token).status_code == 200
    # Soft-deleted before the Lsn.
    assert forget(server, token, target={"Id": new}).json()["rows_written"] == 2
    time.sleep(0.01)
    now = {"wall_ms": time.time_ns() // 1_000_000, "counter": 0}
    assert hard_forget(server, token, {"Before": now}) == (2, 2)
    assert snapshot(server, token, lsn_text(second["lsn"])) == []


def test_forget_rejects_bad_targets(server: Server) -> None:
    token = server.tenants.take()
    for target in (
        {"Id": "nope"},
        {"Scope": {"ByTag": "x"}},
        {"Before": {"wall_ms": -1}},
        {"Before": {"wall_ms": 2**64, "counter": 0}},  # past the seed's u64
        {"Before": {"wall_ms": 1, "counter": 2**32}},  # past the seed's u32
        {},
    ):
        assert_error(forget(server, token, target=target), 400, "invalid_request")


def test_forget_of_another_tenants_episode_touches_nothing(server: Server) -> None:
    a, b = server.tenants.take(), server.tenants.take()
    ulid = str(ULID())
    ingest(server, a, id=ulid, source="mine", content="blueberry")
    r = forget(server, b, target={"Id": ulid})
    assert r.status_code == 200
    assert r.json()["rows_written"] == 0
    assert server.call("GET", f"/v1/episode/{ulid}", a).status_code == 200


# --------------------------------------------------------------------------- snapshot


def test_snapshot_lsn_forms_and_range(server: Server) -> None:
    token = server.tenants.take()
    for bad in ("abc", "1", "1.2.3.4", "1.x", "-1.0"):
        assert_error(server.call("GET", f"/v1/snapshot/{bad}", token), 400, "invalid_lsn")
    future = (time.time_ns() // 1_000_000) + 3_600_000
    r = server.call("GET", f"/v1/snapshot/{future}.0", token)
    assert_error(r, 404, "snapshot_out_of_range")
    assert snapshot(server, token, "1.0") == []
    assert snapshot(server, token, "1745251800123.5.0") == []


def test_lsns_take_the_seeds_u64_and_u32(server: Server) -> None:
    """The seed's Lsn is a u64 wall_ms and a u32 counter: any such pair names a position."""
    token = server.tenants.take()
    top = 2**32 - 1
    out = ingest(server, token, source="u32", content="the counter is wide")["lsn"]
    at = f"{out['wall_ms']}.{top}"
    assert [x["key"].split(":")[0] for x in snapshot(server, token, at)] == ["chunk", "episode"]
    assert snapshot(server, token, f"{out['wall_ms'] - 1}.{top}.7") == []
    too_big = server.call("GET", f"/v1/snapshot/{out['wall_ms']}.{top + 1}", token)
    assert_error(too_big, 400, "invalid_lsn")
    before = {"Before": {"wall_ms": out["wall_ms"], "counter": top}}
    r = forget(server, token, target=before, dry_run=True)
    assert r.status_code == 200, r.text
    assert r.json()["rows_deleted"] == 2
    # wall_ms is a u64: a Before past the journal's range is later than all on record.
    last = {"Before": {"wall_ms": 2**64 - 1, "counter": top}}
    r = forget(server, token, target=last, dry_run=True)
    assert r.status_code == 200, r.text
    assert r.json()["rows_deleted"] == 2


def test_snapshot_holds_the_tenants_primitives(server: Server) -> None:
    a, b = server.tenants.take(), server.tenants.take()
    ulid = str(ULID())
    out = ingest(server, a, id=ulid, source="snap", content="# h\nsnapshot me\n")
    lsn = f"{out['lsn']['wall_ms']}.{out['lsn']['counter']}"
    lines = snapshot(server, a, lsn)
    keys = sorted(line["key"] for line in lines)
    assert keys[-1] == f"episode:{ulid}" and keys[0].startswith("chunk:")
    chunk = next(x for x in lines if x["key"].startswith("chunk:"))
    assert chunk["value"]["text"] == "# h\nsnapshot me\n"
    assert set(chunk["value"]["bt"]) == {"valid", "sys"}
    assert snapshot(server, b, lsn) == []


# ---------------------------------------------------------------------------- episode


def test_episode_ids_and_tenants(server: Server) -> None:
    a, b = server.tenants.take(), server.tenants.take()
    for bad in ("abc", "01HZZZZZZZZZZZZZZZZZZZZZZ", "01HZZZZZZZZZZZZZZZZZZZZZZZZ", "8" * 26):
        assert_error(server.call("GET", f"/v1/episode/{bad}", a), 400, "invalid_episode_id")
    # U+017F (long s) upper-cases to S: before, it was read as that other, base-32 id.
    long_s = str(ULID())[:25] + "\u017f"
    ingest(server, a, id=long_s[:25] + "S", source="s-ended", content="the id ends in S")
    assert_error(server.call("GET", f"/v1/episode/{long_s}", a), 400, "invalid_episode_id")
    r = server.call("POST", "/v1/ingest", a, json={"id": long_s, "source": "x", "content": "x"})
    assert_error(r, 400, "invalid_request")
    r = server.call("POST", "/v1/forget", a, json={"target": {"Id": long_s}})
    assert_error(r, 400, "invalid_request")
    assert server.call("GET", f"/v1/episode/{long_s[:25]}S", a).json()["source"] == "s-ended"
    assert_error(server.call("GET", f"/v1/episode/{ULID()}", a), 404, "episode_not_found")
    ulid = str(ULID())
    ingest(server, a, id=ulid, source="private", content="only for a")
    assert_error(server.call("GET", f"/v1/episode/{ulid}", b), 404, "episode_not_found")
