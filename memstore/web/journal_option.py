"""A server's ``--journal`` and ``--journal-schema``: the PostgreSQL journal they name.

Every server (``memstore serve``, ``memstore serve --api mindlayer``, ``memstore mcp``)
keeps its memory in the ``--data`` folder's SQLite journal unless
``--journal`` gives a ``postgresql://`` (or ``postgres://``) DSN: the servers
then share that database, in the schema ``--journal-schema`` names, or the
DSN's ``memstore_schema`` parameter
(:data:`~memstore.journal.postgres.DEFAULT_SCHEMA`, ``memstore``, when neither
does; replicas of one memory name the same). A schema without such a DSN
names nothing and is refused, so a typo in ``--journal`` is not silently
replaced by the folder's journal; so are the two naming different schemas.

>>> postgres_journal(None, None) is None
True
>>> postgres_journal(None, "s1")
Traceback (most recent call last):
...
memstore.web.journal_option.JournalOptionError: --journal-schema needs --journal postgresql://...
>>> try:  # an empty schema read as the default one before
...     postgres_journal("postgresql://localhost/test", "")
... except JournalOptionError as e:
...     print(str(e).split(" (")[0])
--journal-schema must be a plain identifier
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from memstore.errors import MemstoreError
from memstore.journal.dsnoptions import (
    DSN_OPTIONS,
    DSN_SCHEMA,
    PREFIX,
    JournalOptions,
    is_schema_name,
    journal_options,
)

if TYPE_CHECKING:
    from memstore.journal.postgres import PostgresJournal

__all__ = [
    "DSN_SCHEMES",
    "JOURNAL_HELP",
    "JournalOptionError",
    "postgres_journal",
    "postgres_settings",
]

DSN_SCHEMES: Final = ("postgresql://", "postgres://")
"""How a PostgreSQL DSN starts: a ``--journal`` that does not is not one."""

JOURNAL_HELP: Final = (
    "a postgresql:// DSN instead of the folder's SQLite file. Its query string may name "
    f"the schema, {PREFIX}{DSN_SCHEMA} (default memstore; two memories in one database "
    "name two), and set the journal's timeouts in seconds: "
    + ", ".join(PREFIX + name for name in DSN_OPTIONS[:-1])
    + f" and {PREFIX}{DSN_OPTIONS[-1]} (docs/journal.md), e.g. "
    f"postgresql://app@db/memory?{PREFIX}{DSN_SCHEMA}=agents&{PREFIX}{DSN_OPTIONS[-1]}=5"
)
"""The ``--help`` of every server's ``--journal``: what it takes, with the options its DSN sets.

The parameters are :data:`~memstore.journal.dsnoptions.DSN_SCHEMA` and
:data:`~memstore.journal.dsnoptions.DSN_OPTIONS` with their prefix, so the
help names what :func:`postgres_journal` reads.
"""


class JournalOptionError(MemstoreError, ValueError):
    """``--journal-schema`` given without a PostgreSQL ``--journal``, or naming another schema
    than the DSN's ``memstore_schema``.

    Both a :class:`~memstore.errors.MemstoreError` and a :class:`ValueError`,
    as the servers refuse their other bad options (exit status 2).
    """


def postgres_journal(dsn: str | None, schema: str | None) -> PostgresJournal | None:
    """The journal ``--journal`` (``dsn``) and ``--journal-schema`` (``schema``) open.

    A DSN that starts with one of :data:`DSN_SCHEMES` opens a
    :class:`~memstore.journal.postgres.PostgresJournal` in ``schema``, or in
    the schema the DSN's ``memstore_schema`` names (the journal's default when
    neither does; this needs psycopg). Anything else is ``None``: the caller
    keeps the folder's SQLite journal, or hands a ``dsn`` of another kind on
    to :class:`~memstore.memory.Memory`, whose refusal names it. The DSN's
    other ``memstore_`` parameters set the journal's timeouts
    (:mod:`memstore.journal.dsnoptions`).

    :raises JournalOptionError: ``schema`` is given but names no schema a journal
        takes (an empty one included: it read as the default before), or ``dsn`` is
        no PostgreSQL DSN, or its ``memstore_schema`` names another schema.
    :raises ValueError: a ``memstore_`` parameter the journal cannot take.
    """
    settings = postgres_settings(dsn, schema)
    if settings is None:
        return None
    from memstore.journal.postgres import PostgresJournal  # needs psycopg

    libpq_dsn, options = settings
    return PostgresJournal(libpq_dsn, **options)


def postgres_settings(dsn: str | None, schema: str | None) -> tuple[str, JournalOptions] | None:
    """What :func:`postgres_journal` opens, without opening it: the DSN for libpq and the
    journal's keywords (``schema`` always among them), or ``None`` for no PostgreSQL DSN.

    Opening a journal connects and makes its schema when missing; a caller
    that must first check which journal is meant (the command line, against
    the folder's record) asks this. Raises as :func:`postgres_journal` does.
    """
    if schema is not None and not is_schema_name(schema):
        raise JournalOptionError(
            "--journal-schema must be a plain identifier (ASCII letters, digits and _, "
            f"1 to 63 characters, not starting with a digit), got {schema[:80]!r}"
        )
    if not dsn or not dsn.startswith(DSN_SCHEMES):
        if schema:
            raise JournalOptionError("--journal-schema needs --journal postgresql://...")
        return None
    dsn, options = journal_options(dsn)
    named = options.get("schema")
    if schema and named and schema != named:
        raise JournalOptionError(
            f"--journal-schema {schema} and the DSN's {PREFIX}{DSN_SCHEMA}={named} "
            "name two schemas: give one"
        )
    from memstore.journal.postgres import DEFAULT_SCHEMA  # needs psycopg

    options["schema"] = schema or named or DEFAULT_SCHEMA
    return dsn, options
