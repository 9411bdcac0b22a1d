"""The request bodies of MemoryProtocol 0.1, as strict pydantic models.

Every model forbids unknown fields (a typo must not be silently ignored) and
is strict (``"k": "10"`` is not a number), so a body that does not fit is a
400 ``invalid_request`` naming the field. Every text field, and every string
inside ``metadata`` (keys too), is :data:`Text`: Unicode text, so a lone
surrogate (``"\\udc00"``, which JSON can escape but UTF-8 cannot encode) is
refused here, once, rather than failing wherever the text is next encoded.
Likewise every number in ``metadata`` is finite (no ``NaN``, ``Infinity`` or
``1e400``, which no JSON answer could carry back).
Bounds come from :mod:`memstore.protocol.limits`; the size bounds that answer
413 (content, metadata) are checked by the routes, since a validation error is
a 400.

>>> from pydantic import ValidationError
>>> try:
...     IngestRequest.model_validate({"source": "s", "content": "a\\udc00"})
... except ValidationError as e:
...     print(e.errors()[0]["msg"][:60])
a lone surrogate (U+DC00) at character 1 is not Unicode text
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from memstore.bounded import check
from memstore.protocol.limits import DEFAULT_K, MAX_K, MAX_QUERY_CHARS, MAX_SOURCE_CHARS

__all__ = [
    "MAX_WIRE_COUNTER",
    "BeforeTarget",
    "BySource",
    "EpisodeOut",
    "ErrorOut",
    "ForgetReceiptOut",
    "ForgetRequest",
    "HealthOut",
    "HitOut",
    "HlcOut",
    "IdTarget",
    "IngestOut",
    "IngestRequest",
    "LsnModel",
    "LsnOut",
    "RecallRequest",
    "ScopeTarget",
    "Text",
    "unicode_json",
    "unicode_text",
]

_STRICT = ConfigDict(extra="forbid", strict=True)
MAX_WIRE_COUNTER: Final = 2**32 - 1
"""The largest Lsn counter on the wire: the seed's ``counter`` is a u32."""
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _no_surrogate(value: str, where: str) -> None:
    if value.isascii():
        return
    m = _SURROGATE.search(value)
    if m is not None:
        raise PydanticCustomError(
            "unicode_text",
            "{where}a lone surrogate (U+{code}) at character {at} is not Unicode text "
            "(UTF-8 cannot encode it; send the character itself or a surrogate pair)",
            {"where": where, "code": f"{ord(m.group()):04X}", "at": m.start()},
        )


def unicode_text(value: str) -> str:
    """``value`` if it is Unicode text (no lone surrogate); the validator of :data:`Text`."""
    _no_surrogate(value, "")
    return value


def _finite(value: float, where: str) -> None:
    if not math.isfinite(value):
        raise PydanticCustomError(
            "finite_number",
            "{where}{value} is not a JSON number (NaN and the infinities, 1e400 too, "
            "have no JSON form; send a finite number or a string)",
            {"where": where, "value": json.dumps(value)},  # as Python reads it: NaN, Infinity
        )


def unicode_json(value: Any, path: str = "") -> Any:
    """``value`` if every string in it (object keys too) is Unicode text, every number finite.

    Python's JSON parser reads ``NaN``, ``Infinity`` and ``1e400`` (an
    overflow) as floats no JSON text can carry back: refused here, they can
    never reach an answer or a snapshot line. The error names the path of the
    culprit (``a.b[2]``).

    >>> unicode_json({"n": [1, 2.5, "x"]})
    {'n': [1, 2.5, 'x']}
    """
    if isinstance(value, str):
        _no_surrogate(value, f"{path}: " if path else "")
    elif isinstance(value, float):
        _finite(value, f"{path}: " if path else "")
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_surrogate(key, f"{path}: key " if path else "key ")
            unicode_json(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            unicode_json(item, f"{path}[{i}]")
    return value


Text = Annotated[str, AfterValidator(unicode_text)]
"""A text field of a request: a ``str`` without lone surrogates."""
JsonObject = Annotated[dict[str, Any], AfterValidator(unicode_json)]


class IngestRequest(BaseModel):
    """POST /v1/ingest: one episode."""

    model_config = _STRICT

    id: Text | None = Field(default=None, description="ULID; the server makes one when absent")
    source: Text = Field(min_length=1, max_length=MAX_SOURCE_CHARS, examples=["helios:fs/notes.md"])
    content: Text = Field(description="markdown, at most MAX_CONTENT_BYTES UTF-8 bytes")
    t_ref: Text | None = Field(default=None, description="RFC 3339; defaults to the wall clock")
    metadata: JsonObject | None = Field(default=None, description="any JSON object")


class RecallRequest(BaseModel):
    """POST /v1/recall: a query over the tenant's chunks."""

    model_config = _STRICT

    query: Text = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: Annotated[int, AfterValidator(check("k", 1, MAX_K))] = Field(
        default=DEFAULT_K, json_schema_extra={"minimum": 1, "maximum": MAX_K}
    )
    as_of: Text | None = Field(default=None, description="RFC 3339: answer as the state was then")
    filter: Text | None = Field(default=None, description="v0 filter DSL")
    mode: Literal["semantic", "graph"] = "semantic"
    min_relevance: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="an addition: drop search hits whose relevance (0-1) is below this",
    )


class LsnModel(BaseModel):
    """A log position ``{wall_ms, counter}``: the seed's u64 and u32."""

    model_config = _STRICT

    wall_ms: int = Field(ge=0, le=2**64 - 1)
    counter: int = Field(ge=0, le=MAX_WIRE_COUNTER)


class IdTarget(BaseModel):
    """Forget one episode (and its chunks) or one chunk by ULID."""

    model_config = _STRICT

    Id: Text


class BySource(BaseModel):
    """Every primitive whose source starts with a prefix."""

    model_config = _STRICT

    BySource: Text = Field(min_length=1, max_length=MAX_SOURCE_CHARS)


class ScopeTarget(BaseModel):
    """Forget by scope (``BySource`` prefix)."""

    model_config = _STRICT

    Scope: BySource


class BeforeTarget(BaseModel):
    """Forget every primitive that already existed at an Lsn."""

    model_config = _STRICT

    Before: LsnModel


class ForgetRequest(BaseModel):
    """POST /v1/forget: a target, soft or hard, or a dry run."""

    model_config = _STRICT

    target: IdTarget | ScopeTarget | BeforeTarget
    hard: bool = False
    dry_run: bool = False
    confirmation_token: Text | None = None

    def target_json(self) -> dict[str, Any]:
        """The target as JSON, in the wire shape."""
        dumped: dict[str, Any] = self.target.model_dump()
        return dumped


# --- responses: documented in the OpenAPI document (schemathesis checks the answers
# against them); the routes build plain dicts, so answering costs no validation.


class LsnOut(BaseModel):
    """A log position."""

    wall_ms: int
    counter: int


class HlcOut(LsnOut):
    """A version stamp."""

    node_id: int


class IngestOut(BaseModel):
    """POST /v1/ingest's answer."""

    lsn: LsnOut
    queue_lag_warn: bool


class HitOut(BaseModel):
    """One recall hit, in the seed's shape."""

    id: list[int] = Field(description="the 16 bytes of the chunk's ULID")
    score: float
    text: str
    source: str
    heading_path: list[str]
    valid_from: HlcOut | None
    valid_to: HlcOut | None
    degraded: bool
    rerank_applied: bool
    source_op: str
    episode: str | None = Field(
        default=None, description="the ULID of the chunk's episode (GET /v1/episode/{id})"
    )
    relevance: float | None = Field(
        default=None,
        description="the estimated probability (0-1) that the chunk is evidence for the "
        "query, comparable across calls; null for a hit reached by links (mode graph)",
    )
    graph_complete: bool | None = Field(
        default=None,
        description="mode graph: false when the walk over the links stopped at "
        "CONTEXT_REACH (10,000) items, so a chunk it did not reach may be left out; "
        "true when it reached everything within 2 links; null in mode semantic and for as_of",
    )


class ForgetReceiptOut(BaseModel):
    """The seed's ForgetReceipt (a dry run's also carries ``confirmation``)."""

    target: dict[str, Any]
    indices_affected: list[str]
    rows_written: int
    rows_deleted: int
    audit_lsn: LsnOut
    preview: bool
    confirmation: str | None = None


class EpisodeOut(BaseModel):
    """An episode as ingested."""

    id: str
    source: str
    content: str
    t_ref: str | None
    metadata: dict[str, Any]


class HealthOut(BaseModel):
    """GET /healthz's answer.

    ``lsn`` (an addition to the seed): the journal position this server has
    applied, as ``wall_ms.counter``. Every write up to it is visible here, so
    a client that wrote through another replica (whose acknowledgement
    carried Lsn L) can poll it until it reaches L to read its own writes.
    """

    ok: bool
    version: str
    lsn: str | None = None


class ErrorOut(BaseModel):
    """Every error answer: ``{error, message}``, with ``details`` when there are some."""

    error: str
    message: str
    details: dict[str, Any] | None = None
