"""Whether an answer has begun: what decides if a failed request can still be answered.

A middleware that answers for a request that failed (an exception, a
cancellation) may do so only while nothing of the response has been sent:
once ``http.response.start`` went out, the status line is on the wire and
the only honest end is to close the connection. :class:`StartWatch` wraps
the ASGI ``send`` it is given and remembers whether that happened.

>>> import asyncio
>>> sent = []
>>> async def send(message): sent.append(message["type"])
>>> watch = StartWatch(send)
>>> asyncio.run(watch({"type": "http.response.start", "status": 200})); watch.started
True
"""

from __future__ import annotations

from memstore.web.asgi import Message, Send

__all__ = ["StartWatch"]


class StartWatch:
    """An ASGI ``send`` that passes every message on to ``send`` and notes the response's start.

    Hand it to the application in place of ``send``; :attr:`started` is then
    true once the application has sent ``http.response.start``.
    """

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)
