"""What an import holds each exported version to: the record rule, or the write rules too.

An export is the record of what a store held, and an import restores it. So
by default an import holds every item to the rule :meth:`Store.put
<memstore.store.Store.put>`, ``mirror`` and ``reflect`` hold an item to on
the way in (:func:`~memstore.validate.intake_rejection`): the **record rule**
(:func:`~memstore.validate.record_rejection`, what every stored item obeys
however it was written), and a partition tag short enough for every backend's
index. The rules a *write* obeys (:func:`~memstore.validate.validate_base`:
a stable fact's high confidence, a hypothesis's deadline, an event's date,
the size limits and tag rules; and the host's ``Config.validate``) are not
asked: ``put`` stores items that break them, and a host's rules or vocabulary
may have got stricter since an item was written. Asking them would make such
a store's export impossible to import, its items unrecoverable through the
documented path.

``check_rules=True`` asks for the write rules as well
(:func:`import_rules`): for a file from elsewhere that the host's rules must
screen, as if each of its items were written through ``upsert``.

>>> from memstore import Config, Item, Store
>>> store = Store(Config(validate=lambda it: "no secrets" if "sk-" in it.title else ""))
>>> fact = Item(id="f", kind="stable_fact", title="sk-1", confidence="low")
>>> import_rules(store, check_rules=False).item(fact)
''
>>> import_rules(store, check_rules=True).item(fact)
"kind 'stable_fact' needs confidence 'high', got 'low'"
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from memstore.item import Item
from memstore.validate import intake_rejection, kind_rejection, record_kind_rejection

if TYPE_CHECKING:
    from memstore.store import Store

__all__ = ["RECORD_RULES", "ImportRules", "import_rules"]


class ImportRules(NamedTuple):
    """Why an exported version may not come in (each ``""`` when it may)."""

    item: Callable[[Item], str]
    """Asked about the item of every upsert version."""
    deleted_kind: Callable[[object], str]
    """Asked about the kind a delete version names (when it names one)."""


RECORD_RULES = ImportRules(intake_rejection, record_kind_rejection)
"""The rules of an import by default: what a journal can keep and read back, and
index on every backend (:func:`~memstore.validate.intake_rejection`: the rule of
``put`` on the way in)."""


def import_rules(store: Store, *, check_rules: bool) -> ImportRules:
    """The rules an import into ``store`` holds each version to.

    :data:`RECORD_RULES` unless ``check_rules``; then the rules a write to
    ``store`` obeys: :meth:`Store.validate_base
    <memstore.store.Store.validate_base>` (which includes the record rule;
    the store's vocabulary decides whether a stable fact needs high
    confidence), then the host's ``Config.validate``, and the kind rule
    (:func:`~memstore.validate.kind_rejection`) for the kind a delete names.
    """
    if not check_rules:
        return RECORD_RULES
    host = store.config.validate
    if host is None:
        return ImportRules(store.validate_base, kind_rejection)

    def check(item: Item) -> str:
        return store.validate_base(item) or host(item)

    return ImportRules(check, kind_rejection)
