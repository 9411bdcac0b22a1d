"""How a Mind Layer scope (agent, user) and its memories live in memstore partitions.

A scope is one memstore partition, ``mindlayer/<agent>/<user>``: ids never
hold a ``/``, so the name is unambiguous and reversible
(:meth:`Scope.from_partition`), and the ``mindlayer/`` prefix keeps the
scopes apart from any other surface's partitions in the same data folder.
A partition name holds at most :data:`~memstore.limits.MAX_NAME_CHARS`
(128) characters, and agent and user ids up to 128 each: a scope whose
readable name would be longer is ``mindlayer/~<64 hex digits>``, a hash of
agent and user (ids never hold ``~``, so no readable name is ever one).
The mapping is the engine's (:func:`memstore.partitions.path_partition`), not
this module's: one place says how a path of names becomes a partition.

A memory is an item of kind :data:`KIND_MEMORY` in that partition. Its item
id is ``ml:<scope key>:<memory id>``, where the scope key is a 24-hex-digit
hash of the scope (an item id holds at most 256 characters, and agent plus
user plus memory id can be 384); ``data`` keeps the memory id and the
session label. A scope's personality is one item of kind
:data:`KIND_PERSONALITY`, id ``mlp:<scope key>``, kept out of the vector index.

Memories stored without an id get one derived from their trimmed text
(:func:`derived_id`): storing the same text again lands on the same memory.

>>> s = Scope("assistant", "synthetic-user")
>>> s.partition
'mindlayer/assistant/synthetic-user'
>>> Scope.from_partition(s.partition) == s
True
>>> s.item_id("diet")
'ml:28db740f889b4710ef5fd426:diet'
>>> long = Scope("a" * 128, "u" * 128)
>>> long.partition[:11], len(long.partition)
('mindlayer/~', 75)
>>> derived_id("  The user is vegetarian. ") == derived_id("The user is vegetarian.")
True
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from memstore.mindlayer.limits import ID_PATTERN
from memstore.partitions import HASHED_MARK, PartitionNameError, path_labels, path_partition

__all__ = [
    "DATA_ID",
    "DATA_SESSION",
    "HASHED_MARK",
    "KIND_MEMORY",
    "KIND_PERSONALITY",
    "PARTITION_PREFIX",
    "Scope",
    "derived_id",
    "valid_id",
]

_PREFIX_LABEL: Final = "mindlayer"
PARTITION_PREFIX: Final = f"{_PREFIX_LABEL}/"
"""What every Mind Layer partition name starts with."""
KIND_MEMORY: Final = "memory"
"""The kind of a Mind Layer memory item."""
KIND_PERSONALITY: Final = "personality"
"""The kind of a scope's personality item."""
DATA_ID: Final = "ml_id"
"""The ``data`` key holding a memory's own id."""
DATA_SESSION: Final = "ml_session"
"""The ``data`` key holding a memory's session label."""


_ID: Final = re.compile(ID_PATTERN)


def valid_id(value: str) -> bool:
    """Whether ``value`` is an agent, user or memory id (1-128 of ``[A-Za-z0-9_.-]``).

    >>> valid_id("diet-2"), valid_id(""), valid_id("a/b"), valid_id("x" * 129)
    (True, False, False, False)
    """
    return _ID.fullmatch(value) is not None


def derived_id(text: str) -> str:
    """The id of a memory stored without one: ``m-`` and 32 hex digits of its trimmed text."""
    return "m-" + hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Scope:
    """An agent/user namespace (both already valid ids)."""

    agent: str
    user: str

    def __post_init__(self) -> None:
        for name in ("agent", "user"):
            if not valid_id(getattr(self, name)):
                raise ValueError(
                    f"scope.{name} must be 1-128 ASCII letters, digits, '_', '.' or '-'"
                )

    @property
    def partition(self) -> str:
        """The memstore partition holding the scope.

        ``mindlayer/<agent>/<user>`` when that fits a partition name (128
        characters), else ``mindlayer/~`` and 64 hex digits of agent and user:
        the engine's :func:`~memstore.partitions.path_partition`.
        """
        return path_partition(_PREFIX_LABEL, (self.agent, self.user))

    @property
    def key(self) -> str:
        """24 hex digits naming the scope inside item ids."""
        return hashlib.blake2b(f"{self.agent}\0{self.user}".encode(), digest_size=12).hexdigest()

    def item_id(self, memory_id: str) -> str:
        """The item id of memory ``memory_id`` of this scope."""
        return f"ml:{self.key}:{memory_id}"

    @property
    def personality_id(self) -> str:
        """The item id of the scope's personality."""
        return f"mlp:{self.key}"

    @classmethod
    def from_partition(cls, partition: str) -> Scope:
        """The scope a partition name holds (:func:`~memstore.partitions.path_labels`).

        :raises ValueError: not a Mind Layer partition, or a hashed one
            (``mindlayer/~...``: the scope's ids cannot be read back from it).
        """
        try:
            labels = path_labels(partition, _PREFIX_LABEL)
        except PartitionNameError as e:
            raise ValueError(str(e)) from None
        if len(labels) != 2:
            raise ValueError(f"{partition!r:.80} is not a Mind Layer partition")
        return cls(*labels)
