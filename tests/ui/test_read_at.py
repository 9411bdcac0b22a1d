"""A listing's answer carries the journal position it was read at (``read_at``), exactly.

The page compares it with the ``lsn`` of each live change: at or before it, the
change is in the answer; after it, not. So the position must be the state the
listing was read from: the journal's head when it was read, and no position at
all (``None``) when the store changed under the read every time it was tried.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memstore import Item, Memory
from memstore.journal import Lsn
from memstore.protocol import TokenTable
from memstore.protocol.app import create_app
from memstore.ui import install
from memstore.ui.positions import READ_TRIES, read_at
from memstore.web.hosts import HostPolicy

AUTH = {"Authorization": "Bearer tok-a"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Memory]]:
    tokens = {"tok-a": {"tenant": "a", "scopes": ["recall"]}}
    with Memory(tmp_path, embedder=None, hub=True) as mem:
        app = create_app(
            mem,
            tokens=TokenTable.from_json(json.dumps(tokens)),
            hosts=HostPolicy.for_bind("127.0.0.1", ()),
            mounts=[install],
        )
        with TestClient(app, base_url="http://127.0.0.1:8080") as c:
            yield c, mem


def lsn(answer: dict[str, object]) -> Lsn:
    read = answer["read_at"]
    assert isinstance(read, dict), answer
    return Lsn.parse(read["lsn"])


def test_a_listing_is_read_at_the_journal_head(served: tuple[TestClient, Memory]) -> None:
    c, mem = served
    first = mem.add(Item(kind="note", subject="alice", content="Alice note"), partition="a")
    at_first = mem.journal.head() if mem.journal else None
    for params in ({"q": ""}, {"q": "Alice"}, {"q": "", "subject": "alice", "offset": 1}):
        answer = c.get("/ui/api/search", params=params, headers=AUTH).json()
        assert lsn(answer) == at_first, params
    mem.update(first.id, subject="bob")  # after it: the next answer is read at its position
    assert mem.journal is not None
    moved = mem.journal.head()
    assert moved > lsn(answer)
    answer = c.get("/ui/api/search", params={"subject": "alice"}, headers=AUTH).json()
    assert (answer["hits"], lsn(answer)) == ([], moved)
    whoami = c.get("/ui/api/whoami", headers=AUTH).json()
    assert whoami["head"]["lsn"] == str(lsn(answer))  # the head whoami and /healthz name


def test_a_listing_in_the_past_is_read_at_its_moment(served: tuple[TestClient, Memory]) -> None:
    c, mem = served
    mem.add(Item(kind="note", content="Alice note"), partition="a")
    assert mem.journal is not None
    then = str(mem.journal.head())
    mem.add(Item(kind="note", content="Bob note"), partition="a")
    answer = c.get("/ui/api/search", params={"as_of": then}, headers=AUTH).json()
    assert answer["read_at"] == answer["as_of"] and answer["as_of"]["lsn"] == then


def test_a_read_the_store_changed_under_is_read_again(tmp_path: Path) -> None:
    # The read itself writes (as another thread would while it runs): the first time
    # only, then the second read is of one state, named by its position.
    with Memory(tmp_path, embedder=None) as mem:
        assert mem.journal is not None
        reads: list[int] = []

        def read() -> int:
            if not reads:
                mem.add(Item(kind="note", content="written during the read"), partition="a")
            reads.append(len(mem.store))
            return reads[-1]

        assert read_at(mem, read) == (1, mem.journal.head())
        assert reads == [1, 1]


def test_a_store_that_never_stops_changing_has_no_position(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:

        def read() -> int:
            mem.add(Item(kind="note", content="written during the read"), partition="a")
            return len(mem.store)

        assert read_at(mem, read) == (READ_TRIES, None)
