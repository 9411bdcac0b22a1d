"""The asyncio client: :class:`~memstore.client.MemoryClient`'s verbs as coroutines.

Same arguments, results, errors and retry rule as the blocking client (both
build their requests with :mod:`memstore.client._wire`); streams are async
iterators.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from memstore.client import _wire
from memstore.client._wire import SSE, Call, Mode, RetryPolicy, SseReader
from memstore.client.errors import ProtocolTransportError
from memstore.client.models import (
    ChangeEvent,
    Episode,
    ForgetReceipt,
    Hit,
    IngestResult,
    SnapshotEntry,
)
from memstore.journal import Lsn

__all__ = ["AsyncMemoryClient"]


class AsyncMemoryClient:
    """An asyncio MemoryProtocol 0.1 client: ``async with AsyncMemoryClient(url, token=...)``.

    ``timeout`` bounds each request (connect and each read) in seconds;
    ``retry`` says when a refused request is sent again; ``transport`` and
    ``headers`` are handed to :class:`httpx.Client` (a custom transport, extra
    headers). Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._retry = retry or RetryPolicy()
        merged = dict(headers or {})
        if token is not None:
            merged["Authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(
            base_url=base_url, timeout=timeout, transport=transport, headers=merged
        )

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    # ------------------------------------------------------------ plumbing

    async def _open(self, call: Call, *, stream: bool) -> httpx.Response:
        """Send ``call`` (retrying what the policy allows); a 2xx response or a raise."""
        attempt = 0
        while True:
            try:
                request = self._http.build_request(
                    call.method, call.path, json=call.json, headers=dict(call.headers)
                )
                response = await self._http.send(request, stream=stream)
            except httpx.TransportError as e:
                raise ProtocolTransportError(f"{call.method} {call.path}: {e}") from e
            if response.is_success:
                return response
            await response.aread()
            await response.aclose()
            err = _wire.decode_error(response)
            delay = _wire.retry_delay(err, attempt, self._retry)
            if delay is None:
                raise err
            await asyncio.sleep(delay)
            attempt += 1

    async def _send(self, call: Call) -> Any:
        response = await self._open(call, stream=False)
        try:
            body = response.json()
        except ValueError as e:
            raise ProtocolTransportError(f"{call.path}: the answer is not JSON: {e}") from e
        return _wire.parsed(call, body)

    async def _lines(self, call: Call) -> AsyncIterator[str]:
        response = await self._open(call, stream=True)
        try:
            async for line in response.aiter_lines():
                yield line
        except httpx.TransportError as e:
            raise ProtocolTransportError(f"{call.path}: the stream broke: {e}") from e
        finally:
            await response.aclose()

    # --------------------------------------------------------------- verbs

    async def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``{"ok", "version", "lsn"}`` (no token needed)."""
        body: dict[str, Any] = await self._send(_wire.health_call())
        return body

    async def applied(self) -> Lsn:
        """The journal position the server has applied (``/healthz``'s ``lsn``)."""
        return _wire.applied_lsn(await self.health())

    async def wait_applied(self, lsn: Lsn, *, timeout: float = 30.0, poll: float = 0.01) -> None:
        """Wait until the server has applied ``lsn`` (read your writes on another replica)."""
        _wire.wait_args(lsn, timeout, poll)
        deadline = time.monotonic() + timeout
        while await self.applied() < lsn:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the server did not apply {lsn} within {timeout} s")
            await asyncio.sleep(poll)

    async def ingest(
        self,
        source: str,
        content: str,
        *,
        id: str | None = None,
        t_ref: str | _dt.datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> IngestResult:
        """``POST /v1/ingest``: store one episode; its chunks become recallable.

        ``id`` (a ULID) replaces that episode if it exists; ``t_ref`` is when the
        episode happened (RFC 3339 or an aware datetime); ``metadata`` any JSON
        object, which recall filters can test (``metadata.project = 'x'``).
        """
        result: IngestResult = await self._send(
            _wire.ingest_call(source, content, id=id, t_ref=t_ref, metadata=metadata)
        )
        return result

    async def recall(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: str | None = None,
        as_of: str | _dt.datetime | None = None,
        mode: Mode | None = None,
        min_relevance: float | None = None,
    ) -> list[Hit]:
        """``POST /v1/recall``: the best ``k`` chunks for ``query`` (server default 10).

        ``filter`` is the v0 filter DSL (``source LIKE 'notes/%'``), ``as_of``
        answers as the memory was then, ``mode="graph"`` adds the chunks linked
        to the semantic hits. ``min_relevance`` (0-1) drops the search hits whose
        ``relevance`` is below it (a memstore server's addition).
        """
        hits: list[Hit] = await self._send(
            _wire.recall_call(
                query, k=k, filter=filter, as_of=as_of, mode=mode, min_relevance=min_relevance
            )
        )
        return hits

    async def recall_stream(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: str | None = None,
        as_of: str | _dt.datetime | None = None,
        mode: Mode | None = None,
        min_relevance: float | None = None,
    ) -> AsyncIterator[Hit]:
        """:meth:`recall` as Server-Sent Events: hits as they are sent, until ``done``.

        A stream that ends before ``done`` raises
        :class:`~memstore.client.errors.ProtocolTransportError` after the hits it carried.
        """
        call = _wire.recall_call(
            query,
            k=k,
            filter=filter,
            as_of=as_of,
            mode=mode,
            stream=True,
            min_relevance=min_relevance,
        )
        reader = SseReader()
        async for line in self._lines(call):
            event = reader.feed(line)
            if event is None:
                continue
            if event.event == _wire.RECALL_DONE:
                return
            hit = _wire.recall_event_hit(event)
            if hit is not None:
                yield hit
        raise _wire.cut_short(call)  # no done: the hits so far may not be all

    async def forget(
        self,
        *,
        id: str | None = None,
        source: str | None = None,
        before: Lsn | None = None,
        dry_run: bool = False,
    ) -> ForgetReceipt:
        """``POST /v1/forget``, soft: delete an episode or chunk (``id``), every one whose
        source starts with ``source``, or every one that existed at ``before``.

        Soft-deleted items stay visible to ``as_of`` and snapshots of earlier
        positions. ``dry_run=True`` changes nothing and returns a sealed preview
        for :meth:`confirm_forget`.
        """
        target = _wire.target_json(id=id, source=source, before=before)
        receipt: ForgetReceipt = await self._send(_wire.forget_call(target, dry_run=dry_run))
        return receipt

    async def preview_hard_forget(
        self, *, id: str | None = None, source: str | None = None, before: Lsn | None = None
    ) -> ForgetReceipt:
        """The dry run of a hard delete: what it would erase, sealed for :meth:`confirm_forget`."""
        target = _wire.target_json(id=id, source=source, before=before)
        receipt: ForgetReceipt = await self._send(
            _wire.forget_call(target, hard=True, dry_run=True)
        )
        return receipt

    async def confirm_forget(self, preview: ForgetReceipt) -> ForgetReceipt:
        """Erase, past and present, what ``preview`` (a hard dry run's receipt) listed.

        The server accepts a preview once, for its own target, within minutes
        of issuing it; anything else is
        :class:`~memstore.client.errors.InvalidConfirmationTokenError`.
        """
        call = _wire.forget_call(preview.target, hard=True, confirmation_token=preview.token())
        receipt: ForgetReceipt = await self._send(call)
        return receipt

    async def episode(self, id: str) -> Episode:
        """``GET /v1/episode/{id}``: the episode as ingested (``NotFoundError`` if none)."""
        episode: Episode = await self._send(_wire.episode_call(id))
        return episode

    async def snapshot(self, lsn: Lsn | str) -> AsyncIterator[SnapshotEntry]:
        """``GET /v1/snapshot/{lsn}``: every episode and chunk visible at ``lsn``, streamed.

        An empty iterator means nothing of the caller's tenant existed then.
        """
        async for line in self._lines(Call("GET", _wire.snapshot_path(lsn))):
            for entry in _wire.snapshot_entries((line,)):
                yield entry

    async def events(self, *, last_event_id: str | None = None) -> AsyncIterator[ChangeEvent]:
        """``GET /v1/events``: the tenant's changes as they happen, until the caller stops.

        Each event's ``id`` resumes the stream (``last_event_id=``) after a
        disconnect; a ``reset`` event means the server could not replay the gap.
        """
        headers = {"Accept": SSE}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        reader = SseReader(last_id=last_event_id)
        async for line in self._lines(Call("GET", "/v1/events", headers=headers)):
            event = reader.feed(line)
            if event is not None and event.event != "position":
                yield event
