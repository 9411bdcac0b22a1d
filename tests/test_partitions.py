"""memstore.partitions: label sequences as partition names, reversibly and prefix-preserving."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore import Memory
from memstore.partitions import PartitionNameError, decode_labels, encode_labels, within

labels = st.lists(st.text(max_size=8), min_size=1, max_size=4).map(tuple)


@given(labels)
def test_round_trip_and_a_valid_partition_name(seq: tuple[str, ...]) -> None:
    name = encode_labels(seq)
    assert decode_labels(name) == seq
    assert name and name == name.strip() and name != "*"
    assert not any(c in name for c in ",\r\n*")
    assert name.isprintable()


@given(labels, labels)
def test_within_is_label_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> None:
    assert within(encode_labels(a), encode_labels(b)) == (a[: len(b)] == b)
    assert (encode_labels(a) == encode_labels(b)) == (a == b)


def test_any_label_is_a_partition_memory_accepts() -> None:
    seq = ("a, b", "*", "\n", "", " x ", "%2E", "日本", "\x00", "\ud800")
    with Memory(embedder=None) as mem:
        note = mem.add("hello", partition=encode_labels(seq))
        assert decode_labels(note.tags[-1].removeprefix("tenant/")) == seq


@pytest.mark.parametrize("bad", ["", "a%2", "a%zz", "a b", "a%2e", "%C3", "x,y"])
def test_names_no_sequence_encodes_to_are_refused(bad: str) -> None:
    with pytest.raises(PartitionNameError):
        decode_labels(bad)


@pytest.mark.parametrize("bad", [(), "abc", ("a", 1)])
def test_bad_sequences_are_refused(bad: object) -> None:
    with pytest.raises(PartitionNameError):
        encode_labels(bad)  # type: ignore[arg-type]
