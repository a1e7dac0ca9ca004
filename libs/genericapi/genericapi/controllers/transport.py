"""The controllers' HTTP transport to the delegate link: aiohttp over a Unix socket or TCP(+TLS).

One pooled session per link address. Requests carry the controller's user in ``X-Remote-*``
(the delegate trusts this hop, as it trusts the gateway's). Error bodies (``metav1.Status``)
come back as ``APIError`` so callers handle 404/409/410 the same as with a local store.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from genericapi.apimachinery import deepjson
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.links import http_base, unix_socket_path
from genericapi.apimachinery.user import UserInfo
from genericapi.httpclient import new_session

from .types import CONTROLLER_USER

if TYPE_CHECKING:
    import aiohttp  # loaded by the first session (genericapi.httpclient), not at start-up

#: Plain requests give up after this long; watches have no total limit.
REQUEST_TIMEOUT = 30.0


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
        self._next = 0
        self._ssl_context, self._user_agent = ssl_context, user_agent

    def for_user(self, user: UserInfo) -> Transport:
        """The same link and pooled sessions, requests carrying ``user`` (closed with this one)."""
        other = Transport(self.urls, self._ssl_context, user, self._user_agent)
        other._sessions = self._sessions
        return other

    def _session(self, base: str) -> aiohttp.ClientSession:
        session = self._sessions.get(base)
        if session is None or session.closed:
            session = self._sessions[base] = new_session(ssl_context=self._ssl, unix_path=unix_socket_path(base))
        return session

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()

    def _bases(self) -> list[str]:
        if not self.urls:
            raise apierrors.service_unavailable("no delegate link is configured")
        start = self._next
        self._next += 1
        return [self.urls[(start + i) % len(self.urls)] for i in range(len(self.urls))]

    async def _open(self, method: str, path: str, params: dict[str, str] | None, body: bytes | None,
                    content_type: str, accept: str, total: float | None) -> aiohttp.ClientResponse:
        import aiohttp

        headers = list(self._headers)
        if accept:
            headers = [(k, v) for k, v in headers if k != "Accept"] + [("Accept", accept)]
        if body is not None:
            headers.append(("Content-Type", content_type))
        last: Exception | None = None
        for base in self._bases():
            try:
                return await self._session(base).request(
                    method, http_base(base).rstrip("/") + path, params=params, data=body, headers=headers,
                    allow_redirects=False, timeout=aiohttp.ClientTimeout(total=total, sock_connect=5))
            except (TimeoutError, aiohttp.ClientConnectionError, OSError) as err:
                last = err
        raise apierrors.service_unavailable(f"the delegate is unavailable: {last}")

    async def request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      accept: str = "") -> tuple[int, str, Any]:
        """(status, content type, decoded JSON body); non-2xx raises APIError."""
        import aiohttp

        raw = deepjson.dumps(body) if body is not None else None  # orjson first; any depth
        resp = await self._open(method, path, params, raw, content_type, accept, REQUEST_TIMEOUT)
        try:
            data = await resp.read()
        except (TimeoutError, aiohttp.ClientError) as err:
            raise apierrors.service_unavailable(f"the delegate is unavailable: {err}") from err
        finally:
            resp.release()
        if resp.status >= 300:
            raise status_error(resp.status, data)
        try:
            doc = deepjson.loads(data) if data else None
        except orjson.JSONDecodeError as err:
            raise apierrors.internal_error(f"bad JSON from the delegate: {err}") from err
        return resp.status, resp.headers.get("Content-Type", ""), doc

    async def stream_lines(self, path: str, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """A watch: one decoded JSON object per line until the server ends the stream."""
        import aiohttp

        resp = await self._open("GET", path, params, None, "", "", None)
        try:
            if resp.status >= 300:
                raise status_error(resp.status, await resp.read())
            buf = b""
            try:
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    while True:
                        nl = buf.find(b"\n")
                        if nl < 0:
                            break
                        line, buf = buf[:nl].strip(), buf[nl + 1:]
                        if line:
                            yield deepjson.loads(line)
            except aiohttp.ClientPayloadError:
                return  # the server cut the stream: the caller resumes from its last version
        finally:
            resp.close()
