"""Supersede chains never fork: one current version of a fact at a time.

``supersede(old, new)`` and ``mark_superseded(id, by_id)`` make an item the
current version of one it retires. Two writers working from the same view
(both superseding ``A``) used to leave two active items that both claimed to
replace ``A``: two current versions of one fact, and a chain that forked.
Retiring a cell into a retired keeper (``mark_superseded(q, p)`` after
``mark_superseded(p, q)``) left neither current. Both are refused now, and
the rule holds after any sequence of writes, and after a reopen.
"""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest
from conftest import FakeClock, Recorder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, InvalidItemError, Item, Memory, Store


def _note(id: str, title: str) -> Item:
    return Item(id=id, kind="note", title=title)


def _dump(store: Store) -> list[dict[str, object]]:
    with store.batch():
        return [it.model_dump() for it in store.items_locked()]


def _forks(store: Store) -> dict[str, list[str]]:
    """Each id that more than one active item claims to supersede, with the claimants.

    An active item that supersedes itself, or a loop of active items each
    superseding the next, counts too (under the key ``"loop"``).
    """
    now = store.config.clock()
    claims: dict[str, list[str]] = {}
    with store.batch():
        current = {it.id: it for it in store.items_locked() if it.is_active(now)}
    for it in current.values():
        for old in it.supersedes:
            claims.setdefault(old, []).append(it.id)
    forks = {old: ids for old, ids in claims.items() if len(ids) > 1}
    for start in current:  # follow the current items' claims: none leads back
        seen, stack = set(), list(current[start].supersedes)
        while stack:
            at = stack.pop()
            if at == start:
                forks.setdefault("loop", []).append(start)
                break
            if at in current and at not in seen:
                seen.add(at)
                stack.extend(current[at].supersedes)
    return forks


def test_a_second_supersede_of_the_same_item_is_refused_and_names_the_current_one(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(_note("a", "deploys on tuesday"))
    store.supersede("a", _note("b", "deploys on thursday"))
    before = _dump(store)
    recorder.clear()

    with pytest.raises(InvalidItemError, match="a is already superseded by b: supersede b"):
        store.supersede("a", _note("c", "deploys on friday"))

    assert _dump(store) == before
    assert store.get("c") is None
    assert recorder.quiet
    # The way forward the error names: the chain grows from its head.
    store.supersede("b", _note("c", "deploys on friday"))
    assert _forks(store) == {}
    store._check()


def test_superseding_again_by_the_same_item_is_an_update(store: Store) -> None:
    store.upsert(_note("a", "v1"))
    store.supersede("a", _note("b", "v2"))
    again = store.supersede("a", _note("b", "v2, reworded"))
    assert again.supersedes == ["a"]
    assert _forks(store) == {}


def test_an_item_whose_successor_is_gone_or_retired_can_be_superseded_again(
    store: Store, clock: FakeClock
) -> None:
    store.upsert(_note("a", "v1"))
    store.supersede("a", _note("b", "v2"))
    store.delete("b")
    store.supersede("a", _note("c", "v2 again"))
    store.expire("c")
    store.supersede("a", _note("d", "v3"))
    # A successor past its deadline is no longer current either.
    store.upsert(_note("x", "w1"))
    store.supersede("x", Item(id="y", kind="note", title="w2", stale_after=clock.now))
    store.supersede("x", _note("z", "w3"))
    assert _forks(store) == {}
    store._check()


def test_mark_superseded_refuses_a_retired_keeper(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("p", "ledger timeout"))
    store.upsert(_note("q", "ledger timeouts"))
    assert store.mark_superseded("p", "q") is True
    before = _dump(store)
    recorder.clear()

    # Retiring q into p, which q itself retired, would leave neither current.
    assert store.mark_superseded("q", "p") is False

    assert _dump(store) == before
    assert recorder.quiet
    assert store.get("q").status == "active"  # type: ignore[union-attr]


def test_mark_superseded_refuses_an_item_another_active_cell_supersedes(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(_note("a", "ledger timeout"))
    store.supersede("a", _note("b", "ledger timeouts"))
    store.upsert(_note("k", "ledger time outs"))
    before = _dump(store)
    recorder.clear()

    assert store.mark_superseded("a", "k") is False

    assert _dump(store) == before
    assert recorder.quiet
    assert store.mark_superseded("a", "b") is True  # its own successor: already so
    assert _forks(store) == {}


def test_memory_supersede_refuses_a_fork_and_the_journal_keeps_nothing_of_it(
    tmp_path: Path,
) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        a = mem.add("deploys happen on tuesday")
        b = mem.supersede(a.id, "deploys happen on thursday")
        before = io.StringIO()
        mem.export(before)
        with pytest.raises(InvalidItemError, match=f"supersede {b.id} instead"):
            mem.supersede(a.id, "deploys happen on friday")
        after = io.StringIO()
        mem.export(after)
        assert after.getvalue() == before.getvalue()
    with Memory(tmp_path, embedder=None) as mem:
        assert {it.id: it.status for it in mem.store.items()} == {
            a.id: "superseded",
            b.id: "active",
        }


# ------------------------------------------------------------ the invariant

IDS = ["a", "b", "c", "d"]
ids = st.sampled_from(IDS)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), ids, st.booleans()),
        st.tuples(st.just("claim"), ids, ids),
        st.tuples(st.just("supersede"), ids, ids),
        st.tuples(st.just("supersede_new"), ids),
        st.tuples(st.just("mark_superseded"), ids, ids),
        st.tuples(st.just("refute"), ids),
        st.tuples(st.just("delete"), ids),
        st.tuples(st.just("expire"), ids),
        st.tuples(
            st.just("tick"),
        ),
    ),
    min_size=1,
    max_size=30,
)


def _step(mem: Memory, clock: FakeClock, step: tuple[object, ...]) -> None:
    name = step[0]
    store = mem.store
    if name in ("upsert", "claim"):
        _, id, other = step
        if name == "upsert":
            deadline = clock.now + dt.timedelta(hours=1) if other else None
            item = Item(id=str(id), kind="note", title=f"note {id}", stale_after=deadline)
        else:  # an explicit supersedes list, as upsert and Memory.update take one
            item = Item(id=str(id), kind="note", title=f"note {id}", supersedes=[str(other)])
        try:
            store.upsert(item)  # an update keeps the stored supersedes: it may revive a claim
        except InvalidItemError as e:
            assert "already superseded by" in str(e) or "cannot supersede" in str(e), e
    elif name in ("supersede", "supersede_new"):
        old = str(step[1])
        new = Item(id=str(step[2]) if name == "supersede" else "", kind="note", title="newer")
        if store.get(old) is None or new.id == old:
            return
        try:
            store.supersede(old, new)
        except InvalidItemError as e:
            assert "already superseded by" in str(e)
    elif name == "mark_superseded":
        store.mark_superseded(str(step[1]), str(step[2]))
    elif name == "refute":
        store.refute(str(step[1]), "wrong")
    elif name == "delete":
        store.delete(str(step[1]))
    elif name == "expire":
        store.expire(str(step[1]))
    else:
        clock.advance(dt.timedelta(minutes=40))


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=steps)
def test_no_two_active_items_ever_supersede_the_same_item_and_reopen_agrees(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[object, ...]]
) -> None:
    folder = tmp_path_factory.mktemp("chains")
    clock = FakeClock()
    with Memory(folder, embedder=None, config=Config(clock=clock)) as mem:
        for step in steps:
            _step(mem, clock, step)
            assert _forks(mem.store) == {}, step
        mem.store._check()
        before = _dump(mem.store)
    with Memory(folder, embedder=None, config=Config(clock=clock)) as mem:
        assert _dump(mem.store) == before
        assert _forks(mem.store) == {}
        mem.store._check()


def test_memory_update_can_clear_supersedes(tmp_path: Path) -> None:
    # Before, update(id, supersedes=[]) returned the item with its old list:
    # an empty list was taken for "none given" and the stored one kept.
    with Memory(tmp_path, embedder=None) as mem:
        a = mem.add("deploys happen on tuesday")
        b = mem.supersede(a.id, "deploys happen on thursday")
        assert mem.update(b.id, content="deploys happen on thursday at 10").supersedes == [a.id]
        assert mem.update(b.id, supersedes=[]).supersedes == []
        assert mem.get(b.id).supersedes == []  # type: ignore[union-attr]
        # Nothing supersedes a any more: it may be superseded afresh.
        mem.supersede(a.id, "deploys happen on friday")
        assert _forks(mem.store) == {}
    with Memory(tmp_path, embedder=None) as mem:
        assert mem.get(b.id).supersedes == []  # type: ignore[union-attr]


def test_expiring_a_superseded_item_makes_it_stale_and_keeps_the_chain(store: Store) -> None:
    # As the Go package's Expire: any item becomes stale. The lineage lives on
    # the successor, so the chain still holds a and still refuses a fork.
    store.upsert(_note("a", "v1"))
    store.supersede("a", _note("b", "v2"))
    assert store.expire("a") is True
    assert store.get("a").status == "stale"  # type: ignore[union-attr]
    assert store.get("b").supersedes == ["a"]  # type: ignore[union-attr]
    with pytest.raises(InvalidItemError, match="a is already superseded by b"):
        store.supersede("a", _note("c", "v3"))
    assert _forks(store) == {}


# ------------------------------------------- an explicit supersedes list


def test_upsert_naming_an_item_already_superseded_is_refused_and_names_the_current_one(
    store: Store, recorder: Recorder
) -> None:
    # Before, upsert (and Memory.update) took any supersedes list: c became a
    # second current version of a, beside b, which supersede() itself refuses.
    store.upsert(_note("a", "deploys on tuesday"))
    store.supersede("a", _note("b", "deploys on thursday"))
    store.upsert(_note("c", "deploys on friday"))
    before = _dump(store)
    recorder.clear()

    claim = Item(id="c", kind="note", title="deploys on friday", supersedes=["a"])
    with pytest.raises(InvalidItemError, match="a is already superseded by b: supersede b"):
        store.upsert(claim)
    with pytest.raises(InvalidItemError, match="a is already superseded by b"):
        store.upsert(claim.model_copy(update={"id": "d"}))
    with pytest.raises(InvalidItemError, match="a is already superseded by b"):
        store.upsert_many([_note("e", "fine"), claim])

    assert _dump(store) == before
    assert recorder.quiet
    assert store.get("e") is None  # the group was refused whole
    store.upsert(claim.model_copy(update={"supersedes": ["b"]}))  # from the head: fine
    assert _forks(store) == {}
    store._check()


def test_an_update_that_would_revive_a_claim_someone_else_took_over_is_refused(
    store: Store,
) -> None:
    store.upsert(_note("a", "v1"))
    store.supersede("a", _note("b", "v2"))
    store.expire("b")
    store.supersede("a", _note("c", "v2 again"))  # b is retired: c may take over
    # Making b current again keeps its supersedes: a would have two current versions.
    with pytest.raises(InvalidItemError, match="a is already superseded by c"):
        store.upsert(_note("b", "v2, current again"))
    assert store.get("b").status == "stale"  # type: ignore[union-attr]
    assert _forks(store) == {}


def test_memory_update_cannot_fork_a_chain(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        a = mem.add("deploys happen on tuesday")
        b = mem.supersede(a.id, "deploys happen on thursday")
        c = mem.add("deploys happen on friday")
        with pytest.raises(InvalidItemError, match=f"supersede {b.id} instead"):
            mem.update(c.id, supersedes=[a.id])
        assert mem.get(c.id).supersedes == []  # type: ignore[union-attr]
        assert [v.op for v in mem.history(c.id)] == ["upsert"]  # nothing recorded
    with Memory(tmp_path, embedder=None) as mem:
        assert _forks(mem.store) == {}


def test_supersedes_naming_itself_or_looping_back_is_refused(
    store: Store, recorder: Recorder
) -> None:
    # Before, a (active, superseding itself) made supersede("a", ...) answer
    # "a is already superseded by a: supersede a instead", forever; and two
    # current items superseding each other sent the caller from one to the other.
    store.upsert(_note("a", "v1"))
    store.upsert(Item(id="b", kind="note", title="v2", supersedes=["a"]))  # a stays current
    store.upsert(Item(id="c", kind="note", title="v3", supersedes=["b"]))
    store.upsert(_note("p", "w1"))
    store.upsert(Item(id="q", kind="note", title="w2", supersedes=["p"]))  # p stays current
    before = _dump(store)
    recorder.clear()

    with pytest.raises(InvalidItemError, match="a cannot supersede itself"):
        store.upsert(Item(id="a", kind="note", title="v1", supersedes=["a"]))
    with pytest.raises(InvalidItemError, match="p cannot supersede q: q is current"):
        store.upsert(Item(id="p", kind="note", title="w1", supersedes=["q"]))
    with pytest.raises(InvalidItemError, match="a cannot supersede c: c is current"):
        store.upsert(Item(id="a", kind="note", title="v1", supersedes=["c"]))  # down the chain

    assert _dump(store) == before
    assert recorder.quiet
    assert _forks(store) == {}


def test_lineage_that_is_no_fork_or_loop_is_taken(store: Store) -> None:
    # A name no stored item has (deleted, purged, or kept by the host elsewhere).
    assert store.upsert(Item(id="x", kind="note", title="x", supersedes=["gone"])).supersedes == [
        "gone"
    ]
    # A revert: b replaced a, then a replaces b again; b is retired, so no loop.
    store.upsert(_note("a", "v1"))
    store.supersede("a", _note("b", "v2"))
    back = store.supersede("b", Item(id="a", kind="note", title="v1 again"))
    assert back.status == "active" and back.supersedes == ["b"]
    # A retired item's lineage is history, checked by nobody.
    store.put(Item(id="old", kind="note", title="old", status="stale", supersedes=["a"]))
    assert _forks(store) == {}
    store._check()
