"""Publication: after-commit listeners told of committed changes, in commit order.

A write group commits under the store's lock and queues its changes
(``_unpublished``). Once its thread has released the lock, it drains the
queue: one thread at a time publishes, outside the lock, and takes whatever
other threads committed meanwhile, so listeners hear every change once and
in commit order, and may read (or write to) the store while they do.

Read your writes. A write whose changes another thread is publishing (a
writer that was there first, a PostgreSQL journal's follower) waits for it
before returning: ``_queued`` counts the changes ever queued, ``_delivered``
those whose publication ended, and the writer waits, on ``_delivery`` and
outside the store's lock, until ``_delivered`` reaches what ``_queued`` was
when its group committed. It does not wait where that could deadlock:

- on the publishing thread itself (a listener that writes): its changes are
  delivered by this very thread, after the listener returns;
- while its thread still holds the store's lock (inside ``batch()``, under
  ``with store.lock:``, inside a journal's import): the outermost group
  waits when it ends, and a host holding the lock must not wait for a
  listener that may need it. A host lock that cannot name its owner (no
  ``_is_owned``) cannot answer, so writes under such a lock never wait;
- behind a ``forget_locked`` whose deletes still wait for
  ``publish_removed``: those hold back every later change, and the thread
  that would release them may be the writer's own;
- on a PostgreSQL journal's follower thread (it applies other processes'
  changes with ``settle=False``): a listener may be waiting for the
  follower (``atomically`` after a conflict); ``wait_for`` waits instead
  (:meth:`Publisher._await_all_published`);
- for ever: a listener that blocks holds up every write behind it, so the
  wait ends after :data:`PUBLISH_WAIT_S` seconds with a warning in the log
  and the write returns (committed: its listeners hear it once the listener
  in the way returns).

Lock order: the store's lock, then ``_delivered_lock`` (``_delivery``'s); a
thread waiting on ``_delivery`` holds nothing else of the store's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from memstore.config import BeforeCommitListener, Change, ChangeListener, Config, Locker
from memstore.item import SCOPE_PRIVATE

__all__ = ["PUBLISH_WAIT_S", "Publisher"]

PUBLISH_WAIT_S = 30.0
"""How long a write waits for another thread to deliver its changes, at most (seconds)."""


class Publisher:
    """The publication half of the store: the queue, the publishing turn, the waits."""

    # Set by StoreBase.__init__ (the state this half reads but does not own).
    _config: Config
    _lock: Locker
    _log: logging.Logger
    _tls: threading.local
    _change_hook: ChangeListener | None
    _record_hook: Callable[[Change], None] | None
    _listeners: list[ChangeListener]
    _grouped: list[BeforeCommitListener]

    def _init_publication(self) -> None:
        self._unpublished: list[Change] = []
        self._publishing = False  # a thread holds the publishing turn
        # Committed changes whose publication waits for publish_removed (by
        # identity): they keep their place in commit order and hold back what
        # follows them.
        self._held: set[int] = set()
        self._queued = 0  # changes ever queued (the store's lock)
        self._delivered = 0  # changes whose publication ended (``_delivered_lock``)
        self._delivered_lock = threading.Lock()
        self._delivery = threading.Condition(self._delivered_lock)
        self._waiting = 0  # writers waiting on ``_delivery`` (``_delivered_lock``)
        self._publish_wait = PUBLISH_WAIT_S

    def _publish(self, changes: Iterable[Change]) -> None:
        """Fire the grouped listeners, the change hook and the after-commit listeners (unlocked).

        The changes are committed: a hook or listener that raises is logged and
        the others still run, rather than failing a write that succeeded.
        Grouped listeners get the whole run at once, before the first change
        is told one at a time: whoever hears change ``c`` finds an index that
        follows by group already holding it. A write a listener makes here
        does not wait for its own publication (:meth:`_await_published`).
        """
        d = self._tls.__dict__
        was = d.get("publishing", False)
        d["publishing"] = True
        try:
            self._tell(changes)
        finally:
            d["publishing"] = was

    def _tell(self, changes: Iterable[Change]) -> None:
        cfg = self._config
        hook = self._change_hook
        record = self._record_hook
        listeners = list(self._listeners)
        if self._grouped:
            changes = list(changes)
            for group_fn in list(self._grouped) if changes else ():
                try:
                    group_fn(changes)
                except Exception:
                    self._log.exception("memstore: grouped change listener %r raised", group_fn)
        for c in changes:
            if (
                (hook is not None or record is not None)
                and (c.published or _withdraws(c))
                and not (cfg.quiet and cfg.quiet(c.id))
            ):
                if hook is not None:  # a published item made private leaves what it showed
                    self._call(hook, c, withdrawn=not c.published)
                if record is not None:
                    try:
                        record(c)
                    except Exception:
                        self._log.exception("memstore: change record hook raised on %s", c.id)
                if cfg.published is not None and c.published:
                    try:
                        cfg.published()
                    except Exception:
                        self._log.exception("memstore: the published seam raised")
            for fn in listeners:
                self._call(fn, c)

    def _call(self, fn: ChangeListener, c: Change, *, withdrawn: bool = False) -> None:
        """``fn`` told of ``c``; ``withdrawn``: as the delete it is to those who saw it shared."""
        op, item = ("delete", None) if withdrawn else (c.op, c.item)
        try:
            fn(op, item, c.id, c.kind)
        except Exception:
            self._log.exception("memstore: change listener %r raised on %s %s", fn, c.op, c.id)

    def _drain(self) -> None:
        """Publish committed changes, in commit order, once this thread left the store.

        One thread publishes at a time and takes whatever others committed
        meanwhile, so deliveries keep commit order without holding the store's
        lock (a listener may write to the store; a host may hold the lock).
        """
        if not self._unpublished or self._tls.__dict__.get("depth", 0) > 0:
            return  # an unlocked peek: a change committed meanwhile is its writer's to drain
        lock = self._lock
        while True:
            lock.acquire()
            try:
                queue = self._unpublished
                if self._publishing or not queue:
                    return
                n = len(queue)
                if self._held:  # publish up to the first held change, no further
                    n = next((i for i, c in enumerate(queue) if id(c) in self._held), n)
                    if n == 0:
                        return
                # The turn is taken before the queue shrinks: a waiter that no
                # longer finds its change queued finds it being published.
                self._publishing = True
                pending, self._unpublished = queue[:n], queue[n:]
            finally:
                lock.release()
            try:
                self._publish(pending)
            finally:
                lock.acquire()
                try:
                    # Counted before the turn is given back (a listener that
                    # raised through, KeyboardInterrupt, counts too): whoever
                    # finds the turn free finds every change it took counted.
                    with self._delivered_lock:  # the bare lock: cheaper than the condition's
                        self._delivered += n
                        if self._waiting:
                            self._delivery.notify_all()
                    self._publishing = False
                finally:
                    lock.release()

    def _await_published(self) -> None:
        """Return once this thread's last group has been told to every listener.

        Called where a write ends (the outermost group, its lock released).
        Waits for the thread publishing, or publishes itself when nobody is;
        does not wait where that could deadlock (see the module's docstring),
        nor past :data:`PUBLISH_WAIT_S` (then it logs a warning).
        """
        d = self._tls.__dict__
        if d.get("depth", 0) > 0:
            return  # inside a scope: the outermost one waits
        owed = d.pop("owed", 0)
        if owed > self._delivered and not self._await(owed, self._publish_wait):
            self._log.warning(
                "memstore: a write returns before its after-commit listeners heard it: "
                "the thread publishing has been busy for %.0f s (a listener that blocks?); "
                "they will hear it once it is done",
                self._publish_wait,
            )

    def _await_all_published(self, timeout: float | None) -> bool:
        """Wait until every change queued so far was told to every listener; whether it was.

        What a journal's ``wait_for`` adds once the store holds another
        process's changes: its follower applied them, and the thread
        publishing tells the vector index and the hub. At most ``timeout``
        seconds (``None``: :data:`PUBLISH_WAIT_S`, then a warning and
        ``True``: the store has them). Returns ``True`` at once where a write
        would not wait (a listener, the store's lock held).
        """
        if self._tls.__dict__.get("depth", 0) > 0 or self._queued <= self._delivered:
            return True
        bound = self._publish_wait if timeout is None else min(timeout, self._publish_wait)
        if self._await(self._queued, bound):
            return True
        if timeout is not None and timeout < self._publish_wait:
            return False  # the caller's own timeout ran out
        self._log.warning(
            "memstore: wait_for returns before the after-commit listeners heard every "
            "change: the thread publishing has been busy for %.0f s (a listener that blocks?)",
            self._publish_wait,
        )
        return True

    def _await(self, owed: int, timeout: float) -> bool:
        """Wait until ``_delivered`` reaches ``owed``, at most ``timeout`` s; ``False``: it ran out.

        ``True`` at once where waiting could deadlock: on the publishing
        thread, or holding the store's lock (or unable to tell).
        """
        if self._tls.__dict__.get("publishing"):
            return True  # a listener's write: this thread delivers it once it returns
        owned = getattr(self._lock, "_is_owned", None)
        if not callable(owned) or owned():
            return True  # the thread holds the lock (or cannot tell): never wait under it
        delivery = self._delivery
        end = time.monotonic() + timeout
        while True:
            self._drain()  # nobody publishing: this thread takes the turn
            with delivery:
                self._waiting += 1
                try:
                    while self._delivered < owed and self._publishing:
                        left = end - time.monotonic()
                        if left <= 0:
                            return False
                        delivery.wait(left)
                finally:
                    self._waiting -= 1
                if self._delivered >= owed:
                    return True

    def _settled(self, timeout: float = 10.0) -> bool:
        """Publish what is committed, and wait out another thread's publication (for tests).

        A write waits for its own changes (:meth:`_await_published`), but not
        inside a listener, under the store's lock, or past the bound. Whatever
        follows the store by its listeners (a vector index, a hub) agrees with
        the items only once every committed change was published. ``False``:
        still publishing after ``timeout`` s.
        """
        end = time.monotonic() + timeout
        while True:
            self._drain()
            self._lock.acquire()
            try:
                queue = self._unpublished
                if not self._publishing and (not queue or id(queue[0]) in self._held):
                    return True
            finally:
                self._lock.release()
            if time.monotonic() > end:
                return False
            time.sleep(0.001)


def _withdraws(c: Change) -> bool:
    """Whether ``c`` makes a published item private: the record hook hears of it.

    The change itself is not published (the item is private now), but a
    change stream that showed the item must withdraw it from its subscribers.
    """
    return (
        c.op == "upsert"
        and c.item is not None
        and c.item.scope == SCOPE_PRIVATE
        and c.previous is not None
        and c.previous.scope != SCOPE_PRIVATE
    )
