"""The recall answer's hot path: the same bytes as the general path, built for less.

A plain recall is answered by :class:`~memstore.protocol.fastpath.RecallFastPath`
(no router), its hits as they are (no FastAPI ``jsonable_encoder`` walk), and a
hit's ``id`` bytes are read from the ULID as one base-32 number; each must give
exactly what the general code gives.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.encoders import jsonable_encoder
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from memstore import Item, Memory
from memstore.protocol import TokenTable
from memstore.protocol.app import create_app
from memstore.protocol.fastpath import RecallFastPath
from memstore.protocol.mapping import chunk_id, hit_body, ulid_bytes, ulid_of
from memstore.protocol.models import RecallRequest
from memstore.protocol.verbs import Verbs
from memstore.web.refusal import json_bytes
from memstore.web.responses import NewlineJSONResponse, send_json_answer

TOKENS = '{"tok": {"tenant": "acme", "scopes": ["ingest", "recall"]}}'


@given(st.binary(min_size=16, max_size=16))
def test_ulid_bytes_reads_every_ulid_as_python_ulid_does(raw: bytes) -> None:
    text = str(ULID(raw))
    assert ulid_bytes(text) == list(raw) == list(ULID.from_str(text).bytes)
    assert ulid_bytes(text.lower()) == list(ULID.from_str(text.lower()).bytes)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "01ARZ3NDEKTSV4RRFFQ69G5FA",
        "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
        "8ZZZZZZZZZZZZZZZZZZZZZZZZZ",
        "01ARZ3NDEKTSV4RRFFQ69G5FAU",
        "01ARZ3NDEKTSV4RRFFQ69G5FA!",
    ],
)
def test_ulid_bytes_refuses_what_python_ulid_refuses(bad: str) -> None:
    with pytest.raises(ValueError) as expected:
        ULID.from_str(bad)
    with pytest.raises(ValueError) as got:
        ulid_bytes(bad)
    assert str(got.value) == str(expected.value)


def fast_path_of(app: Any) -> RecallFastPath:
    """The app's fast path, found down its built middleware stack."""
    node = app.middleware_stack
    while not isinstance(node, RecallFastPath):
        node = node.app
    return node


def test_a_recall_answers_the_bytes_of_its_hits_as_json(tmp_path: Path) -> None:
    """The body is the hits through FastAPI's own encoder, byte for byte, with the same
    media type and length headers, for queries answered lexically and fused."""
    with Memory(tmp_path, embedder="hash") as mem:
        app = create_app(mem, tokens=TokenTable.from_json(TOKENS))
        client = TestClient(app)
        auth = {"Authorization": "Bearer tok"}
        notes = [
            "# Deploys\nThe deploy of v2.8 failed on Friday, rolled back by Ana.",
            "# Café\nLe café est fermé le lundi; « pause » à 15 h.",
            "# Alerts\nDisk alerts on db-3 page the on-call engineer.",
        ]
        for i, content in enumerate(notes):
            r = client.post(
                "/v1/ingest", headers=auth, json={"source": f"s{i}", "content": content}
            )
            assert r.status_code == 200
        direct = Verbs(mem)
        for body in (
            {"query": "deploy"},
            {"query": "café fermé", "k": 2},
            {"query": "who pages someone when disks fill up", "mode": "graph"},
            {"query": "nothing matches zzqx"},
        ):
            r = client.post("/v1/recall", headers=auth, json=body)
            assert r.status_code == 200
            hits = direct.recall("acme", RecallRequest.model_validate(body))
            assert r.content == json_bytes(jsonable_encoder(hits))
            assert r.headers["content-type"] == "application/json"
            assert r.headers["content-length"] == str(len(r.content))
            # A JSON media type the fast path leaves to the route: the same answer.
            routed = client.post(
                "/v1/recall",
                headers={**auth, "Content-Type": "application/merge-patch+json"},
                content=json.dumps(body),
            )
            assert (routed.content, routed.headers) == (r.content, r.headers)
        assert fast_path_of(app).answered == 4


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON)
def test_send_json_answer_sends_the_messages_of_the_response_class(content: Any) -> None:
    """The fast path's answer, sent without a response object, is the two messages
    ``NewlineJSONResponse(content)`` sends: status, headers in their order, body."""

    async def messages(answer: Any) -> list[Any]:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        await answer(send)
        return sent

    async def receive() -> Any:
        raise AssertionError("an answer reads nothing")

    scope = {"type": "http", "method": "POST", "path": "/v1/recall", "headers": []}
    by_class = asyncio.run(
        messages(lambda send: NewlineJSONResponse(content)(scope, receive, send))
    )
    by_function = asyncio.run(messages(lambda send: send_json_answer(send, content)))
    assert by_function == by_class


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        ({"query": "deploy", "k": 0}, {}, 400),  # the route words the validation error
        ({"query": "deploy", "extra": 1}, {}, 400),
        ({"query": "   "}, {}, 400),  # checked by the verb: answered by the fast path
        ({"query": "deploy", "filter": "kind = = x"}, {}, 400),
        ({"query": "deploy", "as_of": "2020-01-01T00:00:00Z"}, {}, 200),
        ({"query": "deploy"}, {"Accept": "text/event-stream"}, 200),
        ([1, 2], {}, 400),
    ],
)
def test_what_the_fast_path_leaves_or_refuses_is_answered_as_by_the_route(
    tmp_path: Path, body: Any, headers: dict[str, str], status: int
) -> None:
    """Invalid bodies, as_of and streamed recalls reach the route; a request the verb
    refuses is refused with the route's own error body, whichever path answers."""
    with Memory(tmp_path, embedder="hash") as mem:
        app = create_app(mem, tokens=TokenTable.from_json(TOKENS))
        client = TestClient(app)
        auth = {"Authorization": "Bearer tok"}
        client.post("/v1/ingest", headers=auth, json={"source": "s", "content": "# D\ndeploy"})
        fast = client.post("/v1/recall", headers={**auth, **headers}, content=json.dumps(body))
        routed = client.post(
            "/v1/recall",
            headers={**auth, **headers, "Content-Type": "application/merge-patch+json"},
            content=json.dumps(body),
        )
        assert fast.status_code == status
        assert (fast.content, fast.headers) == (routed.content, routed.headers)


@given(
    raw=st.binary(min_size=16, max_size=16),
    path=st.one_of(
        st.lists(st.text(max_size=8), max_size=4).map(lambda p: json.dumps(p, ensure_ascii=False)),
        st.sampled_from(['{"a": 1}', '"x"', "[1, 2]", '[["a"]]', "null", "[]"]),
    ),
)
def test_a_hit_reads_its_id_and_headings_once_and_hands_out_new_lists(
    raw: bytes, path: str
) -> None:
    """A server answers the same chunks again and again: the second hit of a chunk does
    not read its ULID or its heading path again, and is equal to the first; each hit
    gets lists of its own (a caller changing one changes no other), and a heading path
    that is not a list of headings is read as it is, each time."""
    from memstore import Item
    from memstore.protocol import mapping

    ulid = str(ULID(raw))
    item = Item(id=f"ch:acme:{ulid}", kind="chunk", content="x", data={"heading_path": path})

    def hit() -> dict[str, Any]:
        return mapping.hit_body(
            item, 1.0, valid_from=None, rerank_applied=True, source_op="Reranked"
        )

    first = hit()
    assert first["id"] == list(raw) and first["heading_path"] == json.loads(path)
    reads: list[object] = []
    loads = json.loads
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mapping.json, "loads", lambda s: reads.append(s) or loads(s))
        patch.setattr(mapping, "ulid_bytes", lambda u: reads.append(u) or ulid_bytes(u))
        second = hit()
    assert second == first
    is_headings = isinstance(first["heading_path"], list) and all(
        isinstance(h, str) for h in first["heading_path"]
    )
    assert reads == ([] if is_headings else [path])
    for key in ("id", "heading_path"):
        if isinstance(second[key], list):
            assert second[key] is not first[key]
            second[key].append("changed")
            assert hit()[key] == first[key]


def _hit_body_as_it_was(item: Item, score: float, relevance: float | None) -> dict[str, Any]:
    """:func:`hit_body` before its parts were remembered per item: everything read each time."""
    return {
        "id": ulid_bytes(ulid_of(item.id)),
        "score": score,
        "text": item.content,
        "source": item.data.get("source", ""),
        "heading_path": json.loads(item.data.get("heading_path", "[]")),
        "valid_from": None,
        "valid_to": None,
        "degraded": False,
        "rerank_applied": True,
        "source_op": "reranked",
        "episode": item.data.get("episode") or None,
        "relevance": relevance,
        "graph_complete": None,
    }


_HEADINGS = st.one_of(
    st.lists(st.text(max_size=5), max_size=3).map(json.dumps),
    st.sampled_from(['"not a list"', "[1, 2]", '{"a": 1}', "null"]),
)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([str(ULID(bytes([n] * 16))) for n in range(3)]),
            st.text(max_size=8),
            st.fixed_dictionaries(
                {},
                optional={
                    "source": st.text(max_size=5),
                    "heading_path": _HEADINGS,
                    "episode": st.sampled_from(["", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]),
                },
            ),
        ),
        min_size=1,
        max_size=8,
    ),
    st.booleans(),
)
def test_hit_body_answers_as_it_did_when_it_read_everything_each_time(
    writes: list[tuple[str, str, dict[str, str]]], again: bool
) -> None:
    """Items of a few ids, each a new version (object) after another, answered once or
    twice each: what is remembered of an earlier version never leaks into a later one."""
    for ulid, content, data in writes:
        item = Item(id=chunk_id("acme", ulid), kind="chunk", content=content or "x", data=data)
        for _ in range(2 if again else 1):
            got = hit_body(
                item,
                0.5,
                valid_from=None,
                rerank_applied=True,
                source_op="reranked",
                relevance=0.25,
            )
            assert got == _hit_body_as_it_was(item, 0.5, 0.25)


_OWNERS = st.sampled_from(
    [["tenant/acme"], ["tenant/other"], [], ["shared"], ["x", "tenant/acme", "tenant/other"]]
)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([str(ULID(bytes([n] * 16))) for n in range(3)]),
            _OWNERS,
            st.sampled_from(["public", "private"]),
            st.fixed_dictionaries(
                {},
                optional={
                    "source": st.text(max_size=5),
                    "heading_path": _HEADINGS,
                    "episode": st.sampled_from(["", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]),
                },
            ),
            st.floats(allow_nan=False),
            st.one_of(st.none(), st.tuples(st.integers(0, 2**48), st.integers(0, 9))),
        ),
        max_size=8,
    ),
    st.booleans(),
    st.booleans(),
)
def test_recall_hits_are_the_owned_results_through_hit_body(
    rows: list[tuple[str, list[str], str, dict[str, str], float, tuple[int, int] | None]],
    owned_only: bool,
    again: bool,
) -> None:
    """:func:`recall_hits` (one loop, parts and owner remembered per item) against what
    ``Verbs._hits`` did before: the results :func:`owned_by` the tenant (when asked),
    their stamps asked once for those items, then :func:`hit_body` of each."""
    from memstore.journal import Hlc
    from memstore.protocol.mapping import owned_by, recall_hits
    from memstore.search import SearchResult

    results = []
    stamp_of: dict[str, Hlc | None] = {}
    for ulid, tags, scope, data, score, stamp in rows:
        item = Item(
            id=chunk_id("acme", ulid), kind="chunk", content="x", tags=tags, scope=scope, data=data
        )
        results.append(SearchResult(item, score, relevance=abs(score) % 1.0))
        stamp_of[item.id] = Hlc(*stamp) if stamp is not None else None
    asked: list[list[str]] = []

    def stamps(items: list[Item]) -> list[Hlc | None]:
        asked.append([it.id for it in items])
        return [stamp_of[it.id] for it in items]

    kept = [r for r in results if not owned_only or owned_by(r.item, "acme")]
    want = [
        hit_body(
            r.item,
            r.score,
            valid_from=stamp_of[r.item.id],
            rerank_applied=False,
            source_op="Reranked",
            relevance=r.relevance,
        )
        for r in kept
    ]
    for _ in range(2 if again else 1):
        asked.clear()
        got_kept, got = recall_hits(
            results,
            "acme",
            stamps,
            owned_only=owned_only,
            rerank_applied=False,
            source_op="Reranked",
        )
        assert got_kept == kept and got == want
        assert asked == [[r.item.id for r in kept]]
        for hit in got:  # lists of its own: a caller changing one changes nothing kept
            hit["id"].append(0)
            if isinstance(hit["heading_path"], list):
                hit["heading_path"].append("changed")
