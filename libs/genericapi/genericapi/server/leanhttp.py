"""A lean HTTP/1.1 server protocol for uvicorn: the gateway's connections to its clients.

Issue 15 measured the gateway's CPU per proxied GET at 0.69-0.74 of core-api's, and a bare uvloop +
httptools relay (bench/lean_gateway_probe.py) at 0.33: most of the difference was uvicorn's
per-request plumbing (``HttpToolsProtocol``, ``RequestResponseCycle``, its header checks), not the
gateway's filters. This protocol plugs into uvicorn as its ``http=`` class, so uvicorn still owns
the listening sockets, TLS, lifespan, graceful shutdown and ``server_state`` (connections, tasks,
the ``Date`` header), and parses with the same httptools parser, but its per-request path is short:
one scope dict, one ``Exchange`` (leanexchange.py) whose ``receive``/``send`` are plain bound methods,
one write per small answer, one keep-alive timer per connection instead of one per request.

It keeps what uvicorn gave the gateway: keep-alive (``timeout_keep_alive``), HTTP/1.0 and
``Connection: close``, chunked request bodies, ``Expect: 100-continue`` (answered when the app first
receives), HEAD, streamed answers, pipelined requests answered in order, client disconnect as
``http.disconnect``, a malformed request answered 400 and closed, reading paused while 64 KiB of
body waits for the app and ``send`` waiting while the transport's buffer is over its high-water mark,
graceful shutdown (idle connections dropped, busy ones closed after their answer), ``Upgrade:``
requests served as plain HTTP as uvicorn without a WebSocket library does, and the verified client
certificate in ``scope["extensions"]["tls"]["peercert"]`` (tls.py). A request head past Go's
``DefaultMaxHeaderBytes`` (1 MiB, plus the 4 KiB its server allows over) gets Go's 431 and the
connection is closed, as kube-apiserver's does (httptools has no limit of its own).
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections import deque
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.utils import get_local_addr, get_remote_addr
from uvicorn.server import ServerState

from . import memtrim
from .leanexchange import Exchange
from .tls import parsed_peer

log = logging.getLogger("uvicorn.error")

#: Request body bytes held for the app before reading pauses (uvicorn's HIGH_WATER_LIMIT).
HIGH_WATER = 64 * 1024
#: Go's http.DefaultMaxHeaderBytes plus the 4096 bytes its server reads past it before refusing.
MAX_HEADER_BYTES = (1 << 20) + 4096

_ASGI = {"version": "3.0", "spec_version": "2.3"}
_431 = (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\n\r\n431 Request Header Fields Too Large")
_INVALID = "Invalid HTTP request received."

#: The encoded ``server_state.default_headers`` (the Date line), re-encoded when uvicorn replaces the list.
_default_head: tuple[object, bytes] = (None, b"")


class _HeadTooLarge(Exception):
    pass


class LeanHttpProtocol(asyncio.Protocol):
    """One client connection (uvicorn's ``http=`` protocol interface)."""

    __slots__ = ("app", "app_state", "client", "config", "connections", "current", "expect_100", "extensions",
                 "head_bytes", "headers", "idle_since", "idle_timer", "keep_alive_timeout", "latest", "loop",
                 "parser", "pipeline", "read_paused", "scheme", "scope", "server", "server_state", "tasks",
                 "transport", "url", "writable", "write_paused")

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not config.loaded:
            config.load()
        self.config = config
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.connections = server_state.connections
        self.tasks = server_state.tasks
        self.app_state = app_state
        self.keep_alive_timeout = float(config.timeout_keep_alive)
        self.parser = httptools.HttpRequestParser(self)
        # As uvicorn: answer the first of pipelined requests sent with "Connection: close" too.
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.server: tuple[str, int | None] | None = None
        self.client: tuple[str, int] | None = None
        self.scheme = "http"
        self.extensions: dict[str, Any] | None = None
        #: The exchange whose response is being written, and the last one parsed (differ when pipelined).
        self.current: Exchange | None = None
        self.latest: Exchange | None = None
        self.pipeline: deque[Exchange] | None = None
        self.read_paused = False
        self.write_paused = False
        self.writable: asyncio.Event | None = None
        self.idle_since: float | None = None
        self.idle_timer: asyncio.TimerHandle | None = None
        # Per request being parsed.
        self.scope: dict[str, Any] = {}
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0
        self.expect_100 = False

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connections.add(self)  # type: ignore[arg-type]  # uvicorn types them as its own protocols
        memtrim.TRIMMER.note_connection(self.loop)
        self.transport = transport  # type: ignore[assignment]
        self.server = get_local_addr(transport)  # type: ignore[arg-type]
        self.client = get_remote_addr(transport)  # type: ignore[arg-type]
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.scheme = "https"
            peer = parsed_peer(ssl_object)
            if peer:
                self.extensions = {"tls": {"peercert": peer}}

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)  # type: ignore[arg-type]
        for exchange in (self.current, self.latest, *(self.pipeline or ())):
            if exchange is not None:
                if not exchange.complete:
                    exchange.disconnected = True
                exchange.wake()
                lost = exchange.stream_lost
                if lost is not None:
                    exchange.stream_lost = None
                    lost()
        self.resume_writing()
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None
        if exc is None:
            self.transport.close()
        self.parser = None  # type: ignore[assignment]

    def eof_received(self) -> None:
        pass

    def data_received(self, data: bytes) -> None:
        self.idle_since = None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # No WebSocket library is installed: uvicorn warns and serves the request as plain HTTP.
            log.warning("Unsupported upgrade request.")
            log.warning("No supported WebSocket library detected. Please use \"pip install 'uvicorn[standard]'\","
                        " or install 'websockets' or 'wsproto' manually.")
        except httptools.HttpParserError as err:
            if isinstance(err.__cause__, _HeadTooLarge) or isinstance(err.__context__, _HeadTooLarge):
                self._refuse(_431)
                return
            log.warning(_INVALID)
            self._refuse(b"HTTP/1.1 400 Bad Request\r\n%scontent-type: text/plain; charset=utf-8\r\n"
                         b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                         % (self.default_head(), len(_INVALID), _INVALID.encode()))

    def _refuse(self, answer: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(answer)
            self.transport.close()

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.writable is None:
            self.writable = asyncio.Event()
        self.writable.clear()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.writable is not None:
            self.writable.set()

    async def drain(self) -> None:
        """Until the transport's buffer is below its low-water mark again (or the connection is gone)."""
        if self.writable is not None:
            await self.writable.wait()

    def resume_reading(self) -> None:
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    def pause_reading(self) -> None:
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    # -- httptools callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = []
        self.head_bytes = 0
        self.expect_100 = False

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.head_bytes += len(url)
        if self.head_bytes > MAX_HEADER_BYTES:
            raise _HeadTooLarge

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100 = True
        self.headers.append((name, value))
        self.head_bytes += len(name) + len(value) + 4
        if self.head_bytes > MAX_HEADER_BYTES:
            raise _HeadTooLarge

    def on_headers_complete(self) -> None:
        parser = self.parser
        http_version = parser.get_http_version()
        parsed = httptools.parse_url(self.url)
        raw_path = parsed.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        scope = {
            "type": "http", "asgi": _ASGI, "http_version": http_version, "server": self.server,
            "client": self.client, "scheme": self.scheme, "root_path": "", "headers": self.headers,
            "state": self.app_state.copy(), "method": parser.get_method().decode("ascii"), "path": path,
            "raw_path": raw_path, "query_string": parsed.query or b"",
        }
        if self.extensions is not None:
            scope["extensions"] = self.extensions
        exchange = Exchange(self, scope, http_version != "1.0" and parser.should_keep_alive(), self.expect_100)
        self.latest = exchange
        current = self.current
        if current is None or current.complete:
            self._start(exchange)
        else:  # pipelined: answered in order, reading paused meanwhile
            self.pause_reading()
            if self.pipeline is None:
                self.pipeline = deque()
            self.pipeline.append(exchange)

    def on_body(self, body: bytes) -> None:
        exchange = self.latest
        if exchange is None or exchange.complete:
            return
        exchange.body.append(body)
        exchange.body_size += len(body)
        if exchange.body_size > HIGH_WATER:
            self.pause_reading()
        exchange.wake()

    def on_message_complete(self) -> None:
        exchange = self.latest
        if exchange is None or exchange.complete:
            return
        exchange.more_body = False
        exchange.wake()

    # -- the request cycle ------------------------------------------------------------------
    def _start(self, exchange: Exchange) -> None:
        self.current = exchange
        task = self.loop.create_task(exchange.run(self.app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    def default_head(self) -> bytes:
        """uvicorn's default headers (the ``Date``, updated once a second), as head lines."""
        global _default_head
        headers = self.server_state.default_headers
        source, encoded = _default_head
        if source is not headers:
            encoded = b"".join(b"%s: %s\r\n" % (k, v) for k, v in headers)
            _default_head = (headers, encoded)
        return encoded

    def response_complete(self, _exchange: Exchange) -> None:
        """The app has sent the whole answer: the next pipelined request starts, or the idle clock."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.resume_reading()
        if self.pipeline:
            self._start(self.pipeline.popleft())
            return
        self.idle_since = self.loop.time()
        if self.idle_timer is None:
            self.idle_timer = self.loop.call_at(self.idle_since + self.keep_alive_timeout, self._idle_check)

    def _idle_check(self) -> None:
        """One timer per connection, moved on while requests keep coming (not one per request)."""
        self.idle_timer = None
        if self.idle_since is None:
            return  # busy: the next answer sets the clock again
        due = self.idle_since + self.keep_alive_timeout
        if self.loop.time() >= due - 0.001:
            if not self.transport.is_closing():
                self.transport.close()
        else:
            self.idle_timer = self.loop.call_at(due, self._idle_check)

    def shutdown(self) -> None:
        """uvicorn's graceful stop: an idle connection goes at once (over TLS aborted: an idle pooled
        client never sends the close_notify a TLS close waits for, as Go's server drops idle
        connections), a busy one closes after its answer."""
        exchange = self.latest
        if exchange is None or exchange.complete:
            if self.scheme == "https":
                self.transport.abort()
            else:
                self.transport.close()
        else:
            exchange.keep_alive = False
