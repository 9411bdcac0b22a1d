"""A scope maps to the partition it always mapped to, now through the engine's helper.

The Mind Layer once built ``mindlayer/<agent>/<user>`` (or its hash) with
its own code; :func:`old_partition` is that code as it was, kept here
verbatim, and every scope hypothesis makes must land where it did, so data
written before the move is read by the same scope after it.
"""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from memstore import Memory
from memstore.mindlayer import MindLayer, Scope
from memstore.mindlayer.limits import ID_PATTERN

ids = st.from_regex(ID_PATTERN, fullmatch=True)
"""Agent and user ids, 1-128 of ``[A-Za-z0-9_.-]``: readable and hashed names both."""


def old_partition(agent: str, user: str) -> str:
    """``Scope.partition`` before it used :func:`memstore.partitions.path_partition`."""
    readable = f"mindlayer/{agent}/{user}"
    if len(readable) <= 128:
        return readable
    digest = hashlib.blake2b(f"{agent}\0{user}".encode(), digest_size=32)
    return f"mindlayer/~{digest.hexdigest()}"


@given(ids, ids)
def test_every_scope_keeps_its_partition(agent: str, user: str) -> None:
    scope = Scope(agent, user)
    assert scope.partition == old_partition(agent, user)
    if not scope.partition.startswith("mindlayer/~"):
        assert Scope.from_partition(scope.partition) == scope


def test_data_in_the_old_partitions_is_read_by_its_scope() -> None:
    """Memories whose partition the old code named: found, searched, deleted by the same scope."""
    scopes = [Scope("assistant", "synthetic-user"), Scope("a" * 128, "u.-_" * 30)]
    with Memory(embedder=None) as mem:
        ml = MindLayer(mem)
        for s in scopes:
            ml.remember(s, "The user is vegetarian.", id="diet")
        written = {it.tags[-1].removeprefix("tenant/") for it in mem.store.all_items()}
        assert written == {old_partition(s.agent, s.user) for s in scopes}
        for s in scopes:
            assert [it.data["ml_id"] for it in ml.memories(s)] == ["diet"]
            assert ml.forget_scope(s) == {"deleted": 1}
