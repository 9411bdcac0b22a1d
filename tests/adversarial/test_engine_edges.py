"""Engine edges found by an adversarial review: what a careless or hostile caller did.

Each case is one way to break a promise the docs make: a write acknowledged
and then lost, an import that leaves a folder no one can open, a private note
seen from another partition, a refused call that still changed something.
Every test runs the real engine (a SQLite journal in a temporary folder,
real threads) and checks the promise itself: what is on disk after a
reopen, what a search returns, what a refused call left behind.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from memstore import (
    AsyncMemory,
    Config,
    InvalidItemError,
    Item,
    Memory,
    MemstoreError,
    ReadOnlyError,
    Store,
)
from memstore.cli import main as cli_main
from memstore.eventdate import parse_event_date
from memstore.journal import SqliteJournal
from memstore.limits import MAX_REF_CHARS, MAX_REFS
from memstore.timeexpr import query_dates

EXPORT_HEADER = '{"format": "memstore-journal-export/1"}\n'


def export_line(item: dict[str, Any]) -> str:
    """One exported item with a single upsert version."""
    version = {
        "valid_from": {"wall_ms": 1, "counter": 0, "node_id": 0},
        "op": "upsert",
        "kind": item.get("kind", ""),
        "item": item,
    }
    return json.dumps({"id": item["id"], "versions": [version]}) + "\n"


def snapshot(mem: Memory) -> str:
    """Everything a memory's journal holds, as its export."""
    out = io.StringIO()
    mem.export(out)
    return out.getvalue()


# ------------------------------------------------------------ event dates


@pytest.mark.parametrize(
    "when", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00", "0001-01-01T00:59:59+01:00"]
)
def test_an_event_date_outside_the_utc_years_does_not_parse(when: str) -> None:
    assert parse_event_date(when) is None


def test_an_event_date_outside_the_utc_years_is_a_clear_refusal() -> None:
    with Memory(embedder=None) as mem:
        with pytest.raises(InvalidItemError, match="within the years 1-9999"):
            mem.add("launch", kind="event", event_date="0001-01-01T00:00:00+14:00")
        assert len(mem.store) == 0


# ------------------------------------------------------------------ import

BAD_IMPORTS = {
    "out-of-range event date": {
        "id": "x",
        "kind": "event",
        "content": "launch",
        "event_date": "9999-12-31T23:59:59-12:00",
    },
    "unparseable event date": {"id": "x", "kind": "note", "content": "a", "event_date": "soon"},
    "empty kind": {"id": "x", "kind": "", "content": "a"},
    "id with a space": {"id": "x y", "kind": "note", "content": "a"},
    "two partitions": {
        "id": "x",
        "kind": "note",
        "content": "a",
        "tags": ["tenant/a", "tenant/b"],
    },
    "private with no owner": {"id": "x", "kind": "note", "content": "a", "scope": "private"},
    "content past the limit": {"id": "x", "kind": "note", "content": "a" * 200_001},
}


@pytest.mark.parametrize("name", sorted(BAD_IMPORTS))
def test_import_with_check_rules_refuses_what_a_write_would_refuse(
    tmp_path: Path, name: str
) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        mem.add("hello world", id="a")
        before = snapshot(mem)
        text = EXPORT_HEADER + export_line(BAD_IMPORTS[name])
        with pytest.raises(InvalidItemError, match=r"line 2: (x|id .x y. holds a space)"):
            mem.import_(io.StringIO(text), check_rules=True)
        assert snapshot(mem) == before
        assert [h.item.id for h in mem.search("hello")] == ["a"]
    with Memory(tmp_path, embedder=None) as again:  # the folder still opens
        assert again.get("a") is not None and again.get("x") is None


@pytest.mark.parametrize("name", sorted(set(BAD_IMPORTS) - {"id with a space"}))
def test_import_restores_what_put_can_store_though_a_write_would_refuse_it(
    tmp_path: Path, name: str
) -> None:
    """An import is a restore: an item ``put`` stores as given comes back as it was."""
    with Memory(tmp_path, embedder=None) as mem:
        mem.add("hello world", id="a")
        assert mem.import_(io.StringIO(EXPORT_HEADER + export_line(BAD_IMPORTS[name]))) == 1
        imported = mem.get("x")
        assert imported is not None
        exported = Item(**BAD_IMPORTS[name]).model_dump(mode="json")
        assert imported.model_dump(mode="json") == exported
    with Memory(tmp_path, embedder=None) as again:  # the folder opens with it
        reopened = again.get("x")
        assert reopened is not None and reopened.model_dump(mode="json") == exported
        assert [h.item.id for h in again.search("hello")] == ["a"]


@pytest.mark.parametrize("check_rules", [False, True])
def test_import_refuses_an_id_no_journal_keeps_whatever_the_rules(
    tmp_path: Path, check_rules: bool
) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        text = EXPORT_HEADER + export_line(BAD_IMPORTS["id with a space"])
        with pytest.raises(InvalidItemError, match=r"^line 2: id 'x y' holds a space"):
            mem.import_(io.StringIO(text), check_rules=check_rules)
        assert len(mem.store) == 0


def test_import_of_text_that_is_not_utf8_is_an_invalid_export(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(EXPORT_HEADER.encode() + b'{"id": "\xff\xfe"}\n')
    with Memory(tmp_path / "m", embedder=None) as mem:
        with open(bad, encoding="utf-8") as fp, pytest.raises(InvalidItemError, match="UTF-8"):
            mem.import_(fp)
        assert len(mem.store) == 0


def test_cli_import_of_text_that_is_not_utf8_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"\xff\xfe not utf-8\n")
    code = cli_main(["import", str(bad), "--data", str(tmp_path / "m"), "--embedder", "none"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("memstore: ") and err.count("\n") == 1 and "UTF-8" in err


# -------------------------------------------------------------- read-only


@pytest.mark.parametrize("call", ["purge", "import"])
def test_a_readonly_memory_refuses_purge_and_import_before_touching_the_folder(
    tmp_path: Path, call: str
) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        # Enough items that close saves the lexical index beside the journal.
        mem.add_many([f"note number {i} about topic {i % 97}" for i in range(20_050)])
        some = mem.recent(1)[0].id
        exported = snapshot(mem)
    saved = tmp_path / "journal.db.lexicon.npz"
    assert saved.exists()
    kept = saved.read_bytes()
    with Memory(tmp_path, embedder=None, readonly=True) as reader, pytest.raises(ReadOnlyError):
        if call == "purge":
            reader.purge([some])
        else:
            reader.import_(io.StringIO(exported))
    assert saved.read_bytes() == kept  # the writer's saved index, untouched


# ------------------------------------------------------ fields set after construction

ASSIGNED = [
    ("title", 5),
    ("content", None),
    ("id", 5),
    ("tags", None),
    ("data", None),
    ("subject", None),
    ("evidence_refs", [None]),
    ("status", "bogus"),
    ("scope", "bogus"),
    ("confidence", 3),
]


@pytest.mark.parametrize(("field", "value"), ASSIGNED)
def test_store_upsert_checks_a_field_assigned_after_construction(
    tmp_path: Path, field: str, value: object
) -> None:
    path = str(tmp_path / "journal.db")
    with SqliteJournal(path) as journal:
        store = Store()
        journal.attach(store)
        store.upsert(Item(kind="note", title="kept", id="k"))
        it = Item(kind="note", title="hello")
        setattr(it, field, value)
        with pytest.raises(InvalidItemError, match=field):
            store.upsert(it)
        assert [x.id for x in store.items()] == ["k"]
    with SqliteJournal(path) as journal:  # the journal still opens, with what was kept
        again = Store()
        journal.attach(again)
        assert [x.id for x in again.items()] == ["k"]


def test_a_link_weight_assigned_nan_is_refused() -> None:
    store = Store()
    store.upsert(Item(kind="note", title="target", id="t"))
    it = Item(kind="note", title="source", links=[{"to_id": "t", "relation": "explains"}])
    it.links[0].weight = float("nan")
    with pytest.raises(InvalidItemError, match="weight"):
        store.upsert(it)
    assert len(store) == 1


def test_mutate_checks_what_the_callback_assigned() -> None:
    store = Store()
    store.upsert(Item(kind="note", title="hello", id="h"))

    def spoil(it: Item) -> bool:
        it.status = "bogus"  # type: ignore[assignment]
        return True

    with pytest.raises(InvalidItemError, match="status"):
        store.mutate("h", spoil)
    assert store.get("h").status == "active"  # type: ignore[union-attr]


# ------------------------------------------------------------------- close


def test_a_write_racing_close_is_refused_not_lost(tmp_path: Path) -> None:
    """The writer passes the closed check, close() runs to the end, then the writer goes on."""
    checked = threading.Event()
    closed = threading.Event()

    def validate(item: Item) -> str:  # runs after add's closed check, before the store's lock
        if item.content == "racing":
            checked.set()
            assert closed.wait(10)
        return ""

    mem = Memory(tmp_path, embedder=None, config=Config(validate=validate))
    mem.add("before", id="before")
    outcome: list[BaseException | Item] = []

    def writer() -> None:
        try:
            outcome.append(mem.add("racing", id="racing"))
        except BaseException as e:
            outcome.append(e)

    t = threading.Thread(target=writer)
    t.start()
    assert checked.wait(10)
    mem.close()
    closed.set()
    t.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], MemstoreError)
    assert "closed" in str(outcome[0])
    with Memory(tmp_path, embedder=None) as again:
        assert again.get("before") is not None and again.get("racing") is None


# --------------------------------------------------------------- partitions


def test_a_users_private_notes_stay_in_their_partition() -> None:
    with Memory(embedder="hash") as mem:
        mem.add("badge number 4411 for the acme office", partition="acme", private_to="dana")
        mem.add("badge policy at globex", partition="globex")
        mine = mem.add("badge number 7 for globex", partition="globex", private_to="dana")
        hits = mem.search("badge number", partition="globex", user="dana")
        assert [h.item.content for h in hits if h.item.scope == "private"] == [mine.content]
        every = mem.search("badge number", partition="*", user="dana")
        assert sum(h.item.scope == "private" for h in every) == 2


def test_update_keeps_the_partition_and_owner_tags() -> None:
    with Memory(embedder=None) as mem:
        it = mem.add("alice's salary is 90k", partition="alice", private_to="u1")
        updated = mem.update(it.id, tags=["hr"])
        assert sorted(updated.tags) == ["hr", "tenant/alice", "user:u1"]
        assert mem.update(it.id, tags=[*updated.tags, "pay"]).tags.count("tenant/alice") == 1
        for moved in (["tenant/bob"], ["user:u2"]):
            with pytest.raises(InvalidItemError, match="update keeps"):
                mem.update(it.id, tags=moved)
        assert sorted(mem.get(it.id).tags) == ["hr", "pay", "tenant/alice", "user:u1"]  # type: ignore[union-attr]


# ------------------------------------------------------------------- reads


def test_context_skips_an_anchor_deleted_after_it_was_resolved() -> None:
    """A delete landing between resolving the anchor and reading it (the race, pinned)."""

    class Racing(Store):
        def resolve_anchors(self, anchor: str) -> list[str]:
            ids = super().resolve_anchors(anchor)
            self.delete("a")  # another thread's delete, at the worst moment
            return ids

    store = Racing()
    store.upsert(Item(kind="note", title="deploy", subject="deploy", id="a"))
    store.upsert(Item(kind="note", title="deploy notes", subject="deploy", id="b"))
    anchors, _ = store.context("deploy")
    assert [it.id for it in anchors] == ["b"]


def test_refute_never_leaves_an_item_that_cannot_be_written_again() -> None:
    with Memory(embedder=None) as mem:
        mem.add("the cache is the culprit", id="h1")
        with pytest.raises(InvalidItemError, match="refutation"):
            mem.refute("h1", "wrong", ["e" * MAX_REF_CHARS] * MAX_REFS)
        assert mem.get("h1").status == "active"  # type: ignore[union-attr]
        mem.refute("h1", "wrong", ["the trace shows the database"])
        assert mem.update("h1", content="the database is the culprit").status == "stale"


def test_a_subject_narrows_the_whole_search(tmp_path: Path) -> None:
    """MCP's recall says "only memories about this subject"; the semantic channel obeys too."""
    with Memory(tmp_path, embedder="hash") as mem:
        mem.add("alice likes hiking in the alps", subject="alice")
        mem.add("bob goes hiking trips every weekend", subject="bob")
        for query in ("hiking trips", "who enjoys the outdoors"):
            hits = mem.search(query, subject="alice")
            assert {h.item.subject for h in hits} <= {"alice"}
        assert [h.item.subject for h in mem.search("hiking trips", subject="bob")] == ["bob"]


def test_a_tag_with_a_nul_is_refused_on_every_backend() -> None:
    """PostgreSQL's text columns cannot hold NUL: SQLite must not take what it would refuse."""
    with Memory(embedder=None) as mem:
        with pytest.raises(InvalidItemError, match="NUL"):
            mem.add("note", tags=["tenant/a\x00b"])
        assert len(mem.store) == 0


def test_a_cancelled_async_open_leaves_the_folder_free(tmp_path: Path) -> None:
    """The worker thread cannot be stopped midway; what it opens is closed, not orphaned."""
    started, release = threading.Event(), threading.Event()
    path = str(tmp_path / "journal.db")

    class SlowAttach(SqliteJournal):
        def attach(self, store: Store) -> None:
            started.set()
            assert release.wait(10)
            super().attach(store)

    async def scenario() -> None:
        slow = SlowAttach(path)
        opening = asyncio.create_task(AsyncMemory.open(journal=slow, embedder=None))
        assert await asyncio.to_thread(started.wait, 10)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        release.set()
        # The abandoned open finishes, then closes what it opened; the lock goes
        # last (``_closed`` is set as the close starts, before the file is let go).
        for _ in range(400):
            if slow._closed and slow._lockfile is None:
                break
            await asyncio.sleep(0.025)
        assert slow._closed and slow._lockfile is None
        again = await AsyncMemory.open(journal=SqliteJournal(path), embedder=None)
        await again.add("the folder is free")
        await again.close()

    asyncio.run(scenario())


def test_a_restatement_whose_merge_would_break_a_limit_is_refused() -> None:
    """Two valid facts of 60 tags each would merge into one of 120 (at most 64)."""
    fact = "The staging database is restored from the production snapshot every Sunday night."
    with Memory(embedder=None) as mem:
        kept = mem.add(
            fact, kind="stable_fact", confidence="high", tags=[f"a{i}" for i in range(60)]
        )
        with pytest.raises(InvalidItemError, match=f"restates {kept.id}.*tags"):
            mem.add(
                fact[:-1] + "!",
                kind="stable_fact",
                confidence="high",
                tags=[f"b{i}" for i in range(60)],
            )
        assert len(mem.store) == 1 and len(mem.get(kept.id).tags) == 60  # type: ignore[union-attr]
        mem.update(kept.id, confidence="high")  # the kept cell stays writable


def test_the_write_gate_finds_a_restatement_among_other_kinds() -> None:
    """The gate's candidates are the item's own kind: notes sharing every word are not it."""
    fact = "the ledger service retries failed writes three times with backoff"
    with Memory(embedder=None) as mem:
        mem.add_many([fact + f" note {i}" for i in range(50)])  # notes: another kind
        first = mem.add(fact, kind="stable_fact", confidence="high")
        again = mem.add(fact + ".", kind="stable_fact", confidence="high")
        assert again.id == first.id
        assert sum(it.kind == "stable_fact" for it in mem.store.items()) == 1


def test_a_date_named_many_times_is_one_span() -> None:
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert query_dates("2023 " * 500, now) == query_dates("2023", now)
    assert len(query_dates("in May 2023, May 2023 and June 2023", now)) == 2


def test_supersede_keeps_the_new_items_supersedes_within_the_limit() -> None:
    with Memory(embedder=None) as mem:
        old = mem.add("the cache size is 2 GB")
        full = [f"retired-{i}" for i in range(MAX_REFS)]
        new = mem.supersede(
            old.id, Item(kind="note", title="the cache size is 4 GB", supersedes=full)
        )
        assert len(new.supersedes) == MAX_REFS and new.supersedes[-1] == old.id
        mem.update(new.id, content="raised for the spring sale")  # still writable
