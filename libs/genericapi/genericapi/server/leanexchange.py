"""One request and its response on a ``LeanHttpProtocol`` connection: the ASGI ``receive`` and ``send``.

uvicorn's ``RequestResponseCycle`` does the same job; this one does less per request (issue 15: the
gateway spent more CPU per proxied GET in uvicorn's plumbing than in its own filters). No
``asyncio.Event`` per request (a future only when ``receive`` must wait), no access-log check, the
response head is held and written with the first body piece (one write, one TLS record per small
answer, as ``corking.py`` arranged for uvicorn), a chunked head leaves at the end of the loop turn at
the latest (a watch's client sees it at once), and the head's bytes are checked for control
characters in one pass instead of two regular expressions per header. What the app sees is uvicorn's:
the same messages, the same errors for a broken response (``RuntimeError``), a 500 when it fails
before answering, the connection closed when it fails after.

An exchange is also the request's ``DirectStream`` (handlers/directstream.py, in the scope under its
key while the app runs): a watch whose head went through ``send`` writes its events with
``stream_write``, one chunk-framed write each, from the watch cache's dispatch (no ASGI message, no
end-of-turn handle per piece), and learns of the client going through ``stream_lost``.
"""

from __future__ import annotations

import asyncio
import http
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from genericapi.handlers.directstream import SCOPE_KEY

from .headcheck import clean
from .wholeanswer import SCOPE_KEY as WHOLE_KEY

if TYPE_CHECKING:
    from .leanhttp import LeanHttpProtocol

log = logging.getLogger("uvicorn.error")  # uvicorn's: filters on it (proxy._QuietAbort) keep working

#: Bodies this big are written on their own rather than copied into one buffer with the head.
DIRECT_BYTES = 64 * 1024


def _status_line(code: int) -> bytes:
    try:
        phrase = http.HTTPStatus(code).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (code, phrase)


STATUS_LINE = {code: _status_line(code) for code in range(100, 600)}

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_DISCONNECT = {"type": "http.disconnect"}
_500 = {"type": "http.response.start", "status": 500,
        "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21"),
                    (b"connection", b"close")]}
_500_BODY = {"type": "http.response.body", "body": b"Internal Server Error", "more_body": False}


class Exchange:
    """The state of one request: its body as it arrives, its response as the app sends it."""

    __slots__ = ("body", "body_size", "chunked", "complete", "conn", "disconnected", "flush_handle", "head",
                 "keep_alive", "more_body", "ready", "remaining", "scope", "started", "stream_lost", "waiter",
                 "waiting_100")

    def __init__(self, conn: LeanHttpProtocol, scope: dict[str, Any], keep_alive: bool, expect_100: bool) -> None:
        self.conn = conn
        self.scope = scope
        self.keep_alive = keep_alive
        self.waiting_100 = expect_100
        #: Body pieces not yet received by the app, and their size.
        self.body: list[bytes] = []
        self.body_size = 0
        self.more_body = True
        #: Something happened since the app last received (asyncio.Event's flag, without the Event).
        self.ready = False
        self.waiter: asyncio.Future[None] | None = None
        self.disconnected = False
        self.started = False
        self.complete = False
        #: None until the head is sent: whether the body is chunk-framed.
        self.chunked: bool | None = None
        self.remaining = 0
        #: Bytes not yet written: the response head (held for the first body piece) or a stream's
        #: pieces of this loop turn; written by the end of the turn at the latest (``flush_head``).
        self.head: bytes | None = None
        self.flush_handle: asyncio.Handle | None = None
        #: The streaming handler's callback for the client going (DirectStream).
        self.stream_lost: Callable[[], None] | None = None
        scope[SCOPE_KEY] = self
        scope[WHOLE_KEY] = self  # wholeanswer.py: a sized answer in one write

    def wake(self) -> None:
        self.ready = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def run(self, app: Any) -> None:
        """Run the app for this request (uvicorn's ``run_asgi``: the same outcomes and log lines)."""
        try:
            result = await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            self.scope.pop(SCOPE_KEY, None)
            self.scope.pop(WHOLE_KEY, None)
            log.error("Exception in ASGI application\n", exc_info=exc)
            if not self.started:
                await self.send(_500)
                await self.send(_500_BODY)
            else:
                self.flush_head()
                self.conn.transport.close()
        else:
            self.scope.pop(SCOPE_KEY, None)  # the scope no longer refers back here: no cycle to collect
            self.scope.pop(WHOLE_KEY, None)
            if result is not None:
                log.error("ASGI callable should return None, but returned '%s'.", result)
                self.flush_head()
                self.conn.transport.close()
            elif not self.started and not self.disconnected:
                log.error("ASGI callable returned without starting response.")
                await self.send(_500)
                await self.send(_500_BODY)
            elif not self.complete and not self.disconnected:
                log.error("ASGI callable returned without completing response.")
                self.flush_head()
                self.conn.transport.close()

    async def receive(self) -> dict[str, Any]:
        conn = self.conn
        if self.waiting_100:
            self.waiting_100 = False
            if not conn.transport.is_closing():
                conn.transport.write(_CONTINUE)
        if not self.disconnected and not self.complete:
            if conn.read_paused:
                conn.resume_reading()
            if not self.ready:
                waiter = self.waiter = conn.loop.create_future()
                try:
                    await waiter
                finally:
                    self.waiter = None
            self.ready = False
        if self.disconnected or self.complete:
            return _DISCONNECT
        body = self.body
        data = (body[0] if len(body) == 1 else b"".join(body)) if body else b""
        if body:
            self.body = []
            self.body_size = 0
        return {"type": "http.request", "body": data, "more_body": self.more_body}

    # -- DirectStream (handlers/directstream.py) -----------------------------------------------
    def stream_ready(self) -> bool:
        return (self.chunked is True and not self.complete and not self.disconnected
                and not self.conn.write_paused)

    def stream_gone(self) -> bool:
        return self.disconnected

    def stream_write(self, data: bytes) -> None:
        if data:  # an empty chunk would end the body
            self.stream_write_framed(b"%x\r\n%s\r\n" % (len(data), data))

    def stream_write_framed(self, frame: bytes) -> None:
        """``stream_write`` for a piece chunk-framed already (watchhub.py frames an upstream piece once
        and writes the same bytes to every client sharing it)."""
        if self.disconnected:
            return
        head = self.head
        if head is not None:  # the answer's head, or a piece held for the end of the turn, goes first
            self.head = None
            if self.flush_handle is not None:
                self.flush_handle.cancel()
                self.flush_handle = None
            frame = head + frame
        self.conn.transport.write(frame)

    def stream_buffered(self) -> int:
        """Bytes written and not yet taken by the client's connection (watchhub.py's slow-client bound)."""
        return int(self.conn.transport.get_write_buffer_size())

    async def stream_drain(self) -> None:
        if self.conn.write_paused and not self.disconnected:
            await self.conn.drain()

    def flush_head(self) -> None:
        """Write what is held now (the end of the loop turn for a stream, or an error)."""
        self.flush_handle = None
        head = self.head
        if head is not None:
            self.head = None
            if not self.disconnected:
                self.conn.transport.write(head)

    async def send(self, message: dict[str, Any]) -> None:
        conn = self.conn
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        if not self.started:
            if message["type"] != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{message['type']}'.")
            self._start(message)
        elif not self.complete:
            if message["type"] != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{message['type']}'.")
            self._body(message.get("body", b""), message.get("more_body", False))
        else:
            raise RuntimeError(f"Unexpected ASGI message '{message['type']}' sent, after response already completed.")

    async def answer_whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A sized answer as one head and one write (wholeanswer.py): what ``send``'s two messages
        would write for it, with its ``content-length``, without re-reading the headers for framing."""
        conn = self.conn
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        if self.started:
            raise RuntimeError("Unexpected ASGI message 'http.response.start' sent, after response already started.")
        self.waiting_100 = False
        out = [STATUS_LINE[status], conn.default_head()]
        for name, value in headers:
            out += (name, b": ", value, b"\r\n")
        out.append(b"content-length: %d\r\n" % len(body))
        if not self.keep_alive:
            out.append(b"connection: close\r\n")
        out.append(b"\r\n")
        head = b"".join(out)
        if not clean(head):
            raise RuntimeError("Invalid HTTP header name or value.")
        self.started = True
        self.chunked = False
        if self.scope["method"] == "HEAD":
            body = b""
        transport = conn.transport
        if len(body) < DIRECT_BYTES:
            transport.write(head + body)
        else:
            transport.write(head)
            transport.write(body)
        self.complete = True
        self.wake()
        if not self.keep_alive:
            transport.close()
        conn.response_complete(self)

    def _start(self, message: dict[str, Any]) -> None:
        self.started = True
        self.waiting_100 = False
        status = message["status"]
        conn = self.conn
        out = [STATUS_LINE[status], conn.default_head()]
        close_sent = False
        for name, value in message.get("headers", ()):
            name = name.lower()
            if name == b"content-length":
                if self.chunked is None:
                    self.remaining = int(value)
                    self.chunked = False
            elif name == b"transfer-encoding":
                if value.lower() == b"chunked":
                    self.remaining = 0
                    self.chunked = True
            elif name == b"connection" and b"close" in [t.strip() for t in value.lower().split(b",")]:
                self.keep_alive = False
                close_sent = True
            out += (name, b": ", value, b"\r\n")
        if not self.keep_alive and not close_sent:
            out.append(b"connection: close\r\n")
        if self.chunked is None and self.scope["method"] != "HEAD" and status not in (204, 304):
            self.chunked = True
            out.append(b"transfer-encoding: chunked\r\n")
        out.append(b"\r\n")
        head = b"".join(out)
        if not clean(head):
            self.started = False
            raise RuntimeError("Invalid HTTP header name or value.")
        self.head = head
        if self.chunked:  # a stream: its client sees the head by the end of this turn, body or not
            self.flush_handle = conn.loop.call_soon(self.flush_head)

    def _body(self, body: bytes, more_body: bool) -> None:
        if self.scope["method"] == "HEAD":
            self.remaining = 0
            data = b""
        elif self.chunked:
            data = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
            if not more_body:
                data += b"0\r\n\r\n"
        else:
            size = len(body)
            if size > self.remaining:
                raise RuntimeError("Response content longer than Content-Length")
            self.remaining -= size
            data = body
        transport = self.conn.transport
        pending = self.head
        if pending is not None:
            self.head = None
            if self.flush_handle is not None:
                self.flush_handle.cancel()
                self.flush_handle = None
            if len(data) < DIRECT_BYTES:
                data = pending + data
            else:
                transport.write(pending)
        if more_body and self.chunked and len(data) < DIRECT_BYTES:
            # A stream's piece leaves at the end of this loop turn, with anything else sent in it: a
            # watch event to 1,000 watchers costs less CPU written in one pass after the senders
            # ran than inside each sender's step (protocol-only fan-out: 65 -> 55 us per delivery).
            if data:
                self.head = data
                self.flush_handle = self.conn.loop.call_soon(self.flush_head)
            return
        if data:
            transport.write(data)
        if not more_body:
            if self.remaining != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            self.complete = True
            self.wake()
            if not self.keep_alive:
                transport.close()
            self.conn.response_complete(self)
