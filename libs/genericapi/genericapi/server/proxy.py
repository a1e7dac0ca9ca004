"""Streaming reverse proxy, as an ASGI app: delegation and the gateway's hot path.

TCP upstreams (TLS across hosts) use aiohttp rather than httpx: measured as a concurrent proxy
client, plain httpx was several times slower (bench/ prints both). Unix-socket upstreams (a
backend on the same host) use the small pooled client in ``unixhttp``: A/B against aiohttp on
the same chain it gave about 25% more creates/s and a GET ratio of 0.62-0.67 instead of 0.53-0.55.
Bodies stream both ways with bounded buffers (issue 15): a request body or sized answer that
ends within ``BUFFER_BYTES`` is passed on in one piece as before (so a replica dying mid-answer
is retried unseen for safe methods); a longer one is relayed as it arrives, so the gateway holds
at most about that much per request whatever the size. A watch flows through unbuffered;
hop-by-hop headers are dropped; the client's own ``X-Remote-*`` headers never pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.links import http_base, unix_socket_path
from genericapi.httpclient import client_errors, new_session

from .streamrelay import relay_direct
from .unixhttp import BUFFER_BYTES, UnixHTTPPool, UnixResponse, UpstreamClosed
from .watchhub import Opening, WatchHub, WatchRequest, watch_request
from .wholeanswer import offered

if TYPE_CHECKING:
    import aiohttp  # loaded by the first TCP upstream's session (genericapi.httpclient)

__all__ = ["BUFFER_BYTES", "HOP_BY_HOP", "AbortHandler", "ReverseProxy", "UpstreamPicker", "http_base",
           "unix_socket_path"]

log = logging.getLogger(__name__)

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "trailers", "transfer-encoding", "upgrade", "host", "content-length",
})

#: Request headers not passed on besides the hop-by-hop ones: the gateway's own server answers
#: ``Expect: 100-continue`` (uvicorn, when the proxy first reads the body) and the body goes on
#: without waiting; passed on, the upstream's interim ``100 Continue`` would be taken for its answer.
REQUEST_OWN = HOP_BY_HOP | {"expect"}

#: Response headers the gateway's own HTTP server writes (once): the upstream's copies are dropped,
#: so a proxied answer carries one ``Date`` and, as kube-apiserver's, no ``Server``.
RESPONSE_OWN = HOP_BY_HOP | {"date", "server"}

#: Methods sent again to the next replica when one dies after it began to answer (it may have
#: acted on the request: only these are safe to repeat; others get a 503).
RETRY_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

# The same sets as bytes, for the hot path that never decodes a header (issue 15: CPU per request).
_REQUEST_OWN_B = frozenset(h.encode() for h in REQUEST_OWN)
_RESPONSE_OWN_B = frozenset(h.encode() for h in RESPONSE_OWN)
_NEVER_FORWARDED = (b"x-remote-", b"impersonate-")


class AbortHandler(Exception):
    """Go's ``http.ErrAbortHandler``: raised once the client has the start of an answer whose
    upstream then failed. uvicorn closes the client's connection (it cannot finish the answer),
    so the client sees it cut off; audit records it as kube's does ("APIServer panic'd: ...")."""

    def __init__(self) -> None:
        super().__init__("net/http: abort Handler")


class _QuietAbort(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" traceback for an AbortHandler: Go's
    net/http does not log ErrAbortHandler either (the proxy has logged its one line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], AbortHandler))


logging.getLogger("uvicorn.error").addFilter(_QuietAbort())

#: Chooses the upstream base URL for a request scope (the gateway's routing table).
UpstreamPicker = Callable[[Scope], list[str]]


def _forward_headers(scope: Scope, extra: Iterable[tuple[str, str]],
                     drop: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """Request headers for the upstream: no hop-by-hop headers (including those the client's
    ``Connection`` header names, as Go's ReverseProxy does), no client ``X-Remote-*``, nothing
    in ``drop``; then ``extra`` (the authenticated user)."""
    headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
    named = {t.strip().lower() for k, v in headers if k == "connection" for t in v.split(",") if t.strip()}
    out = [(k, v) for k, v in headers
           if k not in REQUEST_OWN and k not in named and k not in drop
           and not k.startswith(("x-remote-", "impersonate-"))]
    out.extend(extra)
    return out


def _forward_head(scope: Scope, extra: Iterable[tuple[str, str]] | bytes,
                  drop: frozenset[bytes] = frozenset()) -> bytes:
    """``_forward_headers``' headers as the lines of an HTTP/1.1 head, built from the scope's bytes
    without decoding them (the Unix-socket hop, the gateway's hot path); ``extra`` as pairs, or as
    lines already encoded (``head_source``)."""
    headers = scope["headers"]
    named: set[bytes] | None = None
    for k, v in headers:
        if k == b"connection":
            named = (named or set()) | {t.strip().lower() for t in v.split(b",") if t.strip()}
    lines = [b"%s: %s\r\n" % (k, v) for k, v in headers
             if k not in _REQUEST_OWN_B and k not in drop and not k.startswith(_NEVER_FORWARDED)
             and (named is None or k not in named)]
    if isinstance(extra, bytes):
        lines.append(extra)
    else:
        lines.extend(f"{k}: {v}\r\n".encode("latin-1") for k, v in extra)
    return b"".join(lines)


class ReverseProxy:
    """Forwards ASGI HTTP requests to one of several upstreams, trying the next on failure.

    The connection pool is unbounded by default: every open watch holds one upstream
    connection, and a bound would let idle watches starve ordinary requests.
    """

    def __init__(self, pick: UpstreamPicker, ssl_context: ssl.SSLContext | None = None,
                 header_source: Callable[[Scope], list[tuple[str, str]]] | None = None,
                 limit: int = 0, drop_headers: Iterable[str] = (), rotate: bool = True,
                 max_body_bytes: int = 0, head_source: Callable[[Scope], bytes] | None = None,
                 share_watches: bool = True) -> None:
        self._pick = pick
        #: Identical client watches on a Unix upstream share one upstream watch (watchhub.py).
        self.watch_hub: WatchHub | None = WatchHub() if share_watches else None
        #: ``header_source``'s headers as head lines already encoded, for the Unix-socket hop (the
        #: gateway caches its users' lines); None: ``header_source``'s pairs are encoded per request.
        self._head_source = head_source
        #: False: ``pick`` returns the upstreams in the order to try them (it balances itself).
        self._rotate = rotate
        self._ssl = ssl_context
        self._header_source = header_source
        self._limit = limit
        #: Request bodies past this size are refused (413) as they stream in; 0: no limit.
        self._max_body = max_body_bytes
        self._drop = frozenset(h.lower() for h in drop_headers)
        self._drop_b = frozenset(h.encode("latin-1") for h in self._drop)
        self._session: aiohttp.ClientSession | None = None
        self._unix_sessions: dict[str, aiohttp.ClientSession] = {}
        self._unix_pools: dict[str, UnixHTTPPool] = {}
        #: Upstream base URL -> its Unix-socket pool, or None for a TCP upstream (read once per base).
        self._pool_of: dict[str, UnixHTTPPool | None] = {}
        self._streams: set[asyncio.Task[None]] = set()
        self._ending_streams = False
        self._rr = 0

    def session(self, base: str = "") -> aiohttp.ClientSession:
        """The pooled session for an upstream: TCP(+TLS), or one per Unix socket path."""
        socket_path = unix_socket_path(base)
        if socket_path is not None:
            unix = self._unix_sessions.get(socket_path)
            if unix is None or unix.closed:
                unix = self._unix_sessions[socket_path] = new_session(unix_path=socket_path, limit=self._limit,
                                                                      passthrough=True)
            return unix
        if self._session is None or self._session.closed:
            self._session = new_session(ssl_context=self._ssl, limit=self._limit, passthrough=True)
        return self._session

    async def fetch(self, base: str, path: str, limit_seconds: float = 3.0) -> tuple[int, bytes]:
        """A plain GET to an upstream (health and discovery checks)."""
        import aiohttp

        async with self.session(base).get(http_base(base) + path,
                                          timeout=aiohttp.ClientTimeout(total=limit_seconds)) as resp:
            return resp.status, await resp.read()

    def end_streams(self) -> None:
        """End every streaming response (watches) cleanly: used on graceful shutdown. Streams
        that start afterwards (a client reconnecting while the server drains) end at once."""
        self._ending_streams = True
        for task in list(self._streams):
            task.cancel()

    async def close(self) -> None:
        self.end_streams()
        for pool in self._unix_pools.values():
            pool.close()
        if self._session is not None:
            await self._session.close()
        for unix in self._unix_sessions.values():
            await unix.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        upstreams = self._pick(scope)
        try:
            body = await _read_body(scope, receive, self._max_body)
        except apierrors.APIError as err:
            await _send_error(send, err)
            return
        stream: _StreamedBody | None = None
        if not isinstance(body, bytes):
            stream, body = body, body.prefix
        extra: list[tuple[str, str]] | None = None
        if self._head_source is not None:
            head = _forward_head(scope, self._head_source(scope), self._drop_b)
        else:
            extra = self._header_source(scope) if self._header_source else []
            head = _forward_head(scope, extra, self._drop_b)
        raw_target: bytes = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            raw_target += b"?" + scope["query_string"]
        target = raw_target.decode("latin-1")
        if not upstreams:
            await _send_error(send, apierrors.service_unavailable("no backend is available for this request"))
            return
        method = scope["method"]
        watch: WatchRequest | None = None
        if (self.watch_hub is not None and method == "GET" and not body and stream is None
                and not self._ending_streams):
            watch = watch_request(scope, scope.get("raw_path") or scope["path"].encode(), head)
            if watch is not None:
                if await self.watch_hub.join(watch, upstreams, scope, send):
                    return
                with self.watch_hub.opening(watch) as opening:
                    await self._forward(scope, receive, send, upstreams, method, body, stream, head, extra,
                                        raw_target, target, watch, opening)
                return
        await self._forward(scope, receive, send, upstreams, method, body, stream, head, extra, raw_target,
                            target, None, None)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, upstreams: list[str], method: str,
                       body: bytes, stream: _StreamedBody | None, head: bytes, extra: list[tuple[str, str]] | None,
                       raw_target: bytes, target: str, watch: WatchRequest | None,
                       opening: Opening | None) -> None:
        """Try the upstreams in turn (``watch``: a watch that may be shared; ``opening``: where the
        clients waiting to share it learn of its stream)."""
        start = self._rr if self._rotate else 0
        self._rr += 1
        last_err: Exception | None = None
        for i in range(len(upstreams)):
            base = upstreams[(start + i) % len(upstreams)]
            pool = self._pool_of[base] if base in self._pool_of else self._pool_for(base)
            if pool is not None:
                try:
                    unix_resp = await pool.request(method, raw_target if watch is None else watch.target, head, body,
                                                   stream,
                                                   stream.length if stream is not None else None)
                except (OSError, UpstreamClosed) as err:
                    last_err = err
                    if stream is not None and stream.started:
                        break  # part of the body went to this replica and is gone: it cannot be replayed
                    continue
                if opening is not None and self.watch_hub is not None and (unix_resp.sized or unix_resp.status != 200):
                    self.watch_hub.abandon(opening)  # nothing to share: clients waiting for it go their own way
                if unix_resp.sized:
                    try:
                        data, whole = await unix_resp.read_upto(BUFFER_BYTES)
                    except (OSError, UpstreamClosed) as err:
                        last_err = err  # the replica died mid-answer
                        unix_resp.close()
                        if method in RETRY_SAFE and (stream is None or not stream.started):
                            continue
                        break
                    if whole:
                        whole_answer = offered(scope, send) if method != "HEAD" else None
                        if whole_answer is not None:  # one head, one write (wholeanswer.py)
                            await whole_answer.answer_whole(
                                unix_resp.status, [(k, v) for k, v in unix_resp.headers if k not in _RESPONSE_OWN_B],
                                data)
                        else:
                            await _send_whole(send, unix_resp.status, unix_resp.headers, data, method == "HEAD")
                        return
                    await self._relay_sized(unix_resp.status, unix_resp.headers, data, unix_resp.iter_chunks(),
                                            unix_resp.close, receive, send, f"method={method} URI={target!r}")
                    return
                if watch is not None and opening is not None and self.watch_hub is not None \
                        and unix_resp.status == 200:
                    await self.watch_hub.open(watch, base, unix_resp, scope, send, self._streams, self._ending_streams,
                                              _RESPONSE_OWN_B, opening)
                    return
                if not await relay_direct(scope, unix_resp, send, self._streams, self._ending_streams,
                                          _RESPONSE_OWN_B):
                    await self._relay_unix(unix_resp, receive, send)
                return
            if opening is not None and self.watch_hub is not None:
                self.watch_hub.abandon(opening)  # a TCP upstream's watch is relayed privately
            if extra is None:
                extra = self._header_source(scope) if self._header_source else []
            tcp_headers = _forward_headers(scope, extra, self._drop)
            if stream is not None and stream.length is not None:
                tcp_headers = [*tcp_headers, ("content-length", str(stream.length))]
            try:
                resp = await self.session(base).request(
                    method, http_base(base) + target, headers=tcp_headers,
                    data=stream.with_prefix() if stream is not None else body if body else None,
                    allow_redirects=False)
            except client_errors() as err:
                last_err = err
                if stream is not None and stream.started:
                    break  # part of the body went to this replica and is gone: it cannot be replayed
                continue
            if resp.headers.get("Content-Length") is not None:
                try:
                    data, whole = await _read_upto(resp, BUFFER_BYTES)
                except client_errors() as err:
                    last_err = err  # the replica died mid-answer
                    resp.close()
                    if method in RETRY_SAFE and (stream is None or not stream.started):
                        continue
                    break
                raw_headers = [(k.lower(), v) for k, v in resp.raw_headers]
                if whole:
                    resp.release()
                    await _send_whole(send, resp.status, raw_headers, data)
                    return
                try:
                    await self._relay_sized(resp.status, raw_headers, data, resp.content.iter_any(), resp.close,
                                            receive, send, f"method={method} URI={target!r}")
                finally:
                    resp.release()
                return
            await self._relay(resp, receive, send)
            return
        if stream is not None and stream.too_large:
            # A chunked body crossed the limit on its way through: the upstream saw it cut off
            # (its connection closed) and acted on nothing; the client gets kube's 413.
            await _send_error(send, apierrors.request_entity_too_large(self._max_body))
            return
        if stream is not None and stream.client_gone:
            return  # nobody to answer
        log.warning("no upstream answered %s: %s", target, last_err)
        await _send_error(send, apierrors.service_unavailable(
            f"the backend serving this request is unavailable: {last_err}"))

    def _pool_for(self, base: str) -> UnixHTTPPool | None:
        socket_path = unix_socket_path(base)
        pool = None
        if socket_path is not None:
            pool = self._unix_pools.get(socket_path)
            if pool is None:
                pool = self._unix_pools[socket_path] = UnixHTTPPool(socket_path)
        if len(self._pool_of) < 4096:  # bases come from configuration and APIServices: few
            self._pool_of[base] = pool
        return pool

    async def _relay_sized(self, status: int, headers: list[tuple[bytes, bytes]], first: bytes,
                           rest: AsyncIterator[bytes], close: Callable[[], None], receive: Receive,
                           send: Send, request: str) -> None:
        """A sized answer larger than the buffer: its start as read, the rest as it arrives, under
        the upstream's Content-Length (uvicorn counts the bytes against it). The client closing
        frees the upstream connection (``close``). An upstream failing mid-body aborts the client's
        connection as Go's ReverseProxy does (it panics with http.ErrAbortHandler): the client
        sees a cut-off answer, never a wrong complete one nor a second answer."""
        out = [(k, v) for k, v in headers if k not in _RESPONSE_OWN_B]
        out.append((b"content-length", next(v for k, v in headers if k == b"content-length")))
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": first, "more_body": True})
        failed: list[BaseException] = []

        async def pump() -> None:
            try:
                async for chunk in rest:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except client_errors() as err:  # UpstreamClosed is an OSError
                failed.append(err)

        finished = await self._stream(pump(), receive, endable=False)
        if failed or not finished:
            close()
        if failed:
            # kube-apiserver's WithPanicRecovery logs this line for http.ErrAbortHandler (and no
            # stack); uvicorn's own traceback for it is filtered out (_QuietAbort).
            log.warning("timeout or abort while handling: %s: the backend failed mid-answer: %s", request, failed[0])
            raise AbortHandler from failed[0]
        if finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _relay_unix(self, resp: UnixResponse, receive: Receive, send: Send) -> None:
        """Stream a chunked answer (a watch) through as it comes, in the request's own task: one
        more task waits for the client's disconnect (or shutdown, ``end_streams``) and then aborts
        the upstream connection, which ends the loop. An open watch costs one extra task, not two
        and an ``asyncio.wait`` (issue 15: memory per watcher)."""
        out_headers = [(k, v) for k, v in resp.headers if k not in _RESPONSE_OWN_B]
        await send({"type": "http.response.start", "status": resp.status, "headers": out_headers})
        del out_headers
        resp.headers.clear()  # read once: not kept for the stream's life (the connection resets it per request)
        if self._ending_streams:
            resp.close()
        else:
            finished = False

            def end(_task: asyncio.Future[None]) -> None:
                if not finished:
                    resp.close()  # the client left or the server is stopping: the loop below ends

            watcher = asyncio.ensure_future(_disconnected(receive))
            watcher.add_done_callback(end)
            self._streams.add(watcher)
            watcher.add_done_callback(self._streams.discard)
            try:
                while (chunk := await resp.next_chunk()):
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                finished = True  # the connection went back to the pool: the watcher must not abort it
            except (OSError, UpstreamClosed):
                pass  # the upstream ended mid-stream, or was aborted by ``end``
            finally:
                watcher.cancel()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream(self, pump: Coroutine[Any, Any, None], receive: Receive, endable: bool = True) -> bool:
        """Run ``pump`` until it ends, the client disconnects or (``endable``: a watch) shutdown
        ends streams; whether the upstream body was read to its end."""

        if endable and self._ending_streams:
            pump.close()
            return False
        pump_task = asyncio.create_task(pump)
        watch_task = asyncio.create_task(_disconnected(receive))
        if endable:
            self._streams.add(pump_task)
            pump_task.add_done_callback(self._streams.discard)
        try:
            await asyncio.wait({pump_task, watch_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (pump_task, watch_task):
                t.cancel()
            for t in (pump_task, watch_task):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        return pump_task.done() and not pump_task.cancelled() and pump_task.exception() is None

    async def _relay(self, resp: aiohttp.ClientResponse, receive: Receive, send: Send) -> None:
        """Stream a chunked answer (a watch) through as it comes."""
        out_headers = [(k.lower(), v) for k, v in resp.raw_headers
                       if k.lower().decode("latin-1") not in RESPONSE_OWN]
        await send({"type": "http.response.start", "status": resp.status, "headers": out_headers})

        async def pump() -> None:
            async for chunk in resp.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})

        try:
            await self._stream(pump(), receive)
        finally:
            resp.close()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    """Until the client has gone (the rest of a request body, if any, is read and dropped)."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


async def _send_whole(send: Send, status: int, headers: Iterable[tuple[bytes, bytes]], data: bytes,
                      head: bool = False) -> None:
    """An answer read whole from the upstream (it had a Content-Length), without hop-by-hop headers;
    ``head``: the answer to a HEAD, whose Content-Length is the upstream's (its body is not sent)."""
    headers = list(headers)
    out = [(k, v) for k, v in headers if k.lower() not in _RESPONSE_OWN_B]
    length = next((v for k, v in headers if k.lower() == b"content-length"), None) if head else None
    out.append((b"content-length", length if length is not None else b"%d" % len(data)))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def _read_body(scope: Scope, receive: Receive, limit: int = 0) -> bytes | _StreamedBody:
    """The request body if it ends within BUFFER_BYTES (nearly all do: one ``receive``), else its
    start and the rest to stream. Past ``limit`` bytes by Content-Length a 413 with kube's
    message, and so while the start is read; the stream counts the rest against the limit, so
    an oversized upload is never held in memory."""
    if limit:
        for k, v in scope["headers"]:
            if k == b"content-length" and v.isdigit() and int(v) > limit:
                raise apierrors.request_entity_too_large(limit)
    msg = await receive()
    if not msg.get("more_body"):  # the whole body in one message (or the client is gone)
        body: bytes = msg.get("body", b"")
        if limit and len(body) > limit:
            raise apierrors.request_entity_too_large(limit)
        return body
    chunks: list[bytes] = [msg.get("body", b"")]
    size = len(chunks[0])
    if limit and size > limit:
        raise apierrors.request_entity_too_large(limit)
    while size < BUFFER_BYTES:
        msg = await receive()
        if msg["type"] != "http.request":
            break
        chunk = msg.get("body", b"")
        size += len(chunk)
        if limit and size > limit:
            raise apierrors.request_entity_too_large(limit)
        chunks.append(chunk)
        if not msg.get("more_body"):
            break
    else:
        return _StreamedBody(receive, b"".join(chunks), size, limit, _content_length(scope))
    return b"".join(chunks)


def _content_length(scope: Scope) -> int | None:
    for k, v in scope["headers"]:
        if k == b"content-length" and v.isdigit():
            return int(v)
    return None


class ClientGone(ConnectionError):
    """The client went away before its request body ended."""


class _StreamedBody:
    """A request body past BUFFER_BYTES: its start (``prefix``, read already, so a replica that
    fails before taking more can be replaced) and the rest, read from the client only as the
    upstream takes it and counted against the body limit (uvicorn stops reading the client's
    socket while it holds 64 KiB nobody asked for: both buffers stay bounded)."""

    def __init__(self, receive: Receive, prefix: bytes, size: int, limit: int, length: int | None) -> None:
        self._receive = receive
        self.prefix = prefix
        self.size = size
        self._limit = limit
        #: The client's Content-Length (passed on as it is); None: the body is chunked.
        self.length = length
        #: Whether anything past ``prefix`` was read: from then on the body cannot be sent again.
        self.started = False
        self.too_large = False
        self.client_gone = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._rest()

    async def _rest(self) -> AsyncIterator[bytes]:
        while True:
            msg = await self._receive()
            self.started = True
            if msg["type"] != "http.request":
                self.client_gone = True
                raise ClientGone("the client went away before its request body ended")
            chunk = msg.get("body", b"")
            self.size += len(chunk)
            if self._limit and self.size > self._limit:
                self.too_large = True
                raise apierrors.request_entity_too_large(self._limit)
            if chunk:
                yield chunk
            if not msg.get("more_body"):
                return

    async def with_prefix(self) -> AsyncIterator[bytes]:
        """The whole body (for aiohttp, which takes it as one iterable)."""
        yield self.prefix
        async for chunk in self._rest():
            yield chunk


async def _read_upto(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """An aiohttp answer's body up to its end or until ``limit`` bytes arrived, and whether that
    is all of it (the rest is then in ``resp.content``)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await resp.content.readany()
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), resp.content.at_eof()


async def _send_error(send: Send, err: apierrors.APIError) -> None:
    body = err.body()
    await send({"type": "http.response.start", "status": err.code,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
