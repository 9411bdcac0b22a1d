"""An export imports back: what a store held, an import of its export restores.

An export is the record of what a store held, and an import is a restore:
it holds every item to the record rule (what a journal can keep and read
back, the rule :meth:`Store.put` holds every item to), not to the rules a
write obeys. Items written with ``put`` (which stores what it is given) may
break those: a stable fact of low confidence, a hypothesis with no deadline,
an item the host's ``Config.validate`` refuses. So may items written before
the host's rules or its vocabulary got stricter. Each of those imports into
an empty store with the same configuration, history and all.

``check_rules=True`` asks for the write rules as well, for a file from
elsewhere that the host's rules must screen: then such an item refuses the
whole import, naming its line, the item and the rule, and nothing changes.

Tests taking ``places`` run against SQLite files and PostgreSQL schemas.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import Config, Item, Memory, Store, Vocabulary
from memstore.cli import main as cli_main
from memstore.errors import InvalidItemError
from memstore.journal import JournalBase
from tests.conftest import FakeClock, Places
from tests.journals import memory_state, open_journal

HOST_REFUSES = "forbidden"


def _host_rule(item: Item) -> str:
    """The host's ``Config.validate``: no item whose title holds the word."""
    return f"the host refuses {HOST_REFUSES!r} in a title" if HOST_REFUSES in item.title else ""


LATER = dt.datetime(2031, 1, 1, tzinfo=dt.UTC)

# Items ``put`` stores as given that a write (upsert, add) refuses, and the rule they break.
RULE_BREAKERS = [
    pytest.param(
        Item(id="fact", kind="stable_fact", title="x", confidence="low"),
        "needs confidence 'high'",
        id="fact-of-low-confidence",
    ),
    pytest.param(Item(id="guess", kind="hypothesis", title="maybe"), "deadline", id="no-deadline"),
    pytest.param(Item(id="launch", kind="event", title="launch"), "event_date", id="event-no-date"),
    pytest.param(
        Item(id="soon", kind="note", title="x", event_date="soon"),
        "neither YYYY-MM-DD",
        id="event-date-unparsed",
    ),
    pytest.param(Item(id="dk", kind="deploy note", title="x"), "must be 1-64", id="kind-shape"),
    pytest.param(
        Item(id="two", kind="note", title="x", tags=["tenant/a", "tenant/b"]),
        "at most one partition tag",
        id="two-partitions",
    ),
    pytest.param(
        Item(id="mine", kind="note", title="x", scope="private"),
        "owner's tag",
        id="private-no-owner",
    ),
    pytest.param(Item(id="blank", kind="note"), "both empty", id="no-text"),
    pytest.param(
        Item(id="big", kind="note", content="a" * 100_001), "at most 100000", id="content-too-long"
    ),
    pytest.param(
        Item(id="host", kind="note", title=f"a {HOST_REFUSES} word"),
        "the host refuses",
        id="host-validate",
    ),
]


def _config(**more: Any) -> Config:
    return Config(clock=FakeClock(), validate=_host_rule, **more)


@pytest.fixture
def opened(places: Places) -> Iterator[Callable[[str, Config], tuple[JournalBase, Store]]]:
    """Open a journal by name with a new store of ``config`` attached; closed after."""
    journals: list[JournalBase] = []

    def open_(name: str, config: Config) -> tuple[JournalBase, Store]:
        journal, store = open_journal(places(name)), Store(config)
        journal.attach(store)
        journals.append(journal)
        return journal, store

    yield open_
    for journal in journals:
        journal.close()


def _exported(journal: JournalBase) -> str:
    out = io.StringIO()
    journal.export(None, out)
    return out.getvalue()


def _items(store: Store) -> dict[str, dict[str, Any]]:
    with store.lock:  # type: ignore[attr-defined]
        return {it.id: it.model_dump() for it in store.items_locked()}


def _histories(journal: JournalBase, ids: list[str]) -> dict[str, list[Any]]:
    return {
        id: [
            (v.valid_from, v.op, v.kind, v.item and v.item.model_dump())
            for v in journal.history(id)
        ]
        for id in ids
    }


def _source(
    opened: Callable[[str, Config], tuple[JournalBase, Store]],
) -> tuple[JournalBase, Store]:
    """A journal holding every rule breaker, written with ``put``, and one deleted after."""
    journal, store = opened("source", _config())
    for param in RULE_BREAKERS:
        (item, _) = param.values
        assert isinstance(item, Item)
        store.put(item)
    store.put(Item(id="gone", kind="two words", title="x"))
    store.delete("gone")  # the delete version names that kind
    return journal, store


def test_an_export_of_what_put_stored_imports_into_an_empty_store_with_the_same_config(
    opened: Callable[[str, Config], tuple[JournalBase, Store]],
) -> None:
    source, held = _source(opened)
    text = _exported(source)
    target, store = opened("target", _config())

    assert target.import_(io.StringIO(text)) == len(RULE_BREAKERS) + 1

    assert _items(store) == _items(held)
    ids = [*_items(held), "gone"]
    assert _histories(target, ids) == _histories(source, ids)
    # The same record, line for line (the header names each journal's own head).
    assert _exported(target).splitlines()[1:] == text.splitlines()[1:]
    assert target.import_(io.StringIO(text)) == 0  # twice is harmless, as ever


def test_an_export_imports_after_the_hosts_rules_and_vocabulary_got_stricter(
    opened: Callable[[str, Config], tuple[JournalBase, Store]],
) -> None:
    # Written by upsert while the rules allowed it: a fact of low confidence
    # (the vocabulary made it optional) and a title the host later forbids.
    lenient = Config(clock=FakeClock(), vocabulary=Vocabulary(fact_confidence_optional=True))
    source, held = opened("source", lenient)
    held.upsert(Item(id="fact", kind="stable_fact", title="x", confidence="low"))
    held.upsert(Item(id="later", kind="note", title=f"{HOST_REFUSES}, since"))
    text = _exported(source)

    target, store = opened("target", _config())
    assert target.import_(io.StringIO(text)) == 2
    assert _items(store) == _items(held)


@pytest.mark.parametrize(("item", "rule"), RULE_BREAKERS)
def test_check_rules_refuses_an_item_a_write_would_refuse_naming_line_item_and_rule(
    opened: Callable[[str, Config], tuple[JournalBase, Store]], item: Item, rule: str
) -> None:
    source, held = opened("source", _config())
    held.upsert(Item(id="fine", kind="note", title="a fine note"))
    held.put(item)
    text = _exported(source)
    target, store = opened("target", _config())
    store.upsert(Item(id="kept", kind="note", title="already here"))
    before, head = _items(store), target.head()

    line = 2 + sorted(["fine", item.id]).index(item.id)  # item lines come by id
    with pytest.raises(InvalidItemError, match=f"^line {line}: {item.id}: item: .*{rule}") as e:
        target.import_(io.StringIO(text), check_rules=True)

    assert "\n" not in str(e.value)
    assert _items(store) == before and target.head() == head
    assert target.history("fine") == [] and target.history(item.id) == []
    assert target.import_(io.StringIO(text)) == 2  # by default, the same file imports


def test_a_delete_naming_a_kind_no_write_could_imports_and_check_rules_refuses_it(
    opened: Callable[[str, Config], tuple[JournalBase, Store]],
) -> None:
    source, held = opened("source", _config())
    held.put(Item(id="gone", kind="two words", title="x"))
    held.delete("gone")
    header, line, end = _exported(source).splitlines()
    entry = json.loads(line)
    entry["versions"] = entry["versions"][1:]  # the delete alone (as a purge can leave it)
    assert entry["versions"][0]["kind"] == "two words"
    text = "\n".join([header, json.dumps(entry), end]) + "\n"
    target, _ = opened("target", _config())
    head = target.head()

    with pytest.raises(InvalidItemError, match=r"^line 2: gone: a delete version: kind 'two w"):
        target.import_(io.StringIO(text), check_rules=True)
    assert target.head() == head and target.history("gone") == []

    assert target.import_(io.StringIO(text)) == 1
    assert [(v.op, v.kind) for v in target.history("gone")] == [("delete", "two words")]


@pytest.mark.parametrize("check_rules", [1, "yes", None])
def test_check_rules_is_a_bool_or_the_import_is_refused(
    opened: Callable[[str, Config], tuple[JournalBase, Store]], check_rules: object
) -> None:
    source, held = opened("source", _config())
    held.upsert(Item(id="a", kind="note", title="x"))
    text = _exported(source)
    target, store = opened("target", _config())
    head = target.head()
    with pytest.raises(InvalidItemError, match="check_rules must be True or False"):
        target.import_(io.StringIO(text), check_rules=check_rules)  # type: ignore[arg-type]
    assert _items(store) == {} and target.head() == head


def test_the_cli_restores_an_export_and_checks_the_rules_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.store.put(Item(id="fact", kind="stable_fact", title="x", confidence="low"))
        mem.add("a fine note", id="fine")
    export = tmp_path / "e.ndjson"
    assert cli_main(["export", "--data", str(tmp_path / "data"), "-o", str(export)]) == 0
    capsys.readouterr()

    checked = tmp_path / "checked"
    args = ["import", str(export), "--embedder", "none", "--check-rules"]
    assert cli_main([*args, "--data", str(checked)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2: fact: item: kind 'stable_fact' needs" in err
    assert "nothing was imported" in err and not checked.exists()

    graph = cli_main([*args, "--data", str(checked), "--format", "mcp-memory"])
    assert graph == 2 and "--check-rules is for a memstore export" in capsys.readouterr().err

    restored = tmp_path / "restored"
    assert cli_main([*args[:-1], "--data", str(restored)]) == 0
    assert "imported 2 item(s)" in capsys.readouterr().err
    with Memory(tmp_path / "data", embedder=None) as a, Memory(restored, embedder=None) as b:
        assert memory_state(a)[1] == memory_state(b)[1]
