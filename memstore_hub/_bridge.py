"""The wiring between a Store's hooks and a Hub (what :meth:`Hub.attach` installs)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memstore.item import SCOPE_PRIVATE, Item
from memstore_hub.partition import hit_partition as default_hit_partition

if TYPE_CHECKING:
    from memstore.config import Change
    from memstore.store import Store
    from memstore_hub.hub import Hub

__all__ = ["StoreBridge"]

_log = logging.getLogger("memstore.hub")


class StoreBridge:
    """Translates one store's change records and search hits into hub events."""

    def __init__(
        self,
        hub: Hub,
        store: Store,
        *,
        lsn_of: Callable[[Change], object | None] | None,
        hit_partition: Callable[[Sequence[Item]], str | None] | None,
    ) -> None:
        self._hub = hub
        self._store = store
        self._lsn_of = lsn_of
        self._hit_partition = hit_partition or default_hit_partition

    def on_change(self, change: Change) -> None:
        """The store's change record hook: already filtered by the store (published,
        or making a published item private; not quiet), called after commit
        outside its lock, in commit order. The hub withdraws an item from the
        subscribers that lose sight of it (see :meth:`Hub.publish_change`).

        A failing ``lsn_of`` is logged and the change published without an lsn:
        subscribers must not miss a committed change.
        """
        lsn = None
        if self._lsn_of is not None:
            try:
                lsn = self._lsn_of(change)
            except Exception:
                _log.exception("memstore_hub: lsn_of raised on %s %s", change.op, change.id)
        self._hub.publish_change(
            change.op,
            change.item,
            change.id,
            change.kind,
            previous=change.previous,
            lsn=lsn,
        )

    def on_hit(self, item_ids: list[str], query: str, kind: str, kinds: list[str] | None) -> None:
        """The store's hit hook: publish the hit without private or vanished items.

        One :meth:`Store.get` per id (O(hit size)), to learn each item's scope
        and partition.
        """
        get = self._store.get
        ids: list[str] = []
        kept_kinds: list[str] = []
        items: list[Item] = []
        for i, id in enumerate(item_ids):
            item = get(id)
            if item is None or item.scope == SCOPE_PRIVATE:
                continue
            ids.append(id)
            items.append(item)
            if kinds is not None:
                kept_kinds.append(kinds[i])
        if not ids:
            return
        self._hub.publish_hit(
            ids,
            query,
            kind,
            kept_kinds if kinds is not None else None,
            partition=self._hit_partition(items),
        )

    def detach(self) -> None:
        """Clear the store's change record hook and hit hook."""
        self._store.set_change_record_hook(None)
        self._store.set_hit_hook(None)
