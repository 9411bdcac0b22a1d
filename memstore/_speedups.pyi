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
    ids: list[str | None],
    hit_type: type[tuple[object, ...]] | None,
    how: int = 0,
    /,
) -> object:
    """``None`` (no candidate), ``NotImplemented`` (rank with numpy), or the hits:
    ``(hits as hit_type tuples, their ids, scores as float64 bytes)``; with ``hit_type``
    ``None``, the same hits as columns: ``(lexicon slots as int64 bytes, ids, scores as
    float64 bytes, covered as int32 bytes, fuzzy as uint8 bytes)``."""

def slot_map(
    known: object, lex_slots: object, ids: tuple[str, ...], slot: dict[str, int], size: int, /
) -> tuple[bytes, bool]:
    """Ranked hits' snapshot slots (int64 bytes, -1: none below ``size``) by their lexicon
    slots, ``known`` (writable int64) remembering them; and whether every hit has one."""

def holding(texts: list[str], slots: list[int], pair: str, /) -> object:
    """Those of ``slots`` whose text holds ``pair``, or ``NotImplemented`` (not ASCII)."""

def neighbour_sets(
    tok: str,
    spans: list[tuple[int, int]],
    vocab: dict[str, int],
    words: list[str],
    live: object,
    tables: tuple[tuple[object, object, object], ...],
    overlay: dict[int, list[int]],
    /,
) -> list[set[str]]:
    """For each span ``(a, b)``, the words of ``vocab`` within one edit of ``tok[a:b]``."""

def edits(
    tok: str,
    levels: dict[str, float],
    level_edit: float,
    vocab: dict[str, int],
    words: list[str],
    live: object,
    tables: tuple[tuple[object, object, object], ...],
    overlay: dict[int, list[int]],
    /,
) -> tuple[set[str], list[tuple[str, str]]]:
    """``tok``'s one-edit neighbours and the joined pairs it is one edit from, neither strong."""

def substring_words(
    tok: str,
    words: list[str],
    live: object,
    tables: tuple[tuple[object, object, object], ...],
    overlay: dict[int, list[int]],
    /,
) -> list[str]:
    """The live vocabulary words holding ``tok`` (a gram, or two characters or more)."""

def joined_slots(
    pairs: list[tuple[object, object, str]],
    texts: list[str],
    strong: list[object],
    capacity: int,
    /,
) -> list[int]:
    """The slots holding some pair's pattern (``" w1 w2 "``) and both its words, none strong."""

def key_words(
    key: int,
    words: list[str],
    live: object,
    tables: tuple[tuple[object, object, object], ...],
    overlay: dict[int, list[int]],
    /,
) -> list[str]:
    """The live words under ``key`` of one vocabulary table, in word-number order."""

def fuzzy_words(
    tok: str,
    words: list[str],
    live: object,
    tables: tuple[tuple[object, object, object], ...],
    overlay: dict[int, list[int]],
    min_dice: float,
    fuzzy_max: float,
    /,
) -> dict[str, float]:
    """The words whose trigram Dice with ``tok`` reaches ``min_dice``, to ``fuzzy_max * dice``."""

def plain_item(rules: tuple[object, ...], d: dict[str, object], /) -> bool:
    """``memstore._plainitem.plain_item(d)``, given ``_plainitem._RULES``."""

def row_json(
    fields: tuple[tuple[str, int], ...], utcs: tuple[object, ...], d: dict[str, object], /
) -> str | None:
    """The journal row's JSON of an item's fields, or ``None`` (see ``journal/version.py``)."""

def lean_top(
    base: object,
    scored: object,
    readable: object,
    loan_to: object,
    loan_add: object,
    id_rank: object,
    need: int,
    /,
) -> tuple[list[int], list[float]] | None:
    """The lean fusion's best ``need`` readable candidates and their scores, or ``None``
    (a NaN score: see ``memstore/search/_lean.py``'s ``top_slots``)."""

def best_levels(
    parts: list[tuple[float, object]], capacity: int, alive: object, /
) -> tuple[bytes, bytes] | object:
    """A token's matched slots (int64 bytes, ascending) and their best levels (float64
    bytes), or ``NotImplemented`` (see ``memstore/_tokenmatch.py``'s ``best_levels``)."""
