"""LangGraph's operations checked, and memstore's records shown as LangGraph's items.

The free functions of :class:`~memstore.integrations.langgraph.MemstoreStore`:
what a batch's ops, a TTL configuration and an index configuration must be
(each refused with an :class:`~memstore.errors.InvalidItemError` or a
:class:`~memstore.errors.MemstoreError` before anything runs), and the
conversions between the store's records and LangGraph's ``Item`` and
``SearchItem``. Needs LangGraph, as the store does.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    tokenize_path,
    validate_op_namespace,
)

from memstore.arguments import count
from memstore.errors import InvalidItemError, MemstoreError
from memstore.integrations import _records as rec
from memstore.integrations._filters import check_filter
from memstore.integrations._vectors import FieldEmbedder
from memstore.partitions import encode_labels

ROOT: Final = "$"
"""The index field path that means the whole value."""


def checked_ttl_config(ttl: Any) -> TTLConfig | None:
    """LangGraph's ``TTLConfig``, each documented key checked; :class:`InvalidItemError` if not.

    ``default_ttl`` is a positive number of minutes or ``None``;
    ``sweep_interval_minutes`` a positive number of minutes (``None`` or 0: no
    background sweeper); ``refresh_on_read`` ``True`` or ``False``.
    """
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidItemError(f"ttl is a TTLConfig mapping, got {type(ttl).__name__}")
    config = dict(ttl)
    try:
        rec.ttl_minutes(config.get("default_ttl"))
    except InvalidItemError as e:
        raise InvalidItemError(f"default_ttl: {e.reason}") from None
    if config.get("sweep_interval_minutes"):
        sweep_seconds(config["sweep_interval_minutes"])
    refresh = config.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise InvalidItemError(f"refresh_on_read must be True or False, got {refresh!r}")
    return config  # type: ignore[return-value]


def sweep_seconds(minutes: Any) -> float:
    """Seconds between sweeps from a positive, finite number of minutes.

    A zero or negative wait would sweep without pause, and a NaN or infinite
    one would end the sweeper's thread: each is refused. A wait longer than the
    platform's timer holds (``threading.TIMEOUT_MAX``) is that maximum.
    """
    try:
        value = rec.ttl_minutes(minutes)
    except InvalidItemError as e:
        raise InvalidItemError(f"sweep_interval_minutes: {e.reason}") from None
    if value is None:
        raise InvalidItemError("sweep_interval_minutes: a number of minutes is needed")
    return min(60.0 * value, threading.TIMEOUT_MAX)


def check_op(op: Any) -> None:
    """Refuse a malformed op before anything in the batch runs.

    What LangGraph's stores refuse with a ``ValueError`` (an unknown op or
    match type) is an :class:`~memstore.errors.InvalidItemError`, a ``ValueError``.
    """
    if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
        raise InvalidItemError(f"unknown operation type: {type(op).__name__}")
    validate_op_namespace(op)
    if isinstance(op, GetOp | PutOp) and not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if isinstance(op, GetOp | PutOp) and not isinstance(op.key, str):
        raise InvalidItemError(f"a key is text, got {type(op.key).__name__}")
    if isinstance(op, PutOp) and op.value is not None:
        rec.encode_value(op.value)
        rec.ttl_minutes(op.ttl)
        index: Any = op.index
        if (
            index is not None
            and index is not False
            and (isinstance(index, str) or not all(isinstance(p, str) for p in index))
        ):
            raise InvalidItemError(f"index is False or a list of field paths, got {op.index!r}")
    if isinstance(op, ListNamespacesOp):
        depth = op.max_depth
        if depth is not None and type(depth) is not int:
            raise InvalidItemError(f"max_depth must be a whole number or None, got {depth!r}")
        for cond in op.match_conditions or ():
            if getattr(cond, "match_type", None) not in ("prefix", "suffix"):
                raise InvalidItemError(
                    f"unknown match type {getattr(cond, 'match_type', cond)!r}: "
                    "use 'prefix' or 'suffix'"
                )
    if isinstance(op, SearchOp | ListNamespacesOp):
        for name in ("limit", "offset"):
            value = getattr(op, name)
            if type(value) is not int:
                raise InvalidItemError(f"{name} must be a whole number, got {value!r}")
            count(value, name, 0)  # a negative one is refused, as LangGraph's stores do
    if isinstance(op, SearchOp):
        check_filter(op.filter)
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidItemError(f"query must be text, got {type(op.query).__name__}")


def touched(todo: list[Op], out: list[Result]) -> set[str]:
    """The ids a batch may have written: its puts, and what its reads refreshed."""
    keys = [(op.namespace, op.key) for op in todo if isinstance(op, PutOp)]
    for got in out:
        found = got if isinstance(got, list) else [got]
        keys += [(it.namespace, it.key) for it in found if isinstance(it, Item)]
    return {rec.record_id(encode_labels(tuple(ns)), key) for ns, key in keys}


def namespace(namespace: Sequence[str]) -> tuple[str, ...]:
    ns = tuple(namespace)
    validate_op_namespace(GetOp(ns, ""))
    if not ns:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    return ns


def prefix(namespace_prefix: Sequence[str]) -> str:
    ns = tuple(namespace_prefix)
    validate_op_namespace(GetOp(ns, ""))
    return encode_labels(ns) if ns else ""


def tokenized(paths: Sequence[str]) -> list[tuple[str, str | list[str]]]:
    """Each JSON path with its tokens; one text is refused (it would be read letter by letter)."""
    if isinstance(paths, str):
        raise MemstoreError(f"index fields is a list of JSON paths: write [{paths!r}]")
    out: list[tuple[str, str | list[str]]] = []
    for p in paths:
        if not isinstance(p, str):
            raise MemstoreError(f"index fields are JSON paths (text), got {p!r}")
        out.append((p, p if p == ROOT else tokenize_path(p)))
    return out


def field_embedder(cfg: Mapping[str, Any], cells: Any) -> FieldEmbedder:
    """The embedder an IndexConfig names: its ``embed``, else the memory's, else memstore's."""
    embed = cfg.get("embed")
    dims = cfg.get("dims")
    if embed is None:
        engine = cells.embedder if cells is not None else None
        if engine is None:
            from memstore_index import default_embedder

            engine = default_embedder()
        if dims is not None and dims != engine.dim:
            raise MemstoreError(
                f"index dims={dims} but memstore's embedder {engine.model_id} has {engine.dim}"
            )
        return FieldEmbedder(
            lambda texts: engine.embed(texts),
            lambda text: engine.embed([text])[0],
            int(engine.dim),
            str(engine.model_id),
        )
    if isinstance(embed, str):
        raise MemstoreError(
            f"index embed={embed!r}: pass an Embeddings object or a function "
            "(provider strings need LangChain's init_embeddings)"
        )
    if dims is None:
        raise MemstoreError("index needs 'dims' (the length of the embedder's vectors)")
    emb = ensure_embeddings(embed)
    name = getattr(embed, "__qualname__", None) or type(embed).__qualname__
    return FieldEmbedder(
        emb.embed_documents,
        emb.embed_query,
        dims,
        str(name),
        adocuments=emb.aembed_documents,
        aquery=emb.aembed_query,
    )


def item(r: rec.Record) -> Item:
    return Item(
        value=r.fresh_value(),
        key=r.key,
        namespace=r.namespace,
        created_at=r.created_at,
        updated_at=r.updated_at,
    )


def search_item(r: rec.Record, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=r.namespace,
        key=r.key,
        value=r.fresh_value(),
        created_at=r.created_at,
        updated_at=r.updated_at,
        score=score,
    )


def does_match(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    """LangGraph's namespace match: a prefix or suffix path where ``"*"`` is any one label."""
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    if cond.match_type == "prefix":
        pairs = zip(ns, path, strict=False)
    elif cond.match_type == "suffix":
        pairs = zip(reversed(ns), reversed(path), strict=False)
    else:
        raise MemstoreError(f"unknown match type {cond.match_type!r}: use 'prefix' or 'suffix'")
    return all(p == "*" or label == p for label, p in pairs)
