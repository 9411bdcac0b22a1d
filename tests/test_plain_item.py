"""``memstore._plainitem.plain_item``: the common item recognised at once, never wrongly.

It lets a write skip ``well_typed``, ``text_list`` and ``validate_base``, so
it may say ``True`` only for an item all three pass, whatever stored item it
replaces. Items near that shape (ASCII and not, tags padded, empty, with
commas, control characters, several partitions, fields assigned with the
wrong type after construction) are drawn at random and held to the three
checks; the items the benchmarks and a plain ``add_many`` write are
recognised (the shortcut is taken); and a write the shortcut serves still
runs the host's own rules.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Config, InvalidItemError, Item, Memory
from memstore._plainitem import plain_item
from memstore.arguments import text_list
from memstore.item import well_typed
from memstore.limits import MAX_TAG_CHARS, MAX_TAGS
from memstore.validate import validate_base
from memstore.vocabulary import Vocabulary

VOCAB = Vocabulary()
for _kind in ("note", "observation", "decision", "stable_fact", "event", "a b", "k:1"):
    validate_base(VOCAB, Item(kind="note", title="x").model_copy(update={"kind": _kind}))

GOOD = st.text(st.sampled_from([*"ab1 .:-/"]), max_size=6)
BAD = st.text(st.sampled_from([*"a ,", "\n", "\t", "\x00", "é", "\u200b", "\x7f"]), max_size=4)


def sometimes_bad(good: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Mostly ``good`` text; one draw in eight bent (control, format, non-ASCII, commas)."""
    return st.one_of(*[good] * 7, st.builds(str.__add__, good, BAD))


SHORT = sometimes_bad(GOOD)
TAGS = st.lists(
    st.one_of(
        SHORT.filter(lambda t: t.strip() == t and t),
        SHORT.filter(lambda t: t.strip() == t and t),
        st.sampled_from(
            [
                "tenant/a",
                "tenant/",
                "tenant/*",
                "tenant/ a",
                "tenant/a ",
                "user:x",
                "shared",
                " a",
                "a ",
                "a,b",
                "",
                "x" * MAX_TAG_CHARS,
            ]
        ),
        SHORT.map(lambda s: "tenant/" + s),
    ),
    max_size=3,
).flatmap(lambda tags: st.sampled_from([tags, tags, tags, [*tags, *["t"] * MAX_TAGS]]))
WRONG = st.sampled_from([None, 1, ("a",), b"a", ["a"], {"a": "b"}])
FIELDS = [
    "id",
    "kind",
    "title",
    "content",
    "subject",
    "event_date",
    "scope",
    "status",
    "confidence",
    "origin",
    "tags",
    "links",
    "supersedes",
    "evidence_refs",
    "data",
    "stale_after",
    "created_at",
    "no_embed",
    "links_set",
]


EDGE_TAGS = [
    [""],
    ["a", ""],
    ["", "a"],
    ["a", "", "b"],
    [" a"],
    ["a "],
    ["a", " b"],
    ["a ", "b"],
    ["a,b"],
    ["a\n"],
    ["a\x00"],
    ["tenant/"],
    ["x", "tenant/*"],
    ["tenant/ a"],
    ["tenant/a", "tenant/b"],
    ["x", "tenant/" + "n" * 200],
    ["x" * (MAX_TAG_CHARS + 1)],
    ["t"] * (MAX_TAGS + 1),
]
"""Tags lists each breaking one tag rule, or at its edge."""
CLEAN_TAGS = st.lists(
    st.one_of(GOOD.filter(lambda t: bool(t) and t.strip() == t), st.just("tenant/a")),
    max_size=3,
    unique=True,
).map(lambda tags: [t for n, t in enumerate(tags) if t != "tenant/a" or n == 0])


@st.composite
def near_plain(draw: st.DrawFn, bends: int = 2) -> Item:
    """An item of the plain shape, bent out of it in at most ``bends`` ways."""
    item = Item(
        id=draw(st.one_of(st.just(""), GOOD.map(lambda t: t.replace(" ", "")))),
        kind=draw(st.sampled_from(["note", "observation", "decision"])),
        title=draw(GOOD.filter(lambda t: bool(t.strip()))),
        content=draw(GOOD),
        subject=draw(GOOD),
        event_date=draw(st.sampled_from(["", "2026-01-02"])),
        confidence=draw(st.sampled_from(["", "high", "low"])),
        tags=draw(CLEAN_TAGS),
    )
    d = item.__dict__
    for bend in draw(st.lists(st.integers(0, 9), max_size=bends)):
        if bend == 0:  # a field assigned after construction: never validated
            d[draw(st.sampled_from(FIELDS))] = draw(WRONG)
        elif bend == 1:
            name = draw(st.sampled_from(["id", "title", "content", "subject"]))
            d[name] = f"{d[name]}{draw(BAD)}"
        elif bend == 2:
            kept = d["tags"] if type(d["tags"]) is list else []  # bend 0 may have replaced it
            d["tags"] = [*kept, draw(TAGS.filter(bool))[0]]
        elif bend == 3:
            d["tags"] = draw(st.one_of(TAGS, st.sampled_from(EDGE_TAGS)))
        elif bend == 4:
            d["kind"] = draw(st.sampled_from(["stable_fact", "event", "hypothesis", "a b", ""]))
        elif bend == 5:
            d["kind"] = "kind_never_seen_" + draw(st.text("xyz", min_size=1, max_size=3))
        elif bend == 6:
            d["scope"] = "private"
        elif bend == 7:
            d[draw(st.sampled_from(["stale_after", "created_at", "updated_at"]))] = _dt.datetime(
                2030, 1, 1, tzinfo=_dt.UTC
            )
        elif bend == 8:
            d[draw(st.sampled_from(["supersedes", "evidence_refs"]))] = ["x"]
        else:
            name, long = draw(st.sampled_from([("id", 300), ("title", 2000), ("subject", 300)]))
            d[name] = "x" * long
            d["event_date"] = draw(st.sampled_from(["soon", "2026-13-45", "2026-01-02"]))
    return item


def _typed_tags_pass(tags: Any) -> bool:
    try:
        text_list(tags, "tags", MAX_TAGS, MAX_TAG_CHARS)
    except InvalidItemError:
        return False
    return True


@settings(max_examples=2000, deadline=None)
@given(near_plain())
def test_plain_means_every_check_passes(item: Item) -> None:
    if not plain_item(item.__dict__):
        return
    assert well_typed(item)
    assert _typed_tags_pass(item.tags)
    assert validate_base(VOCAB, item) == ""
    other = Item(id=item.id or "x", kind="note", title="before", tags=["tenant/ b", "\tc"])
    assert validate_base(VOCAB, item, other) == ""


@settings(max_examples=300, deadline=None)
@given(near_plain(bends=0))
def test_the_unbent_shape_is_plain(item: Item) -> None:
    """Every item the property above starts from takes the shortcut: it is about something."""
    assert plain_item(item.__dict__)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["tenant/a", "shared", "t", "user:x"]), max_size=4, unique=True))
def test_the_common_shapes_are_plain(tags: list[str]) -> None:
    """Tags without a second partition, ASCII text, a kind seen before: the shortcut."""
    item = Item(id="note-0000001", kind="observation", title="deploy 1", content="x", tags=tags)
    assert plain_item(item.__dict__) is (tags.count("tenant/a") <= 1)
    assert not plain_item(Item(kind="note", title="x", tags=["tenant/a", "tenant/b"]).__dict__)


def test_what_add_many_writes_in_the_benchmarks_is_plain() -> None:
    """The shapes of ``benchmarks/_common.memory_item`` and of the corpus notes."""
    journal_items = [
        Item(
            id=f"note-{i:07d}",
            kind="observation",
            title=f"deploy {i % 977} of service api-{i % 53}",
            content=f"revision 0: the rollout of build {i} paused at stage {i % 7}",
            tags=[f"tenant/t{i % 100}"],
        )
        for i in range(50)
    ]
    notes = [
        Item(kind=kind, title="Payment API timeout", content="retry with backoff: 3 tries",
             subject=subject, confidence=confidence, event_date=date)
        for kind, subject, confidence, date in [
            ("observation", "", "", ""),
            ("note", "payments", "low", "2026-03-01"),
            ("decision", "api", "high", "2026-03-01T10:00:00Z"),
        ]
    ]  # fmt: skip
    for it in notes:
        validate_base(VOCAB, it)  # each kind seen once, as a store would
    assert all(plain_item(it.__dict__) for it in journal_items + notes)


def test_a_plain_entry_still_meets_the_hosts_rules(tmp_path: Path) -> None:
    refuse = Config(validate=lambda it: "no deploys" if "deploy" in it.title else "")
    with Memory(tmp_path / "m", embedder=None, config=refuse) as mem:
        entry = Item(kind="note", title="deploy moved", tags=["tenant/a"])
        validate_base(VOCAB, entry)
        assert plain_item(entry.__dict__)
        with pytest.raises(InvalidItemError, match="entry 1: no deploys"):
            mem.add_many([Item(kind="note", title="fine"), entry])
        assert len(mem.store) == 0
        [stored] = mem.add_many([Item(kind="note", title="fine", tags=["tenant/a"])])
        assert stored.tags == ["tenant/a"] and stored.origin


def test_a_plain_entry_is_refused_as_before_once_it_is_not() -> None:
    """An entry bent out of shape after construction takes the long way and its message."""
    bad = Item(kind="note", title="x", tags=["tenant/a"])
    bad.__dict__["tags"] = ["tenant/a", "tenant/b"]
    assert not plain_item(bad.__dict__)
    assert "at most one partition tag" in validate_base(VOCAB, bad)


def test_an_entry_the_vocabulary_changes_is_checked_again(tmp_path: Path) -> None:
    """The shortcut holds for the item as built: a ``coerce`` that breaks it is caught."""

    def second_partition(item: Item) -> None:
        item.__dict__["tags"] = [*item.tags, "tenant/other"]

    config = Config(vocabulary=Vocabulary(coerce=second_partition))
    with Memory(tmp_path / "m", embedder=None, config=config) as mem:
        entry = Item(kind="note", title="x", tags=["tenant/a"])
        validate_base(VOCAB, entry)
        assert plain_item(entry.__dict__)
        with pytest.raises(InvalidItemError, match="entry 0: at most one partition tag"):
            mem.add_many([entry])
        assert len(mem.store) == 0
