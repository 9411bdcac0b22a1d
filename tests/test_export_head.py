"""An export's header names the journal head its rows are the state at.

A reader resumes the change stream from that head: every version at or
before it is in the file, none after it. Writers go on during an export, so
the head and the rows must come from one snapshot. Here a real writer thread
commits in the middle of an export (while its header is being written, and
then continuously), on SQLite and on PostgreSQL; each export is compared
with the full record once the writer stopped.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator

import pytest

from memstore import Item, Store
from memstore.journal import JournalBase
from memstore.journal.hlc import Lsn
from tests.journals import Place, attached

Stamp = tuple[str, Lsn]  # (id, valid_from) of one version


@pytest.fixture
def opened(place: Place) -> Iterator[tuple[Store, JournalBase]]:
    store, journal = attached(place)
    yield store, journal
    journal.close()


def note(n: int) -> Item:
    return Item(id=f"n{n % 7}", kind="note", title=f"note {n}", tags=["tenant/alpha"])


def parsed(text: str) -> tuple[Lsn, set[Stamp]]:
    """The head an export names, and the versions it holds."""
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[-1].get("end") is True
    stamps = {
        (obj["id"], Lsn(v["valid_from"]["wall_ms"], v["valid_from"]["counter"]))
        for obj in lines[1:-1]
        for v in obj["versions"]
    }
    return Lsn.parse(lines[0]["head"]), stamps


def record(journal: JournalBase) -> set[Stamp]:
    """Every version on record (read once no one writes)."""
    return parsed(exported(journal, None))[1]


def exported(journal: JournalBase, partition: str | None) -> str:
    buf = io.StringIO()
    journal.export(partition, buf)
    return buf.getvalue()


def assert_consistent(text: str, everything: set[Stamp]) -> None:
    """The export holds exactly the versions at or before the head it names."""
    head, stamps = parsed(text)
    assert stamps == {s for s in everything if s[1] <= head}, head


class CommitsOnHeader(io.StringIO):
    """An export target: while the header line is written, another thread commits."""

    def __init__(self, commit: Callable[[], None]) -> None:
        super().__init__()
        self._commit: Callable[[], None] | None = commit

    def write(self, s: str) -> int:
        commit, self._commit = self._commit, None
        if commit is not None:
            t = threading.Thread(target=commit)
            t.start()
            t.join()
        return super().write(s)


@pytest.mark.parametrize("partition", [None, "alpha"])
def test_a_commit_during_the_export_is_after_the_head_it_names(
    opened: tuple[Store, JournalBase], partition: str | None
) -> None:
    store, journal = opened
    for n in range(5):
        store.upsert(note(n))
    before = journal.head()
    target = CommitsOnHeader(lambda: store.upsert(note(5)))
    journal.export(partition, target)
    assert journal.head() > before  # the writer did commit meanwhile
    head, _ = parsed(target.getvalue())
    assert head == before  # the rows were read before that commit: so was the head
    assert_consistent(target.getvalue(), record(journal))


@pytest.mark.parametrize("partition", [None, "alpha"])
def test_exports_beside_a_running_writer_name_their_own_head(
    opened: tuple[Store, JournalBase], partition: str | None
) -> None:
    store, journal = opened
    stop = threading.Event()
    writes = 0

    def writer() -> None:
        nonlocal writes
        while not stop.is_set() or writes < 20:
            store.upsert(note(writes))
            writes += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        texts = [exported(journal, partition) for _ in range(8)]
    finally:
        stop.set()
        t.join()
    everything = record(journal)
    for text in texts:
        assert_consistent(text, everything)
