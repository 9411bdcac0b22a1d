"""The request bodies of MemoryProtocol 0.1, as strict pydantic models.

Every model forbids unknown fields (a typo must not be silently ignored) and
is strict (``"k": "10"`` is not a number), so a body that does not fit is a
400 ``invalid_request`` naming the field. Bounds come from
:mod:`memstore.protocol.limits`; the size bounds that answer 413 (content,
metadata) are checked by the routes, since a validation error is a 400.

>>> RecallRequest.model_validate({"query": "alice"}).k
10
>>> ForgetRequest.model_validate({"target": {"Scope": {"BySource": "fs/"}}}).target_json()
{'Scope': {'BySource': 'fs/'}}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memstore.protocol.limits import DEFAULT_K, MAX_K, MAX_QUERY_CHARS, MAX_SOURCE_CHARS

__all__ = [
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
]

_STRICT = ConfigDict(extra="forbid", strict=True)


class IngestRequest(BaseModel):
    """POST /v1/ingest: one episode."""

    model_config = _STRICT

    id: str | None = Field(default=None, description="ULID; the server makes one when absent")
    source: str = Field(min_length=1, max_length=MAX_SOURCE_CHARS, examples=["helios:fs/notes.md"])
    content: str = Field(description="markdown, at most MAX_CONTENT_BYTES UTF-8 bytes")
    t_ref: str | None = Field(default=None, description="RFC 3339; defaults to the wall clock")
    metadata: dict[str, Any] | None = Field(default=None, description="any JSON object")


class RecallRequest(BaseModel):
    """POST /v1/recall: a query over the tenant's chunks."""

    model_config = _STRICT

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=DEFAULT_K, ge=1, le=MAX_K)
    as_of: str | None = Field(default=None, description="RFC 3339: answer as the state was then")
    filter: str | None = Field(default=None, description="v0 filter DSL")
    mode: Literal["semantic", "graph"] = "semantic"


class LsnModel(BaseModel):
    """A log position ``{wall_ms, counter}``."""

    model_config = _STRICT

    wall_ms: int = Field(ge=0, le=2**44)
    counter: int = Field(ge=0, le=2**20 - 1)


class IdTarget(BaseModel):
    """Forget one episode (and its chunks) or one chunk by ULID."""

    model_config = _STRICT

    Id: str


class BySource(BaseModel):
    """Every primitive whose source starts with a prefix."""

    model_config = _STRICT

    BySource: str = Field(min_length=1, max_length=MAX_SOURCE_CHARS)


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
    confirmation_token: str | None = None

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
