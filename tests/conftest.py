"""Shared fixtures for the store tests: a controllable clock and a hook recorder.

Time never moves unless a test moves it (``clock.advance``), so deadlines,
timestamps and lazy staleness are deterministic. ``make_store`` builds a
:class:`~memstore.Store` on that clock with every observer seam (change hook,
after- and before-commit listeners, ``dirty``, ``signal``, ``published``)
recording into ``recorder``.

Hypothesis runs without its per-example deadline (a wall-clock threshold:
on a loaded two-core machine an example that takes 200 ms says nothing about
the code, and a test that fails for it cannot be trusted). A test that sets
its own ``@settings`` inherits this from the profile loaded here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
from hypothesis import settings

from memstore import Change, Config, Item, Store
from tests.forker import Forker, forked_writers
from tests.journals import Place
from tests.pgtest import PgPlace, Schemas, check_closed, require_pg

settings.register_profile("memstore", deadline=None)
settings.load_profile("memstore")

T0 = dt.datetime(2025, 1, 6, 9, 0, tzinfo=dt.UTC)
"""Where every fake clock starts."""


class FakeClock:
    """A clock returning aware UTC datetimes that moves only when told to."""

    def __init__(self, start: dt.datetime = T0) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, delta: dt.timedelta) -> dt.datetime:
        """Move the clock forward by ``delta``; the new time."""
        self.now = self.now + delta
        return self.now


HookCall = tuple[str, Item | None, str, str]


@dataclass
class Recorder:
    """Everything the store told its observers, in order."""

    hook: list[HookCall] = field(default_factory=list)
    listener: list[HookCall] = field(default_factory=list)
    groups: list[tuple[Change, ...]] = field(default_factory=list)
    published: int = 0
    dirty: int = 0
    signal: int = 0

    def on_hook(self, op: str, item: Item | None, id: str, kind: str) -> None:
        self.hook.append((op, item, id, kind))

    def on_listener(self, op: str, item: Item | None, id: str, kind: str) -> None:
        self.listener.append((op, item, id, kind))

    def on_before(self, changes: Sequence[Change]) -> None:
        self.groups.append(tuple(changes))

    def on_published(self) -> None:
        self.published += 1

    def on_dirty(self) -> None:
        self.dirty += 1

    def on_signal(self) -> None:
        self.signal += 1

    def attach(self, store: Store) -> None:
        """Install the change hook and both kinds of listener on ``store``."""
        store.set_change_hook(self.on_hook)
        store.add_change_listener(self.on_listener)
        store.add_change_listener(self.on_before, before_commit=True)

    def clear(self) -> None:
        self.hook.clear()
        self.listener.clear()
        self.groups.clear()
        self.published = self.dirty = self.signal = 0

    @property
    def quiet(self) -> bool:
        """Whether nothing at all was reported."""
        return not (
            self.hook or self.listener or self.groups or self.published or self.dirty or self.signal
        )

    def hook_ops(self) -> list[tuple[str, str]]:
        return [(op, id) for op, _, id, _ in self.hook]

    def listener_ops(self) -> list[tuple[str, str]]:
        return [(op, id) for op, _, id, _ in self.listener]


class StoreFactory(Protocol):
    def __call__(self, **config: Any) -> Store: ...


def count_is_active(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the items asked ``Item.is_active`` from now on, in order (until undone).

    How a test sees what a read touched: a bounded or indexed read asks only
    the items it names, where a scan asks every one.
    """
    asked: list[str] = []
    is_active = Item.is_active

    def counted(self: Item, now: dt.datetime | None = None) -> bool:
        asked.append(self.id)
        return is_active(self, now)

    monkeypatch.setattr(Item, "is_active", counted)
    return asked


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def make_store(clock: FakeClock, recorder: Recorder) -> StoreFactory:
    """Build a store on ``clock`` whose observers all report into ``recorder``.

    Keyword arguments are :class:`~memstore.Config` fields; they override the
    recording seams when they name one.
    """

    def make(**config: Any) -> Store:
        seams: dict[str, Any] = {
            "clock": clock,
            "dirty": recorder.on_dirty,
            "signal": recorder.on_signal,
            "published": recorder.on_published,
        }
        seams.update(config)
        store = Store(Config(**seams))
        recorder.attach(store)
        return store

    return make


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    return make_store()


# ------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="session")
def pg_schemas() -> Iterator[Schemas]:
    """Fresh PostgreSQL schemas for this run (skips, or fails in CI, without a server)."""
    require_pg()
    schemas = Schemas()
    yield schemas
    schemas.drop_all()


@pytest.fixture
def pg_place(pg_schemas: Schemas) -> Iterator[PgPlace]:
    """A schema of its own for one test, which must close every journal it opens there
    (:func:`tests.pgtest.check_closed`: the run drops the schema later)."""
    place = pg_schemas.new()
    yield place
    check_closed(place)


Places = Callable[[str], Place]
"""Name -> a journal's place on one backend (the :func:`places` fixture)."""


@pytest.fixture(params=["sqlite", "postgres"])
def places(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Places]:
    """Named places of one backend: the same name is the same journal.

    A test taking ``places`` runs once on each backend and may open several
    journals (an export's source and an import's target) by name; on PostgreSQL
    it closes each before it ends (:func:`tests.pgtest.check_closed`).
    """
    if request.param == "sqlite":
        yield lambda name: tmp_path / f"{name}.db"
        return
    schemas: Schemas = request.getfixturevalue("pg_schemas")
    made: dict[str, PgPlace] = {}
    yield lambda name: made.setdefault(name, schemas.new(name))
    for place in made.values():
        check_closed(place)


@pytest.fixture(params=["sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Path | PgPlace:
    """Where a journal lives: an SQLite file, then a PostgreSQL schema of the test's own.

    A test taking ``place`` runs once on each backend (open it with
    :func:`tests.journals.open_journal`). A module may define its own.
    """
    if request.param == "sqlite":
        return tmp_path / "journal.db"
    pg: PgPlace = request.getfixturevalue("pg_place")
    return pg


@pytest.fixture
def forker(tmp_path: Path) -> Iterator[Forker]:
    """A process that imported memstore once, forking the crash tests' writers
    (:func:`tests.forker.kill_writer`)."""
    with forked_writers(tmp_path) as f:
        yield f
