""":class:`~memstore.protocol.stamps.StampCache`: warmed a tenant at a time, never stale.

On real SQLite and PostgreSQL journals: a cold read also reads the stamps of
the tenant's other chunks (and only of that tenant, never past the cache's
size), so later recalls read the journal not at all; a read racing a write
group never keeps the version the group replaced, whether it lands between
the group's forgetting and its journal rows (the store's lock orders them) or
anywhere else; and recalls racing ingests, re-ingests and updates end with
every remembered stamp current (:meth:`StampCache._check`) and answer what the
per-hit history answers.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

from memstore import Memory
from memstore.config import Change
from memstore.journal import Hlc, JournalBase
from memstore.protocol.mapping import KIND_CHUNK, chunk_id
from memstore.protocol.models import IngestRequest, RecallRequest
from memstore.protocol.stamps import StampCache
from memstore.protocol.verbs import Verbs
from tests.journals import open_journal
from tests.test_protocol_stamps import PerHit  # the oracle: each hit's whole history

TEXT = "# a\nthe heron wades\n\n# b\nthe heron flies off\n\n# c\nherons nest\n\n# d\nreeds sway"


@pytest.fixture(params=["sqlite", "postgresql"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    if request.param == "sqlite":
        with Memory(tmp_path, embedder=None) as memory:
            yield memory
    else:
        place = request.getfixturevalue("pg_schemas").new("stampcache")
        with Memory(journal=open_journal(place), embedder=None) as memory:
            yield memory


def reads_of(journal: JournalBase) -> list[int]:
    """Count ``journal.current_stamps`` calls in the returned one-element list."""
    calls = [0]
    inner = journal.current_stamps

    def counted(ids: Any) -> dict[str, Hlc | None]:
        calls[0] += 1
        return inner(ids)

    journal.current_stamps = counted  # type: ignore[method-assign]
    return calls


def ingest(verbs: Verbs, tenant: str, episodes: int) -> None:
    for n in range(episodes):
        verbs.ingest(tenant, IngestRequest(id=str(ULID()), source=f"s/{n}", content=TEXT))


def chunks(mem: Memory, tenant: str) -> list[str]:
    prefix = chunk_id(tenant, "")
    return sorted(it.id for it in mem.store.items() if it.id.startswith(prefix))


def current(mem: Memory, ids: Sequence[str]) -> list[Hlc | None]:
    assert isinstance(mem.journal, JournalBase)
    now = mem.journal.current_stamps(ids)
    return [now[key] for key in ids]


def test_a_cold_recall_warms_the_tenants_chunks_and_the_next_ones_read_nothing(
    mem: Memory,
) -> None:
    ingest(Verbs(mem), "t1", 3)
    ingest(Verbs(mem), "t2", 2)
    verbs = Verbs(mem)  # a server started over a folder: no stamp held
    assert isinstance(mem.journal, JournalBase)
    reads = reads_of(mem.journal)
    first = verbs.recall("t1", RecallRequest(query="heron", k=2))
    assert len(first) == 2 and reads[0] == 1
    assert len(verbs._stamps) == len(chunks(mem, "t1")) == 12  # every chunk of t1, none of t2
    for query in ("reeds", "nest", "flies"):
        req = RecallRequest(query=query, k=5)
        assert verbs.recall("t1", req) == PerHit(mem).recall("t1", req)
    assert reads[0] == 1, "the warmed stamps answer every later recall"
    verbs.recall("t2", RecallRequest(query="heron", k=1))  # t2's first: one read, t2 warmed
    assert reads[0] == 2 and len(verbs._stamps) == 20
    verbs._stamps._check()


def test_warming_takes_a_step_at_a_time_and_never_passes_the_size(mem: Memory) -> None:
    ingest(Verbs(mem), "t1", 3)
    ids = chunks(mem, "t1")
    cache = StampCache(mem.store, mem.journal, size=len(ids), warm_step=4)
    assert cache.stamps("t1", ids[-1:]) == current(mem, ids[-1:])
    assert len(cache) == 1 + 4
    fresh = next(key for key in reversed(cache._warm["t1"]) if key not in cache._held)
    asked = [ids[-1], fresh]  # one remembered, one not: the next 4 come with it
    assert cache.stamps("t1", asked) == current(mem, asked)
    assert len(cache) == 5 + 1 + 4
    small = StampCache(mem.store, mem.journal, size=3, warm_step=100)
    assert small.stamps("t1", ids[:2]) == current(mem, ids[:2])
    assert len(small) <= 3 and set(ids[:2]) <= set(small._held)  # room for one warmed at most
    assert small.stamps("t1", ids[5:7]) == current(mem, ids[5:7])
    assert len(small) == 3 and set(ids[5:7]) <= set(small._held), "the answered ones stay"
    small._check()
    cache._check()


def test_a_read_between_a_groups_forgetting_and_its_journal_rows_keeps_no_old_stamp(
    mem: Memory,
) -> None:
    """The write group drops its stamps, then (lock held) writes its journal rows.

    A read landing between the two would see the old version in the journal
    while no write group seemed to follow it: it waits for the store's lock.
    """
    verbs = Verbs(mem)
    ingest(verbs, "t1", 1)
    target = chunks(mem, "t1")[0]
    cache = StampCache(mem.store, mem.journal, warm_step=0)
    paused, go = threading.Event(), threading.Event()

    def pause(changes: Sequence[Change]) -> None:  # after the cache's forgetter, before the rows
        if any(c.id == target for c in changes):
            paused.set()
            go.wait()

    mem.store.add_change_listener(pause, before_commit=True)
    writer = threading.Thread(target=lambda: mem.update(target, content="the heron has gone"))
    writer.start()
    assert paused.wait(30)
    got: list[Hlc | None] = []
    reader = threading.Thread(target=lambda: got.extend(cache.stamps("t1", [target])))
    reader.start()
    reader.join(0.5)  # the old code read (and kept) the old stamp meanwhile
    go.set()
    writer.join()
    reader.join()
    mem.store.remove_change_listener(pause)
    assert got == current(mem, [target])
    assert cache.stamps("t1", [target]) == current(mem, [target])
    cache._check()


def test_recalls_racing_writes_keep_only_current_stamps(mem: Memory) -> None:
    verbs = Verbs(mem)
    episodes = [str(ULID()) for _ in range(4)]
    for n, episode in enumerate(episodes):
        verbs.ingest("t1", IngestRequest(id=episode, source=f"s/{n}", content=TEXT))
    queries = ["heron", "nest", "reeds sway", "the heron flies"]
    failures: list[BaseException] = []
    done = threading.Event()
    recalls = [0]

    def write() -> None:
        rng = random.Random(7)
        try:
            for n in range(40):
                if n % 3 == 0:  # a re-ingest: the episode's chunks replaced by new ones
                    content = TEXT if n % 2 else TEXT.replace("heron", "egret")
                    req = IngestRequest(id=rng.choice(episodes), source="s/x", content=content)
                    verbs.ingest("t1", req)
                else:  # a new version of one chunk in place
                    ids = chunks(mem, "t1")
                    mem.update(rng.choice(ids), content=f"the heron waits {n}")
        except BaseException as e:
            failures.append(e)
        finally:
            done.set()

    def recall(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not done.is_set():
                mode = rng.choice(["semantic", "graph"])
                # A hit deleted since its search answers valid_from None: not checked here.
                verbs.recall("t1", RecallRequest(query=rng.choice(queries), mode=mode))
                recalls[0] += 1
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=write)]
    threads += [threading.Thread(target=recall, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert recalls[0] > 0
    verbs._stamps._check()
    for query in queries:
        req = RecallRequest(query=query, k=10)
        assert verbs.recall("t1", req) == PerHit(mem).recall("t1", req)
    verbs._stamps._check()
    assert {it.kind for it in mem.store.items() if it.id in verbs._stamps._held} == {KIND_CHUNK}


def test_a_committed_write_hands_its_chunks_stamps_over_without_a_read(mem: Memory) -> None:
    verbs = Verbs(mem)
    ingest(verbs, "t1", 2)
    ids = chunks(mem, "t1")
    assert sorted(verbs._stamps._held) == ids  # the ingest's own stamps, none read
    assert isinstance(mem.journal, JournalBase)
    reads = reads_of(mem.journal)
    held = verbs._stamps.stamps("t1", ids)
    assert reads[0] == 0 and held == current(mem, ids)
    mem.update(ids[0], content="the heron has gone")
    held = verbs._stamps.stamps("t1", ids[:1])
    assert reads[0] == 1 and held == current(mem, ids[:1])  # one read: current's own
    with mem.store.batch():  # written, then deleted, in one group: no stamp to hand over
        mem.update(ids[1], content="briefly")
        mem.delete(ids[1])
    assert ids[1] not in verbs._stamps._held
    assert verbs._stamps.stamps("t1", ids[1:2]) == [None] and reads[0] == 3  # asked, warmed
    mem.delete(ids[2])
    assert ids[2] not in verbs._stamps._held and not verbs._stamps._written
    verbs._stamps._check()


def test_a_group_undone_hands_nothing_over(mem: Memory) -> None:
    verbs = Verbs(mem)
    ingest(verbs, "t1", 1)
    target = chunks(mem, "t1")[0]
    before = verbs._stamps.stamps("t1", [target])

    def refuse(changes: Sequence[Change]) -> None:
        raise RuntimeError("refused")

    mem.store.add_change_listener(refuse, before_commit=True)
    with pytest.raises(RuntimeError):
        mem.update(target, content="never written")
    mem.store.remove_change_listener(refuse)
    assert not verbs._stamps._written and target not in verbs._stamps._held
    assert verbs._stamps.stamps("t1", [target]) == before == current(mem, [target])
    verbs._stamps._check()
