"""The exception hierarchy: one root, each class also a built-in.

Every error memstore raises on purpose derives from :class:`MemstoreError`, and
each concrete class also derives from the built-in a caller would naturally
catch (``ValueError`` for bad input, ``KeyError`` for a missing id), so both
``except MemstoreError`` and ``except ValueError`` work.
"""

from __future__ import annotations

__all__ = ["InvalidItemError", "ItemNotFoundError", "MemstoreError"]


class MemstoreError(Exception):
    """Root of every error memstore raises on purpose."""


class InvalidItemError(MemstoreError, ValueError):
    """A write was refused by validation; nothing was changed.

    ``reason`` is the human-readable rule the item broke, e.g.
    ``"kind stable_fact needs confidence high, got 'low'"``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __repr__(self) -> str:
        return f"InvalidItemError({self.reason!r})"


class ItemNotFoundError(MemstoreError, KeyError):
    """An operation named an item id the store does not hold."""

    def __init__(self, item_id: str) -> None:
        super().__init__(item_id)
        self.item_id = item_id

    def __str__(self) -> str:
        return f"no item with id {self.item_id!r}"
