"""kube's audit filters in the gateway's handler chain: ``WithAuditInit`` and ``WithAudit``.

``WithAuditInit`` (outside authentication) gives every request its Audit-ID (the client's ``Audit-ID``
header, kept as sent, else a new UUID) and returns it in the ``Audit-ID`` response header on every
response, 401s included; with auditing on it also records failed authentication as kube's
WithFailedAuthenticationAudit does (a 401 the authenticator answered: one ResponseStarted event with
no user and the methods tried, "Authentication failed, attempted: bearer").

``WithAudit`` (inside authentication, outside impersonation, as kube places it) asks the policy
about the authenticated user's request and, unless the level is None, records the one event of the
request: RequestReceived, ResponseStarted (long-running requests: watches, proxy, exec, attach,
log, port-forward), ResponseComplete, or Panic when the handler raises, each stage unless the
policy omits it. The impersonated user, the response code, the authorization decision (filters.py
adds it through context.py) and the admission annotations of the backends join the event.

Backends never write events of their own: the one event per request is the gateway's, however many
hops the request takes. What only a backend knows, the audit annotations admission plugins add,
comes back in the response header ``X-Kubechain-Audit-Annotations`` (a JSON object; the shared
server layer, genericapi.server.auditannotations, sets it); the gateway merges it into the event
and strips it from the response, so clients never see it, and removes any such header a client
sends.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from genericapi.apimachinery.uuids import new_uuid4
from genericapi.server.auditannotations import HEADER as ANNOTATIONS_HEADER
from genericapi.server.tls import peer_identity
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import filters
from . import context
from .event import Event, long_running, source_ips, user_agent
from .policy import (
    LEVEL_RANK,
    NONE,
    PANIC,
    REQUEST,
    REQUEST_RECEIVED,
    REQUEST_RESPONSE,
    RESPONSE_COMPLETE,
    RESPONSE_STARTED,
    Policy,
    Request,
)
from .sink import LEVELS, AuditSink

AUDIT_ID_HEADER = b"audit-id"
_ANNOTATIONS = ANNOTATIONS_HEADER.lower().encode("latin-1")
#: Bodies larger than this are not kept for the event (the gateway refuses requests over 3 MiB anyway).
MAX_LOGGED_BODY = 3 * 1024 * 1024
#: Request bodies that complete objectRef (name, uid, resourceVersion) as kube's LogRequestObject does.
_OBJECT_VERBS = frozenset({"create", "update"})
#: Verbs whose success may be a Status (kube copies a returned Status into responseStatus).
_STATUS_VERBS = frozenset({"delete", "deletecollection"})
#: Request shapes whose policy decision is kept (all are dropped when full; the policy never changes).
DECISION_CACHE_SIZE = 4096


def new_audit_id() -> str:
    """A random (version 4) UUID as text, as ``str(uuid.uuid4())`` but without the UUID object
    (and without a read of the system's random source each: apimachinery.uuids)."""
    return new_uuid4()


class Auditor:
    """The policy and the sink, shared by the two filters."""

    def __init__(self, policy: Policy, sink: AuditSink, *, always_allow: bool = False) -> None:
        self.policy = policy
        self.sink = sink
        #: No authorization filter (AlwaysAllow): record kube's always-allow decision ourselves.
        self.always_allow = always_allow
        self._levels = {level: LEVELS.labels(level) for level in LEVEL_RANK}
        self._decided: dict[tuple[Any, ...], tuple[str, frozenset[str], bool]] = {}

    def evaluate(self, scope: Scope, user: Any) -> tuple[str, frozenset[str], bool]:
        info = filters.request_info_of(scope)
        verb = info.verb if info is not None else scope["method"].lower()
        resource = info is not None and info.is_resource_request
        # Everything a rule reads (user name and groups, verb, then the resource or the path): alike
        # requests get the same decision, kept until there are too many shapes to keep.
        key = (user.name if user is not None else None, tuple(user.groups) if user is not None else None, verb,
               resource, scope["path"] if not resource else "",
               *((info.namespace, info.api_group, info.resource, info.subresource, info.name)
                 if resource and info is not None else ()))
        decided = self._decided.get(key)
        if decided is None:
            if info is None or not info.is_resource_request:
                request = Request(user, verb, False, scope["path"])
            else:
                request = Request(user, verb, True, scope["path"], info.namespace, info.api_group, info.resource,
                                  info.subresource, info.name)
            config = self.policy.evaluate(request)
            decided = (config.level, config.omit_stages, config.omit_managed_fields)
            if len(self._decided) >= DECISION_CACHE_SIZE:
                self._decided.clear()
            self._decided[key] = decided
        self._levels[decided[0]].inc()
        return decided

    def new_event(self, scope: Scope, level: str, user: Any, omit_managed_fields: bool) -> Event:
        info = filters.request_info_of(scope)
        headers = scope["headers"]
        client = scope.get("client")
        raw_path = scope.get("raw_path")
        uri = raw_path.decode("latin-1") if raw_path else scope["path"]
        query = scope.get("query_string", b"")
        if query:
            uri += "?" + query.decode("latin-1")
        ref = None
        if info is not None and info.is_resource_request:
            ref = (info.resource, info.namespace, info.name, info.api_group, info.api_version, info.subresource)
        verb = info.verb if info is not None else scope["method"].lower()
        ips = source_ips(headers, client[0] if client else None)
        return Event(level, scope[context.AUDIT_ID], uri, verb, user, ips, user_agent(headers), ref,
                     scope[context.RECEIVED], omit_managed_fields)

    def process(self, event: Event, stage: str, omit: frozenset[str], final: bool = False) -> None:
        """The event at ``stage`` to the sink (a copy, unless this is the event's ``final`` stage)."""
        if stage not in omit:
            self.sink.process(event.final(stage) if final else event.snapshot(stage))


def init_request(scope: Scope) -> tuple[bytes, bytes]:
    """kube's WithAuditInit on the request: its Audit-ID (the client's, else a new one) and receive
    time in the scope, a client's annotations header removed; the ``Audit-ID`` response header."""
    audit_id = ""
    strip = False
    for k, v in scope["headers"]:
        if k == AUDIT_ID_HEADER and not audit_id:
            audit_id = v.decode("latin-1")
        elif k == _ANNOTATIONS:
            strip = True
    if strip:  # only backends may say what admission annotated
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k != _ANNOTATIONS]
    audit_id = audit_id or new_audit_id()
    scope[context.AUDIT_ID] = audit_id
    scope[context.RECEIVED] = time.time()
    return (AUDIT_ID_HEADER, audit_id.encode("latin-1"))


def response_headers(headers: Iterable[tuple[bytes, bytes]], recording: Recording | None,
                     extra: Sequence[tuple[bytes, bytes]], id_header: tuple[bytes, bytes]) -> tuple[
                         list[tuple[bytes, bytes]], bytes]:
    """A response head's headers in one pass: the backends' annotations into ``recording``'s event
    (never to the client), any ``Audit-ID`` replaced by the request's, ``extra`` (flow control's)
    before it; and the first content type (b"": none)."""
    out: list[tuple[bytes, bytes]] = []
    ctype = b""
    for k, v in headers:
        name = k.lower()
        if name == _ANNOTATIONS:
            if recording is not None:
                _take_annotation(v, recording.event)
            continue
        if name == AUDIT_ID_HEADER:
            continue
        if name == b"content-type" and not ctype:
            ctype = v
        out.append((k, v))
    out.extend(extra)
    out.append(id_header)
    return out, ctype


def failed_authentication(auditor: Auditor, scope: Scope) -> None:
    """kube's withFailedRequestAudit: the event of a request authentication refused."""
    level, omit, omit_managed = auditor.evaluate(scope, None)
    if level == NONE:
        return
    event = auditor.new_event(scope, level, None, omit_managed)
    event.response_status = {"message": auth_methods(scope), "code": 401}
    auditor.process(event, RESPONSE_STARTED, omit, final=True)



def auth_methods(scope: Scope) -> str:
    """kube's getAuthMethods: what the client tried, for the failed authentication's message."""
    methods = []
    authorization = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "").strip()
    scheme = authorization.split(" ")
    if scheme[0].lower() == "basic" and len(scheme) > 1:
        methods.append("basic")
    if len(scheme) > 1 and scheme[0].lower() == "bearer":
        methods.append("bearer")
    query = scope.get("query_string", b"").decode("latin-1")
    if any(p.startswith("access_token=") and len(p) > len("access_token=") for p in query.split("&")):
        methods.append("access_token")
    if peer_identity(scope) is not None:
        methods.append("x509")
    if methods:
        return "Authentication failed, attempted: " + ", ".join(methods)
    return "Authentication failed, no credentials provided"


class Recording:
    """kube's WithAudit for one request whose level is not None: its one event, stage by stage
    (RequestReceived at once; ResponseStarted for long-running requests when the head is sent;
    ResponseComplete or Panic at the end), the bodies the level keeps. Driven by the gateway's
    one-pass chain (gatewaychain.py) and by ``WithAudit``."""

    __slots__ = ("auditor", "capture", "event", "keep_request", "keep_response", "omit", "request_chunks",
                 "request_size", "response_chunks", "response_size", "scope", "streaming", "user")

    def __init__(self, auditor: Auditor, scope: Scope, user: Any, level: str, omit: frozenset[str],
                 omit_managed: bool) -> None:
        self.auditor = auditor
        self.scope = scope
        self.user = user
        self.omit = omit
        event = self.event = auditor.new_event(scope, level, user, omit_managed)
        scope[context.EVENT] = event
        if auditor.always_allow:
            context.add_authorization(scope, True, "")
        auditor.process(event, REQUEST_RECEIVED, omit)
        info = filters.request_info_of(scope)
        streaming = self.streaming = info is not None and long_running(info.verb, info.subresource)
        rank = LEVEL_RANK[level]
        self.keep_request = not streaming and (rank >= LEVEL_RANK[REQUEST] or event.verb in _OBJECT_VERBS)
        self.keep_response = not streaming and rank >= LEVEL_RANK[REQUEST_RESPONSE]
        self.request_chunks: list[bytes] = []
        self.response_chunks: list[bytes] = []
        self.request_size = 0
        self.response_size = 0
        #: The response body is kept (decided when its status is known).
        self.capture = False

    def received(self, message: Message) -> None:
        """A request message on its way to the handler (only when ``keep_request``)."""
        if message["type"] == "http.request" and self.request_size <= MAX_LOGGED_BODY:
            chunk = message.get("body", b"")
            if chunk:
                self.request_chunks.append(chunk)
                self.request_size += len(chunk)

    def started(self, status: int, content_type: bytes) -> None:
        """The response head (its annotations already taken: ``response_headers``)."""
        event = self.event
        event.response_status = {"code": status}
        event.response_type = content_type.decode("latin-1")
        current = self.scope[filters.USER]
        if current is not self.user:
            event.impersonated_user = current
        self.capture = capture = not self.streaming and (self.keep_response or status >= 300
                                                         or event.verb in _STATUS_VERBS)
        event.status_from_body = capture and (status >= 300 or event.verb in _STATUS_VERBS)
        if self.streaming:
            self.auditor.process(event, RESPONSE_STARTED, self.omit)

    def body(self, message: Message) -> None:
        """A response body piece (only while ``capture``)."""
        if self.response_size <= MAX_LOGGED_BODY:
            chunk = message.get("body", b"")
            if chunk:
                self.response_chunks.append(chunk)
                self.response_size += len(chunk)

    def complete(self) -> None:
        """The request ended (answered, or the client went away): ResponseComplete."""
        event = self.event
        if event.response_status is None:  # nothing was sent: kube fakes a success
            event.response_status = {"code": 200, "status": "Success", "message": "Connection closed early"}
            if self.streaming:
                self.auditor.process(event, RESPONSE_STARTED, self.omit)
        if self.keep_request and self.request_chunks and self.request_size <= MAX_LOGGED_BODY:
            event.request_body = b"".join(self.request_chunks)
            event.request_type = next((v.decode("latin-1") for k, v in self.scope["headers"]
                                       if k == b"content-type"), "")
            event.complete_ref = event.verb in _OBJECT_VERBS
        if self.response_chunks and self.response_size <= MAX_LOGGED_BODY and (self.keep_response
                                                                              or event.status_from_body):
            event.response_body = b"".join(self.response_chunks)
        self.auditor.process(event, RESPONSE_COMPLETE, self.omit, final=True)

    def panic(self, err: BaseException) -> None:
        """The handler raised: kube's Panic stage with its Status."""
        self.event.response_status = {"code": 500, "status": "Failure", "reason": "InternalError",
                                      "message": f"APIServer panic'd: {err}"}
        self.auditor.process(self.event, PANIC, self.omit, final=True)


def begin(auditor: Auditor, scope: Scope, user: Any) -> Recording | None:
    """The request's recording, or None when the policy's level for it is None."""
    level, omit, omit_managed = auditor.evaluate(scope, user)
    if level == NONE:
        return None
    return Recording(auditor, scope, user, level, omit, omit_managed)


class WithAuditInit:
    """Audit-ID on every request and response; failed authentication audited (see the module doc).
    The gateway runs these steps in its one-pass chain; this ASGI form wraps any app with them."""

    def __init__(self, app: ASGIApp, auditor: Auditor | None) -> None:
        self.app = app
        self.auditor = auditor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        id_header = init_request(scope)
        auditor = self.auditor

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers, _ = response_headers(message.get("headers", ()), None, (), id_header)
                message = {**message, "headers": headers}
                if auditor is not None and message["status"] == 401 and filters.USER not in scope:
                    failed_authentication(auditor, scope)
            await send(message)

        await self.app(scope, receive, send_with_id)


class WithAudit:
    """kube's WithAudit: the request's one event, stage by stage (see the module doc and ``Recording``)."""

    def __init__(self, app: ASGIApp, auditor: Auditor) -> None:
        self.app = app
        self.auditor = auditor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        recording = begin(self.auditor, scope, scope[filters.USER])
        if recording is None:
            await self.app(scope, receive, send)
            return

        async def audit_receive() -> Message:
            message = await receive()
            recording.received(message)
            return message

        async def audit_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", ())
                if any(k.lower() == _ANNOTATIONS for k, _ in headers):
                    kept = []
                    for k, v in headers:
                        if k.lower() == _ANNOTATIONS:
                            _take_annotation(v, recording.event)
                        else:
                            kept.append((k, v))
                    headers = kept
                    message = {**message, "headers": headers}
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                recording.started(message["status"], ctype)
            elif message["type"] == "http.response.body" and recording.capture:
                recording.body(message)
            await send(message)

        try:
            await self.app(scope, audit_receive if recording.keep_request else receive, audit_send)
        except Exception as err:
            recording.panic(err)
            raise
        except BaseException:  # cancelled (the client went away): the request still completed
            recording.complete()
            raise
        recording.complete()


def _take_annotation(value: bytes, event: Event) -> None:
    """One ``X-Kubechain-Audit-Annotations`` value of a backend into the event (kube's
    getAnnotations(ae.Level): a level-bound annotation only when the event's level reaches it)."""
    try:
        found = orjson.loads(value)
    except orjson.JSONDecodeError:
        return
    if isinstance(found, dict):
        for key, item in found.items():
            if isinstance(key, str) and isinstance(item, str):
                event.annotations.setdefault(key, item)
            elif (isinstance(key, str) and isinstance(item, list) and len(item) == 2
                  and item[0] in LEVEL_RANK and isinstance(item[1], str)
                  and LEVEL_RANK[event.level] >= LEVEL_RANK[item[0]]):
                event.annotations.setdefault(key, item[1])
