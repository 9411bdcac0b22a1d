"""Hierarchical names (a namespace, a scope path) as partition names, reversibly.

A partition is one flat name (the ``tenant/<name>`` tag): no commas, no line
breaks, not ``*``, not empty, not padded with spaces. Framework surfaces name
their tenants differently: a LangGraph namespace is a tuple of labels
(``("users", "alice", "memories")``), a Mind Layer scope is a path. This module
turns such a label sequence into one partition name and back, for any label
text, so that every surface maps its names the same way.

Each label is percent-escaped (``%`` + two hex digits, UTF-8 bytes) where it
holds ``%``, the separator ``.``, a comma, ``*``, whitespace or a control
character; an empty label is written as a bare ``%``; labels are joined with
``.``. So the encoding is injective and prefix-preserving: one sequence starts
with another exactly when its name equals the other's or starts with the other's
name followed by ``.`` (:func:`within`).

>>> encode_labels(("users", "alice", "memories"))
'users.alice.memories'
>>> encode_labels(("a.b", "50%", "x y", ""))
'a%2Eb.50%25.x%20y.%'
>>> decode_labels('a%2Eb.50%25.x%20y.%')
('a.b', '50%', 'x y', '')
>>> within(encode_labels(("users", "alice")), encode_labels(("users",)))
True
>>> within(encode_labels(("usersX",)), encode_labels(("users",)))
False
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from memstore.errors import MemstoreError
from memstore.limits import MAX_NAME_CHARS

__all__ = [
    "HASHED_MARK",
    "SEPARATOR",
    "PartitionNameError",
    "decode_labels",
    "encode_labels",
    "path_labels",
    "path_partition",
    "within",
]

SEPARATOR: Final = "."
"""What joins escaped labels in a partition name."""
_EMPTY: Final = "%"
"""The escaped form of an empty label (a ``%`` never stands alone otherwise)."""


class PartitionNameError(MemstoreError, ValueError):
    """A partition name that no label sequence encodes to (or an empty sequence)."""


def _needs_escape(ch: str) -> bool:
    return ch in "%.,*" or ch.isspace() or not ch.isprintable()


def _escape(label: str) -> str:
    if not label:
        return _EMPTY
    if not any(_needs_escape(ch) for ch in label):
        return label  # the common case: nothing to rewrite
    out: list[str] = []
    for ch in label:
        if _needs_escape(ch):
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "".join(out)


def encode_labels(labels: Sequence[str]) -> str:
    """The partition name of a non-empty sequence of labels (any text).

    >>> encode_labels(["memories"])
    'memories'
    >>> encode_labels(["*"])
    '%2A'

    Raises :class:`PartitionNameError` for an empty sequence or a label that is
    not a string.
    """
    if isinstance(labels, str) or not labels:
        raise PartitionNameError(
            f"a partition needs a non-empty sequence of labels, got {labels!r:.80}"
        )
    for label in labels:
        if not isinstance(label, str):
            raise PartitionNameError(
                f"partition labels must be strings, got {type(label).__name__} in {labels!r:.80}"
            )
    return SEPARATOR.join(_escape(label) for label in labels)


def _unescape(token: str, name: str) -> str:
    if token == _EMPTY:
        return ""
    if "%" not in token:
        return token
    raw = bytearray()
    i = 0
    while i < len(token):
        ch = token[i]
        if ch == "%":
            pair = token[i + 1 : i + 3]
            if len(pair) != 2 or not all(c in "0123456789ABCDEFabcdef" for c in pair):
                raise PartitionNameError(f"{name!r:.80} is not an encoded label sequence")
            raw.append(int(pair, 16))
            i += 3
        else:
            raw.extend(ch.encode("utf-8", "surrogatepass"))
            i += 1
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise PartitionNameError(f"{name!r:.80} is not an encoded label sequence") from None


def decode_labels(name: str) -> tuple[str, ...]:
    """The labels whose :func:`encode_labels` is ``name``.

    >>> decode_labels("users.alice")
    ('users', 'alice')

    Raises :class:`PartitionNameError` when no sequence encodes to ``name``.
    """
    if not isinstance(name, str) or not name:
        raise PartitionNameError(f"{name!r:.80} is not an encoded label sequence")
    labels = tuple(_unescape(token, name) for token in name.split(SEPARATOR))
    if encode_labels(labels) != name:  # e.g. an unescaped space or a lower-case escape
        raise PartitionNameError(f"{name!r:.80} is not an encoded label sequence")
    return labels


def within(name: str, prefix: str) -> bool:
    """Whether the sequence encoded as ``name`` starts with the one encoded as ``prefix``.

    An empty ``prefix`` (the empty sequence) contains every name.

    >>> within("a.b.c", "a.b"), within("a.bc", "a.b"), within("a", "")
    (True, False, True)
    """
    if not prefix:
        return True
    return name == prefix or name.startswith(prefix + SEPARATOR)


# Paths of plain labels, readable where they fit: the Mind Layer's scopes.

HASHED_MARK: Final = "~"
"""What follows ``<prefix>/`` in a :func:`path_partition` name too long to spell out."""


def _plain(label: object) -> bool:
    return (
        isinstance(label, str)
        and bool(label)
        and not any(ch in "/~,*" or ch.isspace() or not ch.isprintable() for ch in label)
    )


def path_partition(prefix: str, labels: Sequence[str]) -> str:
    """The partition name ``<prefix>/<label>/<label>...``, or a hash when that is too long.

    For surfaces whose names are short paths of plain labels (a Mind Layer
    scope ``(agent, user)`` lives in ``mindlayer/<agent>/<user>``): the name
    reads as the path while it fits :data:`~memstore.limits.MAX_NAME_CHARS`
    characters, and is ``<prefix>/~`` and 64 hex digits (BLAKE2b-256 of the
    labels joined by NUL) otherwise. The prefix and every label must be
    non-empty and hold no ``/``, ``~``, comma, ``*``, whitespace or control
    character, so a readable name reads back (:func:`path_labels`) and is
    never taken for a hashed one.

    >>> path_partition("mindlayer", ("assistant", "synthetic-user"))
    'mindlayer/assistant/synthetic-user'
    >>> hashed = path_partition("mindlayer", ("a" * 128, "u" * 128))
    >>> hashed[:11], len(hashed)
    ('mindlayer/~', 75)

    Raises :class:`PartitionNameError` for a prefix or label that is not plain,
    or no labels.
    """
    if isinstance(labels, str) or not labels:
        raise PartitionNameError(f"a path needs a non-empty sequence of labels, got {labels!r:.80}")
    for part in (prefix, *labels):
        if not _plain(part):
            raise PartitionNameError(
                f"path labels must be non-empty text without '/', '~', ',', '*', whitespace "
                f"or control characters, got {part!r:.80}"
            )
    readable = "/".join((prefix, *labels))
    if len(readable) <= MAX_NAME_CHARS:
        return readable
    digest = hashlib.blake2b("\0".join(labels).encode(), digest_size=32)
    return f"{prefix}/{HASHED_MARK}{digest.hexdigest()}"


def path_labels(name: str, prefix: str) -> tuple[str, ...]:
    """The labels a readable :func:`path_partition` name under ``prefix`` holds.

    >>> path_labels("mindlayer/assistant/synthetic-user", "mindlayer")
    ('assistant', 'synthetic-user')

    Raises :class:`PartitionNameError` for a name not under ``prefix``, one
    :func:`path_partition` does not make, or a hashed name (its labels are not
    in it: only its hash is).
    """
    head = f"{prefix}/"
    if not isinstance(name, str) or not name.startswith(head):
        raise PartitionNameError(f"{name!r:.80} is not a partition under {head!r}")
    if name.startswith(head + HASHED_MARK):
        raise PartitionNameError(f"{name!r:.80} names its path by hash; the labels are not in it")
    labels = tuple(name[len(head) :].split("/"))
    try:
        if path_partition(prefix, labels) == name:
            return labels
    except PartitionNameError:
        pass
    raise PartitionNameError(f"{name!r:.80} is not a path of labels under {head!r}")
