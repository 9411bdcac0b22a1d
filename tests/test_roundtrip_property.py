"""What memstore acknowledges survives a reopen, an export -> import and a backup -> open.

A property test: any sequence of writes through :class:`~memstore.Memory`
(adds and updates of every kind with its rules, private notes and partitions,
links of any weight in ``(0, 1]``, expiries, deletes), with a host
``Config.before`` hook amending each stored item and a host ``Config.validate``
refusing some, leaves a folder whose items come back equal, field for field,
when the folder is opened again, when its export is imported into a new memory
with the same config, and when a backup of it is opened. A write that is
refused changes nothing and is left out of what must survive.

Some items are written with ``Store.put``, which stores what it is given: they
break the rules a write obeys (a stable fact of low confidence, a hypothesis
with no deadline, an item the host's ``Config.validate`` refuses...), and
still come back, an import being a restore of what the store held.
"""

from __future__ import annotations

import io
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Memory, ThoughtLink
from memstore.backup import backup
from memstore.errors import InvalidItemError, ItemNotFoundError
from memstore.journal.postgres import PostgresJournal
from tests.pgtest import PgPlace, Schemas

IDS = ["a", "b", "c", "d"]
RELATIONS = ["triggers", "caused_by", "correlates_with", "precedes", "explains", "contradicts"]

# Text of any script (never a lone surrogate, which no caller can send as UTF-8),
# control characters included: the journal must carry what the store took.
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
names = st.text("abcxyz_-", min_size=1, max_size=6)


def _seen_by_host(item: Item) -> None:
    """The host's ``before`` hook: a tag and a data entry on every stored item.

    On a title asking for it, it breaks the item instead (a NaN link weight
    the journal could not read back, a NUL tag an import refuses, another
    id): such a write must be refused, not acknowledged and lost later.
    """
    if "host/seen" not in item.tags:
        item.tags = [*item.tags, "host/seen"]
    item.data = {**item.data, "host": f"{len(item.title)}"}
    if item.title == MISCHIEF[0]:
        link = ThoughtLink(to_id="a", relation="explains")
        link.weight = float("nan")
        item.links = [*item.links, link]
    elif item.title == MISCHIEF[1]:
        item.tags = [*item.tags, "nul\x00"]
    elif item.title == MISCHIEF[2]:
        item.id = item.id + "-moved"


MISCHIEF = ("hook: nan link", "hook: nul tag", "hook: move")


@dataclass(frozen=True)
class Add:
    fields: dict[str, Any]


@dataclass(frozen=True)
class Put:
    """An item ``Store.put`` stores as given, breaking one of the rules a write obeys."""

    item: Item


@dataclass(frozen=True)
class Link:
    from_id: str
    to_id: str
    relation: str
    weight: float


@dataclass(frozen=True)
class Delete:
    id: str


@dataclass(frozen=True)
class Expire:
    id: str


Op = Add | Put | Link | Delete | Expire


def _kind_fields(kind: str) -> dict[str, Any]:
    """What each kind's rule needs (a fact's confidence, an event's date)."""
    if kind == "stable_fact":
        return {"confidence": "high"}
    if kind == "event":
        return {"event_date": "2024-03-01"}
    return {}


adds = st.builds(
    lambda id, kind, title, content, tags, data, partition, private, dedup: Add(
        {
            "id": id,
            "kind": kind,
            "title": title,
            "text": content or "body",
            "tags": tags,
            "data": data,
            "partition": partition,
            "private_to": "ana" if private else None,
            "dedup": dedup,
            **_kind_fields(kind),
        }
    ),
    id=st.sampled_from(IDS),
    kind=st.sampled_from(["note", "stable_fact", "event", "hypothesis", "watch_item"]),
    # About one title in seven asks the hook to break the item.
    title=st.tuples(st.integers(0, 20), texts).map(
        lambda pick: MISCHIEF[pick[0]] if pick[0] < len(MISCHIEF) else pick[1]
    ),
    content=texts,
    tags=st.lists(names, max_size=3, unique=True),
    data=st.dictionaries(names, texts, max_size=3),
    partition=st.sampled_from([None, "eu", "us"]),
    private=st.booleans(),
    dedup=st.booleans(),
)
HOST_REFUSES = "forbidden"


def _host_rule(item: Item) -> str:
    """The host's ``Config.validate``: no title holding the word (``put`` stores one)."""
    return f"no {HOST_REFUSES!r} in a title" if HOST_REFUSES in item.title else ""


# What each put item is (kind and fields), breaking a write rule; its title and tags vary.
RULE_BREAKERS: list[dict[str, Any]] = [
    {"kind": "stable_fact", "confidence": "low"},  # a fact needs confidence 'high'
    {"kind": "hypothesis"},  # a hypothesis needs a deadline
    {"kind": "unknown"},  # so does an unknown
    {"kind": "event"},  # an event needs its date
    {"kind": "note", "event_date": "soon"},  # a date no reader parses
    {"kind": "deploy note"},  # a kind with a space
    {"kind": "note", "scope": "private"},  # private, with no owner's tag
    {"kind": "note", "tags": ["tenant/eu", "tenant/us"]},  # two partitions
    {"kind": "note", "tags": [" padded"]},  # a padded tag
    {"kind": "note", "content": "", "blank": True},  # no title and no content
    {"kind": "note", "forbidden": True},  # what the host's Config.validate refuses
]


def _rule_breaker(id: str, pick: int, title: str, tags: list[str]) -> Put:
    fields = dict(RULE_BREAKERS[pick])
    if fields.pop("forbidden", False):
        title = f"{HOST_REFUSES}: {title}"
    if fields.pop("blank", False):
        title = ""
    tags = [*tags, *fields.pop("tags", [])]
    return Put(
        Item(id=id, title=title or "", content=fields.pop("content", "body"), tags=tags, **fields)
    )


puts = st.builds(
    _rule_breaker,
    st.sampled_from(IDS),
    st.integers(0, len(RULE_BREAKERS) - 1),
    texts,
    st.lists(names, max_size=2, unique=True),
)
links = st.builds(
    Link,
    st.sampled_from(IDS),
    st.sampled_from(IDS),
    st.sampled_from(RELATIONS),
    st.floats(min_value=0.0, max_value=1.0, exclude_min=True),
)
operations = st.tuples(
    st.lists(st.one_of(adds, puts), min_size=1, max_size=6),  # items first, for links to find
    st.lists(
        st.one_of(
            adds,
            puts,
            links,
            st.builds(Delete, st.sampled_from(IDS)),
            st.builds(Expire, st.sampled_from(IDS)),
        ),
        max_size=10,
    ),
).map(lambda both: [*both[0], *both[1]])


def _state(mem: Memory) -> list[tuple[str, bool]]:
    """Every item (private ones too) as its persisted fields, and its ``no_embed`` flag."""
    return sorted((it.model_dump_json(), it.no_embed) for it in mem.store.all_items())


def _apply(mem: Memory, op: Op) -> None:
    """One write; a refused one must leave the memory exactly as it was."""
    before = _state(mem)
    try:
        if isinstance(op, Add):
            fields = dict(op.fields)
            mem.add(fields.pop("text"), **fields)
        elif isinstance(op, Put):
            mem.store.put(op.item)
        elif isinstance(op, Link):
            mem.link(op.from_id, op.to_id, op.relation, op.weight)
        elif isinstance(op, Delete):
            mem.delete(op.id)
        else:
            mem.expire(op.id)
    except (InvalidItemError, ItemNotFoundError):
        assert _state(mem) == before, f"a refused {op} changed the memory"


def _config() -> Config:
    return Config(before=_seen_by_host, validate=_host_rule)


def _written(mem: Memory, ops: list[Op]) -> tuple[list[Any], str]:
    """Apply ``ops``; what the memory then holds, and its export."""
    for op in ops:
        _apply(mem, op)
    held = mem.store.all_items()
    event(f"items held: {'none' if not held else '1-2' if len(held) < 3 else '3-4'}")
    breakers = sum(bool(mem.store.validate_base(it) or _host_rule(it)) for it in held)
    event(f"items held that a write would refuse: {'none' if not breakers else 'some'}")
    export = io.StringIO()
    mem.export(export)
    return _state(mem), export.getvalue()


_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # pg_schemas: one run's schemas, new per example
    ],
)


@_SETTINGS
@given(operations)
def test_acknowledged_writes_survive_reopen_export_import_and_backup(
    ops: list[Op],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with Memory(root / "src", embedder=None, config=_config()) as mem:
            acknowledged, export = _written(mem, ops)

        with Memory(root / "src", embedder=None, config=_config()) as reopened:
            assert _state(reopened) == acknowledged

        with Memory(root / "imported", embedder=None, config=_config()) as fresh:
            fresh.import_(io.StringIO(export))
            assert _state(fresh) == acknowledged

        backup(root / "src", root / "copy")
        with Memory(root / "copy", embedder=None, config=_config()) as restored:
            assert _state(restored) == acknowledged


@_SETTINGS
@given(ops=operations)
def test_acknowledged_writes_survive_reopen_and_export_import_on_postgresql(
    pg_schemas: Schemas, ops: list[Op]
) -> None:
    """The same on a PostgreSQL journal (its text columns refuse a NUL; a backup is SQLite's)."""

    def journal(place: PgPlace) -> PostgresJournal:
        return PostgresJournal(place.dsn, schema=place.schema, node_id=0, durability="off")

    src, dst = pg_schemas.new("prop"), pg_schemas.new("prop")
    with Memory(journal=journal(src), embedder=None, config=_config()) as mem:
        acknowledged, export = _written(mem, ops)
    with Memory(journal=journal(src), embedder=None, config=_config()) as reopened:
        assert _state(reopened) == acknowledged
    with Memory(journal=journal(dst), embedder=None, config=_config()) as fresh:
        fresh.import_(io.StringIO(export))
        assert _state(fresh) == acknowledged
