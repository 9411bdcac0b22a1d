"""Types of the optional compiled module ``memstore._speedups`` (see ``_speedups.c``)."""

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
