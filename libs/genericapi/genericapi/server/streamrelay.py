"""The gateway's watch relay without a task wakeup or ASGI message per event (issue 15, fan-out CPU).

``proxy.ReverseProxy._relay_unix`` relays a chunked upstream answer (a watch) piece by piece: the
upstream connection's parser wakes the request's task, which takes the piece and ``send``s it as an
ASGI message, which the client's protocol frames and writes at the end of the loop turn. For one
event to 1,000 watchers that is 1,000 futures, task steps, messages and scheduled writes in the
gateway. Here the client's protocol offers a ``DirectStream`` (handlers/directstream.py; the lean
protocol does), and once the answer's head has gone through ``send`` the upstream connection's
transport is handed to a small protocol (``_Relay``) that parses what arrives with the connection's
own httptools parser and writes each piece, chunk-framed, to the client in the same callback. The
request's task sleeps until the answer ends.

What ``_relay_unix`` gave stays: the answer ends cleanly for the client when the upstream ends it
(the connection goes back to the pool) and is cut short when the upstream fails; the client going
away, or the server ending streams on shutdown (``streams``: the proxy's set, whose members it
cancels), gives the upstream connection up; a client that does not read pauses reading from the
upstream (bounded buffers both sides) until its connection drains. With no ``DirectStream`` in the
scope (another ASGI server, a wrapper that needs every piece) ``relay_direct`` answers False and the
proxy relays through ``send`` as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, MutableSet
from typing import Any

import httptools
from starlette.types import Scope, Send

from genericapi.handlers.directstream import DirectStream, direct_stream

from .unixhttp import UnixResponse, _Connection

_END = {"type": "http.response.body", "body": b"", "more_body": False}


async def relay_direct(scope: Scope, resp: UnixResponse, send: Send, streams: MutableSet[Any], ending: bool,
                       drop: Collection[bytes]) -> bool:
    """Relay ``resp`` (a chunked answer on a Unix-socket upstream) to the client through its protocol's
    ``DirectStream``; False (nothing sent) when the scope has none. ``streams``: cancelling what is
    added to it ends the relay (shutdown); ``ending``: streams are being ended already; ``drop``:
    response headers not passed on."""
    writer = direct_stream(scope)
    if writer is None:
        return False
    headers = [(k, v) for k, v in resp.headers if k not in drop]
    await send({"type": "http.response.start", "status": resp.status, "headers": headers})
    del headers
    resp.headers.clear()  # read once: not kept for the stream's life
    if ending or writer.stream_gone():
        resp.close()
    else:
        await _Relay(resp._conn, writer).run(streams)
    with contextlib.suppress(Exception):
        await send(_END)
    return True


class UpstreamTakeover(asyncio.Protocol):
    """A protocol that takes an upstream Unix connection over from its ``_Connection`` while an answer is
    streamed (``_Relay`` here, watchhub.py's shared watch): the connection keeps its own bookkeeping of
    loss and write flow control, and the taker hears that the upstream is gone."""

    __slots__ = ()
    conn: _Connection

    def upstream_lost(self) -> None:
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.connection_lost(exc)
        self.upstream_lost()

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        self.conn.pause_writing()

    def resume_writing(self) -> None:
        self.conn.resume_writing()


class _Relay(UpstreamTakeover):
    """The upstream connection's protocol while its answer is relayed (see the module docstring)."""

    __slots__ = ("conn", "done", "resumer", "writer")

    def __init__(self, conn: _Connection, writer: DirectStream) -> None:
        self.conn = conn
        self.writer = writer
        #: True: the answer ended and the connection can be reused; False: it is given up.
        self.done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.resumer: asyncio.Task[None] | None = None

    async def run(self, streams: MutableSet[Any]) -> None:
        conn, writer = self.conn, self.writer
        if conn.chunks:  # what arrived with the head
            writer.stream_write(conn.take_all())
        if conn.complete:
            conn.pool.release(conn)
            return
        transport = conn.transport
        if conn.closed or transport is None:
            return
        transport.set_protocol(self)
        writer.stream_lost = self._give_up
        ender: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ender.add_done_callback(self._ended)
        streams.add(ender)
        ender.add_done_callback(streams.discard)
        reusable = False
        try:
            reusable = await self.done
        finally:
            writer.stream_lost = None
            if not ender.done():
                ender.cancel()
            if self.resumer is not None:
                self.resumer.cancel()
            transport.set_protocol(conn)
            if reusable:
                conn.pool.release(conn)
            else:
                conn.abort()

    def _finish(self, reusable: bool) -> None:
        if not self.done.done():
            self.done.set_result(reusable)

    def _give_up(self) -> None:
        """The client went away."""
        self._finish(False)

    def _ended(self, _ender: asyncio.Future[None]) -> None:
        """Shutdown ends streams (or the relay finished: then this changes nothing)."""
        self._finish(False)

    # -- asyncio.Protocol (the upstream connection) ----------------------------------------------
    def data_received(self, data: bytes) -> None:
        conn = self.conn
        try:
            conn.parser.feed_data(data)  # the connection's callbacks gather the body pieces
        except httptools.HttpParserError:
            self._finish(False)
            return
        chunks = conn.chunks
        if chunks:
            writer = self.writer
            writer.stream_write(conn.take_all())
            if not writer.stream_ready() and not writer.stream_gone() and not conn.complete:
                self._pause()
        if conn.complete:
            self._finish(True)

    def _pause(self) -> None:
        """The client's connection is full: stop reading the upstream until it drains."""
        conn = self.conn
        if not conn.read_paused and conn.transport is not None:
            conn.read_paused = True
            conn.transport.pause_reading()
        if self.resumer is None:
            self.resumer = asyncio.ensure_future(self._resume())

    async def _resume(self) -> None:
        writer = self.writer
        try:
            while not writer.stream_ready():
                if writer.stream_gone():
                    return
                await writer.stream_drain()
            conn = self.conn
            if conn.read_paused and not conn.closed and conn.transport is not None:
                conn.read_paused = False
                conn.transport.resume_reading()
        finally:
            self.resumer = None

    def upstream_lost(self) -> None:
        self._finish(False)
