"""A PostgreSQL journal's timeouts in its DSN: ``postgresql://...?memstore_statement_timeout=5``.

Where a PostgreSQL journal is named by a DSN string alone
(``Memory(journal="postgresql://...")``, ``memstore serve --journal``,
``memstore mcp`` and ``memstore mindlayer``), there is no keyword to pass
:class:`~memstore.journal.postgres.PostgresJournal`'s timeouts. So the DSN's
query string may carry them, each named as the keyword with ``memstore_``
before it, in seconds:

* ``memstore_statement_timeout``: ``statement_timeout`` (none by default);
* ``memstore_close_timeout``: ``close_timeout`` (10 by default);
* ``memstore_lock_timeout``: ``lock_timeout`` (30 by default).

They are taken out before libpq sees the DSN (it refuses parameters it does
not know); the rest of the DSN is passed on exactly as written. A
``memstore_`` parameter that is none of these, given twice or not a number
raises :class:`ValueError` and opens nothing; a number the journal cannot
take is refused by it (naming the keyword).

>>> journal_options("postgresql://app@db/memory?sslmode=require&memstore_statement_timeout=5")
('postgresql://app@db/memory?sslmode=require', {'statement_timeout': 5.0})
>>> journal_options("postgresql://app@db/memory")
('postgresql://app@db/memory', {})
"""

from __future__ import annotations

import math
from typing import Final, TypedDict, cast
from urllib.parse import unquote

__all__ = ["DSN_OPTIONS", "PREFIX", "JournalTimeouts", "journal_options", "libpq_dsn"]

PREFIX: Final = "memstore_"
"""What starts a DSN query parameter that is memstore's, not libpq's."""

DSN_OPTIONS: Final = ("statement_timeout", "close_timeout", "lock_timeout")
"""The ``PostgresJournal`` keywords a DSN may set, as ``memstore_<keyword>=<seconds>``."""

_URI_SCHEMES: Final = ("postgresql://", "postgres://")


class JournalTimeouts(TypedDict, total=False):
    """The ``PostgresJournal`` keywords a DSN set (those it did not are absent)."""

    statement_timeout: float
    close_timeout: float
    lock_timeout: float


def journal_options(dsn: str) -> tuple[str, JournalTimeouts]:
    """The DSN for libpq, and the ``PostgresJournal`` keywords its query string set.

    A DSN that is no URI, or whose query string holds no ``memstore_``
    parameter, comes back as it is.

    :raises ValueError: a ``memstore_`` parameter unknown, repeated or not a number.
    """
    base, mark, query = dsn.partition("?")
    if not mark or not dsn.startswith(_URI_SCHEMES) or PREFIX not in query:
        return dsn, JournalTimeouts()
    kept: list[str] = []
    options: dict[str, float] = {}
    for pair in query.split("&"):
        key, _, raw = pair.partition("=")
        key = unquote(key)
        if not key.startswith(PREFIX):
            kept.append(pair)
            continue
        name = key[len(PREFIX) :]
        if name not in DSN_OPTIONS:
            known = ", ".join(PREFIX + n for n in DSN_OPTIONS)
            raise ValueError(f"the DSN names {key[:40]!r}, which memstore does not know ({known})")
        if name in options:
            raise ValueError(f"the DSN gives {key} twice")
        options[name] = _seconds(key, unquote(raw))
    return (base + "?" + "&".join(kept) if kept else base), cast(JournalTimeouts, options)


def libpq_dsn(dsn: str) -> str:
    """``dsn`` without memstore's own parameters: what to give libpq (:func:`journal_options`)."""
    return journal_options(dsn)[0]


def _seconds(key: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if math.isnan(seconds):
        raise ValueError(f"{key} in the DSN takes a number of seconds, got {value[:40]!r}")
    return seconds
