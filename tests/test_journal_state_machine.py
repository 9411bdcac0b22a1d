"""A hypothesis state machine over a store with a journal attached.

Random writes (upserts, edits, deletes, expiry, supersession, refutation,
links, mirrors, batches that commit or abort, purges) run against a live store.
After every step: a fresh store restored from the journal equals the live
store, and ``as_of`` of every earlier step's position equals the state
recorded at that step (less what a purge erased since).

It runs on SQLite (``TestJournalMachine``) and on PostgreSQL
(``test_journal_machine_on_postgres``, fewer examples: every one creates
schemas).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memstore import Config, InvalidItemError, Item, Store, ThoughtLink
from memstore.journal import JournalBase, Lsn
from tests.conftest import FakeClock
from tests.journals import Place, open_journal
from tests.pgtest import Schemas

IDS = [f"id-{i}" for i in range(8)]
TENANTS = ["tenant/acme", "tenant/globex"]

ids = st.sampled_from(IDS)
titles = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(str.strip)

State = dict[str, dict[str, object]]


def snapshot(items: list[Item]) -> State:
    return {it.id: it.model_dump() for it in items}


class Abort(Exception):
    pass


class JournalMachine(RuleBasedStateMachine):
    schemas: Schemas | None = None
    """Where PostgreSQL journals go; ``None``: SQLite files in a temporary folder."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="journal-sm-"))
        self.places: list[Place] = []
        self.clock = FakeClock()
        self.journal = self.open("j")
        self.store = Store(Config(clock=self.clock))
        self.journal.attach(self.store)
        self.history: list[tuple[Lsn, State]] = []

    def open(self, name: str) -> JournalBase:
        place: Place = self.dir / f"{name}.db" if self.schemas is None else self.schemas.new()
        self.places.append(place)
        return open_journal(place)

    def teardown(self) -> None:
        self.journal.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        for place in self.places:
            if not isinstance(place, Path):
                place.sql("DROP SCHEMA {s} CASCADE")

    def live(self) -> State:
        with self.store.lock:  # type: ignore[attr-defined]
            return snapshot(self.store.items_locked())

    def tick(self) -> None:
        self.clock.advance(dt.timedelta(seconds=1))

    # ------------------------------------------------------------ writes

    @rule(id=ids, title=titles, tenant=st.sampled_from(TENANTS), shared=st.booleans())
    def upsert(self, id: str, title: str, tenant: str, shared: bool) -> None:
        tags = [tenant, "shared"] if shared else [tenant]
        self.tick()
        before = self.live()
        try:
            self.store.upsert(Item(id=id, kind="note", title=title, tags=tags))
        except InvalidItemError:
            # An update keeps the stored item's supersedes; when another item
            # has superseded the same one since (this one retired meanwhile),
            # the update would fork the chain: refused, changing nothing.
            kept = self.store.get(id)
            assert kept is not None and kept.supersedes, "only a lineage conflict refuses it"
            assert self.live() == before

    @rule(id=ids, title=titles)
    def private(self, id: str, title: str) -> None:
        if self.store.get(id) is None:
            self.store.upsert(
                Item(id=id, kind="note", title=title, scope="private", tags=["user:me"])
            )

    @rule(id=ids)
    def delete(self, id: str) -> None:
        self.store.delete(id)

    @rule(id=ids)
    def expire(self, id: str) -> None:
        self.store.expire(id)

    @rule(old=ids, new=ids, title=titles)
    def supersede(self, old: str, new: str, title: str) -> None:
        if old != new and self.store.get(old) is not None and self.store.get(new) is None:
            # Refused, changing nothing, when another item supersedes ``old`` already.
            with contextlib.suppress(InvalidItemError):
                self.store.supersede(old, Item(id=new, kind="note", title=title))

    @rule(a=ids, b=ids)
    def link(self, a: str, b: str) -> None:
        if a != b and self.store.get(a) is not None and self.store.get(b) is not None:
            self.store.add_link(a, ThoughtLink(to_id=b, relation="supports", weight=0.5))

    @rule(id=ids, title=titles)
    def mirror(self, id: str, title: str) -> None:
        self.tick()
        now = self.clock()
        self.store.mirror(Item(id=id, kind="note", title=title, created_at=now, updated_at=now))

    @rule(
        writes=st.lists(st.tuples(ids, st.one_of(st.none(), titles)), min_size=1, max_size=5),
        abort=st.booleans(),
    )
    def batch(self, writes: list[tuple[str, str | None]], abort: bool) -> None:
        before = self.live()
        try:
            with self.journal.transaction():
                for id, title in writes:
                    if title is None:
                        self.store.delete(id)
                    else:
                        self.store.upsert(Item(id=id, kind="note", title=title))
                if abort:
                    raise Abort
        except Abort:
            assert self.live() == before

    @precondition(lambda self: len(self.history) > 2)
    @rule(victims=st.lists(ids, max_size=2, unique=True))
    def purge(self, victims: list[str]) -> None:
        self.journal.purge(victims)
        self.history = [
            (lsn, {k: v for k, v in s.items() if k not in victims}) for lsn, s in self.history
        ]

    # -------------------------------------------------------- invariants

    @invariant()
    def restore_equals_live(self) -> None:
        live = self.live()
        fresh = Store()
        fresh.restore(self.journal.current())
        with fresh.lock:  # type: ignore[attr-defined]
            assert snapshot(fresh.items_locked()) == live
        fresh._check()
        self.history.append((self.journal.head(), live))

    @invariant()
    def as_of_replays_every_step(self) -> None:
        for lsn, recorded in self.history:
            assert snapshot(self.journal.as_of(lsn)) == recorded

    @invariant()
    def export_round_trips(self) -> None:
        if len(self.history) % 5:
            return
        out = io.StringIO()
        self.journal.export(None, out)
        other = self.open(f"copy-{len(self.history)}")
        copy = Store()
        other.attach(copy)
        other.import_(io.StringIO(out.getvalue()))
        with copy.lock:  # type: ignore[attr-defined]
            assert snapshot(copy.items_locked()) == self.live()
        for lsn, recorded in self.history:
            assert snapshot(other.as_of(lsn)) == recorded
        other.close()


JournalMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestJournalMachine = JournalMachine.TestCase


class PostgresJournalMachine(JournalMachine):
    pass


def test_journal_machine_on_postgres(pg_schemas: Schemas) -> None:
    PostgresJournalMachine.schemas = pg_schemas
    run_state_machine_as_test(
        PostgresJournalMachine,
        settings=settings(
            max_examples=15,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
