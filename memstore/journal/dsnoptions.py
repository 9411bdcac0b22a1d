"""A PostgreSQL journal's options in its DSN: ``postgresql://...?memstore_statement_timeout=5``.

Where a PostgreSQL journal is named by a DSN string alone
(``Memory(journal="postgresql://...")``, ``memstore serve --journal``,
``memstore mcp`` and ``memstore serve --api mindlayer``), there is no keyword to pass
:class:`~memstore.journal.postgres.PostgresJournal`'s schema and timeouts. So
the DSN's query string may carry them, each named as the keyword with
``memstore_`` before it:

* ``memstore_schema``: ``schema``, the PostgreSQL schema the journal's tables
  live in (``memstore`` by default), a plain identifier as ``PostgresJournal``
  takes it (:func:`is_schema_name`): two memories in one database name two;
* ``memstore_statement_timeout``: ``statement_timeout`` (seconds; none by default);
* ``memstore_close_timeout``: ``close_timeout`` (seconds; 10 by default);
* ``memstore_lock_timeout``: ``lock_timeout`` (seconds; 30 by default).

They are taken out before libpq sees the DSN (it refuses parameters it does
not know); the rest of the DSN is passed on exactly as written. The prefix is
read in any case, percent-encoded too (``MEMSTORE_``, ``memstore%5F``), since
libpq would take neither. A ``memstore_`` parameter that is none of these,
given twice, a timeout that is not a number or a schema that is not a plain
identifier raises :class:`ValueError` naming it and opens nothing (no schema
is created), and so does one of the keywords without the prefix
(``statement_timeout=5``, which libpq refuses in words the journal cannot
show, as they may quote the password); a number the journal cannot take is
refused by it (naming the keyword). A
:class:`~memstore.journal.postgres.PostgresJournal` built in Python takes the
keywords instead, and names such a parameter in its DSN when libpq refuses it
(:func:`misplaced_option`).

>>> journal_options("postgresql://app@db/memory?sslmode=require&memstore_statement_timeout=5")
('postgresql://app@db/memory?sslmode=require', {'statement_timeout': 5.0})
>>> journal_options("postgresql://app@db/memory?memstore_schema=agents")
('postgresql://app@db/memory', {'schema': 'agents'})
>>> journal_options("postgresql://app@db/memory")
('postgresql://app@db/memory', {})
"""

from __future__ import annotations

import math
import re
from typing import Final, TypedDict, cast
from urllib.parse import unquote

__all__ = [
    "DSN_OPTIONS",
    "DSN_SCHEMA",
    "PREFIX",
    "JournalOptions",
    "is_schema_name",
    "journal_options",
    "libpq_dsn",
    "misplaced_option",
]

PREFIX: Final = "memstore_"
"""What starts a DSN query parameter that is memstore's, not libpq's."""

DSN_OPTIONS: Final = ("statement_timeout", "close_timeout", "lock_timeout")
"""The ``PostgresJournal`` timeouts a DSN may set, as ``memstore_<keyword>=<seconds>``."""
DSN_SCHEMA: Final = "schema"
"""The ``PostgresJournal`` keyword a DSN names the schema with, as ``memstore_schema=<name>``."""

_URI_SCHEMES: Final = ("postgresql://", "postgres://")
_SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class JournalOptions(TypedDict, total=False):
    """The ``PostgresJournal`` keywords a DSN set (those it did not are absent)."""

    schema: str
    statement_timeout: float
    close_timeout: float
    lock_timeout: float


def is_schema_name(name: object) -> bool:
    """Whether ``name`` is a schema a journal takes: a plain identifier of 1 to 63 characters.

    ASCII letters, digits and ``_``, not starting with a digit: a name
    PostgreSQL keeps as written (it would cut a longer one to 63 bytes, and
    two names alike in their first 63 would be one schema), quoted or not.
    :class:`~memstore.journal.postgres.PostgresJournal` checks its ``schema``
    with it, and :func:`journal_options` a DSN's ``memstore_schema``.

    >>> is_schema_name("agents_2"), is_schema_name("2agents"), is_schema_name("a-b")
    (True, False, False)
    """
    return isinstance(name, str) and _SCHEMA_NAME.fullmatch(name) is not None


def journal_options(dsn: str) -> tuple[str, JournalOptions]:
    """The DSN for libpq, and the ``PostgresJournal`` keywords its query string set.

    A DSN that is no URI, or whose query string holds no ``memstore_``
    parameter, comes back as it is.

    :raises ValueError: a ``memstore_`` parameter unknown or repeated, a timeout
        not a number, a schema not a plain identifier (:func:`is_schema_name`),
        or one of the keywords without ``memstore_``.
    """
    base, mark, query = dsn.partition("?")
    if not mark or not dsn.startswith(_URI_SCHEMES):
        return dsn, JournalOptions()
    kept: list[str] = []
    options: dict[str, float | str] = {}
    for pair in query.split("&"):
        key, _, raw = pair.partition("=")
        key = unquote(key)  # memstore%5Fclose_timeout is memstore_close_timeout too
        if key in _KEYWORDS:
            what = "a schema name" if key == DSN_SCHEMA else "seconds"
            raise ValueError(
                f"the DSN names {key}, which libpq does not know: where a DSN is all "
                f"one gives, memstore's parameter is {PREFIX}{key} ({what}); "
                f"a PostgresJournal takes {key}= as a keyword"
            )
        if not key.casefold().startswith(PREFIX):  # MEMSTORE_ too: libpq knows neither
            kept.append(pair)
            continue
        name = key[len(PREFIX) :]
        if name not in _KEYWORDS:
            known = ", ".join(PREFIX + n for n in _KEYWORDS)
            raise ValueError(f"the DSN names {key[:40]!r}, which memstore does not know ({known})")
        if name in options:
            raise ValueError(f"the DSN gives {key} twice")
        value = unquote(raw)
        options[name] = _schema(key, value) if name == DSN_SCHEMA else _seconds(key, value)
    if not options:
        return dsn, JournalOptions()
    return (base + "?" + "&".join(kept) if kept else base), cast(JournalOptions, options)


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


_KEYWORDS: Final = (DSN_SCHEMA, *DSN_OPTIONS)


def _schema(key: str, value: str) -> str:
    if not is_schema_name(value):
        raise ValueError(
            f"{key} in the DSN takes a plain identifier (ASCII letters, digits and _, "
            f"at most 63, not starting with a digit), got {value[:70]!r}"
        )
    return value


def _seconds(key: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if math.isnan(seconds):
        raise ValueError(f"{key} in the DSN takes a number of seconds, got {value[:40]!r}")
    return seconds
