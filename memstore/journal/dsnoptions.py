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
not know); the rest of the DSN is passed on exactly as written. The prefix is
read in any case, percent-encoded too (``MEMSTORE_``, ``memstore%5F``), since
libpq would take neither. A ``memstore_`` parameter that is none of these,
given twice or not a number raises :class:`ValueError` and opens nothing, and
so does one of the keywords without the prefix (``statement_timeout=5``, which
libpq refuses in words the journal cannot show, as they may quote the
password); a number the journal cannot take is refused by it (naming the
keyword). A :class:`~memstore.journal.postgres.PostgresJournal` built in Python
takes the keywords instead, and names such a parameter in its DSN when libpq
refuses it (:func:`misplaced_option`).

>>> journal_options("postgresql://app@db/memory?sslmode=require&memstore_statement_timeout=5")
('postgresql://app@db/memory?sslmode=require', {'statement_timeout': 5.0})
>>> journal_options("postgresql://app@db/memory")
('postgresql://app@db/memory', {})
"""

from __future__ import annotations

import math
from typing import Final, TypedDict, cast
from urllib.parse import unquote

__all__ = [
    "DSN_OPTIONS",
    "PREFIX",
    "JournalTimeouts",
    "journal_options",
    "libpq_dsn",
    "misplaced_option",
]

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

    :raises ValueError: a ``memstore_`` parameter unknown, repeated or not a number,
        or one of :data:`DSN_OPTIONS` without ``memstore_``.
    """
    base, mark, query = dsn.partition("?")
    if not mark or not dsn.startswith(_URI_SCHEMES):
        return dsn, JournalTimeouts()
    kept: list[str] = []
    options: dict[str, float] = {}
    for pair in query.split("&"):
        key, _, raw = pair.partition("=")
        key = unquote(key)  # memstore%5Fclose_timeout is memstore_close_timeout too
        if key in DSN_OPTIONS:
            raise ValueError(
                f"the DSN names {key}, which libpq does not know: where a DSN is all "
                f"one gives, memstore's parameter is {PREFIX}{key} (seconds); "
                f"a PostgresJournal takes {key}= as a keyword"
            )
        if not key.casefold().startswith(PREFIX):  # MEMSTORE_ too: libpq knows neither
            kept.append(pair)
            continue
        name = key[len(PREFIX) :]
        if name not in DSN_OPTIONS:
            known = ", ".join(PREFIX + n for n in DSN_OPTIONS)
            raise ValueError(f"the DSN names {key[:40]!r}, which memstore does not know ({known})")
        if name in options:
            raise ValueError(f"the DSN gives {key} twice")
        options[name] = _seconds(key, unquote(raw))
    if not options:
        return dsn, JournalTimeouts()
    return (base + "?" + "&".join(kept) if kept else base), cast(JournalTimeouts, options)


def libpq_dsn(dsn: str) -> str:
    """``dsn`` without memstore's own parameters: what to give libpq (:func:`journal_options`)."""
    return journal_options(dsn)[0]


def misplaced_option(dsn: str) -> str:
    """Why libpq refuses ``dsn`` when a timeout in its query string is why, else ``""``.

    A :class:`~memstore.journal.postgres.PostgresJournal` hands its DSN to
    libpq as it is, and libpq's refusal of a parameter it does not know cannot
    be shown (it may quote the password), so a ``memstore_`` parameter there
    (or a keyword without the prefix) would fail in words that do not name
    it. This names it; nothing else of the DSN is quoted.

    >>> why = misplaced_option("postgresql://app:pw@db/memory?memstore_close_timeout=3")
    >>> for part in why.split(": "):
    ...     print(part)
    the DSN holds memstore_close_timeout, which libpq does not know
    a PostgresJournal takes close_timeout= as a keyword
    >>> misplaced_option("postgresql://app:pw@db/memory?sslmode=require")
    ''
    """
    try:
        options = journal_options(dsn)[1]
    except ValueError as e:
        return str(e)
    for name in options:
        return (
            f"the DSN holds {PREFIX}{name}, which libpq does not know: "
            f"a PostgresJournal takes {name}= as a keyword"
        )
    return ""


def _seconds(key: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if math.isnan(seconds):
        raise ValueError(f"{key} in the DSN takes a number of seconds, got {value[:40]!r}")
    return seconds
