"""The blocking client of ``memstore serve`` (and of any MemoryProtocol 0.1 server).

:class:`MemoryClient` sends each verb of the protocol over one pooled
``httpx`` connection and hands back typed results; every error answer is
raised as the :mod:`memstore.client.errors` class of its code, and a 429 is
retried after its ``Retry-After`` (:class:`~memstore.client.RetryPolicy`).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Generator, Iterator, Mapping
from typing import Any

import httpx

from memstore.client import _wire
from memstore.client._wire import Call, Mode, RetryPolicy
from memstore.client.errors import ClientClosedError, ProtocolTransportError
from memstore.client.models import (
    ChangeEvent,
    Episode,
    ForgetReceipt,
    Hit,
    IngestResult,
    SnapshotEntry,
)
from memstore.journal import Lsn

__all__ = ["MemoryClient"]


class MemoryClient:
    """A MemoryProtocol 0.1 client: ``MemoryClient("http://127.0.0.1:8080", token=...)``.

    ``base_url`` is the server's URL, a path included (``http://proxy/memory``
    sends ``/memory/v1/recall``). ``token`` is sent as ``Authorization: Bearer
    <token>`` (in place of any ``Authorization`` in ``headers``). ``timeout``
    bounds each request (connect and each read) in seconds (an
    :class:`httpx.Timeout`, or ``None`` for no limit); ``retry`` says when a
    refused request is sent again; ``transport`` and ``headers`` are handed to
    :class:`httpx.Client` (a custom transport, extra headers). Every option is
    checked here: a wrong one is an
    :class:`~memstore.client.errors.InvalidRequestError` (status 0), and a
    token is never quoted in it.

    Use it as a context manager, or call :meth:`close`; a closed client raises
    :class:`~memstore.client.errors.ClientClosedError` and sends nothing.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        options = _wire.client_options(base_url, token, timeout, retry, headers)
        self._retry = options.retry
        self._closed = False
        self._http = httpx.Client(
            base_url=options.base_url,
            timeout=options.timeout,
            transport=transport,
            headers=options.headers,
        )

    def __enter__(self) -> MemoryClient:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool (idempotent); the client sends nothing after."""
        self._closed = True
        self._http.close()

    # ------------------------------------------------------------ plumbing

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("this MemoryClient is closed; open a new one")

    def _open(self, call: Call, *, stream: bool) -> httpx.Response:
        """Send ``call`` (retrying what the policy allows); a 2xx response or a raise."""
        attempt = 0
        while True:
            self._check_open()
            request = self._http.build_request(
                call.method, call.path, json=call.json, headers=dict(call.headers)
            )
            try:
                response = self._http.send(request, stream=stream)
            except _wire.UNREADABLE as e:
                raise _wire.unanswered(call, request.url, e) from e
            except RuntimeError:  # httpx's answer when close() ran meanwhile
                self._check_open()
                raise
            if response.is_success:
                return response
            try:  # a streamed call's error answer is read here: it can break too
                response.read()
            except _wire.UNREADABLE as e:
                raise _wire.unanswered(call, request.url, e) from e
            finally:
                response.close()
            err = _wire.decode_error(response)
            delay = _wire.retry_delay(err, attempt, self._retry, call)
            if delay is None:
                raise err
            time.sleep(delay)
            attempt += 1

    def _send(self, call: Call) -> Any:
        return _wire.answer(call, self._open(call, stream=False))

    def _lines(self, call: Call) -> Generator[str, None, None]:
        self._check_open()
        return self._stream_lines(call)

    def _stream_lines(self, call: Call) -> Generator[str, None, None]:
        response = self._open(call, stream=True)
        lines = _wire.LineSplitter()  # "\n" only: httpx also breaks at U+2028
        try:
            for text in response.iter_text():
                yield from lines.feed(text)
            yield from lines.end()
        except _wire.UNREADABLE as e:
            raise _wire.broken(call, e) from e
        finally:
            response.close()

    # --------------------------------------------------------------- verbs

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``{"ok", "version", "lsn"}`` (no token needed)."""
        body: dict[str, Any] = self._send(_wire.health_call())
        return body

    def applied(self) -> Lsn:
        """The journal position the server has applied (``/healthz``'s ``lsn``)."""
        return _wire.applied_lsn(self.health())

    def wait_applied(self, lsn: Lsn, *, timeout: float = 30.0, poll: float = 0.01) -> None:
        """Wait until the server has applied ``lsn`` (read your writes on another replica).

        :raises TimeoutError: it had not within ``timeout`` seconds.
        """
        _wire.wait_args(lsn, timeout, poll)
        self._check_open()
        deadline = time.monotonic() + timeout
        while self.applied() < lsn:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the server did not apply {lsn} within {timeout} s")
            time.sleep(poll)

    def ingest(
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
        result: IngestResult = self._send(
            _wire.ingest_call(source, content, id=id, t_ref=t_ref, metadata=metadata)
        )
        return result

    def recall(
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
        hits: list[Hit] = self._send(
            _wire.recall_call(
                query, k=k, filter=filter, as_of=as_of, mode=mode, min_relevance=min_relevance
            )
        )
        return hits

    def recall_stream(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: str | None = None,
        as_of: str | _dt.datetime | None = None,
        mode: Mode | None = None,
        min_relevance: float | None = None,
    ) -> Iterator[Hit]:
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
        return self._recall_hits(_wire.RecallStream(call), self._lines(call))

    @staticmethod
    def _recall_hits(stream: _wire.RecallStream, lines: Iterator[str]) -> Iterator[Hit]:
        for line in lines:
            hit = stream.feed(line)
            if stream.done:
                return
            if hit is not None:
                yield hit
        raise stream.cut_short()  # no done: the hits so far may not be all

    def forget(
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
        receipt: ForgetReceipt = self._send(_wire.forget_call(target, dry_run=dry_run))
        return receipt

    def preview_hard_forget(
        self, *, id: str | None = None, source: str | None = None, before: Lsn | None = None
    ) -> ForgetReceipt:
        """The dry run of a hard delete: what it would erase, sealed for :meth:`confirm_forget`."""
        target = _wire.target_json(id=id, source=source, before=before)
        receipt: ForgetReceipt = self._send(_wire.forget_call(target, hard=True, dry_run=True))
        return receipt

    def confirm_forget(self, preview: ForgetReceipt) -> ForgetReceipt:
        """Erase, past and present, what ``preview`` (a hard dry run's receipt) listed.

        The server accepts a preview once, for its own target, within minutes
        of issuing it; anything else is
        :class:`~memstore.client.errors.InvalidConfirmationTokenError`.
        """
        receipt: ForgetReceipt = self._send(_wire.confirm_call(preview))
        return receipt

    def episode(self, id: str) -> Episode:
        """``GET /v1/episode/{id}``: the episode as ingested (``NotFoundError`` if none)."""
        episode: Episode = self._send(_wire.episode_call(id))
        return episode

    def snapshot(self, lsn: Lsn | str) -> Iterator[SnapshotEntry]:
        """``GET /v1/snapshot/{lsn}``: every episode and chunk visible at ``lsn``, streamed.

        An empty iterator means nothing of the caller's tenant existed then.
        """
        return _wire.snapshot_entries(self._lines(_wire.snapshot_call(lsn)))

    def events(self, *, last_event_id: str | None = None) -> Iterator[ChangeEvent]:
        """``GET /v1/events``: the tenant's changes as they happen, until the caller stops.

        Each event's ``id`` resumes the stream (``last_event_id=``) after a
        disconnect; a ``reset`` event means changes were missed (the server could
        not replay the gap, or dropped changes the caller read too slowly).

        A connection that breaks mid-stream is opened again at once, resuming
        from the last position the server gave (its first frame positions the
        stream even before any change), so nothing is lost or repeated; after
        :data:`~memstore.client._wire.STREAM_RECONNECTS` connections in a row
        that broke before they got going, or when the server cannot be reached
        again, the break is raised (:class:`~memstore.client.errors.ProtocolTransportError`).
        """
        stream = _wire.ChangeStream(last_event_id)
        self._check_open()
        return self._events(stream)

    def _events(self, stream: _wire.ChangeStream) -> Iterator[ChangeEvent]:
        while True:
            lines = self._lines(stream.call)
            try:
                for line in lines:
                    event = stream.feed(line)
                    if event is not None:
                        yield event
                return  # the server ended the stream (it is shutting down)
            except ProtocolTransportError:
                if not stream.reconnect():
                    raise
            finally:
                lines.close()
