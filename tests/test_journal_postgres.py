"""What only the PostgreSQL journal does: many writers on one record, following, failures.

Each journal here stands for one process (its own connections, store and
follower thread); the real-process proofs are in
``test_journal_replication.py``. The shared behaviour of both backends is in
``test_journal.py``.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item, JournalError, JournalSchemaError, Memory, Store
from memstore.journal import InvalidLsnError, Lsn
from memstore_index import CellStore, HashEmbedder
from tests.pgproxy import CuttingProxy
from tests.pgtest import PgPlace, postgres_module

PostgresJournal = postgres_module().PostgresJournal

WAIT_S = 30.0
"""The longest a test waits for a follower (a hang guard, not a threshold)."""


class CountingEmbedder(HashEmbedder):
    """A hash embedder that counts the texts it embedded."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed(texts)


class Node:
    """One "process": a journal, its store, and optionally its vector index."""

    def __init__(self, place: PgPlace, *, cells: bool = False, **kwargs: Any) -> None:
        options: dict[str, Any] = {"durability": "off", "poll_interval": 0.5, **kwargs}
        self.journal = PostgresJournal(place.dsn, schema=place.schema, **options)
        self.store = Store()
        self.journal.attach(self.store)
        self.embedder = CountingEmbedder()
        self.cells: CellStore | None = None
        if cells:
            self.cells = CellStore(self.embedder)
            self.journal.attach_cells(self.cells)

    def state(self) -> dict[str, dict[str, Any]]:
        with self.store.lock:  # type: ignore[attr-defined]
            return {it.id: it.model_dump() for it in self.store.items_locked()}

    def catch_up(self) -> None:
        """Wait until everything on record is in this node's store."""
        assert self.journal.wait_for(self.journal.head(), WAIT_S), self.journal.feed_status()

    def close(self) -> None:
        self.journal.close()


@pytest.fixture
def nodes(pg_place: PgPlace) -> Iterator[Any]:
    opened: list[Node] = []

    def make(**kwargs: Any) -> Node:
        node = Node(pg_place, **kwargs)
        opened.append(node)
        return node

    yield make
    for node in opened:
        node.close()


def record(journal: PostgresJournal) -> dict[str, dict[str, Any]]:
    return {it.id: it.model_dump() for it in journal.current()}


# ------------------------------------------------------------------ opening


def test_node_ids_are_unique_among_open_journals(pg_place: PgPlace) -> None:
    journals = [PostgresJournal(pg_place.dsn, schema=pg_place.schema) for _ in range(3)]
    ids = [j.node_id for j in journals]
    assert len(set(ids)) == 3 and all(1 <= n <= 65535 for n in ids)
    rows = pg_place.sql("SELECT node FROM {s}.nodes ORDER BY node")
    assert sorted(ids) == [r[0] for r in rows]
    # the claim is an advisory lock held by the journal's connection
    held = pg_place.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
    assert held[0][0] >= 3
    journals[0].close()
    again = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    assert again.node_id not in ids[1:]
    for j in [*journals[1:], again]:
        j.close()


@pytest.mark.parametrize("node_id", [None, 4242])
def test_every_connection_is_named_after_its_node(pg_place: PgPlace, node_id: int | None) -> None:
    """``memstore:<schema>:<write|read|follow>:<node>`` in ``pg_stat_activity``."""
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, node_id=node_id)
    store = Store()
    journal.attach(store)
    store.upsert(Item(id="x", kind="note", title="x"))
    journal.history("x")  # a read connection
    assert node_id is None or journal.node_id == node_id
    node = journal.node_id
    expected = [f"memstore:{pg_place.schema}:{role}:{node}" for role in ("follow", "read", "write")]
    deadline = time.monotonic() + 30  # the follower connects on a thread of its own
    while True:
        names = pg_place.sql(
            "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE %s",
            f"memstore:{pg_place.schema}:%",
        )
        seen = sorted(r[0] for r in names)
        if seen == expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert seen == expected
    journal.close()


def test_unreachable_server_fails_clearly_without_the_password() -> None:
    with pytest.raises(JournalError, match=r"cannot connect to PostgreSQL at app@127\.0\.0\.1:1/"):
        PostgresJournal("postgresql://app:s3cret@127.0.0.1:1/memory", connect_timeout=2)
    try:
        PostgresJournal("postgresql://app:s3cret@127.0.0.1:1/memory", connect_timeout=2)
    except JournalError as e:
        assert "s3cret" not in str(e)


_TOKEN = st.text(alphabet="abcXYZ0189", min_size=1, max_size=4).map(lambda t: "Zq" + t)
_SEPARATOR = st.sampled_from(list("/?#@%:[] =&',;\\\"+"))


@st.composite
def _passwords(draw: st.DrawFn) -> str:
    """Passwords made of ``Zq...`` tokens glued by characters a DSN treats specially.

    Every piece libpq could cut out of one holds ``Zq``, which nothing else in
    a message does: a message without ``Zq`` holds no part of the password.
    """
    tokens = draw(st.lists(_TOKEN, min_size=1, max_size=4))
    glue = draw(st.lists(_SEPARATOR, min_size=len(tokens) - 1, max_size=len(tokens) - 1))
    return tokens[0] + "".join(g + t for g, t in zip(glue, tokens[1:], strict=True))


_DSN_FORMS = [
    "postgresql://postgres:{pw}@127.0.0.1:{port}/test",
    "postgres://postgres:{pw}@127.0.0.1:{port}/test?connect_timeout=2",
    "postgresql://postgres@127.0.0.1:{port}/test?password={pw}",
    "host=127.0.0.1 port={port} user=postgres password={pw} dbname=test",
    "host=127.0.0.1 port={port} user=postgres password='{pw}' dbname=test",
]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(password=_passwords(), form=st.sampled_from(_DSN_FORMS), port=st.sampled_from([5432, 1]))
def test_no_message_holds_any_part_of_the_password(
    pg_place: PgPlace, password: str, form: str, port: int
) -> None:
    """Whatever the DSN looks like, written as is: an unescaped / or %, a space, a quote."""
    import traceback

    assert "Zq" not in pg_place.dsn + pg_place.schema
    dsn = form.format(pw=password, port=port)
    try:
        journal = PostgresJournal(dsn, schema=pg_place.schema, connect_timeout=2)
    except JournalError as e:
        told = "".join(traceback.format_exception(e))  # chained causes included
        assert "Zq" not in told, told
    else:
        assert "Zq" not in repr(journal)
        journal.close()


@pytest.mark.parametrize(
    ("dsn", "where"),
    [
        ("postgresql://app:s3cret@127.0.0.1:1/memory", "app@127.0.0.1:1/memory"),
        ("postgresql://app:s3%2Fcret@127.0.0.1:1/memory", "app@127.0.0.1:1/memory"),
        ("host=127.0.0.1 port=1 user=app password='s3 cret' dbname=m", "app@127.0.0.1:1/m"),
        ("postgresql://app:s3/cret@127.0.0.1:1/memory", "the given DSN"),
        ("postgresql://app:s3@cret@127.0.0.1:1/memory", "the given DSN"),
        ("postgresql://app:s3%cret@127.0.0.1:1/memory", "the given DSN"),
        ("host=127.0.0.1 password=s3 cret", "the given DSN"),
    ],
)
def test_a_dsn_is_described_only_when_it_reads_as_written(dsn: str, where: str) -> None:
    from memstore.journal._pgconn import describe

    assert describe(dsn) == where


def test_a_mangled_dsn_is_not_quoted_and_says_how_to_fix_it() -> None:
    with pytest.raises(JournalError, match=r"percent-encode") as caught:
        PostgresJournal("postgresql://app:Zq9/sec@127.0.0.1:1/memory", connect_timeout=2)
    assert "Zq9" not in str(caught.value) and "sec" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_foreign_schema_is_refused(pg_place: PgPlace) -> None:
    pg_place.sql("CREATE SCHEMA {s}")
    pg_place.sql("CREATE TABLE {s}.users (name TEXT)")
    with pytest.raises(JournalSchemaError, match="not a memstore journal"):
        PostgresJournal(pg_place.dsn, schema=pg_place.schema)


def test_bad_arguments_are_refused(pg_place: PgPlace) -> None:
    with pytest.raises(ValueError, match="schema"):
        PostgresJournal(pg_place.dsn, schema="no; drop table")
    with pytest.raises(ValueError, match="durability"):
        PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="schema"):
        PostgresJournal(pg_place.dsn, schema=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dsn"):
        PostgresJournal(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("node_id", "3"),
        ("node_id", True),
        ("node_id", -1),
        ("node_id", 65_536),
        ("wall", "time"),
        ("replicate", "no"),  # would follow the feed: the string is truthy
        ("poll_interval", "2"),
        ("poll_interval", True),
        ("connect_timeout", "5"),
        ("connect_timeout", -1),  # libpq reads it as "wait for ever"
        ("connect_timeout", 0),
        ("connect_timeout", 2.5),
        ("lock_timeout", "3"),
        ("lock_timeout", True),
    ],
)
def test_an_option_of_the_wrong_type_is_refused_before_connecting(
    option: str, value: object
) -> None:
    # Port 1: nothing listens, so only a check before connecting can answer.
    with pytest.raises(ValueError, match=f"^{option} must be"):
        PostgresJournal("postgresql://app@127.0.0.1:1/memory", **{option: value})


# -------------------------------------------------------------- replication


def test_writes_reach_every_other_process(nodes: Any) -> None:
    a, b = nodes(durability="full"), nodes()
    x = a.store.upsert(Item(kind="note", title="written by a"))
    # read-your-writes: the writer's store and the record have it on return
    assert a.store.get(x.id) is not None and x.id in record(a.journal)
    assert b.journal.wait_for(a.journal.last_lsn(), WAIT_S)  # type: ignore[arg-type]
    assert b.state() == a.state()
    b.store.upsert(Item(id=x.id, kind="note", title="edited by b"))
    b.store.delete(b.store.upsert(Item(kind="note", title="short-lived")).id)
    a.catch_up()
    assert a.state() == b.state() == record(a.journal)
    titles = [v.item.title if v.item else None for v in a.journal.history(x.id)]
    assert titles == ["written by a", "edited by b"]
    nodes_of = [v.valid_from.node_id for v in a.journal.history(x.id)]
    assert nodes_of == [a.journal.node_id, b.journal.node_id]
    # b's own commits reach its feed position when its follower passes them
    # (asynchronously): wait for that, then the position is the head.
    b.catch_up()
    status = b.journal.feed_status()
    assert status.following and status.position == b.journal.head()


def test_the_later_commit_wins_everywhere_even_from_a_slow_clock(nodes: Any) -> None:
    fast, slow = nodes(wall=lambda: 2_000_000_000_000), nodes(wall=lambda: 1_000_000_000_000)
    x = fast.store.upsert(Item(kind="note", title="fast clock"))
    # the slow node has not seen it yet in its store, or has: either way it writes after
    slow.store.upsert(Item(id=x.id, kind="note", title="slow clock, later commit"))
    versions = fast.journal.history(x.id)
    assert [v.item.title for v in versions if v.item] == ["fast clock", "slow clock, later commit"]
    assert versions[1].valid_from > versions[0].valid_from  # stamped above the record's head
    assert versions[0].valid_to == versions[1].valid_from
    fast.catch_up()
    slow.catch_up()
    assert fast.state() == slow.state() == record(fast.journal)
    assert fast.store.get(x.id).title == "slow clock, later commit"  # type: ignore[union-attr]


def test_concurrent_writers_to_the_same_ids_converge(nodes: Any) -> None:
    a, b = nodes(), nodes()
    ids = [f"shared-{i}" for i in range(12)]
    errors: list[BaseException] = []

    def writer(node: Node, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for n in range(60):
                id = rng.choice(ids)
                if rng.random() < 0.15:
                    node.store.delete(id)
                elif rng.random() < 0.2:
                    with node.store.batch():
                        for other in rng.sample(ids, 3):
                            node.store.upsert(Item(id=other, kind="note", title=f"{seed} b{n}"))
                else:
                    node.store.upsert(Item(id=id, kind="note", title=f"{seed} w{n}"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [
        threading.Thread(target=writer, args=(node, seed)) for seed, node in enumerate([a, a, b, b])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    a.catch_up()
    b.catch_up()
    assert a.state() == b.state() == record(a.journal)
    a.store._check()
    b.store._check()
    for id in ids:  # each chain is whole: one open version, closed in stamp order
        versions = a.journal.history(id)
        if versions:
            assert versions[-1].valid_to is None
            assert all(p.valid_to == q.valid_from for p, q in itertools.pairwise(versions))


def test_purge_and_import_reach_other_processes(nodes: Any) -> None:
    import io

    a, b = nodes(), nodes()
    keep = a.store.upsert(Item(kind="note", title="kept"))
    secret = a.store.upsert(Item(kind="note", title="secret"))
    out = io.StringIO()
    a.journal.export(None, out)
    b.catch_up()
    assert a.journal.purge([secret.id, keep.id]) == sorted([secret.id, keep.id])
    b.catch_up()
    assert b.state() == {} and b.journal.history(secret.id) == []
    assert b.journal.import_(io.StringIO(out.getvalue())) == 2
    a.catch_up()
    assert a.state() == b.state() == record(a.journal)
    assert sorted(a.state()) == sorted([keep.id, secret.id])


def test_waiting_for_last_lsn_covers_a_purge_and_an_import(nodes: Any) -> None:
    """Another process that waits for ``last_lsn()`` after a purge or an import sees it."""
    import io

    a, b = nodes(poll_interval=30.0), nodes(poll_interval=30.0)
    secret = a.store.upsert(Item(kind="note", title="api key sk-123"))
    kept = a.store.upsert(Item(kind="note", title="kept"))
    assert b.journal.wait_for(a.journal.last_lsn(), WAIT_S)  # type: ignore[arg-type]
    written = a.journal.last_lsn()
    a.journal.purge([secret.id])
    purged = a.journal.last_lsn()
    assert purged is not None and purged > written and purged == a.journal.head()
    assert b.journal.wait_for(purged, WAIT_S)
    assert b.store.get(secret.id) is None and b.store.get(kept.id) is not None

    out = io.StringIO()
    a.journal.export(None, out)
    a.journal.purge([kept.id])
    a.journal.import_(io.StringIO(out.getvalue()))  # brings ``kept`` back
    imported = a.journal.last_lsn()
    assert imported is not None and imported > purged and imported == a.journal.head()
    assert b.journal.wait_for(imported, WAIT_S)
    assert b.store.get(kept.id) is not None


def test_a_new_process_starts_from_the_record_and_follows(nodes: Any) -> None:
    a = nodes()
    for i in range(5):
        a.store.upsert(Item(kind="note", title=f"before {i}"))
    b = nodes()
    assert b.state() == a.state()
    assert b.journal.feed_status().position == a.journal.head()
    a.store.upsert(Item(kind="note", title="after"))
    b.catch_up()
    assert b.state() == a.state()


def test_catch_up_in_small_batches_and_chunks(nodes: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny batch and chunk sizes: a commit larger than a batch, batches split by ids."""
    from memstore.journal import _pgapply, _pgfeed

    monkeypatch.setattr(_pgfeed, "BATCH_COMMITS", 3)
    monkeypatch.setattr(_pgfeed, "BATCH_IDS", 4)
    monkeypatch.setattr(_pgapply, "APPLY_CHUNK", 2)
    a, b = nodes(), nodes()
    with b.store.lock:  # type: ignore[attr-defined]  # b's follower waits: commits pile up
        with a.store.batch():  # one commit of 7 ids: more than a batch, applied in 4 chunks
            for i in range(7):
                a.store.upsert(Item(id=f"big-{i}", kind="note", title=f"big {i}"))
        for i in range(10):
            a.store.upsert(Item(id=f"one-{i % 4}", kind="note", title=f"one {i}"))
        for i in range(9):
            with a.store.batch():
                a.store.upsert(Item(id=f"pair-{i}", kind="note", title=f"pair {i}"))
                a.store.delete(f"big-{i % 7}")
    b.catch_up()
    assert b.state() == a.state() == record(a.journal)
    assert b.journal.feed_status().batches >= 8  # 20 commits, 3 at most a batch


def test_wait_for_reports_a_position_it_cannot_reach(nodes: Any) -> None:
    a, lone = nodes(), nodes(replicate=False)
    a.store.upsert(Item(kind="note", title="x"))
    assert not lone.journal.feed_status().following
    assert lone.journal.wait_for(a.journal.head(), 0.05) is False
    assert lone.journal.wait_for(Lsn(0, 0), 0.05) is True


@pytest.mark.parametrize("timeout", [math.nan, "5", True, -1])
def test_wait_for_refuses_a_timeout_that_is_not_a_time(nodes: Any, timeout: object) -> None:
    lone = nodes(replicate=False)
    far = Lsn(lone.journal.head().wall_ms + 10**6, 0)  # never reached: NaN waited for ever
    with pytest.raises(ValueError, match=r"^timeout must be"):
        lone.journal.wait_for(far, timeout)


def test_wait_for_reads_an_endless_timeout_as_none(nodes: Any) -> None:
    lone = nodes(replicate=False)
    assert lone.journal.wait_for(Lsn(0, 0), math.inf) is True
    assert lone.journal.wait_for(Lsn(0, 0), 10**30) is True


def test_wait_for_takes_every_form_of_a_position_as_of_does(nodes: Any) -> None:
    a, b = nodes(), nodes()
    a.store.upsert(Item(kind="note", title="x"))
    at = a.journal.last_lsn()
    # the text form is what /healthz and ingest answers carry between processes
    assert b.journal.wait_for(f"{at.wall_ms}.{at.counter}", WAIT_S) is True
    assert b.journal.wait_for(a.journal.head(), WAIT_S) is True
    for bad in ("garbage", None, 5, at.to_datetime()):  # a moment is not a commit
        with pytest.raises(InvalidLsnError):
            b.journal.wait_for(bad, 0.05)


# ------------------------------------------------------------------ vectors


def test_a_replica_never_embeds_what_a_writer_embedded(nodes: Any) -> None:
    a, b = nodes(cells=True), nodes(cells=True)
    notes = [
        a.store.upsert(Item(kind="note", title=f"incident {i}", content=f"api timeout {i}"))
        for i in range(20)
    ]
    with a.store.batch():
        a.store.upsert(notes[0].clone(content="the pool ran dry"))  # a new text, a new vector
        a.store.upsert(notes[1].clone(kind="observation"))  # same text: no new vector
        a.store.delete(notes[2].id)
    b.catch_up()
    assert a.embedder.texts == 21
    assert b.embedder.texts == 0, "the replica embedded"
    assert a.cells is not None and b.cells is not None
    assert a.cells.ids() == b.cells.ids()
    for id in a.cells.ids():
        assert np.array_equal(a.cells.vector(id), b.cells.vector(id))
    query = a.embedder.embed(["pool ran dry"])[0]
    assert a.cells.search_vector(query, 5) == b.cells.search_vector(query, 5)
    b.cells._check()
    # a restart loads every vector from the record
    c = nodes(cells=True)
    assert c.embedder.texts == 0 and c.cells is not None and c.cells.ids() == a.cells.ids()


def test_no_embed_travels_to_replicas(nodes: Any) -> None:
    a, b = nodes(cells=True), nodes(cells=True)
    raw = a.store.upsert(Item(kind="note", title="raw log line", no_embed=True))
    a.store.upsert(Item(kind="note", title="an ordinary note"))
    b.catch_up()
    got = b.store.get(raw.id)
    assert got is not None and got.no_embed
    assert a.cells is not None and b.cells is not None
    assert raw.id not in a.cells and raw.id not in b.cells
    assert b.embedder.texts == 0


def test_vectors_missing_from_the_record_are_embedded_once_and_stored(nodes: Any) -> None:
    plain = nodes()  # writes without a vector index
    for i in range(4):
        plain.store.upsert(Item(kind="note", title=f"note {i}"))
    first = nodes(cells=True)
    assert first.embedder.texts == 4
    second = nodes(cells=True)
    assert second.embedder.texts == 0
    later = plain.store.upsert(Item(kind="note", title="written without vectors"))
    second.catch_up()
    assert second.embedder.texts == 1 and second.cells is not None and later.id in second.cells


def replica(place: PgPlace, embedder: CountingEmbedder) -> Memory:
    """A Memory on ``place``'s schema: another process's view of the same record."""
    journal = PostgresJournal(place.dsn, schema=place.schema, durability="off")
    return Memory(journal=journal, embedder=embedder)


def test_memory_front_door_shares_one_record(pg_place: PgPlace) -> None:
    one_emb, two_emb = CountingEmbedder(), CountingEmbedder()
    with replica(pg_place, one_emb) as one, replica(pg_place, two_emb) as two:
        fact = one.add("The user is vegetarian and cooks for two.", partition="alice")
        journal = two.journal
        assert isinstance(journal, PostgresJournal)
        assert journal.wait_for(journal.head(), WAIT_S)
        assert two.stats().vectors == 1 and two_emb.texts == 0  # the vector came with it
        hits = two.search("vegetarian cooking", partition="alice")
        assert [h.item.id for h in hits] == [fact.id]


def test_a_purge_record_brings_its_vector_to_the_other_replicas(pg_place: PgPlace) -> None:
    one_emb, two_emb = CountingEmbedder(), CountingEmbedder()
    with replica(pg_place, one_emb) as one, replica(pg_place, two_emb) as two:
        secret = one.add("The launch code is kept in the blue binder.")
        assert one.journal is not None
        one.journal.purge(
            [secret.id], record=lambda gone: Item(kind="note", title=f"erased {len(gone)} item")
        )
        journal = two.journal
        assert isinstance(journal, PostgresJournal)
        assert journal.wait_for(journal.head(), WAIT_S)
        assert two.stats().items == 1 and two.stats().vectors == 1
        assert two_emb.texts == 0  # the record's vector came with it, the secret's did not stay
        assert [h.item.title for h in two.search("erased item")] == ["erased 1 item"]


# ----------------------------------------------------------------- failures


def test_follower_reconnects_after_its_connection_is_killed(nodes: Any) -> None:
    """pg_terminate_backend on the follower mid-stream: it catches up, nothing twice or lost."""
    a, b = nodes(), nodes(poll_interval=30.0)  # no polling: only NOTIFY and reconnects
    seen: list[tuple[str, str | None]] = []
    b.store.add_change_listener(
        lambda op, item, id, kind: seen.append((id, item.title if item else None))
    )
    name = f"memstore:{b.journal.schema}:follow:{b.journal.node_id}"
    ids = [f"n{i}" for i in range(15)]
    written = [0]
    stop = threading.Event()

    def write() -> None:  # writes go on while the follower is down and coming back
        n = 0
        while not stop.is_set() or n < 300:
            a.store.upsert(Item(id=ids[n % len(ids)], kind="note", title=f"v{n:05d}"))
            n += 1
            written[0] = n

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for kill in range(3):
            while written[0] < 40 * (kill + 1):  # some writes between kills
                b.journal.wait_for(Lsn(2**42, 0), 0.005)
            before = b.journal.feed_status().connects
            with a.journal._db.connect("test") as killer:
                rows = killer.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (name,),
                )
                assert rows.fetchone() == (1,)
            while b.journal.feed_status().connects == before:  # it comes back by itself
                b.journal.wait_for(Lsn(2**42, 0), 0.005)
    finally:
        stop.set()
        writer.join()
    b.catch_up()
    assert b.journal.feed_status().connects == 4
    assert b.state() == a.state() == record(a.journal)
    # Per id, the replica went through versions in the writer's order, each at most once.
    for id in ids:
        titles = [t for i, t in seen if i == id]
        assert titles == sorted(set(titles)), (id, titles)
        assert titles[-1] == a.store.get(id).title  # type: ignore[union-attr]


def test_a_refused_batch_is_applied_again_later(nodes: Any) -> None:
    """A replica whose before-commit listener refuses a change: the follower retries."""
    a, b = nodes(), nodes()
    refusals = [2]

    def flaky(changes: Sequence[Any]) -> None:  # an embedder that fails twice, say
        if refusals[0] and any(c.id == "flaky" for c in changes):
            refusals[0] -= 1
            raise RuntimeError("the embedding service is down")

    b.store.add_change_listener(flaky, before_commit=True)
    a.store.upsert(Item(id="steady", kind="note", title="before"))
    a.store.upsert(Item(id="flaky", kind="note", title="refused twice"))
    a.store.upsert(Item(id="steady", kind="note", title="after"))
    b.catch_up()
    assert refusals == [0] and b.journal.feed_status().connects >= 3
    assert b.state() == a.state() == record(a.journal)
    b.store._check()


def _state_of(store: Store) -> dict[str, dict[str, Any]]:
    with store.lock:  # type: ignore[attr-defined]
        return {it.id: it.model_dump() for it in store.items_locked()}


def test_connection_lost_during_a_write_changes_nothing(pg_place: PgPlace) -> None:
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off")
    store = Store()
    journal.attach(store)
    kept = store.upsert(Item(kind="note", title="before"))
    before = _state_of(store)
    pg_place.sql(
        "CREATE FUNCTION {s}.die() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$"
    )
    pg_place.sql(
        "CREATE TRIGGER die BEFORE INSERT ON {s}.versions FOR EACH ROW EXECUTE FUNCTION {s}.die()"
    )
    with pytest.raises(JournalError, match="connection to PostgreSQL"):
        store.upsert(Item(kind="note", title="never acknowledged"))
    with pytest.raises(JournalError), store.batch():
        store.delete(kept.id)
        store.upsert(Item(kind="note", title="nor this batch"))
    assert _state_of(store) == before
    store._check()
    pg_place.sql("DROP TRIGGER die ON {s}.versions")
    after = store.upsert(Item(kind="note", title="after"))  # a new connection, by itself
    assert sorted(record(journal)) == sorted([kept.id, after.id])
    journal.close()


def test_connection_lost_while_committing_says_the_outcome_is_unknown(pg_place: PgPlace) -> None:
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off")
    store = Store()
    journal.attach(store)
    die = "BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END"
    with (
        pg_place.at_commit("die", "versions", die),
        pytest.raises(JournalError, match="may or may not be on record"),
    ):
        store.upsert(Item(kind="note", title="in doubt"))
    assert len(store) == 0
    # PostgreSQL ended it before the commit finished: not on record, and the two agree
    assert record(journal) == {} == _state_of(store)
    journal.close()


def test_an_idle_write_connection_that_died_is_opened_again(pg_place: PgPlace) -> None:
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off")
    store = Store()
    journal.attach(store)
    store.upsert(Item(kind="note", title="first"))
    name = f"memstore:{pg_place.schema}:write:{journal.node_id}"
    killed = pg_place.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", name
    )
    assert killed == [(True,)]  # the write connection, found by its name
    store.upsert(Item(kind="note", title="second"))  # nothing was sent: reconnect and write
    assert sorted(it.title for it in journal.current()) == ["first", "second"]
    journal.close()


def test_a_write_connection_lost_again_while_reopening_fails_clearly(pg_place: PgPlace) -> None:
    """The write connection dies, and so does the new one under its first statement.

    Reopening it runs set-up statements (``synchronous_commit``, ``lock_timeout``,
    the node's lock) outside the code that turns driver errors into journal
    errors: a bare ``psycopg.OperationalError`` reached the writer. Now it is a
    :class:`JournalError` saying nothing changed, and the next write reconnects.
    """
    with CuttingProxy(pg_place.dsn) as proxy:
        journal = PostgresJournal(
            proxy.dsn, schema=pg_place.schema, durability="off", replicate=False
        )
        store = Store()
        journal.attach(store)
        store.upsert(Item(id="first", kind="note", title="first"))
        before = (_state_of(store), record(journal), journal.head())
        name = f"memstore:{pg_place.schema}:write:"
        killed = pg_place.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            f"{name}{journal.node_id}",
        )
        assert killed == [(True,)]
        # First the dead connection, then the new one: cut as it sends its first statement.
        # Then, with no connection left, two new ones cut in turn.
        for cuts in (1, 2):
            proxy.cut_next(name, cuts)
            with pytest.raises(JournalError, match="nothing was changed"):
                store.upsert(Item(id="lost", kind="note", title="never acknowledged"))
            assert (_state_of(store), record(journal), journal.head()) == before
            store._check()
        assert proxy.cut == 3
        store.upsert(Item(id="second", kind="note", title="second"))  # reconnects by itself
        assert sorted(record(journal)) == ["first", "second"]
        journal.close()


@pytest.mark.parametrize(("seconds", "ms"), [(0.0005, 1), (1e-9, 1), (0.0015, 2), (0.2, 200)])
def test_lock_timeout_is_whole_milliseconds_never_zero(
    pg_place: PgPlace, seconds: float, ms: int
) -> None:
    """PostgreSQL reads ``lock_timeout = 0`` as no timeout: a tiny one must not become it."""
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, lock_timeout=seconds)
    with journal._db.write_lock:
        shown = journal._db.writer().execute("SHOW lock_timeout").fetchone()
    assert shown == (f"{ms}ms",)
    journal.close()


def test_a_sub_millisecond_lock_timeout_still_gives_up(pg_place: PgPlace) -> None:
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, lock_timeout=0.0005)
    store = Store()
    journal.attach(store)
    with pg_place.commit_lock_held():  # another writer, stuck mid-commit
        failed: list[BaseException] = []

        def write() -> None:
            try:
                store.upsert(Item(kind="note", title="gives up at once"))
            except JournalError as e:
                failed.append(e)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(WAIT_S)
        stuck = writer.is_alive()
    writer.join(WAIT_S)
    assert not stuck, "the write waited for the lock with no timeout"
    assert len(failed) == 1 and "commit lock" in str(failed[0])
    journal.close()


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf"), 3e6])
def test_a_lock_timeout_postgresql_cannot_take_is_refused(
    pg_place: PgPlace, seconds: float
) -> None:
    with pytest.raises(ValueError, match="lock_timeout must be positive and at most"):
        PostgresJournal(pg_place.dsn, schema=pg_place.schema, lock_timeout=seconds)


def _kill(place: PgPlace, journal: Any, role: str) -> int:
    """End ``journal``'s connections of ``role``, as a server restart would; how many."""
    name = f"memstore:{place.schema}:{role}:{journal.node_id}"
    killed = place.sql(  # the second argument waits (ms) until each backend is gone
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = %s",
        name,
    )
    assert all(ok for (ok,) in killed)
    return len(killed)


def test_reads_on_pooled_connections_the_server_dropped_are_run_again(
    pg_place: PgPlace,
) -> None:
    """Every read after a restart-like drop succeeds, not once per dead pooled connection."""
    import io

    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, replicate=False)
    store = Store()
    journal.attach(store)
    a = store.upsert(Item(id="a", kind="note", title="first"))
    store.upsert(Item(id="b", kind="note", title="second"))
    at = journal.head()
    held = journal.snapshot(at)  # holds one read connection while another reads
    next(held)
    assert [v.item.title for v in journal.history("a") if v.item] == ["first"]
    held.close()  # both go back to the pool
    assert _kill(pg_place, journal, "read") == 2

    assert [v.item.title for v in journal.history("a") if v.item] == ["first"]
    assert journal.head() == at
    assert [it.id for it in journal.as_of(at)] == ["a", "b"]
    assert [it.id for it in journal.current()] == ["a", "b"]
    out = io.StringIO()
    assert journal.export(None, out) == 2
    assert _kill(pg_place, journal, "read") == 1
    assert journal.purge(lambda it: it.id == "b") == ["b"]
    assert _kill(pg_place, journal, "read") == 1
    assert journal.import_(io.StringIO(out.getvalue())) == 1  # brings ``b`` back
    assert _kill(pg_place, journal, "read") == 1
    assert journal.matching(lambda it: True) == [a.id, "b"]
    journal.close()


def test_a_read_whose_connection_dies_midway_fails_rather_than_mix_snapshots(
    pg_place: PgPlace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows already handed out came from one snapshot: the rest must not come from another."""
    module = postgres_module()
    monkeypatch.setattr(module, "_FETCH", 2)  # rows arrive in batches of two
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, replicate=False)
    store = Store()
    journal.attach(store)
    with store.batch():
        for n in range(6):
            store.upsert(Item(id=f"i{n}", kind="note", title=f"n{n}"))
    rows = journal.snapshot(journal.head())
    assert next(rows).id == "i0"
    assert _kill(pg_place, journal, "read") == 1
    with pytest.raises(JournalError, match="connection to PostgreSQL failed"):
        list(rows)
    assert len(list(journal.snapshot(journal.head()))) == 6  # the next read reconnects
    journal.close()


def test_a_held_commit_lock_fails_the_write_after_lock_timeout(pg_place: PgPlace) -> None:
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, lock_timeout=0.2)
    store = Store()
    journal.attach(store)
    # another writer, stuck mid-commit
    with pg_place.commit_lock_held(), pytest.raises(JournalError, match="commit lock"):
        store.upsert(Item(kind="note", title="waits, then gives up"))
    assert len(store) == 0
    store.upsert(Item(kind="note", title="then goes through"))
    assert len(store) == 1
    journal.close()


def test_closing_a_memory_while_another_process_writes_logs_no_failure(
    pg_place: PgPlace, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica closed while its follower applies the others' writes says nothing alarming.

    Before, the follower's batch met the closed memory's refusal of writes
    and logged "journal follower failed to apply a batch; retrying" with a
    traceback, as if something had broken.
    """
    stop = threading.Event()

    def write() -> None:
        journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off")
        with Memory(journal=journal, embedder=None) as w:
            n = 0
            while not stop.is_set():
                w.store.upsert(Item(kind="note", title=f"note {n}"))
                n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with caplog.at_level(logging.WARNING, logger="memstore"):
            for _ in range(12):
                journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
                mem = Memory(journal=journal, embedder=None)
                assert journal.wait_for(journal.head(), WAIT_S)  # following, batch after batch
                mem.close()
    finally:
        stop.set()
        writer.join(WAIT_S)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_conflict_while_holding_the_store_lock_is_reported_at_once(
    pg_place: PgPlace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Holding ``store.lock``, a refused delete cannot wait for the follower: it raises at once.

    Before, it waited for a follower that needed that very lock, until the
    wait ran out (10 s by default; here it would be an hour).
    """
    from memstore import WriteConflictError

    monkeypatch.setattr(postgres_module(), "CONFLICT_WAIT_S", 3600.0)
    ja = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    jb = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    with Memory(journal=ja, embedder=None) as a, Memory(journal=jb, embedder=None) as b:
        a.add(Item(id="x", kind="note", title="x"), dedup=False)
        assert jb.wait_for(ja.last_lsn() or ja.head(), WAIT_S)
        outcome: list[object] = []

        def delete_holding_the_lock() -> None:
            with b.store.lock:
                a.delete("x")  # b's follower cannot take it in: this thread holds b's lock
                try:
                    outcome.append(b.delete("x"))
                except WriteConflictError as e:
                    outcome.append(e)

        worker = threading.Thread(target=delete_holding_the_lock)
        worker.start()
        worker.join(WAIT_S)
        if worker.is_alive():  # the old behaviour: release the waiter, then fail
            jb._position.start_at(2**62, 2**62)
            worker.join()
            pytest.fail("the delete waited for a follower blocked on the lock it held")
        assert len(outcome) == 1 and isinstance(outcome[0], WriteConflictError)
        assert jb.wait_for(ja.head(), WAIT_S) and b.get("x") is None  # caught up after
        assert [v.op for v in jb.history("x")] == ["upsert", "delete"]  # b wrote nothing


def test_atomically_checks_the_ids_a_group_writes_not_the_ones_it_reads(
    pg_place: PgPlace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/postgres.md promises, exactly: a write is checked, a read is not.

    b's follower is held back (b's lock is held while a writes), so b decides
    on a stale copy of "flag" both times: the group that only reads it
    commits, the one that writes it is refused and runs again once b caught up.
    """
    from memstore import WriteConflictError

    monkeypatch.setattr(postgres_module(), "CONFLICT_ATTEMPTS", 1)  # report the first refusal
    ja = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    jb = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    with Memory(journal=ja, embedder=None) as a, Memory(journal=jb, embedder=None) as b:
        a.add(Item(id="flag", kind="note", title="flag off"), dedup=False)
        assert jb.wait_for(ja.last_lsn() or ja.head(), WAIT_S)
        outcome: list[object] = []

        def decide() -> None:
            with b.store.lock:  # b's follower cannot take a's write in meanwhile
                a.update("flag", title="flag on")
                seen = b.get("flag").title  # type: ignore[union-attr]
                b.atomically(lambda: b.add(Item(id="read-only", kind="note", title=seen)))
                outcome.append(b.get("read-only").title)  # type: ignore[union-attr]
                try:
                    b.atomically(lambda: b.update("flag", content="seen " + seen))
                except WriteConflictError as e:
                    outcome.append(e.ids)

        worker = threading.Thread(target=decide)
        worker.start()
        worker.join(WAIT_S)
        assert not worker.is_alive()
        assert outcome == ["flag off", ["flag"]]  # the read went unchecked; the write did not
