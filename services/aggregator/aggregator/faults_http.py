"""Fault injection on the wire: the admin path that manages the rules, and applying a plan.

``/debug/kubechain/faults`` (a non-resource path, so discovery stays clean) is served by the
gateway itself to members of ``system:masters`` only; anyone else gets kube's 403 for a
non-resource path. ``GET`` lists the rules with their counters, ``POST`` adds one rule or a list,
``PUT`` replaces them all, ``DELETE`` removes them all; ``GET``/``DELETE .../<name>`` one rule.

A request some rule fires on waits for the added latency, then is answered with the Status of the
answering rule (as kube-apiserver words it: 429 with ``Retry-After``, 500, 503, the optimistic-lock
409, a watch whose first event is the 410 Expired ERROR) or forwarded, with a WatchClose cutting
the stream after N events or S seconds: the backend sees the client go away, the client sees the
chunked response end cleanly, as when kube-apiserver ends a watch.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.errors import APIError
from genericapi.apimachinery.user import UserInfo
from genericapi.handlers.directstream import SCOPE_KEY as DIRECT_STREAM
from starlette.types import Message, Receive, Scope, Send

from .faults import Effect, FaultInjector, FaultPlan, FaultRule, parse_rules
from .filters import send_status

__all__ = ["ADMIN_PATH", "apply_plan", "is_admin_path", "serve_admin"]

ADMIN_PATH = "/debug/kubechain/faults"
ADMIN_GROUP = "system:masters"
#: Largest rule body accepted (a rule list is small; this bounds what an admin typo can cost).
MAX_BODY_BYTES = 1 << 20

Forward = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_admin_path(path: str) -> bool:
    return path == ADMIN_PATH or path == ADMIN_PATH + "/" or path.startswith(ADMIN_PATH + "/")


# -- the admin path ----------------------------------------------------------------------------
async def serve_admin(injector: FaultInjector, scope: Scope, receive: Receive, send: Send, user: UserInfo) -> None:
    method = scope["method"]
    path = scope["path"]
    if ADMIN_GROUP not in user.groups:
        # kube's responsewriters.Forbidden for a non-resource request: the verb is the lowercase method.
        await send_status(send, APIError(403, "Forbidden",
                                          f'forbidden: User "{user.name}" cannot {method.lower()} path "{path}"',
                                          {}))
        return
    name = path[len(ADMIN_PATH):].strip("/")
    try:
        status, body = await _admin(injector, method, name, receive)
    except APIError as err:
        await send_status(send, err)
        return
    await _send_json(send, status, body)


async def _admin(injector: FaultInjector, method: str, name: str, receive: Receive) -> tuple[int, Any]:
    if name:
        if "/" in name:
            raise apierrors.path_not_found()
        if method == "GET":
            return 200, injector.get(name).to_dict()
        if method == "DELETE":
            return 200, injector.remove(name).to_dict()
        raise _method_not_allowed(method, "GET, DELETE")
    if method == "GET":
        return 200, _rule_list(injector.rules)
    if method == "DELETE":
        return 200, _rule_list(injector.clear())
    if method in ("POST", "PUT"):
        rules = parse_rules(await _read_json(receive))
        if method == "POST":
            return 201, _rule_list(injector.add(rules))
        return 200, _rule_list(injector.replace(rules))
    raise _method_not_allowed(method, "GET, POST, PUT, DELETE")


def _rule_list(rules: list[FaultRule]) -> dict[str, Any]:
    return {"kind": "FaultRuleList", "rules": [r.to_dict() for r in rules]}


def _method_not_allowed(method: str, allowed: str) -> APIError:
    return APIError(405, "MethodNotAllowed", f"{method} is not supported on {ADMIN_PATH} (use {allowed})",
                    {}, {"Allow": allowed})


async def _read_json(receive: Receive) -> Any:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise apierrors.request_entity_too_large(MAX_BODY_BYTES)
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    raw = b"".join(chunks)
    if not raw.strip():
        raise apierrors.bad_request("invalid fault rule: <body>: Required value: a fault rule, a list of them or "
                                    '{"rules": [...]}')
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise apierrors.bad_request(f"invalid fault rule: the body is not JSON: {err}") from None


# -- applying rules to a request ---------------------------------------------------------------
async def apply_plan(plan: FaultPlan, scope: Scope, receive: Receive, send: Send, forward: Forward) -> None:
    if plan.latency > 0:
        await asyncio.sleep(plan.latency)
    if plan.answer is not None:
        await _answer(plan, plan.answer.effect, scope, send)
        return
    if plan.cut is not None:
        scope.pop(DIRECT_STREAM, None)  # the cutter sees every piece: the proxy relays through send
        cutter = WatchCutter(plan.cut, receive, send)
        try:
            await forward(scope, cutter.receive, cutter.send)
        finally:
            cutter.cancel_timer()
        return
    await forward(scope, receive, send)


async def _answer(plan: FaultPlan, effect: Effect, scope: Scope, send: Send) -> None:
    info = plan.info
    rule = plan.answer.name if plan.answer is not None else ""
    if effect.type == "TooManyRequests":
        await send_status(send, apierrors.too_many_requests(
            effect.message or "Too many requests, please try again later.", effect.retry_after_seconds))
    elif effect.type == "InternalError":
        await send_status(send, apierrors.internal_error(
            effect.message or f'injected by kubechain fault rule "{rule}"'))
    elif effect.type == "ServiceUnavailable":
        await send_status(send, apierrors.service_unavailable(
            effect.message or f'the server is currently unable to handle the request (injected by kubechain fault '
                              f'rule "{rule}")'))
    elif effect.type == "Conflict":
        await send_status(send, apierrors.optimistic_lock(info.api_group, info.resource, info.name))
    elif effect.type == "WatchExpired":
        await _send_expired_watch(scope, send)


async def _send_expired_watch(scope: Scope, send: Send) -> None:
    """A 200 watch whose only event is the 410 ERROR kube's watch cache sends for a too-old version."""
    from urllib.parse import parse_qs

    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    requested = (query.get("resourceVersion") or ["0"])[0]
    rv = int(requested) if requested.isdigit() else 0
    status = apierrors.resource_expired(f"too old resource version: {rv} ({rv + 1})").status()
    body = b'{"type":"ERROR","object":' + orjson.dumps(status) + b"}\n"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-cache, private"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class WatchCutter:
    """Wraps one forwarded watch's ``send``/``receive``: after ``after_events`` watch events (one
    JSON line each) or ``after_seconds`` from the response start, the client's stream ends; the
    proxy is told the client went away, so it closes the upstream watch and finishes the response."""

    def __init__(self, effect: Effect, receive: Receive, send: Send) -> None:
        self.effect = effect
        self._receive = receive
        self._send = send
        self._events = 0
        self._cut = asyncio.Event()
        self._streaming = False
        self._finished = False
        self._timer: asyncio.TimerHandle | None = None

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def receive(self) -> Message:
        if self._cut.is_set():
            return {"type": "http.disconnect"}
        incoming = asyncio.ensure_future(self._receive())
        cut = asyncio.ensure_future(self._cut.wait())
        try:
            await asyncio.wait({incoming, cut}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (incoming, cut):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        if incoming.done() and not incoming.cancelled():
            return incoming.result()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = message.get("headers") or []
            sized = any(k.lower() == b"content-length" for k, _v in headers)
            self._streaming = message["status"] == 200 and not sized
            if self._streaming and self.effect.after_seconds:
                self._timer = asyncio.get_running_loop().call_later(self.effect.after_seconds, self._cut.set)
            await self._send(message)
            return
        if message["type"] != "http.response.body" or not self._streaming:
            await self._send(message)
            return
        final = not message.get("more_body", False)
        if self._cut.is_set():
            if final and not self._finished:
                self._finished = True
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        body: bytes = message.get("body", b"")
        if self.effect.after_events and body:
            left = self.effect.after_events - self._events
            end = -1
            for _ in range(left):
                end = body.find(b"\n", end + 1)
                if end < 0:
                    break
            if end >= 0:  # the last allowed event ends in this chunk: cut after it
                self._events = self.effect.after_events
                self._cut.set()
                await self._send({"type": "http.response.body", "body": body[:end + 1], "more_body": True})
                if final:
                    self._finished = True
                    await self._send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            self._events += body.count(b"\n")
        if final:
            self._finished = True
        await self._send(message)


async def _send_json(send: Send, status: int, body: Any) -> None:
    data = orjson.dumps(body) + b"\n"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data, "more_body": False})
