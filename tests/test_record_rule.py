"""The record rule: nothing the journal could not read back is ever acknowledged.

A journal writes each item as JSON and reads it back through the model when
it opens. A value the model refuses (a link weight of NaN, assigned after the
link was built, is written as ``null``) would be acknowledged, then make the
whole journal refuse to open. Every way into the store is held to
:func:`~memstore.validate.record_rejection`: ``add_link``, the writes that take
an item as given (``put``, ``mirror``, ``reflect``, ``restore``) and what the
host's ``Config.before`` hook makes of an item. Each refusal is an
:class:`~memstore.errors.InvalidItemError` that changes nothing, in the store
or in the journal, and the journal still opens afterwards.

Every test taking ``place`` runs against an SQLite file and a PostgreSQL schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store, ThoughtLink
from memstore.errors import InvalidItemError
from memstore.journal import JournalBase
from memstore.validate import record_rejection, validate_base
from memstore.vocabulary import Vocabulary
from tests.journals import Place, open_journal

Opened = tuple[JournalBase, Store]


@pytest.fixture
def opened(place: Place) -> Iterator[Opened]:
    """A store attached to a journal at ``place`` holding two notes, ``a`` and ``b``."""
    journal, store = open_journal(place), Store()
    journal.attach(store)
    store.upsert(Item(id="a", kind="note", title="alpha"))
    store.upsert(Item(id="b", kind="note", title="beta"))
    try:
        yield journal, store
    finally:
        journal.close()


def _dump(store: Store) -> list[str]:
    return sorted(it.model_dump_json() for it in store.items())


def _reopened(place: Place, config: Config | None = None) -> list[str]:
    """The items a fresh store restores from the journal at ``place`` (it must open)."""
    journal, store = open_journal(place), Store(config)
    try:
        journal.attach(store)
        return _dump(store)
    finally:
        journal.close()


def _assigned(field: str, value: object) -> ThoughtLink:
    """A valid link to ``b`` with ``field`` then assigned ``value`` (pydantic does not check)."""
    link = ThoughtLink(to_id="b", relation="explains", weight=0.5)
    setattr(link, field, value)
    return link


BAD_LINKS = [
    pytest.param("weight", float("nan"), "got float nan", id="nan"),
    pytest.param("weight", float("inf"), "got float inf", id="inf"),
    pytest.param("weight", -float("inf"), "got float -inf", id="-inf"),
    pytest.param("weight", 0.0, "got float 0.0", id="zero"),
    pytest.param("weight", 1.5, "got float 1.5", id="above-one"),
    pytest.param("weight", None, "got NoneType None", id="none"),
    pytest.param("weight", "0.5", "got str '0.5'", id="text"),
    pytest.param("weight", True, "got bool True", id="bool"),
    pytest.param("to_id", 5, "to_id must be text", id="int-target"),
    pytest.param("to_id", "b\ud800", "lone surrogate", id="surrogate-target"),
    pytest.param("relation", None, "relation must be text", id="no-relation"),
]


# ---------------------------------------------------------------- add_link


@pytest.mark.parametrize(("field", "value", "message"), BAD_LINKS)
def test_add_link_refuses_a_link_no_journal_could_read_back(
    place: Place, opened: Opened, field: str, value: object, message: str
) -> None:
    journal, store = opened
    before, head = _dump(store), journal.head()

    with pytest.raises(InvalidItemError, match=message) as caught:
        store.add_link("a", _assigned(field, value))

    assert "link from a" in str(caught.value)
    assert _dump(store) == before
    assert journal.head() == head  # nothing reached the journal
    journal.close()
    assert _reopened(place) == before  # and it still opens, whole


def test_add_link_still_takes_a_good_link_and_it_survives_a_reopen(
    place: Place, opened: Opened
) -> None:
    journal, store = opened
    link = ThoughtLink(to_id="b", relation="explains", weight=0.5)
    link.weight = 1  # an int: a number in range, stored as the float
    assert store.add_link("a", link)
    stored = store.get("a")
    assert stored is not None
    assert [(lk.to_id, lk.weight, type(lk.weight)) for lk in stored.links] == [("b", 1.0, float)]
    after = _dump(store)
    journal.close()
    assert _reopened(place) == after


def test_add_link_keeps_refusing_what_it_refused_before(opened: Opened) -> None:
    _, store = opened
    assert store.add_link("a", ThoughtLink(to_id="a", relation="explains")) is False  # a self-link
    assert store.add_link("missing", ThoughtLink(to_id="b", relation="explains")) is False


# ------------------------------------------------ writes that take an item as given


def _nan_linked(id: str = "c") -> Item:
    return Item(id=id, kind="note", title="gamma", links=[_assigned("weight", float("nan"))])


def _int_data(id: str = "c") -> Item:
    item = Item(id=id, kind="note", title="gamma")
    item.data = {"count": 3}  # type: ignore[dict-item]  # data holds text; read back, 3 fails
    return item


def _nul_kind(id: str = "c") -> Item:
    return Item(id=id, kind="no\x00te", title="gamma")  # PostgreSQL's kind column refuses NUL


UNSTORABLE = [
    pytest.param(_nan_linked, "link 0: weight must be a number", id="nan-link"),
    pytest.param(_int_data, r"data\.count: Input should be a valid string", id="int-data"),
    pytest.param(_nul_kind, "kind holds a NUL", id="nul-kind"),
]

AS_GIVEN: dict[str, Callable[[Store, Item], Any]] = {
    "put": lambda store, item: store.put(item),
    "mirror": lambda store, item: store.mirror(item),
    "reflect": lambda store, item: store.reflect(item.id, item),
    "restore": lambda store, item: store.restore([*store.items(), item]),
}


@pytest.mark.parametrize("write", sorted(AS_GIVEN))
@pytest.mark.parametrize(("make", "message"), UNSTORABLE)
def test_writes_as_given_refuse_an_item_no_journal_could_keep(
    place: Place, opened: Opened, write: str, make: Callable[[], Item], message: str
) -> None:
    journal, store = opened
    before, head = _dump(store), journal.head()

    with pytest.raises(InvalidItemError, match=f"{write}: {message}"):
        AS_GIVEN[write](store, make())

    assert _dump(store) == before
    assert journal.head() == head
    journal.close()
    assert _reopened(place) == before


def test_put_stores_the_model_types_of_fields_assigned_after_construction(
    place: Place, opened: Opened
) -> None:
    journal, store = opened
    item = Item(id="c", kind="note", title="gamma")
    item.tags = ("x", "y")  # type: ignore[assignment]  # a tuple: the model's type is a list
    store.put(item)
    stored = store.get("c")
    assert stored is not None and stored.tags == ["x", "y"] and type(stored.tags) is list
    after = _dump(store)
    journal.close()
    assert _reopened(place) == after


# ------------------------------------------------------------ Config.before


def _hooked(place: Place, hook: Callable[[Item], None]) -> Opened:
    journal, store = open_journal(place), Store(Config(before=hook))
    journal.attach(store)
    return journal, store


def _set(field: str, value: object) -> Callable[[Item], None]:
    def hook(item: Item) -> None:
        if "keep" not in item.title:
            setattr(item, field, value)

    return hook


def _append_link(item: Item) -> None:
    if "keep" not in item.title:
        item.links.append(_assigned("weight", float("nan")))


BAD_HOOKS = [
    pytest.param(_append_link, "link 0: weight must be a number", id="nan-link"),
    pytest.param(_set("data", {"n": 1}), r"data\.n: Input should be a valid string", id="data"),
    pytest.param(_set("tags", [f"t{n}" for n in range(100)]), "tags; at most", id="too-many-tags"),
    pytest.param(_set("tags", ["a\x00b"]), "NUL", id="nul-tag"),
    pytest.param(_set("kind", "deploy note"), "kind 'deploy note' must be", id="bad-kind"),
    pytest.param(_set("confidence", "low"), "needs confidence 'high'", id="fact-rule"),
    pytest.param(_set("id", "elsewhere"), "changed the id", id="id-change"),
]

HOOKED_WRITES: dict[str, Callable[[Store], Any]] = {
    "upsert": lambda s: s.upsert(Item(kind="stable_fact", title="t", confidence="high")),
    "upsert_many": lambda s: s.upsert_many(
        [
            Item(kind="stable_fact", title="keep", confidence="high"),
            Item(kind="stable_fact", title="t", confidence="high"),
        ]
    ),
    "upsert_dedup": lambda s: s.upsert_dedup(
        Item(kind="stable_fact", title="ledger latency", confidence="high")
    ),
    "supersede": lambda s: s.supersede(
        "old", Item(kind="stable_fact", title="t", confidence="high")
    ),
    "update": lambda s: s.upsert(Item(id="old", kind="stable_fact", title="t", confidence="high")),
}


@pytest.mark.parametrize("write", sorted(HOOKED_WRITES))
@pytest.mark.parametrize(("hook", "message"), BAD_HOOKS)
def test_what_config_before_makes_of_an_item_is_checked(
    place: Place, write: str, hook: Callable[[Item], None], message: str
) -> None:
    journal, store = _hooked(place, hook)
    try:
        # "keep" passes the hook untouched: the item every write below may land on.
        store.upsert(Item(id="old", kind="stable_fact", title="keep", confidence="high"))
        store.upsert(
            Item(id="dup", kind="stable_fact", title="ledger latency keep", confidence="high")
        )
        before, head = _dump(store), journal.head()

        with pytest.raises(InvalidItemError, match=message) as caught:
            HOOKED_WRITES[write](store)

        assert "Config.before" in str(caught.value)
        assert _dump(store) == before
        assert journal.head() == head
    finally:
        journal.close()
    assert _reopened(place) == before


def test_a_config_before_that_keeps_the_rules_still_amends(place: Place) -> None:
    def stamp(item: Item) -> None:
        item.tags = [*item.tags, "seen-by-host"]
        item.data = {**item.data, "host": "yes"}

    journal, store = _hooked(place, stamp)
    try:
        stored = store.upsert(Item(kind="note", title="x"))
        assert stored.tags == ["seen-by-host"] and stored.data == {"host": "yes"}
        after = _dump(store)
    finally:
        journal.close()
    assert _reopened(place) == after


# ------------------------------------------------------------ the rule itself


@pytest.mark.parametrize(
    "item",
    [
        Item(id="a b", kind="note", title="x"),
        Item(id="a", kind="note", title="x\ud800"),
        Item(id="a", kind="note", title="x", tags=["t\x00"]),
        Item(id="a", kind="note", title="x", data={"k\ud800": "v"}),
        Item(
            id="a", kind="note", title="x", links=[ThoughtLink(to_id="\ud800", relation="explains")]
        ),
    ],
    ids=["id-space", "surrogate-title", "nul-tag", "surrogate-key", "surrogate-target"],
)
def test_the_write_rules_include_the_record_rule(item: Item) -> None:
    """What ``put`` refuses, every validated write (and every import) refuses too."""
    assert record_rejection(item)
    assert validate_base(Vocabulary(), item)


def test_a_valid_item_obeys_the_record_rule() -> None:
    link = ThoughtLink(to_id="b", relation="explains", weight=0.25)
    item = Item(id="a", kind="note", title="x", tags=["t"], links=[link], data={"k": "v"})
    assert record_rejection(item) == ""


# Any text at all: controls, NUL, whitespace, lone surrogates included.
_any_text = st.text(st.characters(), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    id=st.one_of(st.just("a"), _any_text.filter(bool)),
    kind=st.one_of(st.just("note"), _any_text),
    title=st.one_of(st.just("t"), _any_text),
    tags=st.lists(_any_text, max_size=3),
    data=st.dictionaries(_any_text, _any_text, max_size=2),
    to_id=_any_text,
)
def test_every_item_the_write_rules_take_obeys_the_record_rule(
    id: str, kind: str, title: str, tags: list[str], data: dict[str, str], to_id: str
) -> None:
    """One rule: nothing an upsert (or an import) accepts could be refused by the record rule."""
    links = [ThoughtLink(to_id=to_id, relation="explains")] if to_id else []
    item = Item(id=id, kind=kind, title=title, tags=tags, data=data, links=links)
    accepted = not validate_base(Vocabulary(), item)
    event("accepted by the write rules" if accepted else "refused by the write rules")
    if accepted:
        assert record_rejection(item) == ""
