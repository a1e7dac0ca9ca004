"""The controllers' HTTP transport to the delegate link: a Unix socket, or TCP(+TLS) with aiohttp.

One pooled client per link address: ``UnixClient`` for a ``unix:`` link (every link of a one-host
chain; aiohttp's import stays off the cold start, issue 15), an aiohttp session for TCP and TLS
peers (imported by the first such session). Requests carry the controller's user in ``X-Remote-*``
(the delegate trusts this hop, as it trusts the gateway's). Error bodies (``metav1.Status``)
come back as ``APIError`` so callers handle 404/409/410 the same as with a local store.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlencode

import orjson

from genericapi.apimachinery import deepjson
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.links import http_base, unix_socket_path
from genericapi.apimachinery.user import UserInfo
from genericapi.httpclient import client_errors, new_session

from .types import CONTROLLER_USER
from .unixclient import UnixClient, UnixClosed

if TYPE_CHECKING:
    import aiohttp  # loaded by the first TCP session (genericapi.httpclient), not at start-up

#: Plain requests give up after this long; watches have no total limit.
REQUEST_TIMEOUT = 30.0


class _Answer(Protocol):
    """What ``Transport`` reads of an answer, whichever client brought it."""

    status: int

    @property
    def content_type(self) -> str: ...

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


class _SessionAnswer:
    """An aiohttp response as an ``_Answer``."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp
        self.status = resp.status

    @property
    def content_type(self) -> str:
        return self._resp.headers.get("Content-Type", "")

    async def read(self) -> bytes:
        return await self._resp.read()

    async def chunks(self) -> AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self._resp.content.iter_any():
                yield chunk
        except aiohttp.ClientPayloadError as err:
            raise UnixClosed(str(err)) from err  # the stream was cut: as a Unix link's

    def release(self) -> None:
        self._resp.release()

    def close(self) -> None:
        self._resp.close()


def status_error(status: int, body: bytes) -> apierrors.APIError:
    """The APIError a non-2xx response stands for (its Status body when it has one)."""
    try:
        doc = deepjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and doc.get("kind") == "Status":
        return apierrors.APIError(int(doc.get("code") or status), str(doc.get("reason") or ""),
                                  str(doc.get("message") or ""), doc.get("details"))
    text = body.decode("utf-8", "replace").strip()[:500]
    return apierrors.APIError(status, "InternalError" if status >= 500 else "BadRequest",
                              text or f"the server responded with status {status}")


class Transport:
    """Requests to one of several replicas of a link, trying the next on connection failure."""

    def __init__(self, urls: Sequence[str], ssl_context: ssl.SSLContext | None = None,
                 user: UserInfo = CONTROLLER_USER, user_agent: str = "") -> None:
        self.urls = [u.rstrip("/") for u in urls]
        self._ssl = ssl_context
        self._headers = [*user.headers(), ("Accept", "application/json")]
        if user_agent:  # the field manager the server derives for writes that name none
            self._headers.append(("User-Agent", user_agent))
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._unix: dict[str, UnixClient] = {}
        self._next = 0
        self._ssl_context, self._user_agent = ssl_context, user_agent

    def for_user(self, user: UserInfo) -> Transport:
        """The same link and pooled clients, requests carrying ``user`` (closed with this one)."""
        other = Transport(self.urls, self._ssl_context, user, self._user_agent)
        other._sessions = self._sessions
        other._unix = self._unix
        return other

    def _session(self, base: str) -> aiohttp.ClientSession:
        session = self._sessions.get(base)
        if session is None or session.closed:
            session = self._sessions[base] = new_session(ssl_context=self._ssl)
        return session

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()
        for client in self._unix.values():
            client.close()
        self._unix.clear()

    def _bases(self) -> list[str]:
        if not self.urls:
            raise apierrors.service_unavailable("no delegate link is configured")
        start = self._next
        self._next += 1
        return [self.urls[(start + i) % len(self.urls)] for i in range(len(self.urls))]

    async def _send(self, base: str, method: str, path: str, params: dict[str, str] | None, body: bytes | None,
                    headers: list[tuple[str, str]], total: float | None) -> _Answer:
        socket_path = unix_socket_path(base)
        if socket_path is not None:
            client = self._unix.get(base)
            if client is None:
                client = self._unix[base] = UnixClient(socket_path)
            target = path + ("?" + urlencode(params, quote_via=quote) if params else "")
            return await client.request(method, target, headers, body, total)
        import aiohttp

        resp = await self._session(base).request(
            method, http_base(base).rstrip("/") + path, params=params, data=body, headers=headers,
            allow_redirects=False, timeout=aiohttp.ClientTimeout(total=total, sock_connect=5))
        return _SessionAnswer(resp)

    async def _open(self, method: str, path: str, params: dict[str, str] | None, body: bytes | None,
                    content_type: str, accept: str, total: float | None) -> _Answer:
        headers = list(self._headers)
        if accept:
            headers = [(k, v) for k, v in headers if k != "Accept"] + [("Accept", accept)]
        if body is not None:
            headers.append(("Content-Type", content_type))
        last: Exception | None = None
        for base in self._bases():
            try:
                return await self._send(base, method, path, params, body, headers, total)
            except client_errors() as err:
                last = err
        raise apierrors.service_unavailable(f"the delegate is unavailable: {last}")

    async def request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      accept: str = "") -> tuple[int, str, Any]:
        """(status, content type, decoded JSON body); non-2xx raises APIError."""
        raw = deepjson.dumps(body) if body is not None else None  # orjson first; any depth
        resp = await self._open(method, path, params, raw, content_type, accept, REQUEST_TIMEOUT)
        try:
            data = await resp.read()
        except client_errors() as err:
            raise apierrors.service_unavailable(f"the delegate is unavailable: {err}") from err
        finally:
            resp.release()
        if resp.status >= 300:
            raise status_error(resp.status, data)
        try:
            doc = deepjson.loads(data) if data else None
        except orjson.JSONDecodeError as err:
            raise apierrors.internal_error(f"bad JSON from the delegate: {err}") from err
        return resp.status, resp.content_type, doc

    async def stream_lines(self, path: str, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """A watch: one decoded JSON object per line until the server ends the stream."""
        resp = await self._open("GET", path, params, None, "", "", None)
        try:
            if resp.status >= 300:
                raise status_error(resp.status, await resp.read())
            buf = b""
            try:
                async for chunk in resp.chunks():
                    buf += chunk
                    while True:
                        nl = buf.find(b"\n")
                        if nl < 0:
                            break
                        line, buf = buf[:nl].strip(), buf[nl + 1:]
                        if line:
                            yield deepjson.loads(line)
            except UnixClosed:
                return  # the server cut the stream: the caller resumes from its last version
        finally:
            resp.close()
