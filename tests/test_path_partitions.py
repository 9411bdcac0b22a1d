"""memstore.partitions.path_partition: short paths of plain labels as readable partition names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore import Memory
from memstore.limits import MAX_NAME_CHARS
from memstore.partitions import HASHED_MARK, PartitionNameError, path_labels, path_partition

plain = st.text(
    st.characters(
        codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp", "Cf", "Co", "Cn")
    ),
    min_size=1,
    max_size=70,
).filter(
    lambda s: (
        not any(c in s for c in "/~,*") and s.isprintable() and not any(c.isspace() for c in s)
    )
)
paths = st.lists(plain, min_size=1, max_size=3).map(tuple)


@given(paths)
def test_a_path_is_a_valid_name_readable_where_it_fits(labels: tuple[str, ...]) -> None:
    name = path_partition("ml", labels)
    assert len(name) <= MAX_NAME_CHARS and name == name.strip() and name.isprintable()
    assert not any(c in name for c in ",\r\n*")
    if len("/".join(("ml", *labels))) <= MAX_NAME_CHARS:
        assert path_labels(name, "ml") == labels
    else:
        assert name.startswith(f"ml/{HASHED_MARK}") and len(name) == len("ml/~") + 64
        with pytest.raises(PartitionNameError, match="by hash"):
            path_labels(name, "ml")


@given(paths, paths)
def test_two_paths_share_a_name_only_when_equal(a: tuple[str, ...], b: tuple[str, ...]) -> None:
    assert (path_partition("ml", a) == path_partition("ml", b)) == (a == b)


@pytest.mark.parametrize(
    "labels", [(), ("",), ("a/b",), ("~a",), ("a b",), ("a,b",), ("*",), ("a\n",), (1,)]
)
def test_labels_that_are_not_plain_are_refused(labels: tuple[object, ...]) -> None:
    with pytest.raises(PartitionNameError):
        path_partition("ml", labels)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["other/a", "ml", "ml/", "ml/a//b", "ml/a b", "mlx/a", "ml/~x"])
def test_names_path_partition_does_not_make_are_refused(name: str) -> None:
    with pytest.raises(PartitionNameError):
        path_labels(name, "ml")


def test_a_path_name_is_a_partition_memory_accepts() -> None:
    with Memory(embedder=None) as mem:
        for labels in (("agent", "user"), ("a" * 100, "u" * 100)):
            note = mem.add("hello", partition=path_partition("ml", labels))
            assert note.tags[-1] == f"tenant/{path_partition('ml', labels)}"
