"""Consolidation: a member is only retired into a keeper the dedup rules let it fold into.

Clusters are formed against each cluster's head, but comparability is not
transitive: an unscoped head takes ``service/auth`` and ``service/billing``
restatements alike. These tests pin the keeper-member check
(``dedup_comparable(member, keeper)``), and a property test checks it on
generated restatements of one fact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, JournalError, Store
from memstore.consolidate import ConsolidationReport, consolidate
from memstore.journal import SqliteJournal
from memstore.limits import MAX_REFS
from memstore.neardup import better_routing_fact, dedup_comparable

FACT = (
    "the nightly backup job of the orders database fails when the disk "
    "of the replica fills above ninety percent"
)


def _store() -> Store:
    return Store(Config(clock=FakeClock()))


def _add(store: Store, id: str, suffix: str, confidence: str, **kw: Any) -> Item:
    tags = ["tenant/acme", *kw.pop("tags", [])]
    return store.upsert(
        Item(
            id=id,
            kind=kw.pop("kind", "hypothesis"),
            content=f"{FACT} {suffix}",
            confidence=confidence,
            tags=tags,
            **kw,
        )
    )


def _get(store: Store, id: str) -> Item:
    it = store.get(id)
    assert it is not None, id
    return it


def _all(store: Store) -> dict[str, dict[str, Any]]:
    """Every stored item, whatever its status, as its persisted fields."""
    with store.lock:  # type: ignore[attr-defined]
        return {it.id: it.model_dump() for it in store.items_locked()}


def _retired_into(report: ConsolidationReport) -> dict[str, str]:
    return {m: g.keep for g in report.groups for m in g.superseded}


def _check_applied(store: Store, report: ConsolidationReport) -> None:
    """Every superseded member went to a keeper it may fold into; keepers stay active."""
    for member, keep in _retired_into(report).items():
        m, k = _get(store, member), _get(store, keep)
        assert m.status == "superseded"
        assert k.status == "active"
        assert member in k.supersedes
        assert dedup_comparable(m, k), (member, keep)
        assert better_routing_fact(k, m)


def test_a_model_written_keeper_never_retires_a_human_note() -> None:
    store = _store()
    _add(store, "head", "today", "low")  # derived, the least trusted
    _add(store, "human", "again", "medium", origin="human")
    _add(store, "model", "still", "high")  # derived, the most trusted
    assert not dedup_comparable(_get(store, "human"), _get(store, "model"))

    report = consolidate(store, "acme", apply=True)

    assert [(g.keep, g.superseded) for g in report.groups] == [("model", ("head",))]
    assert _get(store, "human").status == "active"
    assert _get(store, "model").supersedes == ["head"]
    _check_applied(store, report)


@pytest.mark.parametrize(
    ("keep", "other", "tags"),
    [
        ("auth", "bill", ("service/auth", "service/billing")),  # another service's restatement
        ("x", "y", ("author/xavier", "author/yolanda")),  # another author's claim
    ],
)
def test_a_keeper_never_retires_a_cell_it_may_not_take(
    keep: str, other: str, tags: tuple[str, str]
) -> None:
    store = _store()
    _add(store, "head", "today", "low")
    _add(store, keep, "again", "high", tags=[tags[0]])
    _add(store, other, "still", "medium", tags=[tags[1]])

    report = consolidate(store, "acme", apply=True)

    assert [(g.keep, g.superseded) for g in report.groups] == [(keep, ("head",))]
    assert _get(store, other).status == "active"
    assert other not in _get(store, keep).supersedes
    _check_applied(store, report)


def test_a_member_the_keeper_may_not_take_keeps_its_own_group() -> None:
    store = _store()
    _add(store, "head", "today", "low")
    _add(store, "auth", "again", "high", tags=["service/auth"])
    _add(store, "bill1", "still", "medium", tags=["service/billing"])
    _add(store, "bill2", "as before", "low", origin="observed", tags=["service/billing"])

    report = consolidate(store, "acme", apply=True)

    assert [(g.keep, g.superseded) for g in report.groups] == [
        ("auth", ("head",)),
        ("bill1", ("bill2",)),
    ]
    assert report.superseded == 2
    _check_applied(store, report)


_SERVICES = st.sampled_from([[], ["service/auth"], ["service/billing"]])
_AUTHORS = st.sampled_from([[], ["author/xavier"], ["author/yolanda"]])
_RESTATEMENT = st.tuples(
    st.sampled_from(["low", "medium", "high"]),
    st.sampled_from(["", "derived", "human", "observed", "verified"]),
    _SERVICES,
    _AUTHORS,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_RESTATEMENT, min_size=1, max_size=8))
def test_every_retired_cell_went_to_a_keeper_it_may_fold_into(
    cells: list[tuple[str, str, list[str], list[str]]],
) -> None:
    store = _store()
    for i, (confidence, origin, service, author) in enumerate(cells):
        _add(store, f"c{i}", f"report {i}", confidence, origin=origin, tags=service + author)
    dry = consolidate(store, "acme")
    report = consolidate(store, "acme", apply=True)
    assert report.groups == dry.groups
    keepers = [g.keep for g in report.groups]
    retired = _retired_into(report)
    assert len(set(keepers)) == len(keepers)
    assert not set(keepers) & retired.keys()
    assert report.superseded == len(retired)
    _check_applied(store, report)
    for i in range(len(cells)):
        if f"c{i}" not in retired:
            assert _get(store, f"c{i}").status == "active"


def test_a_large_cluster_leaves_the_keeper_writable() -> None:
    store = _store()
    n = MAX_REFS + 44
    store.upsert_many(
        [
            Item(
                id=f"r{i:03d}",
                kind="stable_fact",
                content=f"{FACT} (report {i})",
                confidence="high",
                tags=["tenant/acme"],
            )
            for i in range(n)
        ]
    )
    report = consolidate(store, "acme", apply=True)
    assert report.superseded == n - 1
    keep = _get(store, report.groups[0].keep)
    assert len(keep.supersedes) == MAX_REFS
    # The most recent ids are the ones kept.
    assert keep.supersedes == list(report.groups[0].superseded[-MAX_REFS:])
    store.upsert(keep.clone(content=f"{FACT} (confirmed)"))
    assert _get(store, keep.id).content.endswith("(confirmed)")


def test_a_consolidation_that_fails_part_way_changes_nothing(tmp_path: Path) -> None:
    """Retiring a cluster is one write group: the journal records all of it or none.

    Each member was retired by a write of its own: when the journal refused
    the second (here a real SQLite trigger refusing that member's version),
    the first stayed superseded on disk while the caller got a JournalError
    saying nothing was changed.
    """
    journal = SqliteJournal(tmp_path / "journal.db")
    store = _store()
    journal.attach(store)
    for i, suffix in enumerate(["", "again", "once more", "every night"]):
        _add(store, f"f{i}", suffix, "high")
    before = _all(store)
    groups = consolidate(store, "acme").groups
    assert len(groups) == 1 and len(groups[0].superseded) == 3
    refused = groups[0].superseded[1]
    journal._conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON versions "
        f"WHEN NEW.id = '{refused}' BEGIN SELECT RAISE(ABORT, 'refused by test'); END"
    )
    with pytest.raises(JournalError, match="refused by test"):
        consolidate(store, "acme", apply=True)
    assert _all(store) == before
    store._check()
    assert {it.id: it.model_dump() for it in journal.current()} == before
    journal._conn.execute("DROP TRIGGER refuse")
    report = consolidate(store, "acme", apply=True)
    assert report.superseded == 3
    assert sorted(it.id for it in journal.current() if it.status == "active") == [groups[0].keep]
    journal.close()
