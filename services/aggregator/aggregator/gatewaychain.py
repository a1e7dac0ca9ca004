"""The gateway's handler chain as one pass: kube's ``DefaultBuildHandlerChain`` over one request object.

kube's filters are one call chain over one ``*http.Request``. The gateway had them as seven ASGI
wrappers, each awaiting the next and most wrapping ``send`` (audit for the Audit-ID and its stages,
tracing for the status, flow control for its headers): every response head was copied and its
header list rebuilt several times, and every request paid seven coroutine frames and closures (issue
15: ~30% of the gateway's busy time under GETs). Here one ``GatewayRequest`` (slotted) carries what
the filters learn (RequestInfo, user, audit recording, flow-control seat, span, response status),
each concern's step runs in kube's order as a plain call into the module that owns it, and one
``send`` does what all of them need once the response starts: the head's headers rebuilt once
(the backends' audit annotations taken out, the X-Kubernetes-PF-* headers and the Audit-ID added),
the audit stages recorded, a watch's seat released.

The order (as ``filters.build_handler_chain`` nests the ASGI forms, outermost first): request info,
audit init (Audit-ID; a 401 audited as failed authentication), authentication (401), tracing, audit
(RequestReceived), impersonation (403/400), in-flight watermark (long-running requests not counted),
priority and fairness (429 with Retry-After; long-running requests other than watches not limited),
authorization (403), the mux. The logic of each step stays in its module (filters.py, audit/filter.py,
flowcontrol/filter.py, genericapi.server.tracing); this module only sequences them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.authorization import Authorizer
from genericapi.apimachinery.requestinfo import RequestInfo
from genericapi.apimachinery.user import UserInfo
from genericapi.server import metrics
from genericapi.server.tracing import ServerSpans, Tracing, trust_privileged
from genericapi.server.wholeanswer import SCOPE_KEY as WHOLE_KEY
from genericapi.server.wholeanswer import WholeAnswer, offered
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import filters
from .audit import filter as audit
from .auth import Authenticator
from .flowcontrol.filter import UNLIMITED

if TYPE_CHECKING:
    from .flowcontrol.filter import Seat

_START = "http.response.start"
_UNAUTHORIZED = apierrors.unauthorized()
#: Paths below the API's roots: resources and group discovery, never the shell's (health, version,
#: metrics, OpenAPI, the APF debug dumps) nor the merged ``/api`` and ``/apis`` themselves.
API_PATHS = ("/api/", "/apis/")


class GatewayRequest:
    """One request through the chain: what the filters learned, and the one ``send`` wrapper."""

    __slots__ = ("audit_id", "auditor", "downstream", "receive_from", "recording", "scope", "seat", "status",
                 "whole")

    def __init__(self, scope: Scope, receive: Receive, send: Send, auditor: audit.Auditor | None) -> None:
        self.scope = scope
        self.receive_from = receive
        self.downstream = send
        self.auditor = auditor
        #: The ``Audit-ID`` response header (audit.init_request).
        self.audit_id: tuple[bytes, bytes] = audit.init_request(scope)
        self.recording: audit.Recording | None = None
        self.seat: Seat | None = None
        #: The response's status once its head was sent (0: not yet).
        self.status = 0
        #: The server's one-write answer (wholeanswer.py) behind ``send``; offered on in its place.
        self.whole: WholeAnswer | None = offered(scope, send)
        if self.whole is not None:
            scope[WHOLE_KEY] = self

    async def receive(self) -> Message:
        """The client's request messages, seen by audit on their way (only at levels that keep the body)."""
        message = await self.receive_from()
        recording = self.recording
        if recording is not None:
            recording.received(message)
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == _START:
            status = self.status = message["status"]
            recording = self.recording
            seat = self.seat
            headers, ctype = audit.response_headers(message.get("headers", ()), recording,
                                                    seat.headers if seat is not None else (), self.audit_id)
            if recording is not None:
                recording.started(status, ctype)
            elif status == 401 and self.auditor is not None and filters.USER not in self.scope:
                audit.failed_authentication(self.auditor, self.scope)
            await self.downstream({**message, "headers": headers})
            if seat is not None and seat.watch:  # the watch is established: it streams on without a seat
                seat.release()
            return
        recording = self.recording
        if recording is not None and recording.capture:
            recording.body(message)
        await self.downstream(message)

    async def answer_whole(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        """A sized answer in one write (wholeanswer.py): what ``send`` does with its two messages."""
        whole = self.whole
        assert whole is not None  # offered only with one
        self.status = status
        recording = self.recording
        seat = self.seat
        headers, ctype = audit.response_headers(headers, recording, seat.headers if seat is not None else (),
                                                self.audit_id)
        if recording is not None:
            recording.started(status, ctype)
            if recording.capture:
                recording.body({"body": body})
        elif status == 401 and self.auditor is not None and filters.USER not in self.scope:
            audit.failed_authentication(self.auditor, self.scope)
        await whole.answer_whole(status, headers, body)
        if seat is not None and seat.watch:
            seat.release()

    async def answer(self, err: apierrors.APIError) -> None:
        """Answer with the error's ``metav1.Status`` through the chain's ``send``."""
        await filters.send_status(self.send, err)


class OnePassChain:
    """The handler chain around ``mux`` as one ASGI app (see the module doc)."""

    def __init__(self, mux: ASGIApp, authenticator: Authenticator, authorizer: Authorizer | None,
                 flow_control: filters.FlowControl | None = None, tracing: Tracing | None = None,
                 auditor: audit.Auditor | None = None, api: ASGIApp | None = None) -> None:
        if flow_control is not None:
            mux = flow_control.around_mux(mux)  # /debug/api_priority_and_fairness/*, authorized
        self.mux = mux
        #: What serves the API's resource paths (``/api/...``, ``/apis/...``) when the mux would only
        #: pass them on to it (the gateway's proxy): the hot path skips the mux's dispatch layers.
        self.api = api
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.flow = flow_control.filter(mux) if flow_control is not None else None
        self.spans = ServerSpans(mux, tracing, trust_privileged(filters.user_of), filters.request_info_of) \
            if tracing is not None else None
        self.auditor = auditor
        self.watermark = metrics.InflightWatermark()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.mux(scope, receive, send)
            return
        info = filters.parse_info(scope)
        r = GatewayRequest(scope, receive, send, self.auditor)
        user = filters.authenticate(self.authenticator, scope)
        if user is None:
            await r.answer(_UNAUTHORIZED)
            return
        span = token = None
        if self.spans is not None:
            span, token = self.spans.begin(scope, info)
        recording = r.recording = audit.begin(self.auditor, scope, user) if self.auditor is not None else None
        try:
            await self._serve(r, scope, info, user)
        except Exception as err:
            if recording is not None:
                recording.panic(err)
            if span is not None:
                ServerSpans.end(span, token, r.status, err)
            raise
        except BaseException as err:  # cancelled (the client went away): the request still completed
            if recording is not None:
                recording.complete()
            if span is not None:
                ServerSpans.end(span, token, r.status, err)
            raise
        if recording is not None:
            recording.complete()
        if span is not None:
            ServerSpans.end(span, token, r.status)

    async def _serve(self, r: GatewayRequest, scope: Scope, info: RequestInfo | None, user: UserInfo) -> None:
        """Impersonation, the in-flight watermark, flow control, authorization, then the mux."""
        try:
            user = await filters.impersonate(scope, user, self.authorizer)
        except apierrors.APIError as err:
            await r.answer(err)
            return
        counted = info is None or not filters.long_running(info)
        kind = self.watermark.kind(info, scope["method"]) if counted else 0
        if counted:
            self.watermark.started(kind)
        try:
            seat = None
            if self.flow is not None:
                seat = await self.flow.admit(scope, info, user, r.send)
                if seat is None:
                    return  # refused: answered 429
                if seat is not UNLIMITED:
                    r.seat = seat
            try:
                if self.authorizer is not None:
                    refused = await filters.authorize(self.authorizer, scope, info, user)
                    if refused is not None:
                        await r.answer(refused)
                        return
                recording = r.recording
                app = self.api if self.api is not None and scope["path"].startswith(API_PATHS) else self.mux
                await app(scope, r.receive if recording is not None and recording.keep_request
                               else r.receive_from, r.send)
            finally:
                if seat is not None:
                    seat.release()
        finally:
            if counted:
                self.watermark.finished(kind)
