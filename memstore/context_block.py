"""The context block: retrieved memories rendered for a prompt, within a character budget.

Every surface that hands an agent its memories (the Mind Layer API's
``/v1/context`` and ``/v1/chat``, the MCP ``recall`` tool, a program calling
the engine) builds the block with :func:`build_context_block`, so an agent
reads the same text whichever door it came through:

- the **personality** (configured text, if any) first, under its own heading;
- then one line per memory, best first: ``- [id] text``, with the item's
  event date appended to its title (:meth:`~memstore.item.Item.title_with_event_time`),
  so a model reading it sees *when* something happened;
- and a **receipt**: the ids of the memories the text holds, in order, and
  the ids left out because they did not fit.

The budget counts characters of the whole text. Memories are taken in rank
order; one that does not fit is left out (named in ``omitted``) and the
next, shorter ones are still tried. A personality longer than the budget is
cut, with ``…`` marking the cut, and then no memory fits.

>>> from memstore.item import Item
>>> hits = [Item(id="diet", kind="note", content="The user is vegetarian."),
...         Item(id="trip", kind="event", title="Trip to Lisbon", content="Flew TAP.",
...              event_date="2026-05-02")]
>>> block = build_context_block(hits, personality="Be warm and concise.", max_chars=200)
>>> print(block.text)
Personality:
Be warm and concise.
<BLANKLINE>
Memories:
- [diet] The user is vegetarian.
- [trip] Trip to Lisbon (2026-05-02): Flew TAP.
>>> block.ids, block.omitted
(('diet', 'trip'), ())
>>> small = build_context_block(hits, max_chars=50)
>>> small.ids, small.omitted
(('diet',), ('trip',))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from memstore.eventdate import event_time_annotation
from memstore.item import Item

__all__ = [
    "DEFAULT_CONTEXT_CHARS",
    "MEMORIES_HEADING",
    "PERSONALITY_HEADING",
    "ContextBlock",
    "build_context_block",
    "memory_line",
]

DEFAULT_CONTEXT_CHARS: Final = 4000
"""The default character budget of a context block (about a thousand tokens)."""
PERSONALITY_HEADING: Final = "Personality:"
"""The line above the personality text."""
MEMORIES_HEADING: Final = "Memories:"
"""The line above the memory lines."""
_CUT: Final = "…"


class _Hit(Protocol):
    """A search hit: anything with an ``item`` (``SearchResult``, ``ScoredItem``)."""

    @property
    def item(self) -> Item: ...


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """A rendered context block and its receipt."""

    text: str
    """The prompt-ready text (empty when there is neither personality nor memory)."""
    ids: tuple[str, ...]
    """The ids of the memories in ``text``, in the order they appear (the receipt)."""
    omitted: tuple[str, ...]
    """The ids of the memories given that did not fit the budget."""
    personality: str
    """The personality as given (``text`` may hold a cut copy)."""


def memory_line(item: Item, id: str | None = None) -> str:
    """One memory as the block renders it: ``- [id] title (event date): content``.

    An item without a title shows its content, with the event date after it.

    >>> memory_line(Item(id="n1", kind="note", content="Alice  joined\\nAcme."))
    '- [n1] Alice joined Acme.'
    >>> memory_line(Item(id="e", kind="note", content="Deploy", event_date="2026-01-02"), "d1")
    '- [d1] Deploy (2026-01-02)'
    """
    content = " ".join(item.content.split())
    if item.title.strip():
        head = " ".join(item.title_with_event_time().split())
        body = f"{head}: {content}" if content else head
    else:
        body = content + event_time_annotation(item.event_date)
    return f"- [{id if id is not None else item.id}] {body}"


def _item_of(hit: Item | _Hit) -> Item:
    return hit if isinstance(hit, Item) else hit.item


def build_context_block(
    hits: Iterable[Item | _Hit],
    *,
    personality: str = "",
    max_chars: int = DEFAULT_CONTEXT_CHARS,
    id_of: Callable[[Item], str] | None = None,
) -> ContextBlock:
    """The context block of ``hits`` (items or search hits, best first); see the module doc.

    :param personality: configured text shown first ("" for none).
    :param max_chars: the budget, in characters, of the whole text (at least 1).
    :param id_of: the id a surface shows for an item (default ``item.id``), e.g.
        the caller's own memory id rather than the engine's.
    :raises ValueError: ``max_chars`` below 1.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError(f"max_chars must be a positive int, got {max_chars!r}")
    name = id_of or (lambda it: it.id)
    parts: list[str] = []
    used = 0
    persona = personality.strip()
    if persona:
        head = f"{PERSONALITY_HEADING}\n"
        room = max_chars - len(head)
        if room <= len(_CUT):
            shown = ""
        elif len(persona) > room:
            shown = persona[: room - len(_CUT)] + _CUT
        else:
            shown = persona
        if shown:
            parts.append(head + shown)
            used = len(parts[0])
    ids: list[str] = []
    omitted: list[str] = []
    lines: list[str] = []
    heading = ("\n\n" if parts else "") + MEMORIES_HEADING
    for hit in hits:
        item = _item_of(hit)
        shown_id = name(item)
        line = "\n" + memory_line(item, shown_id)
        extra = len(line) + (0 if lines else len(heading))
        if used + extra > max_chars:
            omitted.append(shown_id)
            continue
        if not lines:
            parts.append(heading)
        lines.append(line)
        parts.append(line)
        used += extra
        ids.append(shown_id)
    return ContextBlock("".join(parts), tuple(ids), tuple(omitted), personality)
