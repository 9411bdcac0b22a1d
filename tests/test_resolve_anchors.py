"""``Store.resolve_anchors`` from its index: the same answers as the three walks it replaced.

The store answers an anchor from an index of the shared, active items by
folded id, subject and title (``memstore._anchors.Anchors``), built at the
first lookup and kept by every write. ``_walks`` below is the implementation
it replaced, copied as the oracle: a state machine writes, retires, deletes,
makes private, rolls back, restores and moves the clock, and after every step
each anchor must resolve exactly as the oracle resolves it, with the index
equal to one built afresh (``Store._check``). The cost test counts what a
lookup reads: the items it names, not the store.
"""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import T0, FakeClock, count_is_active
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memstore import Config, Item, Store
from memstore.item import SCOPE_PRIVATE

HOUR = dt.timedelta(hours=1)


def _walks(items: list[Item], now: dt.datetime, anchor: str) -> list[str]:
    """The implementation before the index, verbatim but for reading a list of items."""
    needle = anchor.strip().casefold()
    if not needle:
        return []
    live = [it for it in items if it.scope != SCOPE_PRIVATE and it.is_active(now)]
    for test in (
        lambda it: it.id.casefold() == needle,
        lambda it: it.subject.casefold() == needle,
        lambda it: needle in it.subject.casefold() or needle in it.title.casefold(),
    ):
        ids = sorted(it.id for it in live if test(it))
        if ids:
            return ids
    return []


# Ids, subjects and titles that collide under casefold ("ß" folds to "ss"),
# contain one another, and name each other's text.
IDS = ["a", "A", "ss", "SS", "ß", "Ledger", "ledger-db", "Ledger-DB", "x1"]
SUBJECTS = ["", "ledger", "Ledger", "LEDGER", "ss", "ß", "a", "ledger-db", "x"]
TITLES = ["", "Ledger pool", "the SS ledger", "a", "straße", "x1 notes", "LEDGER-DB down"]
NEEDLES = sorted(
    {*IDS, *SUBJECTS, *TITLES, " ledger ", "LEDGER", "pool", "STRASSE", "db", "x", "nothing", "  "}
)


class AnchorMachine(RuleBasedStateMachine):
    """Random writes to a store; every anchor resolves as the oracle's walks resolve it."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(T0)
        self.store = Store(Config(clock=self.clock))
        self.store.resolve_anchors("a")  # the index exists from the start: writes keep it

    @rule(
        id=st.sampled_from(IDS),
        subject=st.sampled_from(SUBJECTS),
        title=st.sampled_from(TITLES),
        private=st.booleans(),
        status=st.sampled_from(["active", "active", "stale", "superseded"]),
        lapse=st.sampled_from([None, 1, 3]),
    )
    def put(
        self, id: str, subject: str, title: str, private: bool, status: str, lapse: int | None
    ) -> None:
        self.store.put(
            Item.model_validate(
                {
                    "id": id,
                    "kind": "note",
                    "subject": subject,
                    "title": title,
                    "status": status,
                    "scope": "private" if private else "public",
                    "tags": ["user:u1"] if private else [],
                    "stale_after": None if lapse is None else self.clock.now + lapse * HOUR,
                }
            )
        )

    @rule(id=st.sampled_from(IDS))
    def delete(self, id: str) -> None:
        self.store.delete(id)

    @rule(id=st.sampled_from(IDS), subject=st.sampled_from(SUBJECTS))
    def rolled_back(self, id: str, subject: str) -> None:
        with pytest.raises(RuntimeError), self.store.batch():
            self.store.put(Item(id=id, kind="note", subject=subject, title="rolled back"))
            self.store.delete("a")
            raise RuntimeError("undo the group")

    @rule()
    def restore(self) -> None:
        self.store.restore(self.store.items_locked())  # a bulk fill drops the index

    @rule()
    def tick(self) -> None:
        self.clock.advance(2 * HOUR)

    @invariant()
    def resolves_as_the_walks_did(self) -> None:
        items, now = self.store.items_locked(), self.clock.now
        for needle in NEEDLES:
            assert self.store.resolve_anchors(needle) == _walks(items, now, needle), needle
        self.store._check()


AnchorMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAnchorMachine = AnchorMachine.TestCase


def test_a_lookup_reads_the_items_it_names_not_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before the index every lookup asked each of the store's items whether
    # it was active (and casefolded its id, subject and title) up to three
    # times: 50-100 ms a call at 100k items. Now only the items named are asked.
    store = Store()
    store.restore(
        Item(
            id=f"Item-{n:04d}",
            kind="note",
            subject=f"service-{n % 100}",
            title=f"note {n} on the ledger" if n % 250 == 0 else f"note {n}",
        )
        for n in range(2_000)
    )
    store.resolve_anchors("warm")  # the index is built once, at the first lookup
    asked = count_is_active(monkeypatch)
    for anchor, named in [
        ("item-0042", ["Item-0042"]),
        ("SERVICE-7", [f"Item-{n:04d}" for n in range(7, 2_000, 100)]),
        ("ledger", [f"Item-{n:04d}" for n in range(0, 2_000, 250)]),
        ("nothing like it", []),
    ]:
        asked.clear()
        assert store.resolve_anchors(anchor) == named
        assert sorted(asked) == named, anchor
