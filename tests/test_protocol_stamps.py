"""A recall's ``valid_from`` is its chunk's current version stamp, read in one call per recall.

:meth:`Verbs._valid_froms` fills the stamps its cache does not hold with one
:meth:`~memstore.journal.JournalBase.current_stamps`. Checked against the
path it replaced (``history(id)[-1]`` per hit, no cache): after random
ingests, re-ingests (new versions of the same chunks) and forgets, every
recall, semantic and graph, answers the same hits byte for byte (chunks
updated in place too, as a program sharing the folder may), whether its
stamps come from the journal or from the cache (a recall asked twice), and
whether the cache holds a stamp from before the chunk changed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from memstore import Memory
from memstore.item import Item
from memstore.journal import Hlc, JournalBase
from memstore.protocol.mapping import KIND_CHUNK
from memstore.protocol.models import ForgetRequest, IngestRequest, RecallRequest
from memstore.protocol.verbs import Verbs
from tests.pgtest import Schemas

TENANT = "t1"
EPISODES = [str(ULID()) for _ in range(3)]
TEXTS = [
    "the heron wades",
    "# a\nthe heron wades\n\n# b\nthe heron flies off\n\n# c\nherons nest",
    "# a\nthe heron waits\n\n# b\na heron fishes",
]
QUERIES = ["heron", "the heron wades", "nest"]


class PerHit(Verbs):
    """The path before: each hit's whole history, its last version, nothing remembered."""

    def _valid_froms(self, tenant: str, items: list[Item]) -> list[Hlc | None]:
        out: list[Hlc | None] = []
        for item in items:
            history = self.journal.history(item.id)
            ok = history and history[-1].op == "upsert"
            out.append(history[-1].valid_from if ok else None)
        return out


class Counting(Verbs):
    """The new path, counting the journal reads it makes."""

    reads = 0

    def _valid_froms(self, tenant: str, items: list[Item]) -> list[Hlc | None]:
        journal = self.journal
        assert isinstance(journal, JournalBase)
        before = journal.current_stamps

        def counted(ids: Any) -> dict[str, Hlc | None]:
            self.reads += 1
            return before(ids)

        journal.current_stamps = counted  # type: ignore[method-assign]
        try:
            return super()._valid_froms(tenant, items)
        finally:
            del journal.current_stamps


ops = st.lists(
    st.one_of(
        st.tuples(st.just("ingest"), st.sampled_from(EPISODES), st.sampled_from(TEXTS)),
        st.tuples(st.just("forget"), st.sampled_from(EPISODES)),
        st.tuples(st.just("touch"), st.integers(0, 8)),
        st.tuples(
            st.just("recall"), st.sampled_from(QUERIES), st.sampled_from(["semantic", "graph"])
        ),
    ),
    min_size=1,
    max_size=14,
)


def check(mem: Memory, sequence: list[tuple[Any, ...]]) -> None:
    new, old = Counting(mem), PerHit(mem)
    for op in sequence:
        if op[0] == "ingest":
            new.ingest(TENANT, IngestRequest(id=op[1], source="s/1", content=op[2]))
        elif op[0] == "forget":
            new.forget(TENANT, ForgetRequest.model_validate({"target": {"Id": op[1]}}))
        elif op[0] == "touch":  # a new version of a chunk: a remembered stamp is stale
            chunks = sorted(it.id for it in mem.store.items() if it.kind == KIND_CHUNK)
            if chunks:
                item = mem.store.get(chunks[op[1] % len(chunks)])
                assert item is not None
                mem.update(item.id, content=f"{item.content} heron")
        else:
            req = RecallRequest(query=op[1], mode=op[2], k=5)
            reads = new.reads
            cold = new.recall(TENANT, req)
            assert cold == old.recall(TENANT, req), op
            assert new.reads - reads <= (2 if op[2] == "graph" else 1), "one read per step"
            assert new.recall(TENANT, req) == cold, "the remembered stamps are the same"
            assert all(hit["valid_from"] is not None for hit in cold)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_recall_stamps_are_those_of_the_per_hit_history(sequence: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder, Memory(Path(folder), embedder=None) as mem:
        check(mem, sequence)


def test_recall_stamps_on_postgresql(pg_schemas: Schemas) -> None:
    from tests.journals import open_journal

    sequence: list[tuple[Any, ...]] = [
        ("ingest", EPISODES[0], TEXTS[1]),
        ("recall", "heron", "graph"),
        ("ingest", EPISODES[0], TEXTS[2]),
        ("ingest", EPISODES[1], TEXTS[0]),
        ("recall", "heron", "semantic"),
        ("forget", EPISODES[1]),
        ("touch", 1),
        ("recall", "heron", "graph"),
    ]
    with Memory(journal=open_journal(pg_schemas.new("recall")), embedder=None) as mem:
        check(mem, sequence)


def test_a_cold_recall_reads_the_journal_once_and_a_warm_one_not_at_all(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        writer = Verbs(mem)
        for n, episode in enumerate(EPISODES):
            writer.ingest(TENANT, IngestRequest(id=episode, source=f"s/{n}", content=TEXTS[1]))
        verbs = Counting(mem)  # a server started over the folder: no stamp held
        req = RecallRequest(query="heron", k=7)
        hits = verbs.recall(TENANT, req)
        assert len(hits) == 7 and verbs.reads == 1
        assert verbs.recall(TENANT, req) == hits and verbs.reads == 1


def put_back_after_delete(mem: Memory) -> None:
    """The reproducer: a chunk deleted and put back as it was keeps its ``updated_at``.

    Before: the stamps were remembered by ``(id, updated_at)``, and ``Store.put``
    (as ``mirror``, ``reflect`` and an import) keeps the caller's ``updated_at``,
    so the recall after the put answered the first version's stamp while the
    chunk's history ended in a newer one.
    """
    v = Verbs(mem)
    content = {"source": "s1", "content": "the backup runs at 02:00"}
    v.ingest("acme", IngestRequest.model_validate(content))
    query = RecallRequest.model_validate({"query": "backup"})
    first = v.recall("acme", query)[0]["valid_from"]
    chunk = next(i for i in mem.store.items() if i.content.startswith("the backup"))
    mem.delete(chunk.id)
    mem.store.put(chunk)
    current = mem.history(chunk.id)[-1].valid_from
    assert current is not None and current.to_json() != first
    hit = v.recall("acme", query)[0]
    assert hit["text"] == chunk.content
    assert hit["valid_from"] == current.to_json()
    assert hit["valid_from"] == PerHit(mem).recall("acme", query)[0]["valid_from"]


def test_a_chunk_put_back_with_its_updated_at_gets_its_new_stamp(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        put_back_after_delete(mem)


def test_a_chunk_put_back_with_its_updated_at_gets_its_new_stamp_on_postgresql(
    pg_schemas: Schemas,
) -> None:
    from tests.journals import open_journal

    with Memory(journal=open_journal(pg_schemas.new("putback")), embedder=None) as mem:
        put_back_after_delete(mem)
