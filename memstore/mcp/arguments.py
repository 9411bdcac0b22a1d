"""The native tools' arguments: typed, bounded, and described for a model to read.

Each model is a tool's ``inputSchema``. Models guess argument names, so the
common guesses are accepted beside the documented name (``q`` and ``text``
for ``query``, ``k`` and ``top_k`` for ``limit``, ``id`` for a one-element
``ids``); anything else unknown is refused with the list of what the tool takes.

Tags are free words, except the placement tags (:data:`PLACEMENT_TAGS`): which
partition a memory belongs to, whose private note it is, whether every
partition sees it. Those are the server's to set (``--partition`` or the HTTP
token's tenant), so a call naming one is refused and changes nothing; the
result shapes never show them, and an update keeps them.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field

from memstore.bounded import check
from memstore.item import VALID_THOUGHT_LINK_RELATIONS
from memstore.limits import MAX_CONTEXT_DEPTH, MAX_ID_CHARS, adapter_cap
from memstore.tags import PARTITION_TAG_PREFIX, PRIVATE_OWNER_TAG_PREFIX, SHARED_TAG

__all__ = [
    "DEFAULT_KIND",
    "DEFAULT_MAX_CHARS",
    "MAX_CHARS",
    "MAX_IDS",
    "MAX_LIMIT",
    "PLACEMENT_TAGS",
    "ForgetArgs",
    "GetArgs",
    "HistoryArgs",
    "Id",
    "LinkArgs",
    "LinkSpec",
    "RecallArgs",
    "RecentArgs",
    "RelatedArgs",
    "RememberArgs",
    "UpdateArgs",
    "Whole",
    "free_tags",
    "is_placement_tag",
    "whole_number",
]

DEFAULT_KIND: Final = "observation"
"""The kind of a memory remembered without ``kind``."""
DEFAULT_MAX_CHARS: Final = 4000
"""How much content ``recall`` returns in all unless told otherwise."""
MAX_CHARS: Final = 200_000
"""The largest ``max_chars`` of ``recall`` (twice the engine's longest content)."""
MAX_LIMIT: Final = adapter_cap(100)
"""The most results one tool call returns: the MCP tools' own cap, on purpose.

The engine allows :data:`~memstore.limits.MAX_RESULTS` (1,000) per search; a
tool's answer is read whole into a model's context, where a hundred memories
are already more than a model can weigh. A call asking for more is refused
with a message naming this cap (``docs/mcp.md``, "The tools").
"""
MAX_IDS: Final = adapter_cap(100)
"""The most ids one call names (``get_memory``, ``forget``): the same MCP-only cap."""
_WHY_CAPPED: Final = "the MCP tools' cap, to keep an answer within a model's context"
PLACEMENT_TAGS: Final = (PARTITION_TAG_PREFIX, PRIVATE_OWNER_TAG_PREFIX, SHARED_TAG)
"""The tags that place a memory (:mod:`memstore.tags`): ``tenant/<name>`` and
``user:<hash>`` by prefix, ``shared`` as a whole word."""

Relation = Literal[
    "triggers", "caused_by", "correlates_with", "precedes", "explains", "contradicts"
]
assert set(Relation.__args__) == set(VALID_THOUGHT_LINK_RELATIONS)  # type: ignore[attr-defined]
Confidence = Literal["", "high", "medium", "low"]


def is_placement_tag(tag: str) -> bool:
    """Whether ``tag`` places a memory rather than describing it.

    >>> [is_placement_tag(t) for t in ("tenant/bob", "user:ab12", "shared", "shared-drive")]
    [True, True, True, False]
    """
    return tag == SHARED_TAG or tag.startswith((PARTITION_TAG_PREFIX, PRIVATE_OWNER_TAG_PREFIX))


def free_tags(tags: list[str]) -> list[str]:
    """``tags`` without the placement tags: what a tool shows and a model may change."""
    return [t for t in tags if not is_placement_tag(t)]


def _no_placement(tags: list[str] | None) -> list[str] | None:
    """Refuse a placement tag in a call's ``tags``: the server places memories, not the model."""
    for t in tags or ():
        if is_placement_tag(t):
            raise ValueError(
                f"{t!r} is reserved: tenant/..., user:... and shared tags say where a memory "
                "lives, which the server decides; use other tags"
            )
    return tags


def _ids_cap(value: list[str]) -> list[str]:
    """Refuse more than :data:`MAX_IDS` ids, saying it is this server's cap."""
    if len(value) > MAX_IDS:
        raise ValueError(f"at most {MAX_IDS} ids per call, not {len(value)} ({_WHY_CAPPED})")
    return value


def _listify(value: Any) -> Any:
    """One id given as text means a list of one (a guess models make)."""
    return [value] if isinstance(value, str) else value


Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
"""A memory id: 1 to :data:`~memstore.limits.MAX_ID_CHARS` characters (the schema's
``minLength`` and ``maxLength``), so an empty or longer one is refused naming the
argument that held it (``ids.0``), never looked up ("Not found: ." for ``""``)."""

Ids = Annotated[
    list[Id],
    BeforeValidator(_listify),
    AfterValidator(_ids_cap),
    Field(
        min_length=1,
        json_schema_extra={"maxItems": MAX_IDS},
        validation_alias=AliasChoices("ids", "id"),
        description=f"Memory ids, as recall or remember returned them (at most {MAX_IDS}).",
    ),
]


def whole_number(value: Any) -> Any:
    """``5.0`` as ``5``: JSON has one number type, and its schema's integer is any whole one.

    Everything else goes on to the strict check as it came, so ``"5"``, ``true``
    and ``2.5`` are refused with a tool error naming the argument.

    >>> whole_number(5.0), whole_number("5"), whole_number(2.5)
    (5, '5', 2.5)
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Whole = Annotated[int, BeforeValidator(whole_number)]
"""An integer argument: a whole JSON number, never text or a boolean (the models are strict)."""
Limit = Annotated[Whole, AfterValidator(check("limit", 1, MAX_LIMIT))]
"""A ``limit`` argument: 1 to :data:`MAX_LIMIT` (the schema's ``minimum`` and ``maximum``).

Out of range, the engine's error (:class:`~memstore.errors.OutOfRangeError`): the tool error
names the argument, the value, the bounds and the code ``arguments.out_of_range``."""


def _limit(what: str) -> Any:
    """The ``limit`` field of a tool: default 10, 1 to :data:`MAX_LIMIT`, with its aliases."""
    return Field(
        default=10,
        json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT},
        validation_alias=_LIMIT,
        description=f"Most {what} (1 to {MAX_LIMIT}).",
    )


FreeTags = Annotated[list[str], AfterValidator(_no_placement)]
"""A ``tags`` argument: free tags, none of them a placement tag."""


class _Args(BaseModel):
    """Strict, as the schema is: ``"5"`` is not an integer, ``1`` or ``"true"`` not a boolean.

    Pydantic's default (lax) mode would take them, and ``true`` as the limit 1:
    arguments the advertised schema forbids, served as if they made sense.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


_QUERY = AliasChoices("query", "q", "text")
_LIMIT = AliasChoices("limit", "k", "top_k")


class LinkSpec(_Args):
    """A link from the new memory to an existing one."""

    to_id: Id = Field(description="The id of the memory linked to.")
    relation: Relation = Field(
        default="correlates_with", description="How the new memory relates to it."
    )


class RememberArgs(_Args):
    content: str = Field(
        min_length=1,
        validation_alias=AliasChoices("content", "text", "memory"),
        description="The memory itself: one self-contained fact, decision or observation.",
    )
    kind: str = Field(
        default=DEFAULT_KIND,
        description=(
            "A category: observation (default), note, decision, preference, event (needs "
            "event_date), stable_fact (needs confidence high), or any word of your own."
        ),
    )
    title: str = Field(default="", description="A one-line summary (optional).")
    subject: str = Field(
        default="", description="What or whom the memory is about, e.g. a project or a person."
    )
    tags: FreeTags = Field(
        default_factory=list,
        description="Free tags (no commas; tenant/..., user:... and shared are reserved).",
    )
    event_date: str = Field(
        default="", description="When it happened: YYYY-MM-DD or an RFC 3339 time (optional)."
    )
    confidence: Confidence = Field(default="", description="How sure you are (optional).")
    links: list[LinkSpec] = Field(
        default_factory=list, description="Links to existing memories (optional)."
    )


class RecallArgs(_Args):
    query: str = Field(
        min_length=1,
        validation_alias=_QUERY,
        description="What to look for, in plain words (keywords or a question).",
    )
    limit: Limit = _limit("hits")
    kind: str = Field(default="", description="Only memories of this kind (optional).")
    subject: str = Field(default="", description="Only memories about this subject (optional).")
    as_of: str = Field(
        default="",
        description=(
            "Search memory as it was at a time: an RFC 3339 time (2025-01-31T12:00:00Z) "
            "or a log position wall_ms.counter from history (optional)."
        ),
    )
    explain: bool = Field(default=False, description="Add why each hit was found (why).")
    min_relevance: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        strict=True,
        description=(
            "Drop hits whose relevance (0-1, the estimated chance a hit is evidence for "
            "the query) is below this; 0 keeps all. A question memory cannot answer may "
            "then get no hits."
        ),
    )
    max_chars: Annotated[Whole, AfterValidator(check("max_chars", 1, MAX_CHARS))] = Field(
        default=DEFAULT_MAX_CHARS,
        json_schema_extra={"minimum": 1, "maximum": MAX_CHARS},
        description="The most characters of content in all hits together.",
    )


class GetArgs(_Args):
    ids: Ids


class UpdateArgs(_Args):
    id: Id = Field(description="The id of the memory to change.")
    content: str | None = Field(default=None, description="New text (omit to keep).")
    title: str | None = Field(default=None, description="New title (omit to keep).")
    kind: str | None = Field(default=None, description="New kind (omit to keep).")
    subject: str | None = Field(default=None, description="New subject (omit to keep).")
    tags: FreeTags | None = Field(
        default=None,
        description="New tags, replacing the old (tenant/..., user:... and shared are reserved).",
    )
    event_date: str | None = Field(default=None, description="New event date (omit to keep).")
    confidence: Confidence | None = Field(default=None, description="New confidence.")


class ForgetArgs(_Args):
    ids: Ids


class LinkArgs(_Args):
    from_id: Id = Field(description="The memory the link starts from.")
    to_id: Id = Field(description="The memory it points to.")
    relation: Relation = Field(default="correlates_with", description="How they relate.")


class RelatedArgs(_Args):
    id_or_query: str = Field(
        min_length=1,
        validation_alias=AliasChoices("id_or_query", "id", "query", "q", "text"),
        description="A memory id, or words: the best matches become the starting points.",
    )
    depth: Annotated[Whole, AfterValidator(check("depth", 1, MAX_CONTEXT_DEPTH))] = Field(
        default=2,
        json_schema_extra={"minimum": 1, "maximum": MAX_CONTEXT_DEPTH},
        description="How many links away to reach.",
    )
    limit: Limit = _limit("results")


class HistoryArgs(_Args):
    id: Id = Field(description="The memory whose versions to list.")


class RecentArgs(_Args):
    limit: Limit = _limit("memories")
    kind: str = Field(default="", description="Only memories of this kind (optional).")
