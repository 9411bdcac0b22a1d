"""How a ``Memory`` opens its parts: the journal, the vector index and the hub.

The order matters and is kept here: the journal first (restoring every item
into the store), then the vector index (which catches up on what the journal
restored, or loads the vectors a PostgreSQL journal keeps), then the hub
(which learns each change's journal position). Each part that opens puts
its closer on ``closers``; :meth:`Memory.close` runs them in reverse, and so
does a constructor that fails half-way.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from memstore import arguments as arg
from memstore._journal_record import forget_journal_record, journal_record, record_journal
from memstore.config import Change
from memstore.errors import JournalError, MemstoreError, ReadOnlyError
from memstore.journal import Journal, SqliteJournal
from memstore.journal.dsnoptions import journal_options
from memstore.store import Store

if TYPE_CHECKING:
    from memstore_hub import Hub
    from memstore_index import CellStore, Embedder

JOURNAL_FILE: Final = "journal.db"
"""The journal's file name inside a :class:`Memory` folder (vectors live beside it)."""

Closers = list[Callable[[], None]]


def open_journal(
    journal: Journal | str | None,
    *,
    store: Store,
    path: Path | None,
    readonly: bool,
    closers: Closers,
) -> Journal | None:
    """The journal ``journal=`` or the folder names, attached (restored) to ``store``."""
    if isinstance(journal, str):
        if journal.startswith(("postgresql://", "postgres://")):
            journal = postgres_journal(journal)
        else:
            raise MemstoreError(
                f"journal={shown_journal(journal)}: pass a Journal object or a postgresql:// DSN; "
                "for a SQLite file give Memory a folder path instead"
            )
    if readonly and path is not None:
        return _open_readonly_journal(path, store, closers)
    if journal is None and path is not None:
        if path.exists() and not path.is_dir():
            raise MemstoreError(f"{path} is a file; Memory(path) takes a folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a read-only parent, a file in the way, a bad name
            raise JournalError(
                f"cannot create the memory folder {str(path)!r}: {e.strerror or e}"
            ) from None
        journal = own = SqliteJournal(path / JOURNAL_FILE)
    else:
        own = None
    if journal is not None:
        closers.append(journal.close)
        journal.attach(store)  # restore before the vectors catch up
        if path is not None:  # the folder says which journal it is kept in (docs/cli)
            if journal is own:
                forget_journal_record(path)
            else:
                record_journal(path, journal_record(journal))
    return journal


def _open_readonly_journal(folder: Path, store: Store, closers: Closers) -> Journal:
    path = folder / JOURNAL_FILE
    if not path.is_file():
        raise MemstoreError(
            f"no memory to read in {str(folder)!r}: {path.name} does not exist "
            "(a writer creates it: Memory(folder) or `memstore add`)"
        )
    journal = SqliteJournal(path, readonly=True)
    closers.append(journal.close)
    journal.attach(store)
    store.add_change_listener(refuse_writes, before_commit=True)
    return journal


def open_cells(
    embedder: str | Embedder | None,
    *,
    store: Store,
    journal: Journal | None,
    path: Path | None,
    readonly: bool,
    closers: Closers,
) -> CellStore | None:
    """The vector index for ``embedder=`` (``None``/``"none"``: no vectors), attached."""
    if embedder is None or embedder == "none":
        return None
    from memstore_index import CellStore

    emb = resolve_embedder(embedder, path)
    if readonly:
        from memstore_index import stored_vectors

        cells = CellStore(emb)  # in memory: the writer owns the folder's vector file
        closers.append(cells.close)
        with cells.offered(stored_vectors(path or ".", emb)):
            cells.attach(store)
        return cells
    cells = CellStore(emb, path=path)
    closers.append(cells.close)
    # A journal that keeps vectors beside its versions (PostgreSQL) binds
    # the index itself: it loads the stored vectors instead of embedding.
    attach_cells = getattr(journal, "attach_cells", None)
    if attach_cells is not None:
        attach_cells(cells)
    else:
        cells.attach(store)
    return cells


def resolve_embedder(embedder: str | Embedder, folder: Path | None = None) -> Embedder:
    """``"auto"``, ``"local"``, ``"local-int8"``, ``"hash"`` or an ``Embedder``, as an embedder.

    ``"auto"`` for a ``folder`` whose vectors were made by an embedder memstore ships
    (:func:`shipped_embedder`) is that embedder: a folder made while the model was not
    installed (with the hash embedder) still opens once it is, and one made with
    ``"local-int8"`` opens with it. Otherwise the local model when installed, else hash.
    """
    from memstore_index import HashEmbedder, default_embedder, stored_model

    if isinstance(embedder, str):
        if embedder == "auto":
            made_by = stored_model(folder) if folder is not None else None
            shipped = shipped_embedder(made_by) if made_by is not None else None
            return shipped if shipped is not None else default_embedder()
        if embedder == "hash":
            return HashEmbedder()
        if embedder in ("local", "local-int8"):
            from memstore_index import onnx_embedder

            if not onnx_embedder.AVAILABLE:
                raise MemstoreError(
                    f"embedder={embedder!r} needs the local model: {onnx_embedder.INSTALL_HINT} "
                    f"({onnx_embedder.MISSING})"
                )
            return onnx_embedder.OnnxMiniLMEmbedder(int8=embedder == "local-int8")
        raise MemstoreError(
            f"embedder={embedder!r}: use 'auto', 'local', 'local-int8', 'hash', None or an Embedder"
        )
    from memstore_index import Embedder as EmbedderType

    if not isinstance(embedder, EmbedderType):
        raise MemstoreError(
            f"embedder must be 'auto', 'local', 'local-int8', 'hash', None or an Embedder, "
            f"got {arg.describe(embedder)}"
        )
    return embedder


def shipped_embedder(model_id: str) -> Embedder | None:
    """The embedder memstore ships whose vectors ``model_id`` names, built, or None.

    ``hash-v1-<dim>-<seed>`` is a :class:`~memstore_index.HashEmbedder` of that dim and seed;
    the local model's two ids are :class:`~memstore_index.onnx_embedder.OnnxMiniLMEmbedder`
    (float or ``int8=True``) when the ``embed`` extra is installed. Any other id (a
    provider's model, a custom embedder's) is None: only its owner can build it.
    """
    from memstore_index import EmbedderConfigError, HashEmbedder, onnx_embedder

    if model_id.startswith("hash-v1-"):
        dim, _, seed = model_id.removeprefix("hash-v1-").partition("-")
        try:
            return HashEmbedder(dim=int(dim), seed=int(seed))
        except (ValueError, EmbedderConfigError):  # not an id HashEmbedder writes
            return None
    local = (onnx_embedder.MODEL_ID, onnx_embedder.MODEL_ID_INT8)
    if model_id in local and onnx_embedder.AVAILABLE:
        return onnx_embedder.OnnxMiniLMEmbedder(int8=model_id == onnx_embedder.MODEL_ID_INT8)
    return None


def open_hub(
    hub: bool | Hub | None, *, store: Store, journal: Journal | None, closers: Closers
) -> Hub | None:
    """The change hub ``hub=`` asks for (``True``: a new one), attached to ``store``.

    On close, a hub the memory made (``True``) is closed: its subscribers read
    what is queued, then their iteration ends, rather than waiting for ever
    for changes that can no longer come. A hub the caller passed in is only
    detached: it is the caller's, and may carry other sources.
    """
    if hub is False or hub is None:
        return None
    from memstore_hub import Hub

    the_hub = Hub() if hub is True else hub
    if not isinstance(the_hub, Hub):
        raise MemstoreError(f"hub= takes True, False or a memstore_hub.Hub, not {hub!r}")
    lsn_of = journal.lsn_of if journal is not None else None
    the_hub.attach(store, lsn_of=lsn_of)
    closers.append(the_hub.close if hub is True else lambda: the_hub.detach(store))
    return the_hub


def shown_journal(journal: str) -> str:
    """A refused ``journal=`` string as an error may show it: never what may be a password.

    A URL of another scheme (a typo'd ``postgresq://app:secret@db``) is named by its
    scheme alone, and libpq's ``key=value`` form (``host=db password=secret``) not at all.

    >>> shown_journal("data/journal.db"), shown_journal("postgresq://app:s3cret@db/x")
    ("'data/journal.db'", "'postgresq://...'")
    >>> shown_journal("host=db password=s3cret")
    "a libpq 'key=value' string (not shown: it may hold a password)"
    """
    if "://" in journal:
        return repr(journal.split("://", 1)[0][:20] + "://...")
    if "=" in journal:
        return "a libpq 'key=value' string (not shown: it may hold a password)"
    return repr(journal[:40])


def postgres_journal(dsn: str) -> Journal:
    """A ``PostgresJournal`` on ``dsn``, or a clear error when its extra is not installed.

    Its timeouts come from the DSN's ``memstore_`` parameters
    (:mod:`memstore.journal.dsnoptions`), taken out before libpq sees it.
    """
    dsn, options = journal_options(dsn)  # a bad one is refused before anything is imported
    try:
        module = importlib.import_module("memstore.journal.postgres")
    except ModuleNotFoundError as e:
        raise MemstoreError(
            f"a PostgreSQL journal needs its backend ({e.name} is missing): "
            'pip install "memstore-engine[postgres]"'
        ) from None
    journal: Journal = module.PostgresJournal(dsn, **options)
    return journal


def refuse_writes(changes: Sequence[Change]) -> None:
    """The before-commit listener of a read-only memory: every write group is undone."""
    ids = ", ".join(repr(c.id) for c in changes[:3])
    raise ReadOnlyError(
        f"this memory was opened read-only (readonly=True); the write of {ids} was refused. "
        "Write through the process that holds the folder, or open it without readonly"
    )
