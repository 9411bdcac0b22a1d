"""One Memory shared by many threads: adds, searches, deletes, links and a subscriber at once.

The promise a user relies on (``Memory`` is "thread-safe"): threads of one
program may call it at the same time without an exception, and every write
a call acknowledged (it returned) is there afterwards, also after the Memory
is closed and opened again. Each writer works on notes of its own (so the
expected end state is known exactly) while searchers read everything and a
subscriber receives the change events. Run on the folder's SQLite journal
and on a PostgreSQL journal.

Every thread runs a fixed number of operations (no wall-clock loop).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstore import Memory
from memstore_hub.events import ItemChanged
from tests.pgtest import PgPlace

WRITERS = 4
NOTES = 25
"""Notes each writer adds; every third is deleted again and every other one linked."""
SEARCHERS = 2
SEARCHES = 30


def _open(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[], Memory]:
    if kind == "sqlite":
        return lambda: Memory(tmp_path / "data", embedder="hash", hub=True)
    place: PgPlace = request.getfixturevalue("pg_place")
    from memstore.journal.postgres import PostgresJournal

    return lambda: Memory(
        tmp_path / "data",
        embedder="hash",
        hub=True,
        journal=PostgresJournal(place.dsn, schema=place.schema),
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_many_threads_on_one_memory_lose_no_acknowledged_write(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    open_memory = _open(kind, tmp_path, request)
    memory = open_memory()
    sub = memory.subscribe(maxsize=100_000)
    errors: list[BaseException] = []
    kept: dict[str, str] = {}  # id -> content, acknowledged and not deleted
    deleted: set[str] = set()
    links: dict[str, str] = {}  # from id -> to id, acknowledged
    lock = threading.Lock()
    events: list[ItemChanged] = []
    hits: list[int] = []
    first = threading.Event()  # a note exists: the searches have something to find

    def guarded(fn: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            try:
                fn(*args)
            except BaseException as e:
                errors.append(e)

        return run

    @guarded
    def writer(w: int) -> None:
        previous: str | None = None
        for n in range(NOTES):
            text = f"writer {w} note {n} about kestrel{w} and harbour{n}"
            item = memory.add(text, dedup=False)
            with lock:
                kept[item.id] = text
            first.set()
            if previous is not None and n % 2 == 0:
                assert memory.link(item.id, previous, "precedes", 0.5)
                with lock:
                    links[item.id] = previous
            if n % 3 == 0:
                assert memory.delete(item.id)
                with lock:
                    del kept[item.id]
                    links.pop(item.id, None)
                    deleted.add(item.id)
            else:
                previous = item.id

    @guarded
    def searcher(s: int) -> None:
        first.wait(60)
        for n in range(SEARCHES):
            found = memory.search(f"kestrel{n % WRITERS} harbour{n % NOTES}", limit=5)
            assert all(hit.item.content.startswith("writer ") for hit in found)
            hits.append(len(found))

    @guarded
    def reader() -> None:
        while (event := sub.get(30)) is not None:
            if isinstance(event, ItemChanged):
                events.append(event)

    listening = threading.Thread(target=reader)
    listening.start()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=searcher, args=(s,)) for s in range(SEARCHERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    memory.close()  # ends the subscription once its events are read
    listening.join(60)
    assert errors == []
    assert sum(hits) > 0, "the searches ran while there were notes to find"
    assert len(kept) + len(deleted) == WRITERS * NOTES

    upserted = {e.id for e in events if e.op == "upsert"}
    removed = {e.id for e in events if e.op == "delete"}
    assert set(kept) | deleted <= upserted, "an acknowledged add was never published"
    assert deleted <= removed, "an acknowledged delete was never published"

    with open_memory() as again:  # everything acknowledged is durable
        for id, text in kept.items():
            item = again.get(id)
            assert item is not None, f"acknowledged note {id} lost"
            assert item.content == text
        for id in deleted:
            assert again.get(id) is None, f"deleted note {id} came back"
        for source, target in links.items():
            item = again.get(source)
            assert item is not None
            assert target in {link.to_id for link in item.links}
        assert again.stats().active == len(kept)
