"""Types of the optional compiled module ``memstore._speedups`` (see ``_speedups.c``)."""

from collections.abc import Callable, Sequence

def count_docs(
    docs: list[tuple[str, list[str], list[str]]],
    df: dict[str, int],
    content_wid: dict[str, int],
    content_ids: list[int],
    content_counts: list[int],
    title_wid: dict[str, int],
    title_ids: list[int],
    title_counts: list[int],
    /,
) -> list[str]: ...
def index_texts(
    docs: list[tuple[str, str | list[str], str | list[str], Sequence[str]]],
    split: Callable[[str], list[str]],
    df: dict[str, int],
    content_wid: dict[str, int],
    content_ids: list[int],
    content_counts: list[int],
    title_wid: dict[str, int],
    title_ids: list[int],
    title_counts: list[int],
    /,
) -> tuple[list[str], list[str], list[int], list[str]]: ...
def split_ascii(text: str, /) -> list[str]: ...
def lex_rank(
    tokens: tuple[tuple[object, object, object, object, float], ...],
    denom: float,
    title_weight: float,
    exact_level: float,
    cols: tuple[object, ...],
    kind: int | None,
    subject: int | None,
    partition: int | None,
    hidden: tuple[int, ...],
    now_ts: float,
    limit: int,
    /,
) -> object:
    """``None`` (no candidate), ``NotImplemented`` (rank with numpy), or the hits:
    ``(slots, scores as float64 bytes, covered, fuzzy, tied runs or None, cut)``."""

def holding(texts: list[str], slots: list[int], pair: str, /) -> object:
    """Those of ``slots`` whose text holds ``pair``, or ``NotImplemented`` (not ASCII)."""

def plain_item(rules: tuple[object, ...], d: dict[str, object], /) -> bool:
    """``memstore._plainitem.plain_item(d)``, given ``_plainitem._RULES``."""

def row_json(
    fields: tuple[tuple[str, int], ...], utcs: tuple[object, ...], d: dict[str, object], /
) -> str | None:
    """The journal row's JSON of an item's fields, or ``None`` (see ``journal/version.py``)."""
