"""What the Store asks of its host: the seams, the lock, and change records.

Every :class:`Config` field may be left unset; an unset seam behaves as the
feature being absent.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from memstore.item import Item, utc_now
from memstore.vocabulary import Vocabulary

__all__ = [
    "DEFAULT_ID_PREFIX",
    "BeforeCommitListener",
    "Change",
    "ChangeListener",
    "Config",
    "HitHook",
    "Locker",
]

DEFAULT_ID_PREFIX = "memory-"
"""What a minted id starts with, before its ULID."""


class Locker(Protocol):
    """The host's lock: anything with ``acquire()`` and ``release()``.

    It must be reentrant (``threading.RLock``, the default): hooks run with it
    held and may read the store.
    """

    def acquire(self) -> bool | None: ...

    def release(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Change:
    """One change to the store, as listeners receive it.

    ``op`` is ``"upsert"`` (``item`` is the stored copy) or ``"delete"``
    (``item`` is ``None``); ``id`` and ``kind`` are always set. ``mirrored`` marks
    a change reflected from another writer of a shared record (:meth:`Store.mirror`),
    which a journal must not write again. ``published`` tells whether the change
    reaches the change hooks (not for private items, link-only edits, or quiet ids).
    ``previous`` is the stored item the change replaced or removed (``None`` for a
    creation): for a delete, the only record of the removed item's tags, hence of
    its partition. Listeners must not mutate ``item`` or ``previous``.
    """

    op: Literal["upsert", "delete"]
    item: Item | None
    id: str
    kind: str
    mirrored: bool = False
    published: bool = True
    previous: Item | None = None


ChangeListener = Callable[[str, Item | None, str, str], None]
"""After-commit listener: ``fn(op, item, id, kind)`` once per change."""
BeforeCommitListener = Callable[[Sequence[Change]], None]
"""Before-commit listener: ``fn(changes)`` once per group, before it becomes visible."""
HitHook = Callable[[list[str], str, str, list[str] | None], None]
"""``fn(item_ids, query, kind, kinds)``: a search surfaced these items to a consumer."""


@dataclass
class Config:
    """The host seams. Hooks documented as running "with the lock held" run inside it."""

    retention: Callable[[str], int] | None = None
    """Days a knowledge item of a partition is kept (0 = no deadline). Runs before the lock."""
    validate: Callable[[Item], str] | None = None
    """Why an item may not be written, or ``""``: the host's rules. Runs before the lock."""
    before: Callable[[Item], None] | None = None
    """Amends an item about to be stored, after any merge (lock held).

    What it makes of the item is checked again by the base rules (an import
    of it would apply them): breaking one, or changing the id, raises
    :class:`~memstore.errors.InvalidItemError` naming ``Config.before``, and the
    write changes nothing."""
    read: Callable[[list[Item]], None] | None = None
    """Amends items about to be returned (lock held)."""
    dirty: Callable[[], None] | None = None
    """Fires after every committed store or delete (lock held): rebuild what you derive.
    The write is committed by then: an exception it raises is logged, not raised."""
    signal: Callable[[], None] | None = None
    """Fires after every committed store or delete (lock held): wake your watchers.
    The write is committed by then: an exception it raises is logged, not raised."""
    quiet: Callable[[str], bool] | None = None
    """Ids whose changes are not worth publishing to the change hook (lock released)."""
    published: Callable[[], None] | None = None
    """Fires once per change published to the change hook (lock released)."""
    vocabulary: Vocabulary | None = None
    """The host's kinds; ``None`` restricts nothing (a clone inherits its source's)."""
    default_ttl: Mapping[str, _dt.timedelta] | None = None
    """A deadline per kind for items created without one; updates keep the stored one."""
    renew_on_merge: bool = False
    """A restatement merged by :meth:`Store.upsert_dedup` re-arms a ``default_ttl`` deadline."""
    subject: str = ""
    """The identity of the instance holding these items (a private item's subject)."""
    id_prefix: str = DEFAULT_ID_PREFIX
    """What a minted id starts with."""
    new_id: Callable[[], str] | None = None
    """Supplies the id of an item written without one, instead of prefix + ULID."""
    skip_id_text: Callable[[str], bool] | None = None
    """Ids left out of an item's search text; default: the ids this store mints."""
    logger: logging.Logger | None = None
    """Where the store logs; default ``logging.getLogger("memstore")``."""
    clock: Callable[[], _dt.datetime] = field(default=utc_now)
    """Returns the current time as an aware UTC datetime (tests inject their own)."""
