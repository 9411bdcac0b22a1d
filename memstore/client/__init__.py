"""A typed Python client for ``memstore serve`` (MemoryProtocol 0.1 over HTTP).

Install the ``http`` extra (``httpx``). Both clients speak every verb of the
server: ingest, recall (with a filter, ``as_of``, graph mode, or streamed as
Server-Sent Events), forget (soft, dry run, and the hard delete confirmed by
its preview), snapshots as an iterator, episodes, and the change stream with
resume. Error answers are raised as :mod:`memstore.client.errors` classes
(all :class:`~memstore.errors.MemstoreError`), and a 429 is retried after its
``Retry-After``::

    from memstore.client import MemoryClient

    with MemoryClient("http://127.0.0.1:8080", token=TOKEN) as memory:
        at = memory.ingest("notes/today.md", "# Deploy\\nThe deploy is on Friday.").lsn
        for hit in memory.recall("when is the deploy?", k=3):
            print(hit.score, hit.text)
        lines = list(memory.snapshot(at))

:class:`AsyncMemoryClient` is the same with ``await`` and ``async for``.
"""

from __future__ import annotations

try:
    import httpx as _httpx  # noqa: F401  (the http extra: the client speaks through it)
except ModuleNotFoundError as _missing:  # pragma: no cover - exercised without the extra
    raise ImportError(
        f"memstore.client needs httpx ({_missing.name} is missing): "
        'pip install "memstore-engine[http]"',
        name=_missing.name,
    ) from None

from memstore.client._wire import RetryPolicy
from memstore.client.aio import AsyncMemoryClient
from memstore.client.errors import (
    AuthenticationError,
    ClientClosedError,
    ClientError,
    ConfirmationRequiredError,
    ForbiddenError,
    GraphUnavailableError,
    InvalidConfirmationTokenError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    ProtocolTransportError,
    RateLimitedError,
    ServerError,
    ServerFailureError,
    UnavailableError,
)
from memstore.client.models import (
    ChangeEvent,
    Episode,
    ForgetReceipt,
    Hit,
    Hlc,
    IngestResult,
    SnapshotEntry,
)
from memstore.client.sync import MemoryClient

__all__ = [
    "AsyncMemoryClient",
    "AuthenticationError",
    "ChangeEvent",
    "ClientClosedError",
    "ClientError",
    "ConfirmationRequiredError",
    "Episode",
    "ForbiddenError",
    "ForgetReceipt",
    "GraphUnavailableError",
    "Hit",
    "Hlc",
    "IngestResult",
    "InvalidConfirmationTokenError",
    "InvalidRequestError",
    "MemoryClient",
    "NotFoundError",
    "PayloadTooLargeError",
    "ProtocolTransportError",
    "RateLimitedError",
    "RetryPolicy",
    "ServerError",
    "ServerFailureError",
    "SnapshotEntry",
    "UnavailableError",
]
