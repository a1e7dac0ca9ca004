"""One socket write per response instead of one per ASGI message (TCP_CORK, in user space).

uvicorn writes a response's head when the app sends ``http.response.start`` and its body when
the app sends ``http.response.body``: two ``write`` calls, and over TLS two records, for every
small JSON answer. py-spy put ``write`` at about 30% of the gateway's busy time (issue 15), and
on the Unix-socket hop the reader then wakes twice per response. ``CorkedTransport`` gathers
every write made in one turn of the event loop and hands them to the real transport as one
buffer at the end of that turn. Streams (watches, large LISTs) still leave once per turn, so
nothing waits longer than the loop takes to come round; ``close`` and ``write_eof`` flush first,
``abort`` drops what is pending as it drops the transport's own buffer.

Gathering is for small writes only: a write of ``DIRECT_BYTES`` or more goes to the transport at
once, after what is pending, and is never joined (a 25 MB LIST body written whole used to be copied
into one 25 MB buffer with its 200-byte head), and pending writes that reach ``DIRECT_BYTES`` leave
at once too. So a sender writing many pieces in one turn does not pile them up here: the real
transport sees them, and its flow control (``pause_writing``) stops the sender as it would uncorked.

``CorkedHttpToolsProtocol`` also offers each request a ``DirectStream`` (handlers/directstream.py):
a watch writes its events chunk-framed straight to the real transport (``write_now``: with whatever
is pending, in one write), from the watch cache's dispatch, instead of one ASGI ``send`` per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from genericapi.handlers.directstream import SCOPE_KEY

from . import memtrim

#: Writes this big leave at once instead of being gathered: one more write call costs nothing next
#: to copying them into a join (and 64 KiB is asyncio's and uvloop's default write high-water mark).
DIRECT_BYTES = 64 * 1024


class CorkedTransport:
    """A transport whose writes in one loop turn leave as one (everything else is the real one's)."""

    __slots__ = ("_handle", "_loop", "_pending", "_pending_bytes", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._handle: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        size = len(data)
        if not size:
            return
        if size >= DIRECT_BYTES:
            self.flush()
            if not self._transport.is_closing():
                self._transport.write(data)
            return
        self._pending.append(data)
        self._pending_bytes += size
        if self._pending_bytes >= DIRECT_BYTES:
            self.flush()
        elif self._handle is None:
            self._handle = self._loop.call_soon(self._flush)

    def write_now(self, data: bytes) -> None:
        """Write what is pending and ``data`` now, in one write."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._pending:
            self._pending.append(data)
            data = b"".join(self._pending)
            self._pending.clear()
            self._pending_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(bytes(chunk))

    def flush(self) -> None:
        """Write what is pending now (the transport is told once)."""
        if self._handle is not None:
            self._handle.cancel()
        self._flush()

    def _flush(self) -> None:
        self._handle = None
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._pending.clear()
        self._pending_bytes = 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._pending_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _CycleStream:
    """A ``DirectStream`` over one uvicorn ``RequestResponseCycle`` (its state decides what is allowed)."""

    __slots__ = ("cycle", "protocol", "stream_lost")

    def __init__(self, protocol: CorkedHttpToolsProtocol, cycle: RequestResponseCycle) -> None:
        self.protocol = protocol
        self.cycle = cycle
        self.stream_lost: Callable[[], None] | None = None

    def stream_ready(self) -> bool:
        cycle = self.cycle
        return (cycle.chunked_encoding is True and cycle.response_started and not cycle.response_complete
                and not cycle.disconnected and not cycle.flow.write_paused)

    def stream_gone(self) -> bool:
        return self.cycle.disconnected

    def stream_write(self, data: bytes) -> None:
        if not data or self.cycle.disconnected:
            return  # an empty chunk would end the body
        transport = self.protocol.transport
        frame = b"%x\r\n%s\r\n" % (len(data), data)
        if isinstance(transport, CorkedTransport):
            transport.write_now(frame)
        elif not transport.is_closing():
            transport.write(frame)

    async def stream_drain(self) -> None:
        cycle = self.cycle
        if cycle.flow.write_paused and not cycle.disconnected:
            await cycle.flow.drain()


class CorkedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through a ``CorkedTransport``, with a ``DirectStream`` per request."""

    _stream: _CycleStream | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        corked = CorkedTransport(transport, self.loop)
        super().connection_made(corked)  # type: ignore[arg-type]
        memtrim.TRIMMER.note_connection(self.loop)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:
            self._stream = stream = _CycleStream(self, cycle)
            self.scope[SCOPE_KEY] = stream  # type: ignore[literal-required]

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        stream = self._stream
        if stream is not None:
            self._stream = None
            lost = stream.stream_lost
            if lost is not None:
                stream.stream_lost = None
                lost()
